#!/usr/bin/env python3
"""Compare `zarrstream record` with peer sharded Zarr v3 writers.

Contenders: zarrstream (`target/release/zarrstream record --input`), zarrstream's Python
package (zarrstream-python, see zarrstream_python.py), acquire-zarr,
tensorstore (zarr3 driver) and zarr-python 3, on the same raw frames (written once by
`zarrstream record --save-frames` from the project's synthetic camera), each run in a fresh
process with the same thread budget. Runs alternate between contenders (repeat 1 of
everything, then repeat 2, ...). Every output is read back with zarr-python and
compared with the input frames exactly; a mismatch is reported as FAILED.

Timed phase, for every contender: from the first append until the writer is closed and
its files are durable (peers: close, then fsync of every file and directory written;
zarrstream: `finish` returned, which fsyncs each shard and the metadata; the report's
`seconds`). Extra RSS: peak RSS of the timed phase minus RSS after loading the frames,
measured inside the writing process (VmHWM reset through /proc/self/clear_refs;
`zarrstream record` does the same and reports it as `extra_rss_mib`).

Normally started by `tools/peers/run`; `--help` lists the options.
"""

from __future__ import annotations

import argparse
import datetime as dt
import json
import os
import platform
import shutil
import statistics
import subprocess
import sys
import threading
import time

import paced  # tools/peers/paced.py: the paced mode (--paced)
import zarrstream_python  # tools/peers/zarrstream_python.py: its settings, shared with record

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# `zarrstream record`: the CLI binary (where cargo put it: tools/peers/run builds it with
# the caller's CARGO_TARGET_DIR) and its subcommand.
ZARRSTREAM = os.path.join(os.path.abspath(os.environ.get("CARGO_TARGET_DIR")
                                          or os.path.join(ROOT, "target")),
                          "release", "zarrstream")
RECORD = [ZARRSTREAM, "record"]
H = W = 2048
FRAME_BYTES = H * W * 2  # uint16

# (inner chunk, shard), (t, y, x)
CONFIGS = {
    "C1": ((1, 512, 512), (32, 2048, 2048)),
    "C2": ((16, 256, 256), (64, 2048, 2048)),
}
CODECS = {
    "zstd": "zstd level 1",
    "lz4": "blosc lz4 clevel 1, byte shuffle, typesize 2",
    "none": "no compression",
}
RECORD_CODEC = {"zstd": "zstd:1", "lz4": "lz4:1", "none": "none"}
CONTENDERS = ["acquire-zarr", "tensorstore", "zarr-python", "zarrstream", "zarrstream-python"]
# The Python package's targets, as same-run ratios (python_targets): append throughput
# >= 0.95 x record's and >= 2 x acquire-zarr's, extra RSS <= 1.10 x record's.
TARGETS = {"vs_record": 0.95, "vs_acquire_zarr": 2.0, "rss_vs_record": 1.10}


# ---------------------------------------------------------------------------------
# measurement helpers
# ---------------------------------------------------------------------------------


def proc_status_mib(key: str) -> float:
    with open("/proc/self/status") as f:
        for line in f:
            if line.startswith(key + ":"):
                return int(line.split()[1]) / 1024
    return float("nan")


def reset_peak_rss() -> bool:
    try:
        with open("/proc/self/clear_refs", "w") as f:
            f.write("5")
        return True
    except OSError:
        return False


def machine_busy_s() -> float:
    """Busy CPU seconds of the whole machine (every process), from /proc/stat."""
    with open("/proc/stat") as f:
        v = [int(x) for x in f.readline().split()[1:9]]
    return (sum(v) - v[3] - v[4]) / os.sysconf("SC_CLK_TCK")


