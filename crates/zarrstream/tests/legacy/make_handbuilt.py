#!/usr/bin/env python3
"""Hand-builds legacy sharded arrays that no released library writes, following the
layout notes (shared/specs/references-and-legacy.md, part 2), for tests/cli_convert.rs:

* L1, zarr-python PR 876: `.zarray` with "shards" and "shard_format": "indexed", shard
  objects under v2 keys of the shard grid;
* L2, zarrita draft: v3-draft store, `meta/root/<p>.array.json` with "sharding":
  {"chunks_per_shard", "format": "indexed"}, shards at `data/root/<p>/c<i>/<j>`.

Shards: inner chunks encoded with numcodecs (real compressed bytes), stored in reverse C
order with a few junk bytes between them, then the index (u64 LE offset, nbytes per
inner chunk in C order, both 2^64-1 when empty), no checksum.

    python make_handbuilt.py DIR

writes DIR/l1_*/, DIR/l2/ and DIR/<name>.npy (what each array must read as), and prints
a JSON manifest [{"store", "array", "expected"}] as the last line.
"""

import itertools
import json
import os
import sys

import numcodecs
import numpy as np

EMPTY = 2**64 - 1
DRAFT = "https://purl.org/zarr/spec/protocol/core/3.0"


def data(shape, dtype, seed):
    rng = np.random.default_rng(seed)
    n = int(np.prod(shape))
    if np.dtype(dtype).kind == "f":
        v = rng.normal(100.0, 30.0, n)
        v[::17] = np.nan
        return v.astype(dtype).reshape(shape)
    info = np.iinfo(dtype)
    base = np.arange(n) % 500 + rng.integers(0, 20, n)
    return np.clip(base + max(info.min, -100), info.min, info.max).astype(dtype).reshape(shape)


