#!/usr/bin/env python3
"""Checks OME-Zarr 0.5 images written by zarrstream (tests/readers/ome.rs).

    ome_check.py images MANIFEST.json   validate and read finished images
    ome_check.py live MANIFEST.json     read an image again and again while it is recorded
    ome_check.py plate MANIFEST.json    validate and read an HCS plate (tests/readers/plate.rs)

MANIFEST: {"images": [{"name", "path", "expected" (raw little-endian file), "dtype"
(numpy), "shape", "levels", "method", "z_axis" (optional)}]} or {"live": {... as one
image, "timeout_s", "ready_file"}}.

Pyramid levels: level k must equal numpy's 2x2 reduction (y, x) of level k-1, or its
2x2x2 reduction when "z_axis" names the z axis, computed here from the expected level 0:
exactly for decimate/min/max and for the integer mean, whose rounding is round half up
of the exact mean, floor((2*sum + n) / (2*n)) with n the pixels that exist (4 or 8, and
fewer on the last row/column/plane of odd sizes), in Python integers for the 64-bit types;
float means are sum / n of data whose sums are exact.

For each image: the group validates with ome-zarr-models (NGFF 0.5 pydantic models);
the ome-zarr reader (parse_url + Reader) finds one image node whose level 0 equals the
expected data; zarr-python reads level 0 through the group equal to it too. Live: every
read (zarr-python through the group, and ome-zarr's Reader) sees level 0's shape never
ahead of its data and never shrinking. Prints FAIL lines and exits 1 on any failure.

Plate: {"plate": {"path", "rows", "columns", "wells" (["A/1", ...]), "acquisitions" (ids),
"field_count", "name", "dtype", "shape" (of every field image), "levels", "method",
"images": [{"key", "expected", "acquisition"}]}}. The plate validates with
ome-zarr-models' HCS model (wells, their images and acquisitions, every field an image);
the ome-zarr reader finds the plate node, whose level 0 is the grid of every well's first
field (an absent well reads as zeros), and on a well the grid of its fields; zarr-python
reads every field's levels equal to the expected data and its 2x2 reductions.
"""

import json
import math
import sys
import time
import warnings

import numpy as np
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr_models.exceptions import ValidationWarning
from ome_zarr_models.v05.hcs import HCS
from ome_zarr_models.v05.image import Image


def expected(entry):
    data = np.fromfile(entry["expected"], dtype=entry["dtype"])
    return data.reshape(entry["shape"])


def validate(path):
    """The group and its levels validate with ome-zarr-models; returns the model."""
    return Image.from_zarr(zarr.open_group(path, mode="r"))


def ome_zarr_level0(path):
    nodes = list(Reader(parse_url(path))())
    if not nodes:
        raise AssertionError("ome-zarr found no image node")
    return nodes[0], np.asarray(nodes[0].data[0])


