#!/usr/bin/env python3
"""Reads reference sets written by `zarrstream refs` the way users do, and compares.

    python refs_check.py MANIFEST.json

MANIFEST: {"cases": [{"label", "refs", "format": "json"|"parquet", "name", "expected"
(raw little-endian file), "dtype" (numpy), "shape", "n_refs", optional "cwd",
"template_overrides", "record_size", "expect_error" (a substring of the error)}]}.

Every case opens `fsspec.filesystem("reference", fo=REFS, ...)` (lazy parquet: fsspec's
LazyReferenceMapper with its default fastparquet engine), wraps it in zarr-python's
FsspecStore and reads the array (zarr_format=2) whole and in a sub-region; parquet cases
also read every record file with fastparquet to check the layout. Prints one line per
case ("ok ..." / "FAIL ...") and exits 1 if any case failed.
"""

import json
import os
import sys
import traceback

import fastparquet
import fsspec
import numpy as np
import zarr
from zarr.storage import FsspecStore

META = (".zgroup", ".zarray", ".zattrs")


def open_array(case):
    """The array as zarr-python 3 sees it through fsspec's reference filesystem."""
    kwargs = {"fo": case["refs"], "remote_protocol": "file", "asynchronous": True}
    if case.get("template_overrides"):
        kwargs["template_overrides"] = case["template_overrides"]
    fs = fsspec.filesystem("reference", **kwargs)
    group = zarr.open_group(FsspecStore(fs, read_only=True, path=""), mode="r",
                            zarr_format=2)
    return group[case["name"]]


def count_json_refs(path):
    with open(path, encoding="utf-8") as f:
        doc = json.load(f)
    assert doc.get("version") == 1, "not version 1"
    assert "gen" not in doc, "has gen entries"
    assert list(doc["templates"]) == ["u"], f"templates {doc['templates']}"
    return sum(1 for k in doc["refs"] if not k.endswith(META))


def count_parquet_refs(case):
    """Checks the LazyReferenceMapper layout and counts the present chunks."""
    root = case["refs"]
    with open(os.path.join(root, ".zmetadata"), encoding="utf-8") as f:
        zmeta = json.load(f)
    record_size = zmeta["record_size"]
    assert record_size == case.get("record_size", 10000), f"record_size {record_size}"
    zarray = zmeta["metadata"][f"{case['name']}/.zarray"]
    grid = [-(-s // c) for s, c in zip(zarray["shape"], zarray["chunks"])]
    total = int(np.prod(grid))
    field = os.path.join(root, case["name"])
    present = 0
    for fn in sorted(os.listdir(field)):
        n = int(fn.split(".")[1])
        df = fastparquet.ParquetFile(os.path.join(field, fn)).to_pandas()
        assert list(df.columns) == ["path", "offset", "size", "raw"], list(df.columns)
        assert str(df["offset"].dtype) == "int64", df["offset"].dtype
        rows = min(record_size, total - n * record_size)
        assert len(df) == rows, f"{fn}: {len(df)} rows, want {rows}"
        assert df["raw"].isna().all(), "raw holds data"
        present += int(df["path"].notna().sum())
    return present


def check(case):
    if case.get("cwd"):
        os.chdir(case["cwd"])
    want = np.fromfile(case["expected"], dtype=case["dtype"]).reshape(case["shape"])
    try:
        arr = open_array(case)
        got = arr[...]
    except Exception as e:  # noqa: BLE001 - the expected failure is any reader error
        if case.get("expect_error") and case["expect_error"] in f"{e!r} {e.__cause__!r}":
            return "read failed as expected"
        raise
    if case.get("expect_error"):
        raise AssertionError("read succeeded, expected an error")
    assert arr.shape == want.shape, f"shape {arr.shape} != {want.shape}"
    assert got.dtype == want.dtype, f"dtype {got.dtype} != {want.dtype}"
    if not np.array_equal(got.view(np.uint8), want.view(np.uint8)):
        bad = np.argwhere(got != want)
        raise AssertionError(f"{len(bad)} elements differ, first at {bad[0].tolist()}: "
                             f"{got[tuple(bad[0])]} != {want[tuple(bad[0])]}")
    sub = tuple(slice(s // 3, max(s // 3 + 1, 2 * s // 3)) for s in want.shape)
    assert np.array_equal(arr[sub], want[sub]), "sub-region differs"
    if case["format"] == "json":
        n = count_json_refs(case["refs"])
    else:
        n = count_parquet_refs(case)
    assert n == case["n_refs"], f"{n} chunk references, want {case['n_refs']}"
    return f"{n} chunks, shape {list(want.shape)}"


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        cases = json.load(f)["cases"]
    home = os.getcwd()
    failed = 0
    for case in cases:
        try:
            print(f"ok {case['label']}: {check(case)}", flush=True)
        except Exception:  # noqa: BLE001 - reported per case
            failed += 1
            print(f"FAIL {case['label']}:\n{traceback.format_exc()}", flush=True)
        finally:
            os.chdir(home)
    print(f"refs_check: {len(cases) - failed} of {len(cases)} cases ok")
    sys.exit(1 if failed else 0)


if __name__ == "__main__":
    main()
