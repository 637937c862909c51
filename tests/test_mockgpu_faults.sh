#!/usr/bin/env bash
# test_mockgpu_faults.sh NETC SRC MOCKDIR - the GPU runtime's error paths,
# swept on the mock GPU (tests/mockgpu): a clean run of each case counts the
# fallible driver and cuBLASLt calls it makes (NETC_MOCK_CALL_LOG, one line
# "N NAME" a call), then the case runs again with call N failing
# (NETC_MOCK_FAIL_CALL=N) as a real driver fails it (out of memory for an
# allocation, launch failed for a launch, ...). Each such run must end with
# a one-line "netc: ..." error naming the call that failed and exit 1, or
# succeed where the runtime has a fallback for that call (FALLBACKS below);
# never die of a signal, hang, or leave allocations, streams, events or
# modules alive (the mock exits 3), nor, in a sanitized build, a leak or an
# undefined behaviour.
#
# Every call of a case is swept with NETC_FAULT_SWEEP=full; by default (CI)
# the first and last call of each entry point and each STRIDE-th call, which
# touches every entry point the case uses. NETC_FAULT_ONLY=NAME sweeps one case.
set -uo pipefail
netc=$1 src=$2 mock=$3
tmp=$(mktemp -d)
[[ -n ${NETC_KEEP_TMP:-} ]] || trap 'rm -rf "$tmp"' EXIT
fails=0 runs=0 stride=${NETC_FAULT_STRIDE:-25}
limit=${NETC_FAULT_TIMEOUT:-60}

# A run may succeed with a call failing only where the runtime has a way on
# without it, and then its results (the outputs, the losses) must be the
# clean run's:
#   cuPointerGetAttribute: the host buffer is taken for pageable and staged
#   cuMemGetInfo: only the memory report's "the device has ... in use" goes
#   cuEventElapsedTime: only a step's timing goes (--metrics)
#   any call after the run's last copy back to the host: the teardown
#     (gpu_session_free), which has no one left to tell
FALLBACKS=${NETC_FAULT_FALLBACKS:-cuPointerGetAttribute cuMemGetInfo cuEventElapsedTime}

on_mock() { LD_LIBRARY_PATH="$mock" NETC_MOCK_CUDA_SOURCE="$1" "${@:2}"; }

# With NETC_MATMUL_TUNE, a product's algorithms other than cuBLASLt's first
# are timed and one that fails is passed over (runtime/gpu.c tune_product):
# the products and events before the tuning's last elapsed time.
tuning_call() {   # tuning_call LOG N CALL
  [[ -n ${NETC_MATMUL_TUNE:-} && $3 =~ ^(cublasLtMatmul|cuEventRecord|cuEventSynchronize|cuLaunchKernel(Ex)?)$ ]] &&
    (($2 < $(awk '$2 == "cuEventElapsedTime" { n = $1 } END { print n + 0 }' "$1")))
}

# What a run printed that a failure must not change: outputs and losses.
results() { grep -oE '^output .*|loss [-0-9.e+]+' || true; }

# A call's failure that is named by what it means rather than by the call.
declare -A nothing=([cublasLtMatmulAlgoGetHeuristic]='cuBLASLt has no algorithm')

# The call numbers to fail, from a clean run's log.
pick() {   # pick LOG
  if [[ ${NETC_FAULT_SWEEP:-} == full ]]; then awk '{print $1}' "$1"; return; fi
  awk -v s="$stride" '!($2 in first) { first[$2] = $1 } { last[$2] = $1 } $1 % s == 0 { print $1 }
    END { for (k in first) { print first[k]; print last[k] } }' "$1" | sort -n -u
}

