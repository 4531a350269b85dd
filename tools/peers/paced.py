"""The paced mode of tools/peers/compare.py (`--paced 50,80,95`): how long the per-frame
call holds the acquisition thread when frames come from a camera at a fraction of the
writer's sustainable rate.

pymmcore-plus calls the writer's `append` on its acquisition loop: while `append` runs,
no frame is taken from Micro-Manager's circular buffer, so the tail of the append time
(p99, p99.9, max), not the mean, decides whether frames are lost upstream.

- The sustainable rate of each contender is its own closed-loop rate from the same run:
  the median frames/s of its `--repeats` ordinary runs (config and codec alike).
- Each contender is then paced like a camera at each load: frame k is due at
  t0 + k / target on the monotonic clock, the loop sleeps until it is due (the last
  250 us spun, as `record --fps` does); a frame that is late is pushed at once, and
  counted late when it is pushed more than one period after it was due (`record`'s
  definition). The frames file is cycled, so memory stays that of `-n` frames.
- Back-pressure is block for every contender: zarrstream's ome-writers backend (the
  writer pymmcore-plus gets) leaves the library's default, block, and acquire-zarr's
  `append` always waits. Dropped frames are reported all the same (`record`'s report,
  the Python writer's `stats.frames_dropped`; acquire-zarr cannot drop).
- Latency: the time inside the call, per frame. Python (zarrstream-python `Writer.append`,
  acquire-zarr `ZarrStream.append`): `time.perf_counter` around the call, exact
  percentiles over every sample (numpy); `record --fps`: the library's push latency
  (time inside `push`, an HDR histogram at 3 significant digits).
"""

from __future__ import annotations

import time

# The last stretch before a frame is due is spun rather than slept (sleep overshoots by
# the timer slack), as record's pacer does (record/acquire.rs, `wait_until`).
SPIN_S = 250e-6
# p99.9 is one of the samples only from 1000 frames on.
MIN_FRAMES = 1000


class Paced:
    """The frames a camera delivers at `fps`: iterating yields `total` frames cycled
    from `frames` (an (n, H, W) array), frame k not before t0 + k / fps, where t0 is
    when the first frame is asked for. Has the `shape`, `dtype` and `len()` of the
    whole sequence, which is what the writer functions read of their frames."""

    def __init__(self, frames, total: int, fps: float):
        self.frames = frames
        self.total = total
        self.period = 1.0 / fps
        self.shape = (total, *frames.shape[1:])
        self.dtype = frames.dtype
        self.t0: float | None = None
        self.late = 0
        self.max_lateness_s = 0.0

    def __len__(self) -> int:
        return self.total

    def __iter__(self):
        clock = time.perf_counter  # CLOCK_MONOTONIC on Linux
        n = len(self.frames)
        for k in range(self.total):
            if self.t0 is None:
                self.t0 = clock()
            due = self.t0 + k * self.period
            left = due - clock()
            if left > SPIN_S:
                time.sleep(left - SPIN_S)
            while clock() < due:
                pass
            lateness = clock() - due
            self.max_lateness_s = max(self.max_lateness_s, lateness)
            if lateness > self.period:
                self.late += 1
            yield self.frames[k % n]


def percentiles_ms(lat_s: list[float]) -> dict:
    """Exact p50, p99, p99.9 and max of per-call durations in seconds, in ms."""
    import numpy as np

    a = np.asarray(lat_s) * 1e3
    p50, p99, p999 = np.percentile(a, [50, 99, 99.9])
    return {"p50": float(p50), "p99": float(p99), "p999": float(p999), "max": float(a.max())}


def sustainable_fps(runs: list[dict], frame_bytes: int) -> dict:
    """(config, codec, contender) -> median closed-loop frames/s of its successful runs."""
    import statistics

    out: dict = {}
    for key in {(r["config"], r["codec"], r["contender"]) for r in runs}:
        fps = [r["raw_bytes"] / frame_bytes / r["wall_s"] for r in runs
               if (r["config"], r["codec"], r["contender"]) == key and "error" not in r]
        if fps:
            out[key] = statistics.median(fps)
    return out


# Row order within a load: the two zarrstream rows the ratios compare first.
ORDER = ["zarrstream", "zarrstream-python", "acquire-zarr", "tensorstore", "zarr-python"]
# What the table calls each contender (zarrstream is `record --fps`).
NAMES = {"zarrstream": "zarrstream (`record`)"}


