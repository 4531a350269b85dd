#!/usr/bin/env python3
"""Writes arrays in the Zarr v3-draft "sharding storage transformer" layout (L3) with
zarr-python 2.18 (the last release line that wrote it), for tests/cli_convert.rs.

    ZARR_V3_EXPERIMENTAL_API=1 ZARR_V3_SHARDING=1 python make_v3_draft.py STORE CASES.json

CASES.json is a list of objects {"path", "shape", "chunks", "chunks_per_shard",
"dtype", "compressor": "zstd"|"blosc"|"none", "fill_value", "skip": [[chunk coords]...]}.
Every array is filled with a deterministic pattern (data.npy beside the store's
arrays is what the test compares with: `<STORE>/../<path with / -> _>.npy`), except the
chunks listed in "skip", which are never written (they read as the fill value).
"""

import json
import os
import sys

os.environ.setdefault("ZARR_V3_EXPERIMENTAL_API", "1")
os.environ.setdefault("ZARR_V3_SHARDING", "1")

import numcodecs  # noqa: E402
import numpy as np  # noqa: E402
import zarr  # noqa: E402
from zarr._storage.v3_storage_transformers import ShardingStorageTransformer  # noqa: E402


def compressor(name, dtype):
    if name == "zstd":
        return numcodecs.Zstd(level=3)
    if name == "blosc":
        shuffle = numcodecs.Blosc.BITSHUFFLE if dtype.itemsize == 1 else numcodecs.Blosc.SHUFFLE
        return numcodecs.Blosc(cname="lz4", clevel=5, shuffle=shuffle)
    if name == "gzip":
        return numcodecs.GZip(level=5)
    if name == "none":
        return None
    raise SystemExit(f"unknown compressor {name}")


def pattern(shape, dtype, seed):
    n = int(np.prod(shape))
    rng = np.random.default_rng(seed)
    base = np.arange(n, dtype=np.uint64) * 7 + rng.integers(0, 50, n, dtype=np.uint64)
    if dtype.kind == "f":
        return (base.astype(np.float64) / 3.0 - 100.0).astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    return (base % (int(info.max) + 1)).astype(dtype).reshape(shape)


def write(store, case, seed):
    dtype = np.dtype(case["dtype"])
    shape, chunks = tuple(case["shape"]), tuple(case["chunks"])
    arr = zarr.create(
        shape=shape, chunks=chunks, dtype=dtype, store=store, path=case["path"],
        zarr_version=3, compressor=compressor(case["compressor"], dtype),
        fill_value=case.get("fill_value", 0), write_empty_chunks=True,
        storage_transformers=[ShardingStorageTransformer("indexed",
                                                         case["chunks_per_shard"])],
    )
    data = pattern(shape, dtype, seed)
    expected = np.full(shape, case.get("fill_value", 0) or 0, dtype=dtype)
    skip = {tuple(c) for c in case.get("skip", [])}
    grid = [range(-(-s // c)) for s, c in zip(shape, chunks)]
    for coords in np.ndindex(*[len(g) for g in grid]):
        if coords in skip:
            continue
        sel = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(coords, chunks, shape))
        arr[sel] = data[sel]
        expected[sel] = data[sel]
    back = arr[...]
    if not np.array_equal(back, expected):
        raise SystemExit(f"{case['path']}: zarr 2.18 does not read back what it wrote")
    return expected


def main():
    if len(sys.argv) != 3:
        raise SystemExit("usage: make_v3_draft.py STORE CASES.json")
    store_path, cases_path = sys.argv[1], sys.argv[2]
    with open(cases_path, encoding="utf-8") as f:
        cases = json.load(f)
    store = zarr.DirectoryStoreV3(store_path)
    for seed, case in enumerate(cases):
        expected = write(store, case, seed)
        out = os.path.join(os.path.dirname(os.path.abspath(store_path)),
                           case["path"].replace("/", "_") + ".npy")
        np.save(out, expected)
    print(f"zarr {zarr.__version__}, numcodecs {numcodecs.__version__}: "
          f"{len(cases)} arrays in {store_path}")


if __name__ == "__main__":
    main()
