#!/usr/bin/env bash
# Same-run ratios for BENCHMARKS.md §13 (issue 17): two arrays of one Recording against
# one array (C1 lz4:1 and zstd:1, same total bytes), and the single-array C1 lz4:1 path
# against a build from before the issue.
#
#   tools/recording-bench.sh NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]
#   (target/release/zarrstream; OLD_BINARY an older zarrstream, or from before
#   `zarrstream record` a build of the record example: see `record` in bench-common.sh)
#
# Runs alternate (one, two, one, two, ...) so that drift hits both sides alike; each
# pair gives one ratio, and the medians of the ratios are printed.
set -euo pipefail
new=${1:?usage: $0 NEW_ZARRSTREAM_BINARY [OLD_BINARY] [PAIRS]}
old=${2:-}
pairs=${3:-6}
dir=$(mktemp -d /tmp/recording-bench.XXXXXX)
trap 'rm -rf "$dir"' EXIT
# shellcheck source=tools/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
c1=(--shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --threads 2)

run() { # binary codec report extra-args...
  local bin=$1 codec=$2 report=$3
  shift 3
  rm -rf "$dir/out.zarr"
  record "$bin" --out "$dir/out.zarr" "${c1[@]}" --codec "$codec" --report "$report" "$@" >/dev/null
}



for codec in lz4:1 zstd:1; do
  ratios=() one=() two=() rss1=() rss2=()
  for i in $(seq "$pairs"); do
    run "$new" "$codec" "$dir/one.json" --frames 192
    run "$new" "$codec" "$dir/two.json" --frames 96 --arrays 2
    a=$(field "$dir/one.json" throughput_mib_s) b=$(field "$dir/two.json" throughput_mib_s)
    one+=("$a") two+=("$b")
    rss1+=("$(field "$dir/one.json" extra_rss_mib)") rss2+=("$(field "$dir/two.json" extra_rss_mib)")
    ratios+=("$(ratio "$a" "$b")")
  done
  echo "two arrays / one array, C1 $codec: ratios ${ratios[*]}"
  echo "  median ratio $(median "${ratios[@]}"); median MiB/s one $(median "${one[@]}"), two $(median "${two[@]}")"
  echo "  median extra RSS MiB one $(median "${rss1[@]}"), two $(median "${rss2[@]}"); pool (budget) MiB $(field "$dir/two.json" pool_mib)"
done

if [[ -n $old ]]; then
  ratios=() a_all=() b_all=()
  for i in $(seq "$((pairs + 2))"); do
    run "$old" lz4:1 "$dir/old.json" --frames 192
    run "$new" lz4:1 "$dir/new.json" --frames 192
    a=$(field "$dir/old.json" throughput_mib_s) b=$(field "$dir/new.json" throughput_mib_s)
    a_all+=("$a") b_all+=("$b")
    ratios+=("$(ratio "$a" "$b")")
  done
  echo "single array C1 lz4:1, new / old: ratios ${ratios[*]}"
  echo "  median ratio $(median "${ratios[@]}"); median MiB/s old $(median "${a_all[@]}"), new $(median "${b_all[@]}")"
fi
