#!/usr/bin/env bash
# Same-run ratios for BENCHMARKS.md §17 (issue 28): C1-like frames (2048 x 2048 uint16,
# 2 channels) acquired channel-first and written by index into t, c, y, x storage
# (`record --acquisition-order c,t`) against the same frames appended in storage order,
# for lz4:1 and none; and the C1 append path against a build from before the issue.
#
#   tools/order-bench.sh NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]
#   (target/release/zarrstream; OLD_BINARY an older zarrstream, or from before
#   `zarrstream record` a build of the record example: see `record` in bench-common.sh)
#
# Runs alternate (appended, channel-first, appended, ...) so that drift hits both sides
# alike; each pair gives one ratio, and the medians are printed, with each side's
# extra RSS against its memory estimate and its push latency percentiles (p50, p99,
# p99.9, max in microseconds; medians over the runs).
set -euo pipefail
new=${1:?usage: $0 NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]}
old=${2:-}
pairs=${3:-6}
dir=$(mktemp -d "${ZARRSTREAM_BENCH_TMP:-/tmp}/order-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# shellcheck source=tools/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
# 96 time points x 2 channels = 192 frames, as the other C1 rows; shards 32 t deep per
# channel.
two=(--shape 96,2,2048,2048 --chunk 1,1,512,512 --shard 32,1,2048,2048 --dim-names t,c,y,x
  --frames 192 --threads 2)
c1=(--shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 192 --threads 2)

run() { # binary report args...
  local bin=$1 report=$2
  shift 2
  rm -rf "$dir/out.zarr"
  record "$bin" --out "$dir/out.zarr" --report "$report" --quiet "$@" >/dev/null
}



for codec in lz4:1 none; do
  ratios=() a_all=() b_all=() rss_a=() rss_b=() est_a=() est_b=()
  declare -A lat_a=() lat_b=()
  for i in $(seq "$pairs"); do
    run "$new" "$dir/a.json" "${two[@]}" --codec "$codec"
    run "$new" "$dir/b.json" "${two[@]}" --codec "$codec" --acquisition-order c,t
    a=$(field "$dir/a.json" throughput_mib_s) b=$(field "$dir/b.json" throughput_mib_s)
    a_all+=("$a") b_all+=("$b")
    rss_a+=("$(field "$dir/a.json" extra_rss_mib)") rss_b+=("$(field "$dir/b.json" extra_rss_mib)")
    est_a+=("$(field "$dir/a.json" memory_estimate_mib resident)")
    est_b+=("$(field "$dir/b.json" memory_estimate_mib resident)")
    for p in p50 p99 p999 max; do
      lat_a[$p]+=" $(field "$dir/a.json" push_latency_us "$p")"
      lat_b[$p]+=" $(field "$dir/b.json" push_latency_us "$p")"
    done
    ratios+=("$(ratio "$a" "$b")")
  done
  echo "channel-first / appended, C1 2 channels $codec: ratios ${ratios[*]}"
  echo "  median ratio $(median "${ratios[@]}"); median MiB/s appended $(median "${a_all[@]}"), channel-first $(median "${b_all[@]}")"
  echo "  median extra RSS MiB appended $(median "${rss_a[@]}") (estimate $(median "${est_a[@]}")), channel-first $(median "${rss_b[@]}") (estimate $(median "${est_b[@]}"))"
  for p in p50 p99 p999 max; do
    # shellcheck disable=SC2086
    echo "  push latency $p us: appended $(median ${lat_a[$p]}), channel-first $(median ${lat_b[$p]})"
  done
  unset lat_a lat_b
done

if [[ -n $old ]]; then
  for codec in lz4:1 none; do
    ratios=() a_all=() b_all=()
    for i in $(seq "$((pairs + 2))"); do
      run "$old" "$dir/old.json" "${c1[@]}" --codec "$codec"
      run "$new" "$dir/new.json" "${c1[@]}" --codec "$codec"
      a=$(field "$dir/old.json" throughput_mib_s) b=$(field "$dir/new.json" throughput_mib_s)
      a_all+=("$a") b_all+=("$b")
      ratios+=("$(ratio "$a" "$b")")
    done
    echo "C1 appended $codec, new / old: ratios ${ratios[*]}"
    echo "  median ratio $(median "${ratios[@]}"); median MiB/s old $(median "${a_all[@]}"), new $(median "${b_all[@]}")"
  done
fi
