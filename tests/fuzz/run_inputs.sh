#!/usr/bin/env bash
# run_inputs.sh FUZZ_PARSE FUZZ_COMPILE SRC - the ctest fuzz_inputs (a -DNETC_FUZZ=ON
# build): every input that once failed fuzz_parse or fuzz_compile (regress/), the seeds
# of seeds/net/ and the golden .net files, run once through each target, the way
# libFuzzer replays a crash: a sanitizer report, a leak or an abort fails it.
parse=$1 compile=$2 src=$3
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
mapfile -t parse_inputs < <(find "$src/tests/fuzz/regress/fuzz_parse" "$src/tests/fuzz/regress/fuzz_compile" \
                                 "$src/tests/fuzz/seeds/net" "$src/tests/golden" -type f -name '*.net' 2>/dev/null | sort)
mapfile -t compile_inputs < <(find "$src/tests/fuzz/regress/fuzz_compile" "$src/tests/fuzz/seeds/net" -type f -name '*.net' | sort)
fails=0
"$parse" -timeout=20 "${parse_inputs[@]}" >/dev/null 2>"${TMPDIR:-/tmp}/fuzz_inputs.$$" ||
  { tail -40 "${TMPDIR:-/tmp}/fuzz_inputs.$$"; echo "FAIL fuzz_parse"; fails=$((fails + 1)); }
"$compile" -timeout=20 "${compile_inputs[@]}" >/dev/null 2>"${TMPDIR:-/tmp}/fuzz_inputs.$$" ||
  { tail -40 "${TMPDIR:-/tmp}/fuzz_inputs.$$"; echo "FAIL fuzz_compile"; fails=$((fails + 1)); }
rm -f "${TMPDIR:-/tmp}/fuzz_inputs.$$"
echo "fuzz_parse: ${#parse_inputs[@]} inputs, fuzz_compile: ${#compile_inputs[@]} inputs, $fails failed"
[[ $fails -eq 0 ]]
