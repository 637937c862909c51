#!/usr/bin/env bash
# scripts/tsan.sh - ThreadSanitizer over what runs threads in netc: builds
# build-tsan/ (-DNETC_SANITIZE=thread) and runs, each with its log in
# build-tsan/tsan-logs/:
#   unit   the threaded unit tests: sessions on several threads at once (the CPU,
#          the mock GPU, crews of several sessions), the crew's products, chains
#          and attention heads (test_cpu_matmul, test_cpu_ops), the loader's
#          thread (test_data), NVRTC cache writers, memory planners, sessions
#          created at once (test_api_misuse)
#   cli    netc train (fashion_mlp on Fashion-MNIST, char_lm and llama_lm on a
#          text) and netc run, a few steps each, on crews of 2 and 3 threads
#          (NETC_CPU_THREADS); char_lm on the mock GPU; a training run stopped by
#          SIGINT from outside, and one by SIGTERM taken on the data loader's
#          thread (needs python3)
# A check fails on a ThreadSanitizer report or an unexpected exit status.
# On the shared 2-core machine, from an empty build-tsan/: 2m43s, the build
# 58 s of it (4m40s at a load of 10); the mock GPU's run is the longest check
# (30 to 60 s: it compiles its kernels for the host).
#
# Options:
#   --no-build   use build-tsan/ as it is
#   -h, --help   this text
# Only third-party code's reports may be suppressed, in tests/tsan.supp, each
# line with its reason; never netc's own.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
cd "$ROOT" || exit 1
BUILD=1
while (($#)); do
  case "$1" in
    --no-build) BUILD=0 ;;
    -h|--help) sed -n '2,/^set -uo/p' "$0" | sed -e '$d' -e 's/^# \{0,1\}//'; exit 0 ;;
    *) echo "tsan.sh: unknown option '$1' (try --help)" >&2; exit 2 ;;
  esac
  shift
done

B=$ROOT/build-tsan
LOGS=$B/tsan-logs
T0=$SECONDS
UNIT=(test_session_threads test_cpu_matmul test_cpu_ops test_data test_nvrtc_cache test_memplan test_api_misuse)
for f in tests/unit/test_cpu_attention*.c; do [[ -f $f ]] && UNIT+=("$(basename "$f" .c)"); done

if ((BUILD)); then
  cmake -S "$ROOT" -B "$B" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DNETC_SANITIZE=thread -DNETC_FUZZ=OFF >/dev/null ||
    { echo "tsan.sh: cmake failed" >&2; exit 1; }
  mock=()   # the mock GPU is built where the CUDA toolkit is
  cmake --build "$B" --target help | grep '^mock_cuda:' >/dev/null && mock=(mock_cuda mock_cublaslt)   # all read: no SIGPIPE
  cmake --build "$B" -j "$(nproc 2>/dev/null || echo 2)" --target netc "${mock[@]}" "${UNIT[@]}" ||
    { echo "tsan.sh: the build failed" >&2; exit 1; }
  echo "tsan.sh: built build-tsan/ in $((SECONDS - T0)) s"
fi
grep -qx 'NETC_SANITIZE:[A-Z]*=thread' "$B/CMakeCache.txt" 2>/dev/null ||
  { echo "tsan.sh: $B is not a -DNETC_SANITIZE=thread build" >&2; exit 1; }

rm -rf "$LOGS"; mkdir -p "$LOGS"
TMP=$(mktemp -d); trap 'rm -rf "$TMP"' EXIT
# history_size: the earlier access of a race keeps its stack
export TSAN_OPTIONS=${TSAN_OPTIONS:-history_size=4:second_deadlock_stack=1}
[[ -f tests/tsan.supp ]] && TSAN_OPTIONS+=":suppressions=$ROOT/tests/tsan.supp"
export NETC_STDLIB=$ROOT/stdlib NETC_CACHE_DIR=$TMP/cache
FAILED=()

# verdict NAME RC WANT SECONDS: passes when RC is WANT and the log has no report
verdict() {
  local name=$1 rc=$2 want=$3 log=$LOGS/$1.log took="($4 s)"
  if grep -q 'WARNING: ThreadSanitizer' "$log"; then
    FAILED+=("$name"); echo "FAIL $name $took: $(grep -c 'WARNING: ThreadSanitizer' "$log") report(s); the first:"
    sed -n '/WARNING: ThreadSanitizer/,/^SUMMARY/p' "$log" | head -n 40
  elif [[ $rc != "$want" ]]; then
    FAILED+=("$name"); echo "FAIL $name $took: exit $rc, not $want"; tail -n 20 "$log"
  else
    echo "ok   $name $took"
  fi
}

# check NAME COMMAND...: runs it, its output in the log, and wants exit 0
check() {
  local name=$1 t=$SECONDS; shift
  "$@" >"$LOGS/$name.log" 2>&1
  verdict "$name" $? 0 $((SECONDS - t))
}

for t in "${UNIT[@]}"; do   # the mock GPU for the sessions that want one
  check "$t" env LD_LIBRARY_PATH="$B/mockgpu" "$B/tests/$t"
done

