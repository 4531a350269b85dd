# Shell functions the paired benchmark scripts share (sourced, not run):
#   record BINARY ARGS...       `BINARY record ARGS` for a `zarrstream` binary (the CLI,
#                               target/release/zarrstream); any other name is taken for a
#                               build of the record example from before it became
#                               `zarrstream record`, run as `BINARY ARGS`, so that a
#                               comparison against an older build still works
#   field REPORT KEY [SUBKEY]   a value of a `record --report` JSON file ("total" first,
#                               for a recording's report)
#   median X...                 the median, rounded to 3 decimals
#   ratio A B                   B / A, rounded to 3 decimals

record() {
  local bin=$1
  shift
  case $(basename "$bin") in
    zarrstream | zarrstream.exe) "$bin" record "$@" ;;
    *) "$bin" "$@" ;;
  esac
}

field() {
  python3 -c '
import json, sys
d = json.load(open(sys.argv[1]))
total = d.get("total", {})
v = total[sys.argv[2]] if sys.argv[2] in total else d[sys.argv[2]]
if len(sys.argv) > 3:
    v = v[sys.argv[3]]
print(v)' "$@"
}

median() { python3 -c 'import statistics,sys; print(round(statistics.median(map(float, sys.argv[1:])), 3))' "$@"; }

ratio() { python3 -c "print(round($2 / $1, 3))"; }