def build(shape, chunks, cps, dtype, codec, fill, seed, skip_chunks=(), skip_shards=()):
    """Returns ({shard coords: bytes}, expected array)."""
    arr = data(shape, dtype, seed)
    fillv = 0 if fill is None else fill
    expected = arr.copy()
    grid = [-(-s // c) for s, c in zip(shape, chunks)]
    shard_grid = [-(-g // p) for g, p in zip(grid, cps)]
    shards = {}
    for sc in itertools.product(*[range(g) for g in shard_grid]):
        body, index = bytearray(), []
        encoded = {}
        for local in itertools.product(*[range(p) for p in cps]):
            cc = tuple(s * p + l for s, p, l in zip(sc, cps, local))
            sel = tuple(slice(i * c, min((i + 1) * c, s)) for i, c, s in zip(cc, chunks, shape))
            inside = all(i < g for i, g in zip(cc, grid))
            if not inside:
                continue
            if sc in skip_shards or cc in skip_chunks:
                expected[sel] = fillv
                continue
            block = np.full(chunks, fillv, dtype=dtype)
            block[tuple(slice(0, s.stop - s.start) for s in sel)] = arr[sel]
            raw = block.tobytes(order="C")
            encoded[local] = codec.encode(raw) if codec else raw
        if sc in skip_shards:
            continue
        offsets = {}
        for local in sorted(encoded, reverse=True):  # not C order, with gaps
            body += b"\xab" * 3
            offsets[local] = (len(body), len(encoded[local]))
            body += encoded[local]
        for local in itertools.product(*[range(p) for p in cps]):
            index.extend(offsets.get(local, (EMPTY, EMPTY)))
        shards[sc] = bytes(body) + np.array(index, dtype="<u8").tobytes()
    return shards, expected


def write_json(path, doc):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "w", encoding="utf-8") as f:
        json.dump(doc, f, indent=2)


def write_file(path, data_bytes):
    os.makedirs(os.path.dirname(path), exist_ok=True)
    with open(path, "wb") as f:
        f.write(data_bytes)


def l1(out, name, shape, chunks, cps, dtype, compressor, fill, sep, seed, **skips):
    codec = numcodecs.get_codec(compressor) if compressor else None
    shards, expected = build(shape, chunks, cps, dtype, codec, fill, seed, **skips)
    root = os.path.join(out, name)
    zarray = {"zarr_format": 2, "shape": list(shape), "chunks": list(chunks),
              "dtype": np.dtype(dtype).str, "compressor": compressor, "fill_value": fill,
              "filters": None, "order": "C", "shards": list(cps), "shard_format": "indexed"}
    if sep != ".":
        zarray["dimension_separator"] = sep
    write_json(os.path.join(root, ".zarray"), zarray)
    write_json(os.path.join(root, ".zattrs"), {"_ARRAY_DIMENSIONS": ["t", "y", "x"][-len(shape):]})
    for sc, b in shards.items():
        write_file(os.path.join(root, sep.join(map(str, sc))), b)
    return root, "", expected


def draft_compressor(cfg):
    if cfg is None:
        return None
    cfg = dict(cfg)
    name = cfg.pop("id")
    return {"codec": f"https://purl.org/zarr/spec/codec/{name}/1.0", "configuration": cfg}


def l2(store, path, shape, chunks, cps, dtype, compressor, fill, sep, seed, **skips):
    codec = numcodecs.get_codec(compressor) if compressor else None
    shards, expected = build(shape, chunks, cps, dtype, codec, fill, seed, **skips)
    write_json(os.path.join(store, "zarr.json"),
               {"zarr_format": DRAFT, "metadata_encoding": DRAFT,
                "metadata_key_suffix": ".json", "extensions": []})
    doc = {"shape": list(shape), "data_type": np.dtype(dtype).str.lstrip("|"),
           "chunk_grid": {"type": "regular", "chunk_shape": list(chunks), "separator": sep},
           "chunk_memory_layout": "C", "compressor": draft_compressor(compressor),
           "fill_value": fill, "extensions": [], "attributes": {"made_by": "make_handbuilt"},
           "sharding": {"chunks_per_shard": list(cps), "format": "indexed"}}
    write_json(os.path.join(store, "meta", "root", path + ".array.json"), doc)
    for sc, b in shards.items():
        write_file(os.path.join(store, "data", "root", path, "c" + sep.join(map(str, sc))), b)
    return store, path, expected


def main():
    out = os.path.abspath(sys.argv[1])
    os.makedirs(out, exist_ok=True)
    blosc = {"id": "blosc", "cname": "lz4", "clevel": 5, "shuffle": 1, "blocksize": 0}
    zstd = {"id": "zstd", "level": 1}
    gzip = {"id": "gzip", "level": 5}
    l2store = os.path.join(out, "l2")
    write_json(os.path.join(l2store, "meta", "root", "acq.group.json"),
               {"attributes": {"instrument": "hand-built"}})
    cases = {
        # 2-D zstd, partial edge shards, a missing chunk and a missing shard file
        "l1_zstd_2d": l1(out, "l1_zstd_2d", (20, 30), (4, 8), (2, 2), "<u2", zstd, 0, ".", 1,
                         skip_chunks={(0, 1)}, skip_shards={(2, 1)}),
        # 3-D uncompressed, nested keys, fill_value null
        "l1_none_3d": l1(out, "l1_none_3d", (5, 9, 10), (2, 4, 4), (2, 1, 2), "<i2", None, None,
                         "/", 2, skip_chunks={(1, 1, 1)}),
        # 3-D blosc-lz4 float32 with NaNs, fill 1.5, missing chunk
        "l2_blosc_3d": l2(l2store, "acq/frames", (6, 10, 12), (2, 5, 4), (2, 2, 2), "<f4", blosc,
                          1.5, "/", 3, skip_chunks={(0, 0, 2)}),
        # 2-D gzip uint8, flat keys, fill 7, a missing shard
        "l2_gzip_2d": l2(l2store, "gz", (13, 17), (4, 4), (2, 3), "|u1", gzip, 7, ".", 4,
                         skip_shards={(0, 0)}),
    }
    manifest = []
    for name, (store, array, expected) in cases.items():
        npy = os.path.join(out, name + ".npy")
        np.save(npy, expected)
        manifest.append({"name": name, "store": store, "array": array, "expected": npy})
    print(json.dumps(manifest))


if __name__ == "__main__":
    main()
