"""The Python package's first example: the book's "Getting started: Python" and the README
show the part between the ANCHOR lines, and crates/zarrstream-python/tests/python/
test_examples.py runs it and reads the array back.

    python examples/python/quickstart.py        # writes ./run.zarr

Records 64 frames of a simulated 512 x 512 uint16 camera into a sharded Zarr v3 array.
"""

from __future__ import annotations

from collections.abc import Iterator

import numpy as np


def simulated_camera(frames: int) -> Iterator[np.ndarray]:
    """`frames` deterministic 512 x 512 uint16 frames: noise over an offset of 100."""
    rng = np.random.default_rng(0)
    for _ in range(frames):
        yield rng.integers(100, 4096, size=(512, 512), dtype=np.uint16)


def main() -> "zarrstream.Stats":  # noqa: F821 (imported in the example)
    # ANCHOR: writer
    import zarrstream

    camera = simulated_camera(64)            # your camera: (512, 512) uint16 numpy arrays
    with zarrstream.Writer("run.zarr", shape=(None, 512, 512), chunks=(1, 256, 256),
                           shards=(16, 512, 512), dtype="uint16", codec="lz4:1") as w:
        for frame in camera:
            w.append(frame)                  # no copy in Python; the GIL is released
    print(w.stats.frames_written, "frames, p99 push latency",
          w.stats.push_latency_ns.p99, "ns")
    # ANCHOR_END: writer
    return w.stats


if __name__ == "__main__":
    main()