def process_cpu_s(pid: int) -> float:
    """user + system CPU seconds of a running process (all its threads)."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def fsync_tree(path: str) -> None:
    for root, _dirs, files in os.walk(path):
        for name in files + ["."]:
            fd = os.open(os.path.join(root, name), os.O_RDONLY)
            try:
                os.fsync(fd)
            finally:
                os.close(fd)


def stored_bytes(path: str) -> int:
    return sum(os.path.getsize(os.path.join(r, f)) for r, _d, fs in os.walk(path) for f in fs)


def quantile_ms(lat: list[float], q: float) -> float:
    s = sorted(lat)
    return 1e3 * s[min(len(s) - 1, int(q * len(s)))]


# ---------------------------------------------------------------------------------
# peer writers (run inside a child process); each appends frames one call at a time
# and records each call's duration in `lat`
# ---------------------------------------------------------------------------------


def write_acquire_zarr(frames, path, chunk, shard, codec, threads, lat, s3=None):
    """`s3` (a dict: endpoint, bucket, region) selects acquire-zarr's S3 mode: `path` is
    then the key prefix in the bucket, credentials come from AWS_ACCESS_KEY_ID and
    AWS_SECRET_ACCESS_KEY (benches/object_store.rs, BENCHMARKS.md §15)."""
    import acquire_zarr as aqz
    import numpy as np

    aqz.set_log_level(aqz.LogLevel.ERROR)
    kinds = [aqz.DimensionType.TIME, aqz.DimensionType.SPACE, aqz.DimensionType.SPACE]
    sizes = [0, H, W]  # 0: unbounded append dimension
    dims = [
        aqz.Dimension(name=n, kind=k, array_size_px=s, chunk_size_px=c, shard_size_chunks=sh // c)
        for n, k, s, c, sh in zip("tyx", kinds, sizes, chunk, shard)
    ]
    array = aqz.ArraySettings(dimensions=dims, data_type=np.uint16)
    if codec == "zstd":
        array.compression = aqz.CompressionSettings(
            compressor=aqz.Compressor.ZSTD, codec=aqz.CompressionCodec.ZSTD, level=1, shuffle=0
        )
    elif codec == "lz4":
        array.compression = aqz.CompressionSettings(
            compressor=aqz.Compressor.BLOSC1, codec=aqz.CompressionCodec.BLOSC_LZ4, level=1,
            shuffle=1,
        )
    # S3Settings go in through the constructor: assigning `settings.s3` afterwards made
    # acquire-zarr 0.10 crash (SIGSEGV) when the stream was created.
    remote = ({"s3": aqz.S3Settings(endpoint=s3["endpoint"], bucket_name=s3["bucket"],
                                    region=s3["region"])} if s3 else {})
    stream = aqz.ZarrStream(aqz.StreamSettings(store_path=path, overwrite=True,
                                               max_threads=threads, arrays=[array], **remote))
    clock = time.perf_counter
    for frame in frames:
        t0 = clock()
        stream.append(frame)
        lat.append(clock() - t0)
    stream.close()


def write_tensorstore(frames, path, chunk, shard, codec, threads, lat):
    """One transaction per shard layer, committed while the next fills (one in flight)."""
    import tensorstore as ts

    inner = [{"name": "bytes", "configuration": {"endian": "little"}}]
    if codec == "zstd":
        inner.append({"name": "zstd", "configuration": {"level": 1, "checksum": False}})
    elif codec == "lz4":
        inner.append({"name": "blosc", "configuration": {
            "cname": "lz4", "clevel": 1, "shuffle": "shuffle", "typesize": 2, "blocksize": 0}})
    sharding = {"name": "sharding_indexed", "configuration": {
        "chunk_shape": list(chunk),
        "codecs": inner,
        "index_codecs": [{"name": "bytes", "configuration": {"endian": "little"}},
                         {"name": "crc32c"}],
        "index_location": "end",
    }}
    store = ts.open({
        "driver": "zarr3",
        "kvstore": {"driver": "file", "path": path},
        "metadata": {
            "shape": [len(frames), H, W],
            "data_type": "uint16",
            "chunk_grid": {"name": "regular", "configuration": {"chunk_shape": list(shard)}},
            "chunk_key_encoding": {"name": "default"},
            "fill_value": 0,
            "codecs": [sharding],
            "dimension_names": ["t", "y", "x"],
        },
        "create": True,
        "delete_existing": True,
        "context": {
            "data_copy_concurrency": {"limit": threads},
            "file_io_concurrency": {"limit": threads},
            "cache_pool": {"total_bytes_limit": 0},
        },
    }).result()
    depth, n = shard[0], len(frames)
    clock = time.perf_counter
    pending = view = txn = None
    for i, frame in enumerate(frames):
        t0 = clock()
        if i % depth == 0:
            txn = ts.Transaction()
            view = store.with_transaction(txn)
        view[i].write(frame).copy.result()  # the frame may be reused after this
        if i % depth == depth - 1 or i == n - 1:
            if pending is not None:
                pending.result()
            pending = txn.commit_async()
        lat.append(clock() - t0)
    if pending is not None:
        pending.result()


def write_zarr_python(frames, path, chunk, shard, codec, threads, lat):
    """A one-shard-layer buffer, written with one shard-aligned assignment when full."""
    import numcodecs
    import numpy as np
    import zarr
    import zarr.codecs as zc

    numcodecs.blosc.use_threads = False  # the parallelism is zarr's thread pool
    zarr.config.set({"threading.max_workers": threads})
    compressors = {
        "zstd": [zc.ZstdCodec(level=1, checksum=False)],
        "lz4": [zc.BloscCodec(cname="lz4", clevel=1, shuffle="shuffle", typesize=2,
                              blocksize=0)],
        "none": None,
    }[codec]
    n = len(frames)
    arr = zarr.create_array(
        store=zarr.storage.LocalStore(path), shape=(n, H, W), dtype="uint16", chunks=chunk,
        shards=shard, compressors=compressors, fill_value=0, zarr_format=3,
        dimension_names=("t", "y", "x"), overwrite=True,
    )
    depth = shard[0]
    buf = np.empty((depth, H, W), dtype=frames.dtype)
    clock = time.perf_counter
    for i, frame in enumerate(frames):
        t0 = clock()
        j = i % depth
        buf[j] = frame
        if j == depth - 1 or i == n - 1:
            arr[i - j:i + 1] = buf[:j + 1]
        lat.append(clock() - t0)


def write_zarrstream_python(frames, path, chunk, shard, codec, threads, lat):
    """zarrstream's Python package (tools/peers/zarrstream_python.py); returns the start
    of its timed phase, which is record's (first append until close returned)."""
    return zarrstream_python.write(frames, path, chunk, shard, codec, threads, lat)


PEERS = {
    "acquire-zarr": write_acquire_zarr,
    "tensorstore": write_tensorstore,
    "zarr-python": write_zarr_python,
    "zarrstream-python": write_zarrstream_python,
}
# What each child imports before its baseline RSS, so that importing is neither timed
# nor counted as the writer's memory (the writer functions' own imports are then no-ops).
PRELOAD = {
    "acquire-zarr": ["acquire_zarr"],
    "tensorstore": ["tensorstore"],
    "zarr-python": ["zarr", "numcodecs"],
    "zarrstream-python": ["zarrstream"],
}


