#!/usr/bin/env python3
"""Reads converted arrays with zarr-python 3 and tensorstore and compares them with the
expected data, element for element (NaN equal to NaN).

    python check_converted.py MANIFEST.json

MANIFEST: [{"name", "path" (converted array directory), "expected" (.npy)}]. Prints one
line per array and reader; exit status 1 if any read failed or differed.
"""

import json
from importlib.metadata import version
import sys

import numpy as np
import tensorstore as ts
import zarr


def same(a, b):
    return a.shape == b.shape and a.dtype == b.dtype and np.array_equal(
        a, b, equal_nan=a.dtype.kind in "fc")


def readers(path):
    yield "zarr-python " + zarr.__version__, lambda: zarr.open_array(path, mode="r")[...]
    yield "tensorstore " + version("tensorstore"), lambda: ts.open(
        {"driver": "zarr3", "kvstore": {"driver": "file", "path": path}}).result().read().result()


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        manifest = json.load(f)
    failed = 0
    for case in manifest:
        expected = np.load(case["expected"])
        for reader, read in readers(case["path"]):
            try:
                got = np.asarray(read())
                ok = same(got, expected)
                why = "" if ok else f" (got {got.dtype}{got.shape}, want {expected.dtype}{expected.shape})"
            except Exception as e:  # noqa: BLE001 - report every reader failure
                ok, why = False, f" ({type(e).__name__}: {e})"
            failed += not ok
            print(f"{'OK  ' if ok else 'FAIL'} {case['name']:<16} {reader}{why}", flush=True)
    print(f"converted arrays checked: {len(manifest)} arrays, {failed} failures")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
