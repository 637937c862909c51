#!/usr/bin/env bash
# bench/run_all.sh PART - on the lent GPU machine, from the repository root,
# with build-gpu/ and data/ carried (scripts/gpu_prepare.sh makes them here):
# what the open issues ask to run on a GPU, in two parts that each fit one
# 10-minute call. What comes back is $OUT/partN.log (every line printed, the
# JSON lines of the bench scripts among them), $OUT/ctest_gpu.log and
# $OUT/partN-logs.tar.gz (the scripts' own logs; compiled modules left out).
#   1: the GPU tests against the CPU executor (ctest -L gpu), issue 3
#      (bench/run_infer.sh), issue 4 (bench/run_train.sh, 10 epochs at batch
#      512), issue 5 (bench/run_kernels.sh)
#   2: issue 6 (bench/run_gpt2.sh: the step against PyTorch eager and
#      torch.compile, the 4GiB budget, with and without DGELU_BGRAD, the
#      per-launch profile and the first 10 losses against PyTorch)
set -u
part=${1:?usage: bench/run_all.sh 1|2}
OUT=${OUT:-/tmp/bench-out}
WORK=$(mktemp -d)   # what the bench scripts write (modules, logs): only a summary goes to $OUT
mkdir -p "$OUT"
export LD_LIBRARY_PATH="$PWD/build-gpu/lib${LD_LIBRARY_PATH:+:$LD_LIBRARY_PATH}"
NETC=build-gpu/netc
[[ -x $NETC ]] || { echo "run_all: no $NETC: run scripts/gpu_prepare.sh here and carry build-gpu and data" | tee "$OUT/part$part.log"; exit 1; }
# the build's tests name the sources by the path the build was made at
src=$(sed -n 's/^CMAKE_HOME_DIRECTORY:INTERNAL=//p' build-gpu/CMakeCache.txt)
if [[ -n $src && ! -e $src ]]; then mkdir -p "$(dirname "$src")" && ln -s "$PWD" "$src"; fi
step() { echo "== $* ($(date -u +%T))"; }
run_part() {
  date -u; nvidia-smi --query-gpu=name,driver_version,memory.total,clocks.max.sm --format=csv
  git log --oneline -1 2>/dev/null
  case $part in
  1)
    step "ctest -L '^gpu$'"
    (cd build-gpu && ctest -L '^gpu$' --output-on-failure) > "$OUT/ctest_gpu.log" 2>&1
    grep -E "tests passed|Failed|Passed" "$OUT/ctest_gpu.log"
    step "issue 3: bench/run_infer.sh"
    OUT=$WORK bash bench/run_infer.sh "$NETC" build-gpu/bench/infer_netc
    step "issue 4: bench/run_train.sh"
    OUT=$WORK DATA=data/fashion-mnist bash bench/run_train.sh "$NETC" 10 512
    step "issue 5: bench/run_kernels.sh"
    OUT=$WORK bash bench/run_kernels.sh "$NETC" 50
    ;;
  2)
    step "issue 6: bench/run_gpt2.sh"
    cat README.md docs/*.md > "$WORK/text.txt"   # the step's cost does not depend on the tokens
    OUT=$WORK bash bench/run_gpt2.sh "$NETC" "$WORK/text.txt"
    ;;
  *) echo "run_all: part 1 or 2"; return 2 ;;
  esac
  step done
}
run_part 2>&1 | tee "$OUT/part$part.log"
tar -C "$WORK" --exclude='*.netm' --exclude='text.txt' -czf "$OUT/part$part-logs.tar.gz" .