def child_write(job: dict) -> dict:
    """Runs in a fresh process: load the frames, time the writer, report."""
    import numpy as np

    n = job["n"]
    frames = np.fromfile(job["raw"], dtype="<u2", count=n * H * W).reshape(n, H, W)
    frames.sum(dtype=np.uint64)  # every page resident before timing
    camera = None
    if job.get("paced"):
        # `total` frames cycled from the n loaded, at `fps` (paced.py).
        camera = frames = paced.Paced(frames, job["paced"]["frames"], job["paced"]["fps"])
    for module in PRELOAD[job["contender"]]:
        __import__(module)
    rss_base = proc_status_mib("VmRSS")
    reset = reset_peak_rss()
    lat: list[float] = []
    chunk, shard = CONFIGS[job["config"]]
    # benches/object_store.rs also runs acquire-zarr on layouts of its own.
    chunk, shard = tuple(job.get("chunk", chunk)), tuple(job.get("shard", shard))
    cpu0, busy0, t0 = sum(os.times()[:2]), machine_busy_s(), time.perf_counter()
    # An object-store destination (job["s3"], acquire-zarr only) is complete when close()
    # returned: there is no local file to fsync.
    extra = {"s3": job["s3"]} if job.get("s3") else {}
    own = PEERS[job["contender"]](frames, job["out"], chunk, shard, job["codec"],
                                  job["threads"], lat, **extra) or {}
    if "timed_from" not in own and not extra:
        fsync_tree(job["out"])
    t1 = time.perf_counter()
    # zarrstream-python is timed like record: first append until close() returned (close
    # fsyncs every shard and zarr.json); the peers from creation until the fsync of
    # every file and directory.
    wall = t1 - own.pop("timed_from", t0)
    cpu = sum(os.times()[:2]) - cpu0
    if camera is not None:
        return {
            **own,
            "wall_s": wall,
            "cpu_s": cpu,
            "others_cores": max(0.0, machine_busy_s() - busy0 - cpu) / wall,
            # From the first frame's due time, as record's `seconds` with --fps.
            "achieved_fps": camera.total / (t1 - camera.t0),
            "late": camera.late,
            "max_lateness_ms": camera.max_lateness_s * 1e3,
            "dropped": own.get("frames_dropped", 0),
            "append_ms": paced.percentiles_ms(lat),
        }
    return {
        **own,
        "wall_s": wall,
        "cpu_s": cpu,
        "others_cores": max(0.0, machine_busy_s() - busy0 - cpu) / wall,
        "extra_rss_mib": proc_status_mib("VmHWM") - rss_base if reset else None,
        "lat_ms": [quantile_ms(lat, 0.5), quantile_ms(lat, 0.99), 1e3 * max(lat)],
    }


def child_verify(job: dict) -> dict:
    """Runs in a fresh process: read the output back with zarr-python, compare exactly."""
    import numpy as np
    import zarr

    n = job["n"]
    frames = np.memmap(job["raw"], dtype="<u2", mode="r", shape=(n, H, W))
    # A paced run writes `total` frames cycled from the n of the file; its read-back
    # compares the first and the last shard layer only (every frame is many GiB).
    total = job["paced"]["frames"] if job.get("paced") else n
    arr = zarr.open_array(job["out"], mode="r")
    meta = arr.metadata.to_dict()
    sharding = meta["codecs"][0]
    if sharding["name"] != "sharding_indexed":
        return {"ok": False, "note": "not sharded: " + sharding["name"]}
    cfg = sharding["configuration"]
    chain = {k: "+".join(c["name"] for c in cfg[k]) for k in ("codecs", "index_codecs")}
    note = f"chunk: {chain['codecs']}; index: {chain['index_codecs']}"
    chunk, shard = CONFIGS[job["config"]]
    layout = (tuple(cfg["chunk_shape"]), tuple(meta["chunk_grid"]["configuration"]["chunk_shape"]))
    problems = []
    if tuple(arr.shape) != (total, H, W):
        problems.append(f"shape {tuple(arr.shape)}")
    elif arr.dtype != np.uint16:
        problems.append(f"dtype {arr.dtype}")
    elif layout != (chunk, shard):
        problems.append(f"layout chunk {layout[0]} shard {layout[1]}")
    else:
        layers = range(0, total, shard[0])
        if job.get("paced"):
            layers = sorted({layers[0], layers[-1]})
        for t in layers:
            got = arr[t:t + shard[0]]
            want = frames[np.arange(t, min(t + shard[0], total)) % n]
            if not np.array_equal(got, want):
                problems.append(f"frames {t}..: {int(np.count_nonzero(got != want))} px differ")
                break
    return {"ok": not problems, "note": "; ".join(problems + [note])}


# ---------------------------------------------------------------------------------
# the driver
# ---------------------------------------------------------------------------------


def spawn_child(mode: str, job: dict, timeout: float) -> dict:
    cmd = [sys.executable, os.path.abspath(__file__), mode, json.dumps(job)]
    try:
        p = subprocess.run(cmd, capture_output=True, text=True, timeout=timeout)
    except subprocess.TimeoutExpired:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        tail = (p.stderr.strip().splitlines() or ["(no output)"])[-1]
        return {"error": f"exit {p.returncode}: {tail}"}
    return json.loads(p.stdout.strip().splitlines()[-1])


