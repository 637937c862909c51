#!/usr/bin/env bash
# check_regress.sh NETC SRC - the .net inputs that once failed fuzz_parse or
# fuzz_compile, through `netc check`: each must end in diagnostics or success
# (exit 0 or 1), never a crash, within the fuzz targets' 5 s timeout (20 s
# here, for a loaded machine). Inputs too big for a fuzz seed (libFuzzer's
# max_len is 4096) are generated here.
netc=$1 src=$2
fails=0
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NETC_STDLIB="$src/stdlib"

check() {   # check NAME FILE SECONDS
  local start rc
  start=$(date +%s.%N)
  timeout "$3" "$netc" check "$2" >"$tmp/out" 2>&1
  rc=$?
  if [[ $rc -ne 0 && $rc -ne 1 ]]; then
    echo "FAIL $1: exit $rc$([[ $rc -eq 124 ]] && echo " (over $3 s)")"; tail -5 "$tmp/out"
    fails=$((fails + 1))
  else
    printf 'ok   %s (exit %d, %.2f s)\n' "$1" "$rc" "$(echo "$(date +%s.%N) - $start" | bc)"
  fi
}

for f in "$src"/tests/fuzz/regress/fuzz_parse/*.net "$src"/tests/fuzz/regress/fuzz_compile/*.net; do
  [[ -f $f ]] && check "${f#"$src"/tests/fuzz/regress/}" "$f" 20
done

# A run of comment or blank lines: every newline rescanned the rest of the
# run for an 'else' or '->' after it (20,000 comment lines took 89 s, 40,000 blank ones 7 s).
head='model m(x: f32[B, 4]) -> (y: f32[B, 4]) {'
{ echo "$head"; echo "  y = x"; for ((i = 0; i < 20000; i++)); do echo "  # a comment line, one of many"; done
  echo "  return y"; echo "}"; } >"$tmp/comments.net"
check comment_run "$tmp/comments.net" 10
{ echo "$head"; echo "  y = x"; for ((i = 0; i < 80000; i++)); do echo; done; echo "  return y"; echo "}"; } >"$tmp/blank.net"
check blank_run "$tmp/blank.net" 10

[[ $fails -eq 0 ]] || { echo "$fails failed"; exit 1; }
echo "all fuzz regressions pass"
