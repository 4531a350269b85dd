#!/usr/bin/env python3
"""Where a writer run's CPUs sat idle, and what the block device was doing then
(BENCHMARKS.md §20, "Why the direct sink idles here").

Record a run with the scheduler and block-layer tracepoints, then read it back:

    perf record -e sched:sched_switch -e sched:sched_wakeup \\
        -e block:block_rq_issue -e block:block_rq_complete -a -o io.data -- \\
        target/release/deps/scaling-<hash> --cases c1-zstd --threads 2 \\
        --paths zero-copy --no-tmpfs --frames 512
    perf script -i io.data -F comm,tid,cpu,time,event,trace > io.txt
    tools/scaling/io-stalls.py io.txt

The window is the writer's: from the first to the last context switch of a
`zarrstream-work*` thread (the ceilings run on other threads). Printed:
- CPU idle in the window, split by the workers' states when the CPU went idle
  (blocked in the kernel D, sleeping S, runnable R) and by the writes in flight;
- write requests completed in the window: latency percentiles and sizes;
- cache flushes (`FF` requests) in the window, and how many of the slow writes
  (over 20 ms) were in flight while a flush was.
Python 3 only, no packages: it reads perf's text output.
"""

import collections
import re
import sys

LINE = re.compile(r"^\s*(\S.*?)\s+(\d+)\s+\[(\d+)\]\s+(\d+\.\d+):\s+(\S+):\s+(.*)$")
SWITCH = re.compile(r"prev_pid=(\d+) .*prev_state=(\S+) ==> next_comm=\S+ next_pid=(\d+)")
ISSUE = re.compile(r"\d+,\d+ (\S+) \d+ \(\) (\d+) \+ (\d+)")
COMPLETE = re.compile(r"\d+,\d+ (\S+) \(\) (\d+) \+ (\d+)")
WORKER = "zarrstream-work"
SLOW = 0.020


def events(path):
    with open(path) as f:
        for line in f:
            m = LINE.match(line)
            if m:
                yield float(m[4]), int(m[3]), m[5], m[6], m[1], int(m[2])


def percentile(sorted_values, q):
    return sorted_values[min(len(sorted_values) - 1, int(len(sorted_values) * q))]


def main(path):
    evs = list(events(path))
    workers = {tid for _, _, _, _, comm, tid in evs if comm.startswith(WORKER)}
    switches = [t for t, _, e, tr, _, _ in evs
                if e == "sched:sched_switch" and f"prev_comm={WORKER}" in tr]
    if not switches:
        sys.exit(f"no {WORKER}* thread in {path}")
    t0, t1 = switches[0], switches[-1]
    state = {w: "R" for w in workers}
    in_flight = {}          # sector -> (issued at, bytes) of the writes in flight
    open_flushes = collections.deque()
    idle_since = {}         # cpu -> (since, worker states, writes in flight)
    idle_by_state = collections.Counter()
    idle_by_flight = collections.Counter()
    writes, flush_spans = [], []  # (latency, bytes, issued at); (issued, completed)
    for t, cpu, e, tr, _, _ in evs:
        inside = t0 <= t <= t1
        if e == "sched:sched_switch":
            m = SWITCH.search(tr)
            if not m:
                continue
            prev, prev_state, nxt = int(m[1]), m[2], int(m[3])
            if prev in workers:
                state[prev] = "R" if prev_state.startswith("R") else (
                    "D" if "D" in prev_state else "S")
            if nxt in workers:
                state[nxt] = "C"
            if cpu in idle_since and inside:
                since, states, flight = idle_since[cpu]
                idle_by_state[states] += t - since
                idle_by_flight[flight] += t - since
            idle_since.pop(cpu, None)
            if nxt == 0:
                c = collections.Counter(state.values())
                idle_since[cpu] = (t, f"D{c['D']} S{c['S']} R{c['R']}", len(in_flight))
        elif e == "sched:sched_wakeup":
            m = re.search(r"pid=(\d+)", tr)
            if m and int(m[1]) in workers and state[int(m[1])] != "C":
                state[int(m[1])] = "R"
        elif e == "block:block_rq_issue":
            m = ISSUE.search(tr)
            if m and m[1].startswith("F"):
                open_flushes.append(t)
            elif m and "W" in m[1]:
                in_flight[m[2]] = (t, int(m[3]) * 512)
        elif e == "block:block_rq_complete":
            m = COMPLETE.search(tr)
            if m and m[1].startswith("F"):
                # A flush completes with no sector of its own: the oldest one open.
                if open_flushes:
                    flush_spans.append((open_flushes.popleft(), t))
            elif m and m[2] in in_flight:
                issued, size = in_flight.pop(m[2])
                if inside:
                    writes.append((t - issued, size, issued))
    window = t1 - t0
    cpus = len({cpu for _, cpu, *_ in evs})
    idle = sum(idle_by_state.values())
    print(f"writer window {window:.2f} s on {cpus} CPUs; {len(workers)} workers")
    print(f"CPU idle {idle:.2f} CPU s of {cpus * window:.2f} ({100 * idle / (cpus * window):.1f} %)")
    print("idle by the workers' states when the CPU went idle:")
    for k, v in idle_by_state.most_common(6):
        print(f"  {k:<12} {v:7.3f} s")
    print("idle by writes in flight:")
    for k, v in sorted(idle_by_flight.items()):
        print(f"  {k:>3} {v:7.3f} s")
    if writes:
        lat = sorted(w[0] * 1000 for w in writes)
        mib = sum(w[1] for w in writes) / 2**20
        q = " / ".join(f"{percentile(lat, x):.2f}" for x in (0.5, 0.9, 0.99, 0.999))
        print(f"writes: {len(writes)}, {mib:.0f} MiB ({mib / window:.0f} MiB/s); "
              f"latency p50 / p90 / p99 / p99.9 {q} ms, max {lat[-1]:.1f} ms")
        sizes = collections.Counter(w[1] for w in writes).most_common(4)
        print("most common sizes:", ", ".join(f"{s // 1024} KiB × {n}" for s, n in sizes))
    flushes = sum(1 for a, _ in flush_spans if t0 <= a <= t1)
    slow = [(lat, at) for lat, _, at in writes if lat > SLOW]
    overlapping = sum(1 for lat, at in slow
                      if any(a < at + lat and b > at for a, b in flush_spans))
    print(f"flushes: {flushes} ({flushes / window:.1f}/s); writes over {SLOW * 1000:.0f} ms: "
          f"{len(slow)}, of which {overlapping} overlapped a flush")


if __name__ == "__main__":
    if len(sys.argv) != 2:
        sys.exit(__doc__)
    main(sys.argv[1])