def run_zarrstream(job: dict, timeout: float) -> dict:
    """`zarrstream record`, measured like the peers: its report gives the wall time
    (first push -> finish, durable), push latency and extra RSS (VmHWM reset after
    loading, same method as the peers); CPU seconds of the timed phase come from
    /proc/<pid>/stat when it says the frames are loaded, and from wait4 at its exit."""
    chunk, shard = CONFIGS[job["config"]]
    report = job["out"] + ".report.json"
    def join(v):
        return ",".join(map(str, v))

    pace = job.get("paced")
    total = pace["frames"] if pace else job["n"]
    # --input is cycled when --frames asks for more frames than it holds.
    cmd = [*RECORD, "--input", job["raw"], "--frames", str(total), "--shape", f"0,{H},{W}", "--chunk", join(chunk),
           "--shard", join(shard), "--codec", RECORD_CODEC[job["codec"]],
           "--threads", str(job["threads"]), *zarrstream_python.RECORD_FLAGS,
           "--report", report, "--overwrite", "--out", job["out"]]
    if pace:
        cmd += ["--fps", repr(pace["fps"])]
    # Not --quiet: the "ready" line on stderr marks the start of the timed phase.
    p = subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    killer = threading.Timer(timeout, p.kill)
    killer.start()
    cpu0 = busy0 = None
    lines = []
    for line in p.stderr:
        lines.append(line.rstrip())
        if cpu0 is None and " ready in " in line:
            cpu0, busy0 = process_cpu_s(p.pid), machine_busy_s()
    _pid, status, usage = os.wait4(p.pid, 0)
    busy1 = machine_busy_s()
    p.returncode = os.waitstatus_to_exitcode(status)
    timed_out = not killer.is_alive()
    killer.cancel()
    if timed_out:
        return {"error": f"timed out after {timeout:.0f} s"}
    if p.returncode != 0:
        return {"error": f"exit {p.returncode}: {(lines or ['(no output)'])[-1]}"}
    with open(report) as f:
        r = json.load(f)
    os.remove(report)
    if r["frames"] != total or (r["dropped"] and not pace):
        return {"error": f"record pushed {r['frames']} frames, dropped {r['dropped']}"}
    cpu = usage.ru_utime + usage.ru_stime - (cpu0 or 0.0)
    lat = r["push_latency_us"]
    if pace:
        return {
            "wall_s": r["seconds"],
            "cpu_s": cpu if cpu0 is not None else None,
            "others_cores": (max(0.0, busy1 - busy0 - cpu) / r["seconds"]
                             if cpu0 is not None else None),
            # record's clock starts when the first frame is due (--fps).
            "achieved_fps": total / r["seconds"],
            "late": r["late_frames"],
            "max_lateness_ms": r["max_lateness_us"] / 1e3,
            "dropped": r["dropped"],
            "append_ms": {k: lat[k] / 1e3 for k in ("p50", "p99", "p999", "max")},
            "sink": r.get("sink"),
        }
    return {
        "wall_s": r["seconds"],
        "cpu_s": cpu if cpu0 is not None else None,
        "others_cores": (max(0.0, busy1 - busy0 - cpu) / r["seconds"]
                         if cpu0 is not None else None),
        "extra_rss_mib": r.get("extra_rss_mib"),
        "lat_ms": [lat["p50"] / 1e3, lat["p99"] / 1e3, lat["max"] / 1e3],
        "sink": r.get("sink"),
    }


def run_one(job: dict, timeout: float) -> dict:
    if os.path.exists(job["out"]):
        shutil.rmtree(job["out"])
    if job["contender"] == "zarrstream":
        res = run_zarrstream(job, timeout)
    else:
        res = spawn_child("--child-write", job, timeout)
    if "error" not in res:
        res["stored_bytes"] = stored_bytes(job["out"])
        res.update(spawn_child("--child-verify", job, timeout))
        if "error" in res:
            res["ok"], res["note"] = False, "read-back error: " + res.pop("error")
        if res.get("sink"):
            res["note"] += f"; sink {res['sink']}"
    if os.path.exists(job["out"]):
        shutil.rmtree(job["out"])
    return res


def ensure_frames(path: str, n: int) -> None:
    if os.path.exists(path) and os.path.getsize(path) == n * FRAME_BYTES:
        return
    os.makedirs(os.path.dirname(path) or ".", exist_ok=True)
    print(f"writing {n} synthetic frames to {path}", flush=True)
    subprocess.run([*RECORD, "--save-frames", path, "--frames", str(n), "--shape",
                    f"0,{H},{W}", "--quiet"], check=True)


def machine_facts(out_dir: str) -> dict:
    from importlib.metadata import version

    cpu = "unknown"
    with open("/proc/cpuinfo") as f:
        for line in f:
            if line.startswith("model name"):
                cpu = line.split(":", 1)[1].strip()
                break
    fs = subprocess.run(["df", "--output=fstype", out_dir], capture_output=True,
                        text=True).stdout.split()

    def git(*a):
        return subprocess.run(["git", "-C", ROOT, *a], capture_output=True,
                              text=True).stdout.strip()

    rustc = subprocess.run(["rustc", "-V"], capture_output=True, text=True).stdout.split()
    dirty = " (+ uncommitted changes)" if git("status", "--porcelain", "--untracked-files=no") else ""
    return {
        "nproc": os.cpu_count(),
        "cpu_model": cpu,
        "kernel": platform.release(),
        "filesystem": fs[-1] if fs else "unknown",
        "python": platform.python_version(),
        "versions": {
            "zarrstream": git("rev-parse", "--short", "HEAD") + dirty,
            "rustc": rustc[1] if len(rustc) > 1 else "unknown",
            **{m: version(m) for m in ("acquire-zarr", "tensorstore", "zarr", "numcodecs",
                                       "numpy")},
            "zarrstream (Python wheel)": installed_version("zarrstream"),
        },
    }


