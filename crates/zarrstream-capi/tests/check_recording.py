#!/usr/bin/env python3
"""Reads the stores examples/c/recording.c wrote with zarr-python and compares every
pixel, every per-frame metadata value and the attributes with what recording.c pushed
(its pixel formulas are recomputed here with numpy).

    check_recording.py DIR N0 N1 NI NW

DIR is recording.c's directory; N0, N1, NI and NW are the frames it reported in cam0,
stage/cam1, img (level 0) and w.zarr. Prints one line per array and exits 0 when all
agree; exits 1 naming every difference.
"""

import sys

import numpy as np
import zarr
from zarr.core.indexing import morton_order_iter

problems = []


def expect(what, got, want):
    if got != want:
        problems.append(f"{what}: {got!r}, expected {want!r}")


def frames(n, h, w, dtype, pixel):
    """The frames [0, n) of a camera, pixel(t, y, x) computed in uint32 and wrapped."""
    t = np.arange(n, dtype=np.uint32)[:, None, None]
    y = np.arange(h, dtype=np.uint32)[None, :, None]
    x = np.arange(w, dtype=np.uint32)[None, None, :]
    return pixel(t, y, x).astype(dtype)


def check_array(a, name, want, attrs):
    expect(f"{name} shape", a.shape, want.shape)
    expect(f"{name} dtype", a.dtype, want.dtype)
    expect(f"{name} state", a.attrs.get("zarrstream", {}).get("state"), "finished")
    for key, value in attrs.items():
        expect(f"{name} attribute {key}", a.attrs.get(key), value)
    if a.shape == want.shape:
        data = a[...]
        if not np.array_equal(data, want):
            t, y, x = np.argwhere(data != want)[0]
            problems.append(f"{name} frame {t} differs at (y={y}, x={x}): "
                            f"{data[t, y, x]} != {want[t, y, x]}")
    print(f"check_recording: {name}: {a.shape} {a.dtype} read by zarr-python "
          f"{zarr.__version__}")


def stored_order(shard, grid):
    """The coordinates of a shard's present inner chunks in the order of their bytes
    in the file, from its index (at the end: 16 bytes per chunk, then a crc32c)."""
    n = int(np.prod(grid))
    with open(shard, "rb") as f:
        data = f.read()
    index = np.frombuffer(data[len(data) - 16 * n - 4:len(data) - 4], dtype="<u8")
    offsets = index.reshape(n, 2)[:, 0]
    present = [i for i in range(n) if offsets[i] != 2**64 - 1]
    present.sort(key=lambda i: offsets[i])
    return [tuple(int(c) for c in np.unravel_index(i, grid)) for i in present]


def main():
    if len(sys.argv) != 6:
        sys.exit(__doc__)
    d = sys.argv[1]
    n0, n1, ni, nw = (int(v) for v in sys.argv[2:])

    root = zarr.open_group(f"{d}/rec.zarr", mode="r")
    expect("root experiment", root.attrs.get("experiment"), "E12")
    expect("root operator", root.attrs.get("operator"), "ada")
    expect("root tmp (removed)", "tmp" in root.attrs, False)
    expect("root arrays", root.attrs.get("zarrstream", {}).get("recording", {}).get("arrays"),
           ["cam0", "stage/cam1", "img"])
    expect("root members", sorted(k for k, _ in root.members()), ["cam0", "img", "stage"])

    check_array(root["cam0"], "cam0",
                frames(n0, 48, 64, np.uint16, lambda t, y, x: t * 1000 + y * 64 + x),
                {"camera": "left", "exposure_ms": 10})
    ts = root["cam0/frame_meta/timestamp"][...]
    counter = root["cam0/frame_meta/counter"][...]
    expect("cam0 timestamps", ts.tolist(), [t * 0.25 for t in range(n0)])
    expect("cam0 counters", counter.tolist(), list(range(n0)))

    check_array(root["stage/cam1"], "stage/cam1",
                frames(n1, 32, 40, np.uint8, lambda t, y, x: t * 7 + y * 3 + x),
                {"gain": {"db": 3.5}})
    # Written with "chunk_order": "morton" (and not rewritten by the resume): the
    # chunks lie in the order zarr-python itself writes a shard in.
    grid = (4, 2, 2)
    expect("stage/cam1 c/0/0/0 chunk order",
           stored_order(f"{d}/rec.zarr/stage/cam1/c/0/0/0", grid),
           list(morton_order_iter(grid)))

    img = root["img"]
    expect("img group note", img.attrs.get("note"), "hello")
    expect("img group tmp (removed)", "tmp" in img.attrs, False)
    expect("img is an OME-Zarr image", "multiscales" in img.attrs.get("ome", {}), True)
    # "omero": "auto": the display window is taken from the frames (50000 + t*256 + ...),
    # not the type's range, and the group note set meanwhile is kept beside it. Which
    # frames are sampled depends on which worker finishes first (frame 1 may be encoded
    # before frame 0), so only the bounds every sample obeys are checked: the window lies
    # within the data, and spans at least most of one frame's 256 values.
    window = img.attrs["ome"]["omero"]["channels"][0]["window"]
    print(f"check_recording: img omero window {window}")
    lo, hi = 50000, 50000 + ni * 256 - 1
    expect("img omero window start within the data",
           lo <= window["start"] <= hi - 128, True)
    expect("img omero window end within the data",
           window["start"] + 128 <= window["end"] <= hi, True)
    expect("img omero window min/max", (window["min"], window["max"]), (0, 65535))
    check_array(img["0"], "img/0",
                frames(ni, 16, 16, np.uint16, lambda t, y, x: 50000 + t * 256 + y * 16 + x),
                {})

    w = zarr.open_array(f"{d}/w.zarr", mode="r")
    check_array(w, "w.zarr (resumed writer)",
                frames(nw, 16, 16, np.uint16, lambda t, y, x: t * 256 + y * 16 + x),
                {})
    expect("w.zarr frames_committed",
           w.attrs.get("zarrstream", {}).get("frames_committed"), nw)

    if problems:
        print("check_recording: " + "; ".join(problems))
        sys.exit(1)
    print(f"check_recording: {d}: every array, metadata value and attribute as pushed")


if __name__ == "__main__":
    main()
