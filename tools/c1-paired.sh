#!/usr/bin/env bash
# The C1 paired ratio of a change: C1 frames (2048 x 2048 uint16, 192 frames, shards of
# 32 frames, chunks 512 x 512, 2 threads) recorded by a build from before and a build
# from after, alternating within each pair (ABBA: old-new, then new-old), so that drift
# and the page cache hit both sides alike. Each pair gives one ratio new / old of
# throughput; the medians are printed per codec, with each side's push latency.
#
#   tools/c1-paired.sh NEW_BINARY OLD_BINARY [PAIRS] [CODECS]
#   (NEW_BINARY and OLD_BINARY: a zarrstream binary, or from before `zarrstream record`
#   a build of the record example; CODECS default "lz4:1 zstd:1 none"; PAIRS default 6;
#   EXTRA: more flags for both sides, e.g. EXTRA="--sink pwrite" for a sink other than the
#   default)
#
# Issues 30 and 31 ask for this ratio (BENCHMARKS.md §19). Run it on an otherwise idle
# machine: the writer uses both cores.
set -euo pipefail
new=${1:?usage: $0 NEW_BINARY OLD_BINARY [PAIRS] [CODECS]}
old=${2:?usage: $0 NEW_BINARY OLD_BINARY [PAIRS] [CODECS]}
pairs=${3:-6}
codecs=${4:-lz4:1 zstd:1 none}
dir=$(mktemp -d "${ZARRSTREAM_BENCH_TMP:-/tmp}/c1-paired.XXXXXX")
trap 'rm -rf "$dir"' EXIT
# shellcheck source=tools/bench-common.sh
source "$(dirname "$0")/bench-common.sh"
c1=(--shape 0,2048,2048 --chunk 1,512,512 --shard 32,2048,2048 --frames 192 --threads 2)

run() { # binary report codec
  rm -rf "$dir/out.zarr"
  # shellcheck disable=SC2086 # EXTRA is a list of flags
  record "$1" --out "$dir/out.zarr" --report "$2" --quiet "${c1[@]}" --codec "$3" ${EXTRA:-} >/dev/null
}

echo "C1 paired, new $new against old $old, $pairs pairs${EXTRA:+, $EXTRA}, in $dir"
for codec in $codecs; do
  ratios=() a_all=() b_all=() pa=() pb=()
  for i in $(seq "$pairs"); do
    if ((i % 2)); then
      run "$old" "$dir/old.json" "$codec"
      run "$new" "$dir/new.json" "$codec"
    else
      run "$new" "$dir/new.json" "$codec"
      run "$old" "$dir/old.json" "$codec"
    fi
    a=$(field "$dir/old.json" throughput_mib_s) b=$(field "$dir/new.json" throughput_mib_s)
    a_all+=("$a") b_all+=("$b")
    pa+=("$(field "$dir/old.json" push_latency_us p99)") pb+=("$(field "$dir/new.json" push_latency_us p99)")
    ratios+=("$(ratio "$a" "$b")")
  done
  echo "C1 $codec, new / old: ratios ${ratios[*]}"
  echo "  median ratio $(median "${ratios[@]}"); median MiB/s old $(median "${a_all[@]}"), new $(median "${b_all[@]}"); median push p99 us old $(median "${pa[@]}"), new $(median "${pb[@]}")"
done