def installed_version(dist: str) -> str:
    from importlib.metadata import PackageNotFoundError, version

    try:
        return version(dist)
    except PackageNotFoundError:
        return "not installed"


def summarize(runs: list[dict]) -> list[dict]:
    rows = []
    keys = sorted({(r["config"], r["codec"], r["contender"]) for r in runs},
                  key=lambda k: (k[0], list(CODECS).index(k[1]), CONTENDERS.index(k[2])))
    for cfg, codec, cont in keys:
        rs = [r for r in runs if (r["config"], r["codec"], r["contender"]) == (cfg, codec, cont)]
        ok = [r for r in rs if "error" not in r]
        row = {"config": cfg, "codec": codec, "contender": cont, "runs": len(rs),
               "errors": [r["error"] for r in rs if "error" in r]}
        if ok:
            mib = [r["raw_bytes"] / 2**20 / r["wall_s"] for r in ok]
            row.update(
                mib_s=med(mib), best_mib_s=max(mib),
                compression=med([r["raw_bytes"] / r["stored_bytes"] for r in ok]),
                extra_rss_mib=med([r["extra_rss_mib"] for r in ok
                                   if r.get("extra_rss_mib") is not None]),
                lat_ms=[med([r["lat_ms"][i] for r in ok]) for i in range(3)],
                cpu_s=med([r["cpu_s"] for r in ok if r.get("cpu_s") is not None]),
                others_cores=[r.get("others_cores") for r in ok],
                walls=[round(r["wall_s"], 3) for r in ok],
                verified=all(r["ok"] for r in ok),
                notes=sorted({r["note"] for r in ok}),
                create_s=[round(r["create_s"], 4) for r in ok if "create_s" in r],
            )
        rows.append(row)
    for row in rows:
        ref = next((r for r in rows if r["contender"] == "acquire-zarr" and r.get("mib_s")
                    and (r["config"], r["codec"]) == (row["config"], row["codec"])), None)
        row["vs_acquire_zarr"] = row["mib_s"] / ref["mib_s"] if ref and row.get("mib_s") else None
    return rows


def python_targets(runs: list[dict], rows: list[dict]) -> list[dict]:
    """For every config and codec with zarrstream-python runs: its rows beside record's
    (contender zarrstream) and acquire-zarr's, and the targets' ratios. Each ratio is
    taken within a repeat (runs of one repeat are adjacent in time), then the median
    over repeats; the ratio of the rows' medians is given too."""
    out = []
    for cfg, codec in sorted({(r["config"], r["codec"]) for r in runs
                              if r["contender"] == "zarrstream-python"},
                             key=lambda k: (k[0], list(CODECS).index(k[1]))):
        def row(cont):
            return next((r for r in rows if (r["config"], r["codec"], r["contender"])
                         == (cfg, codec, cont) and r.get("mib_s")), None)

        def paired(metric, other):
            vals = []
            for rep in sorted({r["repeat"] for r in runs}):
                got = {r["contender"]: r for r in runs if r["repeat"] == rep
                       and (r["config"], r["codec"]) == (cfg, codec) and "error" not in r}
                a, b = got.get("zarrstream-python"), got.get(other)
                if a and b and metric(a) is not None and metric(b):
                    vals.append(metric(a) / metric(b))
            return vals

        def mib(r):
            return r["raw_bytes"] / 2**20 / r["wall_s"]

        def rss(r):
            return r.get("extra_rss_mib")

        py, rec, aqz = row("zarrstream-python"), row("zarrstream"), row("acquire-zarr")
        entry = {"config": cfg, "codec": codec,
                 "rows": {k: v for k, v in (("record", rec), ("zarrstream-python", py),
                                            ("acquire-zarr", aqz)) if v}}
        for key, metric, other, a, b in (
                ("vs_record", mib, "zarrstream", "mib_s", rec),
                ("vs_acquire_zarr", mib, "acquire-zarr", "mib_s", aqz),
                ("rss_vs_record", rss, "zarrstream", "extra_rss_mib", rec)):
            vals = paired(metric, other)
            of_medians = (py[a] / b[a] if py and b and py.get(a) is not None and b.get(a)
                          else None)
            value = med(vals)
            met = (None if value is None else
                   value <= TARGETS[key] if key.startswith("rss") else value >= TARGETS[key])
            entry[key] = {"per_repeat": [round(v, 3) for v in vals], "median": value,
                          "of_medians": of_medians, "target": TARGETS[key], "met": met}
        out.append(entry)
    return out


def python_targets_lines(targets: list[dict]) -> list[str]:
    """The Python package's table: record, zarrstream-python and acquire-zarr rows per
    config and codec, and the target ratios."""
    if not targets:
        return []
    L = ["| config | codec | contender | median MiB/s | frames/s | extra RSS MiB "
         "| latency p50 / p99 / max ms | CPU s |",
         "|---|---|---|---|---|---|---|---|"]
    for t in targets:
        for name, r in t["rows"].items():
            lat = " / ".join(fmt(x, ".1f") for x in r["lat_ms"])
            L.append(f"| {t['config']} | {t['codec']} | {name} | **{r['mib_s']:.0f}** | "
                     f"{r['mib_s'] * 2**20 / FRAME_BYTES:.0f} | {fmt(r['extra_rss_mib'])} | "
                     f"{lat} | {fmt(r['cpu_s'], '.2f')} |")
    L += ["", "| config | codec | ratio | target | same-run median (per repeat) "
          "| of medians | met |", "|---|---|---|---|---|---|---|"]
    names = {"vs_record": ("MiB/s python / record", ">="),
             "vs_acquire_zarr": ("MiB/s python / acquire-zarr", ">="),
             "rss_vs_record": ("extra RSS python / record", "<=")}
    for t in targets:
        for key, (label, op) in names.items():
            v = t[key]
            met = {True: "**yes**", False: "**NO**", None: "n/a"}[v["met"]]
            per = ", ".join(f"{x:.2f}" for x in v["per_repeat"])
            L.append(f"| {t['config']} | {t['codec']} | {label} | {op} {v['target']:.2f} | "
                     f"**{fmt(v['median'], '.3f')}** ({per}) | {fmt(v['of_medians'], '.3f')} "
                     f"| {met} |")
    return L