DATA=/usr/share/datasets/fashion-mnist
for _ in $(seq 300); do printf 'the quick brown fox jumps over the lazy dog. '; done >"$TMP/fox.txt"
for _ in $(seq 20); do cat "$TMP/fox.txt"; done >"$TMP/long.txt"   # epochs of hundreds of batches: the loader's thread stays
small=(--set C=32 --set L=1 --set H=2 --set T=16 --device cpu --seed 1 --batch 16 --max-steps 4 --eval-samples 64)
netc=$B/netc
check build_fashion "$netc" build examples/fashion_mlp.net --target '' -o "$TMP/fashion.netm"   # no NVRTC images: CPU runs
for n in 2 3; do
  if [[ -d $DATA ]]; then
    check "fashion_train_$n" env NETC_CPU_THREADS=$n "$netc" train examples/fashion_mlp.net --data "$DATA" --device cpu \
      --batch 128 --max-steps 3 --eval-samples 256
  fi
  check "char_lm_$n" env NETC_CPU_THREADS=$n "$netc" train examples/char_lm.net --data "$TMP/fox.txt" "${small[@]}"
  check "llama_lm_$n" env NETC_CPU_THREADS=$n "$netc" train examples/llama_lm.net --data "$TMP/fox.txt" "${small[@]}" --set HIDDEN=64
  check "run_$n" env NETC_CPU_THREADS=$n "$netc" run "$TMP/fashion.netm" --device cpu --dim B=512 --random-inputs 1
done
[[ -d $DATA ]] || echo "note: no $DATA (scripts/setup.sh installs it): the fashion_mlp training runs were left out"
# the GPU runtime on the mock GPU (tests/mockgpu): inputs staged from the loader's batches, the mock's matmul threads
if [[ -e $B/mockgpu/libcuda.so.1 ]]; then
  m=(--set T=16 --set C=32 --set L=1)
  mkdir -p "$TMP/cuda"
  "$netc" build examples/char_lm.net --entry train --dim B=4 "${m[@]}" --target '' --emit-cuda -o "$TMP/t.netm" >"$TMP/t.cu" 2>/dev/null
  "$netc" build examples/char_lm.net --entry forward "${m[@]}" --target '' --emit-cuda -o "$TMP/f.netm" >"$TMP/f.cu" 2>/dev/null
  check mock_gpu_train env LD_LIBRARY_PATH="$B/mockgpu" NETC_MOCK_CUDA_SOURCE="$TMP/t.cu:$TMP/f.cu:$TMP/cuda/eval.cu" \
    NETC_TRAIN_CUDA_DIR="$TMP/cuda" NETC_CPU_THREADS=2 "$netc" train examples/char_lm.net --data "$TMP/fox.txt" --device gpu \
    --batch 4 --max-steps 6 --eval-samples 64 --seed 5 "${m[@]}"
else
  echo "note: no mock GPU in $B (no CUDA toolkit): the mock GPU training run was left out"
fi

# stop_run NAME SIGNAL TARGET: a long run on crews of 3 gets SIGNAL once its
# first step is logged, sent to the process (TARGET main: the kernel picks a
# thread, the main one in practice) or to the data loader's thread (loader:
# the newest thread, not the main one, that does not block SIGNAL; the crew's
# workers block every signal). It must stop after its step, save and die of
# the signal.
stop_run() {
  local name=$1 sig=$2 target=$3 log=$LOGS/$1.log pid rc t=$SECONDS
  # `&` in a script starts a job with SIGINT ignored (and netc leaves it so); trap - INT cannot
  # give it back where the script itself began with it ignored (a CI runner's background job),
  # env --default-signal can
  (trap - INT; NETC_CPU_THREADS=3 exec env --default-signal=INT "$netc" train examples/char_lm.net --data "$TMP/long.txt" \
     --set C=64 --set L=1 --set H=2 --set T=32 --device cpu --seed 1 --batch 16 --save "$TMP/$name.safetensors" \
     >"$log" 2>&1) &
  pid=$!
  for _ in $(seq 1200); do grep -q 'step 1 ' "$log" && break; sleep 0.1; done
  if [[ $target == main ]]; then
    kill -s "$sig" "$pid"
  else
    python3 - "$pid" "$sig" <<'PY' || kill -s KILL "$pid"   # no such thread: the check fails
import ctypes, os, signal, sys
pid, sig = int(sys.argv[1]), int(getattr(signal, "SIG" + sys.argv[2]))
best = None   # (start time, tid): the newest thread, not the main one, that does not block sig
for tid in map(int, os.listdir(f"/proc/{pid}/task")):
    try:
        status = open(f"/proc/{pid}/task/{tid}/status").read()
        start = int(open(f"/proc/{pid}/task/{tid}/stat").read().rsplit(")", 1)[1].split()[19])
    except OSError:
        continue
    blocked = int(next(l for l in status.splitlines() if l.startswith("SigBlk:")).split()[1], 16)
    if tid != pid and not blocked >> (sig - 1) & 1 and (best is None or start >= best[0]):
        best = (start, tid)
if best is None or ctypes.CDLL(None).syscall(234, pid, best[1], sig) != 0:   # 234: tgkill
    sys.exit("no thread of the loader's to signal")
print(f"     (SIG{sys.argv[2]} sent to thread {best[1]} of {pid})")
PY
  fi
  wait "$pid"; rc=$?
  grep -q "stopped by SIG$sig after step" "$log" || { echo "     (no 'stopped by SIG$sig' line)"; rc=no-stop; }
  verdict "$name" "$rc" $((128 + $(kill -l "$sig"))) $((SECONDS - t))
}
stop_run sigint INT main
if command -v python3 >/dev/null; then stop_run sigterm_loader TERM loader
else echo "note: no python3: the SIGTERM on the loader's thread was left out"; fi

echo "tsan.sh: $((SECONDS - T0)) s in all; logs in $LOGS"
if ((${#FAILED[@]})); then echo "tsan.sh: FAILED: ${FAILED[*]}"; exit 1; fi
echo "tsan.sh: no ThreadSanitizer reports"