sweep() {   # sweep NAME CUDA_SOURCES NETC_ARGS...
  local name=$1 cu=$2; shift 2
  [[ -z ${NETC_FAULT_ONLY:-} || $name == "$NETC_FAULT_ONLY" ]] || return 0
  local log="$tmp/$name.calls" rc=0
  NETC_MOCK_CALL_LOG="$log" on_mock "$cu" timeout "$limit" "$netc" "$@" >"$tmp/$name.out" 2>&1 || rc=$?
  if ((rc != 0)) || [[ ! -s $log ]]; then
    echo "FAIL $name: the clean run exited $rc"; tail -5 "$tmp/$name.out"; fails=$((fails + 1)); return
  fi
  local k n call why picked=0 survived=() teardown results
  k=$(wc -l <"$log")
  teardown=$(awk '$2 ~ /^cuMemcpyDtoH/ { n = $1 } END { print n + 0 }' "$log")
  results=$(results <"$tmp/$name.out")
  for n in $(pick "$log"); do
    call=$(awk -v n="$n" '$1 == n { print $2; exit }' "$log")
    rc=0; why=
    NETC_MOCK_FAIL_CALL=$n on_mock "$cu" timeout -k 5 "$limit" "$netc" "$@" >"$tmp/out" 2>"$tmp/err" || rc=$?
    picked=$((picked + 1)) runs=$((runs + 1))
    if ((rc == 124 || rc == 137)); then why="hung (killed after ${limit}s)"
    elif ((rc > 128)); then why="died of signal $((rc - 128))"
    elif ((rc == 3)); then why="leaked: $(grep 'at exit' "$tmp/err")"
    elif grep -qE 'Sanitizer|runtime error:' "$tmp/err"; then why="sanitizer: $(grep -m1 -E 'Sanitizer|runtime error:' "$tmp/err")"
    elif ! grep -q "failing call $n as asked" "$tmp/err"; then why="call $n ($call) never came: the run is not deterministic"
    elif ((rc == 0)); then
      if [[ " $FALLBACKS " != *" $call "* ]] && ((n <= teardown)) && ! tuning_call "$log" "$n" "$call"; then
        why="exit 0: the failure went unnoticed"
      elif [[ $(cat "$tmp/out" "$tmp/err" | results) != "$results" ]]; then why="exit 0 with other results than the clean run's"
      else survived+=("$call"); fi
    elif ((rc != 1)); then why="exit $rc"
    elif ! grep '^netc: ' "$tmp/err" | tail -1 | grep -qE "$call|${nothing[$call]:-$call}"; then
      why="the last 'netc: ' line does not name $call"
    fi
    if [[ -n $why ]]; then
      echo "FAIL $name: call $n of $k ($call) failing: $why"; sed 's/^/    /' "$tmp/err" | tail -6; fails=$((fails + 1))
    fi
  done
  local points; points=$(awk '{print $2}' "$log" | sort -u | tr '\n' ' ')
  echo "ok $name: $k fallible calls, $picked runs with one failing; entry points: $points"
  ((${#survived[@]} == 0)) || echo "   survived (fallbacks): $(printf '%s\n' "${survived[@]}" | sort | uniq -c | tr -s ' \n' ' ')"
}

start=$SECONDS
# Forward: a matmul model (cuBLASLt), weights and inputs copied in, the outputs back.
"$netc" build "$src/examples/fashion_mlp.net" --entry forward --dim B=5 -o "$tmp/mlp.netm" --emit-cuda >"$tmp/mlp.cu"
sweep run_mlp "$tmp/mlp.cu" run "$tmp/mlp.netm" --random-inputs 3 --device gpu
# The same with the launches' programmatic serialization (cuLaunchKernelEx)
# and the matmuls' algorithms timed on the device (events, elapsed times).
NETC_PDL=1 NETC_MATMUL_TUNE=1 sweep run_mlp_pdl_tune "$tmp/mlp.cu" run "$tmp/mlp.netm" --random-inputs 3 --device gpu
# Training: a few steps (the staged inputs, the CUDA graph's capture and
# replays from the third step, the evaluation pass, the metrics' timings).
head -c 3000 "$src/README.md" >"$tmp/text.txt"
lm=("$src/examples/char_lm.net" --set T=16 --set C=32 --set L=1)
"$netc" build "${lm[@]}" --entry train --dim B=4 --emit-cuda -o "$tmp/t.netm" >"$tmp/train.cu"
"$netc" build "${lm[@]}" --entry forward --emit-cuda -o "$tmp/f.netm" >"$tmp/forward.cu"
sweep train_lm "$tmp/train.cu:$tmp/forward.cu" train "${lm[@]}" --data "$tmp/text.txt" --batch 4 --max-steps 4 \
  --epochs 1 --seed 5 --device gpu --metrics "$tmp/m.jsonl"
echo "$runs runs in $((SECONDS - start))s"
((fails == 0)) || { echo "$fails failures"; exit 1; }
