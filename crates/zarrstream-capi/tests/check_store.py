#!/usr/bin/env python3
"""Reads an array written by examples/c/record.c or examples/python/record.py with
zarr-python and compares every pixel with the deterministic camera, recomputed here
with numpy from the formula in record.c (camera_pixel).

    check_store.py STORE FRAMES

Prints one line and exits 0 when the array holds exactly FRAMES frames of that camera
and its metadata says the recording finished; exits 1 naming the first difference.
"""

import json
import sys

import numpy as np
import zarr

HEIGHT = WIDTH = 256
BEAD = 16
M32 = 0xFFFFFFFF


def camera_frame(t):
    """record.c's camera_pixel for every (y, x) of frame t, with uint32 wrap-around."""
    y = np.arange(HEIGHT, dtype=np.uint32)[:, None]
    x = np.arange(WIDTH, dtype=np.uint32)[None, :]
    h = (x * np.uint32(73856093)) ^ (y * np.uint32(19349663)) ^ np.uint32((t * 83492791) & M32)
    h ^= h >> np.uint32(13)
    v = (100 + (h & np.uint32(15))).astype(np.uint16)
    by, bx = (t * 3) % (HEIGHT - BEAD), (t * 5) % (WIDTH - BEAD)
    v[by:by + BEAD, bx:bx + BEAD] += 1000
    return v


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    store, frames = sys.argv[1], int(sys.argv[2])
    a = zarr.open_array(store, mode="r")
    problems = []
    if a.shape != (frames, HEIGHT, WIDTH):
        problems.append(f"shape {a.shape}, expected {(frames, HEIGHT, WIDTH)}")
    if a.dtype != np.uint16:
        problems.append(f"dtype {a.dtype}")
    state = a.attrs.get("zarrstream", {}).get("state")
    if state != "finished":
        problems.append(f"state {state!r}: {json.dumps(dict(a.attrs))}")
    if not problems:
        data = a[...]
        for t in range(frames):
            want = camera_frame(t)
            if not np.array_equal(data[t], want):
                y, x = np.argwhere(data[t] != want)[0]
                problems.append(f"frame {t} differs at (y={y}, x={x}): "
                                f"{data[t, y, x]} != {want[y, x]}")
                break
    if problems:
        print(f"check_store: {store}: " + "; ".join(problems))
        sys.exit(1)
    print(f"check_store: {store}: {frames} frames of {HEIGHT} x {WIDTH} uint16 read by "
          f"zarr-python {zarr.__version__} equal the camera's")


if __name__ == "__main__":
    main()
