#!/usr/bin/env bash
# Same-run ratios for BENCHMARKS.md §18 (issue 29): what sampling frames for the OME
# display windows costs on the hot path. C1 frames (2048 x 2048 uint16, 192 frames,
# 2 threads) recorded as an OME image with a 4-level pyramid (`--ome --levels 4`),
# windows from the data (the default) against a window given (`--window 0,65535`: no
# sampling), both with the binary given; and, with OLD_BINARY (a build from
# before the issue, whose `--ome` without `--channels` wrote no omero), the same
# against it.
#
#   tools/display-bench.sh NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]
#   (target/release/zarrstream; OLD_BINARY an older zarrstream, or from before
#   `zarrstream record` a build of the record example: see `record` in bench-common.sh)
#
# Runs alternate (ABBA) so that drift and order hit both sides alike; each pair gives one ratio
# (sampled / not sampled), and the medians are printed with the push latency p99.
set -euo pipefail
new=${1:?usage: $0 NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]}
old=${2:-}
pairs=${3:-6}
dir=$(mktemp -d "${ZARRSTREAM_BENCH_TMP:-/tmp}/display-bench.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# shellcheck source=tools/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
c1=(--shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 192 --threads 2
  --ome --levels 4)

run() { # binary report args...
  local bin=$1 report=$2
  shift 2
  rm -rf "$dir/out.zarr"
  record "$bin" --out "$dir/out.zarr" --report "$report" --quiet "$@" >/dev/null
}



compare() { # label base_bin base_args... -- bin args...
  local label=$1 base_bin=$2
  shift 2
  local base_args=() args=()
  while [[ $1 != -- ]]; do base_args+=("$1"); shift; done
  shift
  local bin=$1
  shift
  args=("$@")
  local ratios=() a_all=() b_all=() p99_a=() p99_b=()
  for i in $(seq "$pairs"); do
    # ABBA: which side runs first alternates, so an order effect cancels out.
    if ((i % 2)); then
      run "$base_bin" "$dir/a.json" "${base_args[@]}"
      run "$bin" "$dir/b.json" "${args[@]}"
    else
      run "$bin" "$dir/b.json" "${args[@]}"
      run "$base_bin" "$dir/a.json" "${base_args[@]}"
    fi
    local a b
    a=$(field "$dir/a.json" throughput_mib_s) b=$(field "$dir/b.json" throughput_mib_s)
    a_all+=("$a") b_all+=("$b")
    p99_a+=("$(field "$dir/a.json" push_latency_us p99)")
    p99_b+=("$(field "$dir/b.json" push_latency_us p99)")
    ratios+=("$(ratio "$a" "$b")")
  done
  echo "$label: ratios ${ratios[*]}"
  echo "  median ratio $(median "${ratios[@]}"); median MiB/s $(median "${a_all[@]}") -> $(median "${b_all[@]}"); push p99 us $(median "${p99_a[@]}") -> $(median "${p99_b[@]}")"
}

for codec in lz4:1 none; do
  compare "C1 --ome --levels 4 $codec, windows from the data / window given" \
    "$new" "${c1[@]}" --codec "$codec" --window 0,65535 -- "$new" "${c1[@]}" --codec "$codec"
done
if [[ -n $old ]]; then
  for codec in lz4:1 none; do
    compare "C1 --ome --levels 4 $codec, this build / the old one" \
      "$old" "${c1[@]}" --codec "$codec" -- "$new" "${c1[@]}" --codec "$codec"
  done
fi
