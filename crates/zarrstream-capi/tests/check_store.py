#!/usr/bin/env python3
"""Reads an array written by examples/c/record.c or examples/python/record.py with
zarr-python and compares every pixel with the deterministic camera, recomputed here
with numpy from the formula in record.c (camera_pixel).

    check_store.py STORE FRAMES

STORE may be an s3:// URL (endpoint and credentials from the AWS_* environment).

Prints one line and exits 0 when the array holds exactly FRAMES frames of that camera
and its metadata says the recording finished; exits 1 naming the first difference.
"""

import json
import os
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


def open_store(store):
    """A local path as it is; an ``s3://bucket/prefix`` URL through s3fs, with the
    endpoint, region and credentials of the AWS_* environment (path-style addressing,
    no caches)."""
    if not store.startswith("s3://"):
        return store
    from zarr.storage import FsspecStore

    env = os.environ
    return FsspecStore.from_url(store, read_only=True, storage_options={
        "endpoint_url": env["AWS_ENDPOINT_URL"], "key": env["AWS_ACCESS_KEY_ID"],
        "secret": env["AWS_SECRET_ACCESS_KEY"],
        "client_kwargs": {"region_name": env.get("AWS_REGION", "us-east-1")},
        "config_kwargs": {"s3": {"addressing_style": "path"}},
        "use_listings_cache": False, "skip_instance_cache": True,
    })


def main():
    if len(sys.argv) != 3:
        sys.exit(__doc__)
    store, frames = sys.argv[1], int(sys.argv[2])
    a = zarr.open_array(open_store(store), mode="r")
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