def med(vals: list):
    return statistics.median(vals) if vals else None


def fmt(x, spec=".0f") -> str:
    return "n/a" if x is None else format(x, spec)


def write_markdown(path: str, rows: list[dict], facts: dict, args, n_frames: int,
                   elapsed: float, targets: list[dict], paced_tables: list[dict]) -> None:
    v = facts["versions"]
    L = [
        "# Peer comparison: streaming camera frames into sharded Zarr v3",
        "",
        f"Generated by `tools/peers/run` on {dt.datetime.now().astimezone():%Y-%m-%d %H:%M %Z}"
        f" in {elapsed / 60:.1f} min: {n_frames} frames of {H} x {W} uint16 "
        f"({n_frames * FRAME_BYTES / 2**20:.0f} MiB), {args.repeats} run(s) per row, "
        f"{args.threads} threads per contender.",
        "",
        "## Machine",
        "",
        f"- nproc {facts['nproc']}; CPU: {facts['cpu_model']}; kernel {facts['kernel']}; "
        f"output filesystem {facts['filesystem']}; Python {facts['python']}",
        "- versions: " + ", ".join(f"{k} {val}" for k, val in v.items()),
        "",
        "## Results",
        "",
        "| config | codec | contender | median MiB/s | best | vs acquire-zarr | compression "
        "| extra RSS MiB | latency p50 / p99 / max ms | CPU s | read-back |",
        "|---|---|---|---|---|---|---|---|---|---|---|",
    ]
    for r in rows:
        head = f"| {r['config']} | {r['codec']} | {r['contender']} |"
        if "mib_s" not in r:
            L.append(f"{head} n/a | | | | | | | ERROR: {r['errors'][0][:100]} |")
            continue
        lat = " / ".join(fmt(x, ".1f") for x in r["lat_ms"])
        status = "ok" if r["verified"] else "**FAILED**"
        if r["errors"]:
            status += f" ({len(r['errors'])} run(s) ERROR)"
        L.append(f"{head} **{r['mib_s']:.0f}** | {r['best_mib_s']:.0f} | "
                 f"{fmt(r['vs_acquire_zarr'], '.2f')} | {r['compression']:.2f} | "
                 f"{fmt(r['extra_rss_mib'])} | {lat} | {fmt(r['cpu_s'], '.1f')} | {status} |")
    if targets:
        L += ["", "## Python package against record and acquire-zarr", "",
              "zarrstream-python: the Python package appending the numpy frames one call per "
              "frame, with record's writer settings "
              f"({', '.join(f'{k} {v}' for k, v in zarrstream_python.WRITER_SETTINGS.items())}"
              f", threads {args.threads}); record = the zarrstream rows above. Targets: "
              "python / record MiB/s >= 0.95, python / acquire-zarr MiB/s >= 2, python / "
              "record extra RSS <= 1.10.", "", *python_targets_lines(targets)]
    if paced_tables:
        L += ["", "## Paced like a camera: time inside the per-frame call", "",
              f"`--paced {args.paced}`: {args.paced_frames} frames per run at each load of "
              "each contender's own closed-loop rate (pymmcore-plus calls `append` on its "
              "acquisition loop; while it runs no frame leaves Micro-Manager's buffer).", "",
              *paced.lines(paced_tables), *paced.METHOD]
    L += [
        "",
        "## Method",
        "",
        "- The same raw frames for every contender: the project's synthetic sCMOS camera "
        "(`record --save-frames`), loaded into memory before timing.",
        "- Each run is a fresh process; runs alternate (repeat 1 of every contender, then "
        "repeat 2, ...). MiB/s = raw MiB / wall seconds from the first append until the writer "
        "is closed and its output durable (peers: close, then fsync of every file and "
        "directory; zarrstream: `finish` returned, which fsyncs each shard and `zarr.json`; "
        "zarrstream-python: timed as zarrstream, from the first `append` until `close()` "
        "returned, writer creation before it). The Python peers import their package "
        "before the timed phase. median = median over runs, best = fastest run.",
        "- vs acquire-zarr = this row's median MiB/s / acquire-zarr's, same config, codec and "
        "invocation. compression = raw bytes / bytes of all output files.",
        "- extra RSS = peak RSS during the timed phase minus RSS after loading the frames, "
        "and importing the writer's package, inside the writing process (VmHWM reset with "
        "/proc/self/clear_refs; `record` does the same and reports `extra_rss_mib`).",
        "- latency = duration of the per-frame call (acquire-zarr `append`, tensorstore "
        "write + at most one pending commit, zarr-python buffer copy + layer write at each "
        "shard boundary, zarrstream `push`, zarrstream-python `Writer.append` timed in "
        "Python); p50 / p99 / max, median over runs.",
        "- CPU s = user + system seconds of the writing process during the timed phase "
        "(zarrstream: from /proc/<pid>/stat when it has loaded the frames to its exit).",
        f"- threads: {args.threads} each: acquire-zarr `max_threads`, tensorstore "
        "`data_copy_concurrency` and `file_io_concurrency` limits, zarr-python "
        "`threading.max_workers` (numcodecs blosc internal threads off), `record --threads`, "
        "zarrstream-python `threads=`.",
        "- acquire-zarr: `ZarrStream.append` per frame, unbounded append dimension, `close`. "
        "tensorstore: zarr3 driver, one transaction per shard layer, `commit_async` while the "
        "next fills, at most one in flight. zarr-python: one-shard-layer buffer, shard-aligned "
        "assignment. zarrstream: `record --input` with its defaults spelled out (sink auto, "
        "pool 0 = 2 x threads + 2 frames, pinned workers, back-pressure block, durability "
        "shard, crc32c on). zarrstream-python: `zarrstream.Writer` with the same settings, "
        "`append` per frame of the numpy array, `close`.",
        "- read-back: every output is opened with zarr-python in a fresh process and compared "
        "with the input frames exactly (`numpy.array_equal`), shape, dtype and chunk/shard "
        "layout included; a mismatch is FAILED. The output is deleted after each run.",
        "",
        "Configs (t, y, x): "
        + "; ".join(f"{k} chunk {c} shard {s}" for k, (c, s) in CONFIGS.items())
        + ". Codecs: " + "; ".join(f"`{k}` {d}" for k, d in CODECS.items()) + ".",
        "",
        "## What each writes (codecs read back from zarr.json) and per-run data",
        "",
    ]
    for r in rows:
        if "mib_s" in r:
            others = ", ".join(fmt(o, ".2f") for o in r["others_cores"])
            L.append(f"- {r['config']} {r['codec']} {r['contender']}: {'; '.join(r['notes'])}; "
                     f"wall s {r['walls']}; others' cores {others}"
                     + (f"; writer creation s (untimed) {r['create_s']}" if r["create_s"] else ""))
        for e in r["errors"]:
            L.append(f"- {r['config']} {r['codec']} {r['contender']}: ERROR {e}")
    L += ["", "others' cores = CPU time of all other processes on the machine during the "
          "timed phase / wall time (the machine may be shared; 0 = idle).", ""]
    with open(path, "w") as f:
        f.write("\n".join(L))


