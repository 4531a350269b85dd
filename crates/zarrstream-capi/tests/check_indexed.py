#!/usr/bin/env python3
"""Reads the stores of examples/c/indexed.c with zarr-python and tensorstore and compares
every pixel with the frames the program wrote, recomputed here from its formula.

    check_indexed.py DIR

DIR/ctz.zarr: t=4, c=2 frames of 48 x 64 uint16, frame (t, c) holding
(t * 2 + c) * 1000 + (i % 1000) at element i; DIR/single.zarr: frame (0, 0) as one
48 x 64 array (rank 2). Prints one line per reader and store; exits 1 at the first
difference.
"""

import sys
from pathlib import Path

import numpy as np
import tensorstore as ts
import zarr

H, W = 48, 64


def frame(t, c):
    return ((t * 2 + c) * 1000 + np.arange(H * W) % 1000).astype(np.uint16).reshape(H, W)


def main():
    root = Path(sys.argv[1])
    want_ctz = np.stack([np.stack([frame(t, c) for c in range(2)]) for t in range(4)])
    want_single = frame(0, 0)
    for name, want in (("ctz.zarr", want_ctz), ("single.zarr", want_single)):
        path = root / name
        readers = {
            "zarr-python": lambda: zarr.open_array(str(path), mode="r")[...],
            "tensorstore": lambda: ts.open(
                {"driver": "zarr3", "kvstore": {"driver": "file", "path": str(path)}}
            ).result().read().result(),
        }
        for reader, read in readers.items():
            got = np.asarray(read())
            if got.shape != want.shape or not np.array_equal(got, want):
                print(f"{reader} {name}: shape {got.shape}, want {want.shape}; differs")
                return 1
            print(f"{reader} {name}: {got.shape} equal to the frames written")
    return 0


if __name__ == "__main__":
    sys.exit(main())