def summary(paced_runs: list[dict], configs: list[str], codecs: list[str]) -> list[dict]:
    """The paced table per config and codec (in the order given): its rows (contender x
    load), and per load the same-run ratios zarrstream-python / record and
    zarrstream-python / acquire-zarr of the p99 and max append latency."""
    out = []
    groups = sorted({(r["config"], r["codec"]) for r in paced_runs},
                    key=lambda k: (configs.index(k[0]), codecs.index(k[1])))
    for cfg, codec in groups:
        rows = [r for r in paced_runs if (r["config"], r["codec"]) == (cfg, codec)]
        rows.sort(key=lambda r: (r["load_pct"], ORDER.index(r["contender"])))
        ratios = []
        for load in sorted({r["load_pct"] for r in rows}):
            got = {r["contender"]: r for r in rows
                   if r["load_pct"] == load and "error" not in r}
            py = got.get("zarrstream-python")
            for other, name in (("zarrstream", "record"), ("acquire-zarr", "acquire-zarr")):
                b = got.get(other)
                if py and b:
                    ratios.append({
                        "load_pct": load, "against": name,
                        "p99": py["append_ms"]["p99"] / b["append_ms"]["p99"],
                        "max": py["append_ms"]["max"] / b["append_ms"]["max"],
                    })
        out.append({"config": cfg, "codec": codec, "rows": rows, "ratios": ratios})
    return out


def _f(x, spec: str) -> str:
    return "n/a" if x is None else format(x, spec)


def lines(tables: list[dict]) -> list[str]:
    """The paced tables as Markdown."""
    L: list[str] = []
    for t in tables:
        L += [f"### {t['config']} {t['codec']}", "",
              "| contender | sustainable fps | load % | target fps | achieved fps | frames "
              "| late | dropped | append ms p50 / p99 / p99.9 / max | others' cores "
              "| read-back |",
              "|---|---:|---:|---:|---:|---:|---:|---:|---|---:|---|"]
        for r in t["rows"]:
            name = NAMES.get(r["contender"], r["contender"])
            head = (f"| {name} | {r['sustainable_fps']:.1f} | {r['load_pct']:g} | "
                    f"{r['target_fps']:.1f} |")
            if "error" in r:
                L.append(f"{head} | {r['frames']} | | | ERROR: {r['error'][:100]} | | |")
                continue
            lat = " / ".join(f"{r['append_ms'][k]:.2f}" for k in ("p50", "p99", "p999", "max"))
            status = "ok" if r.get("ok") else f"**FAILED** {r.get('note', '')[:80]}"
            L.append(f"{head} {r['achieved_fps']:.1f} | {r['frames']} | {r['late']} | "
                     f"{_f(r['dropped'], 'd')} | {lat} | {_f(r.get('others_cores'), '.2f')} "
                     f"| {status} |")
        if t["ratios"]:
            L += ["", "| load % | zarrstream-python / … | p99 ratio | max ratio |",
                  "|---:|---|---:|---:|"]
            for q in t["ratios"]:
                L.append(f"| {q['load_pct']:g} | {q['against']} | **{q['p99']:.2f}** | "
                         f"**{q['max']:.2f}** |")
        L.append("")
    return L


METHOD = [
    "- Sustainable fps: each contender's own closed-loop rate in this run (median frames/s "
    "of its ordinary runs above, same config and codec); target fps = load × that.",
    "- Paced like a camera: frame k due at t0 + k / target fps (monotonic clock), slept "
    "until due (the last 250 us spun, as `record --fps` does); a frame found late is pushed "
    "at once, and counted late when pushed more than one period after it was due. The "
    "frames file is cycled. One run per contender and load; loads in turn, contenders "
    "alternating within a load.",
    "- Back-pressure block for every contender: zarrstream's ome-writers backend (what "
    "pymmcore-plus uses) keeps the library's default, block; acquire-zarr's `append` always "
    "waits. dropped: `record`'s report, the Python writer's `stats.frames_dropped`; "
    "acquire-zarr has no drop mode (0 when its array holds every frame).",
    "- append ms: time inside the per-frame call. zarrstream-python `Writer.append` and "
    "acquire-zarr `ZarrStream.append`: `time.perf_counter` around the call, exact "
    "percentiles of every frame (numpy, linear interpolation); zarrstream = `record --fps` "
    "(the Rust `push`, same frames, same pacing): the library's push latency (HDR "
    "histogram, 3 significant digits).",
    "- achieved fps = frames / seconds from the first frame's due time until the writer "
    "was closed and its output durable (`record`'s report `seconds`).",
    "- others' cores: CPU time of every other process on the machine during the run / its "
    "wall time (the machine may be shared; 0 = idle).",
    "- read-back: the array's shape (every frame written), dtype and layout, and its first "
    "and last shard layers compared exactly with the cycled input.",
    "- Ratios: zarrstream-python's p99 (max) over the other contender's, same load, same "
    "run; below 1 means the Python package holds the acquisition thread for less.",
]