def parse_list(text: str, allowed) -> list[str]:
    items = [x for x in text.split(",") if x]
    bad = [x for x in items if x not in allowed]
    if bad or not items:
        raise SystemExit(f"unknown {bad or text!r}; choose from {', '.join(allowed)}")
    return items


def main() -> int:
    if len(sys.argv) == 3 and sys.argv[1] in ("--child-write", "--child-verify"):
        fn = child_write if sys.argv[1] == "--child-write" else child_verify
        print(json.dumps(fn(json.loads(sys.argv[2]))), flush=True)
        return 0
    target = os.path.join(ROOT, "target", "peers")
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("-n", "--frames", type=int, default=128, help="frames per run [128]")
    p.add_argument("--repeats", type=int, default=3, help="runs per row [3]")
    p.add_argument("--configs", default="C1,C2", help="subset of C1,C2")
    p.add_argument("--codecs", default="zstd,lz4,none", help="subset of zstd,lz4,none")
    p.add_argument("--contenders", default=",".join(CONTENDERS),
                   help=f"subset of {','.join(CONTENDERS)}")
    p.add_argument("--threads", type=int, default=2, help="threads per contender [2]")
    p.add_argument("--input", help="raw frames file [target/peers/frames-N.raw, written "
                   "by record --save-frames when missing]")
    p.add_argument("--md", default=os.path.join(target, "PEERS.md"), help="markdown table")
    p.add_argument("--json", default=os.path.join(target, "peers.json"), help="raw results")
    p.add_argument("--timeout", type=float, default=600, help="seconds per process [600]")
    p.add_argument("--paced", metavar="PCTS", help="then pace each contender like a camera "
                   "at these %% of its own closed-loop rate (e.g. 50,80,95) and report the "
                   "per-frame call's latency (paced.py)")
    p.add_argument("--paced-frames", type=int, default=2000, metavar="N",
                   help=f"frames per paced run, cycled from the -n of the file [2000; at "
                   f"least {paced.MIN_FRAMES} for p99.9]")
    args = p.parse_args()
    configs = parse_list(args.configs, CONFIGS)
    codecs = parse_list(args.codecs, CODECS)
    contenders = parse_list(args.contenders, CONTENDERS)
    if min(args.frames, args.repeats, args.threads, args.paced_frames) < 1:
        raise SystemExit("-n, --repeats, --threads and --paced-frames must be at least 1")
    loads = parse_loads(args.paced) if args.paced else []
    if loads and args.paced_frames < paced.MIN_FRAMES:
        print(f"warning: --paced-frames {args.paced_frames} < {paced.MIN_FRAMES}: p99.9 is "
              "then the largest samples", file=sys.stderr)
    if not os.access(ZARRSTREAM, os.X_OK):
        raise SystemExit(f"{ZARRSTREAM} missing: cargo build --release -p zarrstream-cli")

    raw = os.path.abspath(args.input or os.path.join(target, f"frames-{args.frames}.raw"))
    if args.input:
        if os.path.getsize(raw) < args.frames * FRAME_BYTES:
            raise SystemExit(f"{raw} holds fewer than {args.frames} frames of {H} x {W} u16")
    else:
        ensure_frames(raw, args.frames)
    out_dir = os.path.join(target, "out")
    os.makedirs(out_dir, exist_ok=True)
    for path in (args.md, args.json):
        os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
    facts = machine_facts(out_dir)
    raw_bytes = args.frames * FRAME_BYTES
    total = args.repeats * len(configs) * len(codecs) * len(contenders)
    runs: list[dict] = []
    start = time.perf_counter()
    for rep in range(args.repeats):
        for cfg in configs:
            for codec in codecs:
                for cont in contenders:
                    job = {"contender": cont, "config": cfg, "codec": codec, "n": args.frames,
                           "threads": args.threads, "raw": raw,
                           "out": os.path.join(out_dir, f"{cont}-{cfg}-{codec}.zarr")}
                    res = run_one(job, args.timeout)
                    runs.append({**job, "repeat": rep, "raw_bytes": raw_bytes, **res})
                    if "error" in res:
                        msg = "ERROR " + res["error"]
                    else:
                        msg = (f"{raw_bytes / 2**20 / res['wall_s']:7.0f} MiB/s  "
                               f"ratio {raw_bytes / res['stored_bytes']:5.2f}  "
                               f"extra RSS {fmt(res['extra_rss_mib']):>5} MiB  "
                               f"{'ok' if res['ok'] else 'FAILED ' + res['note']}")
                    print(f"[{len(runs):3}/{total}] {cfg} {codec:4} {cont:17} {msg}", flush=True)
                    with open(args.json, "w") as f:
                        json.dump({"facts": facts, "runs": runs}, f, indent=1)
    paced_runs: list[dict] = []
    if loads:
        paced_runs = run_paced(loads, args, configs, codecs, contenders, raw, out_dir, runs,
                               lambda: {"facts": facts, "runs": runs,
                                        "paced_runs": paced_runs})
    elapsed = time.perf_counter() - start
    rows = summarize(runs)
    targets = python_targets(runs, rows)
    paced_tables = paced.summary(paced_runs, list(CONFIGS), list(CODECS))
    with open(args.json, "w") as f:
        json.dump({"facts": facts, "args": vars(args), "elapsed_s": elapsed, "summary": rows,
                   "python_targets": targets, "paced": paced_tables, "runs": runs},
                  f, indent=1)
    write_markdown(args.md, rows, facts, args, args.frames, elapsed, targets, paced_tables)
    if targets:
        print("\n".join(["", "Python package (zarrstream-python) against record and "
                         "acquire-zarr:", *python_targets_lines(targets), ""]))
    if paced_tables:
        print("\n".join(["", "Paced like a camera (--paced): time inside the per-frame "
                         "call:", "", *paced.lines(paced_tables)]))
    print(f"done in {elapsed / 60:.1f} min: {args.md}, {args.json}")
    failed = any(not r.get("verified", False) or r["errors"] for r in rows)
    failed |= any("error" in r or not r.get("ok") for r in paced_runs)
    return 1 if failed else 0


