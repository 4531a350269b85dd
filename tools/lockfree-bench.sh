#!/usr/bin/env bash
# Same-run ratios for issue 31 (no lock on the per-chunk path): the C1 append path
# (2048 x 2048 uint16 frames, 512 x 512 chunks, 32-frame shards, 192 frames, 2 threads)
# with a build of the lock-free path against a build from before it, for lz4:1 and none,
# with the default sink (direct where the filesystem takes O_DIRECT) and, with SINKS set,
# others (e.g. SINKS="auto pwrite").
#
#   tools/lockfree-bench.sh NEW_RECORD_BINARY OLD_RECORD_BINARY [PAIRS]
#
# Runs alternate (old, new, old, ...) so that drift hits both sides alike; each pair
# gives one ratio new/old of throughput_mib_s, and the medians are printed, with each
# side's median frame latency p99 (us).
set -euo pipefail
usage="usage: $0 NEW_RECORD_BINARY OLD_RECORD_BINARY [PAIRS]"
new=${1:?$usage}
old=${2:?$usage}
pairs=${3:-6}
sinks=${SINKS:-auto}
dir=$(mktemp -d "${ZARRSTREAM_BENCH_TMP:-/tmp}/lockfree-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
c1=(--shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 192 --threads 2)

run() { # binary report args...
  local bin=$1 report=$2
  shift 2
  rm -rf "$dir/out.zarr"
  "$bin" --out "$dir/out.zarr" --report "$report" --quiet "$@" >/dev/null
}

field() { # report key [subkey]
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
v = d[sys.argv[2]]
if len(sys.argv) > 3:
    v = v[sys.argv[3]]
print(v)' "$@"
}

median() { python3 -c 'import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:])), 3))' "$@"; }

for sink in $sinks; do
  for codec in lz4:1 none; do
    ratios=() a_all=() b_all=() la=() lb=()
    for i in $(seq "$pairs"); do
      run "$old" "$dir/old.json" "${c1[@]}" --codec "$codec" --sink "$sink"
      run "$new" "$dir/new.json" "${c1[@]}" --codec "$codec" --sink "$sink"
      a=$(field "$dir/old.json" throughput_mib_s) b=$(field "$dir/new.json" throughput_mib_s)
      a_all+=("$a") b_all+=("$b")
      la+=("$(field "$dir/old.json" frame_latency_us p99)")
      lb+=("$(field "$dir/new.json" frame_latency_us p99)")
      ratios+=("$(python3 -c "print(round($b / $a, 3))")")
    done
    used=$(field "$dir/new.json" sink)
    echo "C1 appended $codec, sink $sink ($used), new / old: ratios ${ratios[*]}"
    echo "  median ratio $(median "${ratios[@]}"); median MiB/s old $(median "${a_all[@]}"), new $(median "${b_all[@]}")"
    echo "  median frame latency p99 us: old $(median "${la[@]}"), new $(median "${lb[@]}")"
  done
done