def reduce2(a, method, z_axis=None):
    """numpy's reduction of 2x2 blocks of the last two axes, or 2x2x2 blocks with axis
    z_axis too (odd sizes: over what exists)."""
    axes = {a.ndim - 2, a.ndim - 1} | ({z_axis} if z_axis is not None else set())
    if method == "decimate":
        return a[tuple(slice(None, None, 2) if i in axes else slice(None) for i in range(a.ndim))]
    pad = [(0, a.shape[i] % 2) if i in axes else (0, 0) for i in range(a.ndim)]
    shape, pairs = [], []
    for i, n in enumerate(a.shape):
        if i in axes:
            shape += [(n + 1) // 2, 2]
            pairs.append(len(shape) - 1)
        else:
            shape.append(n)
    pairs = tuple(pairs)
    if method in ("min", "max"):
        blocks = np.pad(a, pad, mode="edge").reshape(shape)
        return getattr(blocks, method)(axis=pairs)
    n = np.pad(np.ones(a.shape, np.int64), pad).reshape(shape).sum(axis=pairs)
    if a.dtype.kind == "f":
        # The test data's sums are exact in float64, so the mean is too.
        s = np.pad(a.astype(np.float64), pad).reshape(shape).sum(axis=pairs)
        return (s / n).astype(a.dtype)
    if a.dtype.itemsize < 8:
        s = np.pad(a.astype(np.int64), pad).reshape(shape).sum(axis=pairs)
        return ((2 * s + n) // (2 * n)).astype(a.dtype)
    # The 64-bit types' sums overflow int64: Python integers (numpy's padding would mix
    # in numpy scalars, which overflow, so every element is made a Python int).
    to_int = np.frompyfunc(int, 1, 1)
    s = to_int(np.pad(a, pad)).reshape(shape).sum(axis=pairs)
    m = (2 * s + to_int(n)) // to_int(2 * n)
    return np.array(m.tolist(), dtype=a.dtype)


def pyramid(entry, want):
    levels = [want]
    for _ in range(1, entry.get("levels", 1)):
        levels.append(reduce2(levels[-1], entry["method"], entry.get("z_axis")))
    return levels


def compare(name, what, got, want, fails):
    if got.shape != want.shape:
        fails.append(f"FAIL [{name}] {what}: shape {got.shape}, expected {want.shape}")
    elif not np.array_equal(got, want):
        bad = np.argwhere(got != want)[0]
        fails.append(f"FAIL [{name}] {what}: first difference at {tuple(bad)}: "
                     f"{got[tuple(bad)]} != {want[tuple(bad)]}")


def check_image(entry, fails):
    name, path = entry["name"], entry["path"]
    want = expected(entry)
    levels = pyramid(entry, want)
    try:
        model = validate(path)
        ms = model.attributes.ome.multiscales[0]
        axes = [a.name for a in ms.axes]
        paths = [d.path for d in ms.datasets]
        if paths != [str(k) for k in range(len(levels))]:
            fails.append(f"FAIL [{name}] datasets {paths}, expected {len(levels)} levels")
        print(f"{name}: ome-zarr-models validated, axes {axes}, levels {paths}")
    except Exception as e:  # noqa: BLE001
        fails.append(f"FAIL [{name}] ome-zarr-models: {e}")
    try:
        node, data = ome_zarr_level0(path)
        compare(name, "ome-zarr level 0", data, want, fails)
        if len(node.data) != len(levels):
            fails.append(f"FAIL [{name}] ome-zarr sees {len(node.data)} levels")
        for k, lv in enumerate(levels[1:len(node.data)], start=1):
            compare(name, f"ome-zarr level {k}", np.asarray(node.data[k]), lv, fails)
        got_axes = [a["name"] for a in node.metadata["axes"]]
        if got_axes != entry["axes"]:
            fails.append(f"FAIL [{name}] ome-zarr axes {got_axes}, expected {entry['axes']}")
    except Exception as e:  # noqa: BLE001
        fails.append(f"FAIL [{name}] ome-zarr: {type(e).__name__}: {e}")
    try:
        group = zarr.open_group(path, mode="r")
        for k, lv in enumerate(levels):
            method = entry.get("method", "") if k else ""
            compare(name, f"zarr-python level {k} {method}", group[str(k)][...], lv, fails)
    except Exception as e:  # noqa: BLE001
        fails.append(f"FAIL [{name}] zarr-python: {type(e).__name__}: {e}")


def run_images(manifest):
    fails = []
    for entry in manifest["images"]:
        check_image(entry, fails)
    return fails


def run_live(manifest):
    entry = manifest["live"]
    name, path = entry["name"], entry["path"]
    want = expected(entry)
    levels = pyramid(entry, want)
    last_k, seen_k = {}, {}
    fails = []
    with open(entry["ready_file"], "w") as f:
        f.write("ready")
    deadline = time.monotonic() + entry["timeout_s"]
    state, seen, last = None, set(), 0
    while state != "finished" and len(fails) < 20:
        if time.monotonic() > deadline:
            fails.append(f"FAIL [{name}] live: not finished within {entry['timeout_s']} s")
            break
        try:
            level0 = zarr.open_group(path, mode="r")["0"]
        except Exception:  # noqa: BLE001  (not created yet)
            time.sleep(0.01)
            continue
        state = level0.attrs["zarrstream"]["state"]
        rows = level0.shape[0]
        if rows < last:
            fails.append(f"FAIL [{name}] live: shape[0] shrank from {last} to {rows}")
        last = rows
        seen.add(rows)
        compare(name, f"live zarr-python read of {rows} rows", level0[...], want[:rows], fails)
        # Every other level: its shape never ahead of its data, never shrinking.
        for k, lv in enumerate(levels[1:], start=1):
            try:
                arr = zarr.open_group(path, mode="r")[str(k)]
            except Exception as e:  # noqa: BLE001
                fails.append(f"FAIL [{name}] live level {k}: {type(e).__name__}: {e}")
                continue
            r = arr.shape[0]
            if r < last_k.get(k, 0):
                fails.append(f"FAIL [{name}] live level {k}: shape[0] shrank to {r}")
            last_k[k] = r
            seen_k.setdefault(k, set()).add(r)
            compare(name, f"live level {k} read of {r} rows", arr[...], lv[:r], fails)
        try:
            _, data = ome_zarr_level0(path)
            rows2 = data.shape[0]
            compare(name, f"live ome-zarr read of {rows2} rows", data, want[:rows2], fails)
        except Exception as e:  # noqa: BLE001
            fails.append(f"FAIL [{name}] live ome-zarr: {type(e).__name__}: {e}")
    partial = sorted(s for s in seen if 0 < s < want.shape[0])
    print(f"live: shape[0] seen while recording: {sorted(seen)}")
    for k, s in sorted(seen_k.items()):
        print(f"live: level {k} shape[0] seen: {sorted(s)}")
    if len(partial) < 2:
        fails.append(f"FAIL [{name}] live: saw only {sorted(seen)} rows; too short to "
                     "read at two growing sizes")
    check_image(entry, fails)
    return fails


def run_plate(manifest):
    p = manifest["plate"]
    root, fails = p["path"], []
    shape = tuple(p["shape"])
    want = {im["key"]: np.fromfile(im["expected"], dtype=p["dtype"]).reshape(shape)
            for im in p["images"]}
    # ome-zarr-models: the plate, its wells and their images.
    try:
        # A model's warning (a field it expects and we left out) counts as a failure.
        with warnings.catch_warnings():
            warnings.simplefilter("error", ValidationWarning)
            hcs = HCS.from_zarr(zarr.open_group(root, mode="r"))
        plate = hcs.ome_attributes.plate
        got = {
            "rows": [r.name for r in plate.rows],
            "columns": [c.name for c in plate.columns],
            "wells": [w.path for w in plate.wells],
            "acquisitions": [a.id for a in plate.acquisitions or []],
            "field_count": plate.field_count,
            "name": plate.name,
        }
        for key, value in got.items():
            if value != p[key]:
                fails.append(f"FAIL [plate] ome-zarr-models {key}: {value}, expected {p[key]}")
        wells = list(hcs.well_groups)
        if len(wells) != len(p["wells"]):
            fails.append(f"FAIL [plate] ome-zarr-models found {len(wells)} well groups")
        listed = {}
        for path, well in zip(p["wells"], wells):
            for im in well.ome_attributes.well.images:
                listed[f"{path}/{im.path}"] = im.acquisition
        expected = {im["key"]: im["acquisition"] for im in p["images"]}
        if listed != expected:
            fails.append(f"FAIL [plate] well images {listed}, expected {expected}")
        for key in want:
            Image.from_zarr(zarr.open_group(f"{root}/{key}", mode="r"))
        print(f"plate: ome-zarr-models validated {len(wells)} wells, {len(listed)} images")
    except Exception as e:  # noqa: BLE001
        fails.append(f"FAIL [plate] ome-zarr-models: {type(e).__name__}: {e}")
    # The ome-zarr reader: the plate as a grid of first fields, a well as a grid of fields.
    first = {}
    for im in p["images"]:
        well = im["key"].rsplit("/", 1)[0]
        first.setdefault(well, im["key"])
    try:
        nodes = list(Reader(parse_url(root))())
        if not nodes or "plate" not in nodes[0].metadata.get("metadata", {}):
            raise AssertionError("ome-zarr found no plate node")
        data = np.asarray(nodes[0].data[0])
        t, h, w = shape[0], shape[-2], shape[-1]
        grid = np.zeros(shape[:-2] + (len(p["rows"]) * h, len(p["columns"]) * w), p["dtype"])
        for i, r in enumerate(p["rows"]):
            for j, c in enumerate(p["columns"]):
                if f"{r}/{c}" in first:
                    grid[..., i * h:(i + 1) * h, j * w:(j + 1) * w] = want[first[f"{r}/{c}"]]
        compare("plate", "ome-zarr plate grid of first fields", data, grid, fails)
        if len(nodes[0].data) != p["levels"]:
            fails.append(f"FAIL [plate] ome-zarr plate has {len(nodes[0].data)} levels")
        well = p["wells"][0]
        fields = [im["key"] for im in p["images"] if im["key"].startswith(well + "/")]
        cols = math.ceil(math.sqrt(len(fields)))
        rows = math.ceil(len(fields) / cols)
        grid = np.zeros(shape[:-2] + (rows * h, cols * w), p["dtype"])
        for k, key in enumerate(fields):
            i, j = divmod(k, cols)
            grid[..., i * h:(i + 1) * h, j * w:(j + 1) * w] = want[key]
        wnodes = list(Reader(parse_url(f"{root}/{well}"))())
        compare("plate", f"ome-zarr well {well} grid of fields",
                np.asarray(wnodes[0].data[0]), grid, fails)
        print(f"plate: ome-zarr read the plate grid {data.shape} and well {well}")
    except Exception as e:  # noqa: BLE001
        fails.append(f"FAIL [plate] ome-zarr: {type(e).__name__}: {e}")
    # zarr-python: every field image and its levels.
    for key, data in want.items():
        check_levels = pyramid({"levels": p["levels"], "method": p["method"]}, data)
        try:
            group = zarr.open_group(f"{root}/{key}", mode="r")
            for k, lv in enumerate(check_levels):
                compare("plate", f"zarr-python {key} level {k}", group[str(k)][...], lv, fails)
        except Exception as e:  # noqa: BLE001
            fails.append(f"FAIL [plate] zarr-python {key}: {type(e).__name__}: {e}")
    return fails


def main():
    if len(sys.argv) != 3 or sys.argv[1] not in ("images", "live", "plate"):
        print(__doc__)
        return 2
    with open(sys.argv[2], encoding="utf-8") as f:
        manifest = json.load(f)
    run = {"images": run_images, "live": run_live, "plate": run_plate}[sys.argv[1]]
    fails = run(manifest)
    for line in fails:
        print(line)
    if fails:
        print(f"{len(fails)} failure(s)")
        return 1
    print("ome: every check passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
