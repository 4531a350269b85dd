"""The zarrstream-python contender of tools/peers/compare.py: zarrstream's Python package
(`crates/zarrstream-python`, built as a release wheel into the peers venv by
`tools/peers/run`) driven like the other Python peers, frames held in one numpy array
and appended one call per frame.

It is measured the way `record --input` is, so the two rows compare the Python layer
and nothing else:

- the same writer settings as the `record` command line compare.py builds
  (`WRITER_SETTINGS`: threads, sink, pool, pinning, back-pressure, durability; the
  library's defaults for the rest, crc32c on);
- the timed phase runs from the first `append` until `close()` returned (`finish`, which
  fsyncs every shard and `zarr.json`), as `record`'s report does; creating the writer
  comes before it and is reported apart (`create_s`);
- extra RSS: VmHWM (reset after the frames are loaded and the package imported) minus
  VmRSS at that point, writer creation included, as `record` resets before creating.
"""

from __future__ import annotations

import time

# Settings shared by `record` (compare.py passes them as flags) and the Python writer;
# each is the library's default spelled out, `threads` comes from --threads.
WRITER_SETTINGS = {
    "sink": "auto",          # direct (O_DIRECT) where the filesystem allows it
    "pool_frames": 0,        # 0 = 2 x threads + 2 frame buffers
    "pin_threads": True,
    "backpressure": "block",
    "durability": "shard",
}

RECORD_FLAGS = [
    "--sink", WRITER_SETTINGS["sink"],
    "--pool-frames", str(WRITER_SETTINGS["pool_frames"]),
    "--backpressure", WRITER_SETTINGS["backpressure"],
    "--durability", WRITER_SETTINGS["durability"],
]  # pinning is record's default (no --no-pin)

CODEC = {"zstd": "zstd:1", "lz4": "lz4:1", "none": "none"}


def write(frames, path, chunk, shard, codec, threads, lat) -> dict:
    """Appends `frames` (an (n, H, W) uint16 array, or the paced camera of paced.py) one
    frame per call; returns the start of the timed phase (perf_counter) and what the
    writer reports."""
    import zarrstream

    t_create = time.perf_counter()
    w = zarrstream.Writer(
        path, shape=(0, *frames.shape[1:]), chunks=chunk, shards=shard, dtype=frames.dtype,
        codec=CODEC[codec], dimension_names=("t", "y", "x"), threads=threads,
        overwrite=True, **WRITER_SETTINGS,
    )
    clock = time.perf_counter
    t_first = clock()
    for frame in frames:
        t0 = clock()
        w.append(frame)
        lat.append(clock() - t0)
    stats = w.close()
    return {
        "timed_from": t_first,
        "create_s": t_first - t_create,
        "sink": stats.sink,
        "writer_seconds": stats.seconds,
        "frames_written": stats.frames_written,
        "frames_dropped": stats.frames_dropped,
        "pool_bytes": stats.pool_bytes,
    }
