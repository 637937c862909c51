#!/usr/bin/env bash
# test_scripts.sh SRC - the project's shell scripts parse (bash -n), so do
# the bench's Python scripts (where python3 is), and bench/run_all.sh, the one
# device call a GPU session gets, keeps its deadline: run in a copy of the
# tree with the bench scripts, netc, ctest and nvidia-smi replaced by stubs
# that only sleep and print, it must run the steps in order, cut one short at
# its cap, skip what has no time left and say so, and still bring back its
# logs. A broken runbook costs a device session; this costs a second (and
# bench/rehearse.sh runs the steps for real on the mock GPU, in minutes).
set -uo pipefail
src=${1:?usage: test_scripts.sh SRC}
fail=0
for f in "$src"/scripts/*.sh "$src"/bench/*.sh "$src"/tests/*.sh "$src"/tests/*/*.sh "$src"/.ci/run; do
  [[ -f $f ]] || continue
  bash -n "$f" || { echo "FAIL: $f does not parse"; fail=1; }
done
# the bench's Python too: the GPU machine is where most of it first runs (python3 is optional here)
if command -v python3 >/dev/null; then
  for f in "$src"/bench/*.py; do
    python3 -c 'import ast, sys; ast.parse(open(sys.argv[1]).read(), sys.argv[1])' "$f" || { echo "FAIL: $f does not parse"; fail=1; }
  done
fi

tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
tree=$tmp/tree
mkdir -p "$tree/bench" "$tree/build-gpu/bench" "$tree/build-gpu/tests" "$tree/docs" "$tmp/bin"
cp "$src/bench/run_all.sh" "$tree/bench/"
echo readme > "$tree/README.md"; echo doc > "$tree/docs/a.md"
printf '#!/bin/sh\n' > "$tree/build-gpu/netc"
printf '#!/bin/sh\necho "test_gpu_models: $NETC_GPU_CASE"\n' > "$tree/build-gpu/tests/test_gpu_models"
echo "CMAKE_HOME_DIRECTORY:INTERNAL=$tmp/built-at/tree" > "$tree/build-gpu/CMakeCache.txt"
printf '#!/bin/sh\necho stub-gpu\n' > "$tmp/bin/nvidia-smi"
printf '#!/bin/sh\necho "100%% tests passed, 0 tests failed out of 2"\n' > "$tmp/bin/ctest"
for s in gpt2 train infer kernels cnn; do   # each prints its arguments, sleeps SLEEP_<step> seconds, writes a log
  printf 'echo "%s: $*"; echo log > "$OUT/%s.log"; sleep ${SLEEP_%s:-0}; echo "%s: finished"\n' $s $s $s $s > "$tree/bench/run_$s.sh"
done
chmod +x "$tree/build-gpu/netc" "$tree/build-gpu/tests/"* "$tmp/bin/"*

expect() {  # log pattern what
  grep -qE "$2" "$1" || { echo "FAIL: run_all.sh: $3 (no line matching '$2')"; sed 's/^/  | /' "$1"; fail=1; }
}

# everything in time: each step runs once, in priority order, and the logs come back
(cd "$tree" && PATH="$tmp/bin:$PATH" OUT=$tmp/out1 bash bench/run_all.sh > "$tmp/all.txt" 2>&1)
expect "$tmp/out1/run.log" "100% tests passed" "the GPU tests' summary"
order=$(grep -oE '^== [a-z0-9]+' "$tmp/out1/run.log" | tr '\n' ' ')
[[ $order == "== gpt2 == tests == wgmma == kernels == infer == train == cnn == done " ]] || { echo "FAIL: run_all.sh: steps ran as '$order'"; fail=1; }
expect "$tmp/out1/run.log" "^gpt2: build-gpu/netc .*text.txt" "run_gpt2.sh gets netc and a text"
expect "$tmp/out1/run.log" "^test_gpu_models: gpt2_d64_train_wgmma" "the wgmma step runs its GPU test cases"
expect "$tmp/out1/run.log" "^train: build-gpu/netc 10 512" "run_train.sh gets 10 epochs at batch 512"
[[ $(grep -c '^kernels: build-gpu/netc 30' "$tmp/out1/run.log") == 2 ]] || { echo "FAIL: run_all.sh: run_kernels.sh ran other than twice (wgmma, kernels)"; fail=1; }
# the listing first: with pipefail, grep -q stopping early would fail tar with SIGPIPE
listing=$(tar -tzf "$tmp/out1/logs.tar.gz")
grep -q 'kernels.log' <<<"$listing" || { echo "FAIL: run_all.sh: the steps' logs are not in logs.tar.gz"; fail=1; }
[[ -L $tmp/built-at/tree ]] || { echo "FAIL: run_all.sh: the build's source path is not linked to the tree"; fail=1; }

# a step that outruns the deadline is cut short and the rest say they had no time
(cd "$tree" && PATH="$tmp/bin:$PATH" OUT=$tmp/out2 SLEEP_gpt2=30 NETC_BENCH_SECONDS=36 bash bench/run_all.sh > /dev/null 2>&1)
expect "$tmp/out2/run.log" "^== gpt2: cut short at [0-9]+ s" "a step past the deadline is cut short"
expect "$tmp/out2/run.log" "^== tests: skipped, no time left" "a step with no time left says so"
grep -q "gpt2: finished" "$tmp/out2/run.log" && { echo "FAIL: run_all.sh: the cut step ran to its end"; fail=1; }
[[ -f $tmp/out2/logs.tar.gz ]] || { echo "FAIL: run_all.sh: no logs after a cut step"; fail=1; }

# named steps only, and an unknown name said
(cd "$tree" && PATH="$tmp/bin:$PATH" OUT=$tmp/out3 bash bench/run_all.sh kernels nonsense > /dev/null 2>&1)
expect "$tmp/out3/run.log" "no step 'nonsense'" "an unknown step is named"
grep -q "^== tests" "$tmp/out3/run.log" && { echo "FAIL: run_all.sh: ran a step that was not named"; fail=1; }

# the PyTorch references each script runs, with python3 and netc stubs that print their
# arguments: on the GPU machine (no TINY) the measured sizes on CUDA (what a GPU session runs,
# its meaning unchanged by the CPU path); with TINY=1 (bench/rehearse.sh) on the CPU with
# $PYTHON, and none with NO_TORCH=1
stubs=$tmp/stubs; mkdir -p "$stubs"
printf '#!/bin/sh\n[ "$1" = - ] || echo "python: $*" >> "$PYLOG"\n' > "$stubs/python3"
printf '#!/bin/sh\n' > "$stubs/netc"; chmod +x "$stubs/"*
echo text > "$tmp/text.txt"
torch_runs() {  # env... : the bench/*.py the five scripts ran, one a line
  : > "$tmp/py.log"
  (cd "$src" && for s in "gpt2.sh $stubs/netc $tmp/text.txt 16 1024 60" "infer.sh $stubs/netc $stubs/netc" "kernels.sh $stubs/netc 30" \
      "train.sh $stubs/netc 10 512" "cnn.sh $stubs/netc 100 128 512"; do
    env PATH="$stubs:$PATH" PYLOG="$tmp/py.log" OUT=$tmp/bench DATA=D "$@" bash bench/run_$s > /dev/null 2>&1
  done)
  sed -n 's/^python: //p' "$tmp/py.log"
}
gpu=$(torch_runs)
want_gpu="bench/torch_gpt2.py 16 1024 20
bench/gpt2_losses.py --steps 10 --batch 4 --T 256 --netc $stubs/netc --losses-tool $stubs/bench/gpt2_losses --out $tmp/bench/losses
bench/torch_infer.py 1 512
torch_gpt2_infer.py 1:64 16:1024
bench/torch_kernels.py
bench/torch_mlp_train.py D 10 512
bench/torch_cnn_train.py D 100 128 512"
[[ $gpu == "$want_gpu" ]] || { echo "FAIL: the GPU machine's PyTorch commands changed:"; diff <(echo "$want_gpu") <(echo "$gpu"); fail=1; }
tiny=$(torch_runs TINY=1 PYTHON=python3)
n=$(grep -c -- '--device cpu' <<<"$tiny")
((n == 6)) || { echo "FAIL: TINY=1 ran $n PyTorch references on the CPU, not 6:"; echo "$tiny"; fail=1; }
notorch=$(torch_runs TINY=1 NO_TORCH=1)
[[ -z $notorch ]] || { echo "FAIL: NO_TORCH=1 still ran PyTorch: $notorch"; fail=1; }

((fail == 0)) && echo "scripts: all parse; run_all.sh keeps its order, caps and deadline; the PyTorch commands are the GPU's (CPU's with TINY)"
exit $fail