def parse_loads(text: str) -> list[float]:
    try:
        loads = [float(x) for x in text.split(",") if x]
    except ValueError:
        raise SystemExit(f"--paced {text!r}: expected percentages such as 50,80,95") from None
    if not loads or any(not 0 < x <= 100 for x in loads):
        raise SystemExit(f"--paced {text!r}: every load must be in (0, 100]")
    return loads


def run_paced(loads: list[float], args, configs: list[str], codecs: list[str],
              contenders: list[str], raw: str, out_dir: str, runs: list[dict],
              document) -> list[dict]:
    """The paced phase (paced.py): each contender at each load of its own closed-loop
    rate from `runs`; loads in turn, contenders alternating within a load. `document()`
    is what the JSON file holds while the phase runs."""
    rates = paced.sustainable_fps(runs, FRAME_BYTES)
    total = len(loads) * len(configs) * len(codecs) * len(contenders)
    out: list[dict] = []
    for load in loads:
        for cfg in configs:
            for codec in codecs:
                for cont in contenders:
                    rate = rates.get((cfg, codec, cont))
                    head = {"contender": cont, "config": cfg, "codec": codec,
                            "load_pct": load, "frames": args.paced_frames,
                            "sustainable_fps": rate or 0.0,
                            "target_fps": (rate or 0.0) * load / 100}
                    if rate is None:
                        res = {"error": "no closed-loop rate (every closed-loop run failed)"}
                    else:
                        job = {"contender": cont, "config": cfg, "codec": codec,
                               "n": args.frames, "threads": args.threads, "raw": raw,
                               "out": os.path.join(out_dir, f"paced-{cont}-{cfg}-{codec}.zarr"),
                               "paced": {"fps": head["target_fps"],
                                         "frames": args.paced_frames}}
                        res = run_one(job, args.timeout + args.paced_frames / job["paced"]["fps"])
                    out.append({**head, **res})
                    if "error" in res:
                        msg = "ERROR " + res["error"]
                    else:
                        lat = res["append_ms"]
                        msg = (f"{res['achieved_fps']:6.1f} of {head['target_fps']:6.1f} fps  "
                               f"late {res['late']:4}  dropped {res['dropped']:3}  append ms "
                               f"p99 {lat['p99']:6.2f} p99.9 {lat['p999']:6.2f} "
                               f"max {lat['max']:6.2f}  "
                               f"{'ok' if res['ok'] else 'FAILED ' + res['note']}")
                    print(f"[paced {len(out):3}/{total}] {cfg} {codec:4} {load:3g}% "
                          f"{cont:17} {msg}", flush=True)
                    with open(args.json, "w") as f:
                        json.dump(document(), f, indent=1)
    return out


if __name__ == "__main__":
    sys.exit(main())
