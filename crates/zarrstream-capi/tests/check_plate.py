#!/usr/bin/env python3
"""Validates and reads the plate examples/c/plate.c wrote, with readers zarrstream did
not write: ome-zarr-models (its OME-Zarr 0.5 HCS model: plate, wells, images), the
ome-zarr reader (the plate as a grid of every well's first field) and zarr-python (every
field image equal to what plate.c pushed; its pixel formula is recomputed here).

    check_plate.py DIR

Prints what it checked and exits 0 when all agree; exits 1 naming every difference.
"""

import sys
import warnings

import numpy as np
import zarr
from ome_zarr.io import parse_url
from ome_zarr.reader import Reader
from ome_zarr_models.exceptions import ValidationWarning
from ome_zarr_models.v05.hcs import HCS

H = W = 16
T = 3
WELLS = ["A/1", "A/2", "A/3", "B/1", "B/3"]
FIELDS, ACQUISITIONS = 2, [0, 7]

problems = []


def expect(what, got, want):
    if got != want:
        problems.append(f"{what}: {got!r}, expected {want!r}")


def frames(i):
    """Image i's T frames, as plate.c's pixel(i, t, y, x)."""
    t = np.arange(T, dtype=np.uint32)[:, None, None]
    y = np.arange(H, dtype=np.uint32)[None, :, None]
    x = np.arange(W, dtype=np.uint32)[None, None, :]
    return (i * 1000 + t * 100 + y * W + x).astype(np.uint16)


def images():
    """(key, acquisition id, index) in plate.c's push order."""
    i = 0
    for a, acq in enumerate(ACQUISITIONS):
        for well in WELLS:
            for f in range(FIELDS):
                yield f"{well}/{a * FIELDS + f}", acq, i
                i += 1


def main():
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    root = f"{sys.argv[1]}/plate.ome.zarr"
    with warnings.catch_warnings():
        warnings.simplefilter("error", ValidationWarning)
        hcs = HCS.from_zarr(zarr.open_group(root, mode="r"))
    plate = hcs.ome_attributes.plate
    expect("plate name", plate.name, "C plate")
    expect("rows", [r.name for r in plate.rows], ["A", "B"])
    expect("columns", [c.name for c in plate.columns], ["1", "2", "3"])
    expect("wells", [w.path for w in plate.wells], WELLS)
    expect("field_count", plate.field_count, FIELDS * len(ACQUISITIONS))
    expect("acquisitions", [(a.id, a.name, a.maximumfieldcount) for a in plate.acquisitions],
           [(0, "first", FIELDS), (7, "second", FIELDS)])
    listed = {f"{path}/{im.path}": im.acquisition
              for path, well in zip(WELLS, hcs.well_groups)
              for im in well.ome_attributes.well.images}
    expect("well images", listed, {key: acq for key, acq, _ in images()})
    attrs = zarr.open_group(root, mode="r").attrs
    expect("root screen attribute", attrs.get("screen"), {"compound": "X"})
    expect("recording mark", len(attrs["zarrstream"]["recording"]["arrays"]), 20)
    print(f"check_plate: ome-zarr-models validated {len(listed)} images in "
          f"{len(WELLS)} wells")

    for key, _, i in images():
        got = zarr.open_array(f"{root}/{key}/0", mode="r")[...]
        if not np.array_equal(got, frames(i)):
            problems.append(f"{key}: pixels differ from image {i}'s frames")
    print("check_plate: zarr-python read every field image as pushed")

    nodes = list(Reader(parse_url(root))())
    grid = np.zeros((T, 2 * H, 3 * W), np.uint16)
    for key, acq, i in images():
        row, col, path = key.split("/")
        if path == "0":
            r, c = "AB".index(row), int(col) - 1
            grid[:, r * H:(r + 1) * H, c * W:(c + 1) * W] = frames(i)
    if not nodes or not np.array_equal(np.asarray(nodes[0].data[0]), grid):
        problems.append("ome-zarr's plate grid differs from every well's first field")
    print("check_plate: the ome-zarr reader's plate grid holds every well's first field")

    if problems:
        print("check_plate: " + "; ".join(problems))
        sys.exit(1)
    print(f"check_plate: {root}: as pushed")


if __name__ == "__main__":
    main()
