#!/usr/bin/env bash
# test_mockgpu_cli.sh NETC SRC MOCKDIR MAKE_NPY - the command line's GPU paths on the
# mock GPU (tests/mockgpu): `netc run --device gpu` against `--device cpu`,
# and `netc train --device gpu` (staged inputs, CUDA graph replays, the
# evaluation pass) against the CPU executor's training on the same data,
# step by step. The mock runs the kernels of the CUDA C files named in
# NETC_MOCK_CUDA_SOURCE, which `netc build --emit-cuda` writes here (and
# netc train itself, NETC_TRAIN_CUDA_DIR, for the loss graph that evaluates a
# model that is not a classifier).
set -euo pipefail
netc=$1 src=$2 mock=$3 make_npy=$4
tmp=$(mktemp -d)
[[ -n ${NETC_KEEP_TMP:-} ]] || trap 'rm -rf "$tmp"' EXIT
fails=0

on_mock() { LD_LIBRARY_PATH="$mock" NETC_MOCK_CUDA_SOURCE="$1" "${@:2}"; }

# Numbers of two lines agree within a relative tolerance.
close() {   # close TOL "a b c" "a' b' c'"
  awk -v tol="$1" -v a="$2" -v b="$3" 'BEGIN {
    n = split(a, x, " "); m = split(b, y, " ");
    if (n != m || n == 0) exit 1;
    for (i = 1; i <= n; i++) { d = x[i] - y[i]; if (d < 0) d = -d; s = (x[i] < 0 ? -x[i] : x[i]); if (d > tol * (s + 0.05)) exit 1 }
  }'
}

# The numbers netc run prints for its outputs: "output NAME: dtype[...] mean M first A B C D".
run_numbers() { grep -E '^output ' | sed -E 's/.*mean //; s/first //' | tr '\n' ' '; }

check_run() {   # check_run NAME MODEL DIMS...
  local name=$1 model=$2; shift 2
  "$netc" build "$model" --entry forward "$@" -o "$tmp/$name.netm" --emit-cuda >"$tmp/$name.cu"
  local cpu gpu
  cpu=$("$netc" run "$tmp/$name.netm" --random-inputs 3 --device cpu 2>&1 | run_numbers)
  if ! gpu=$(on_mock "$tmp/$name.cu" "$netc" run "$tmp/$name.netm" --random-inputs 3 --device gpu 2>"$tmp/$name.err" | run_numbers) ||
     ! grep -q 'running on cuda:0 netc mock GPU' "$tmp/$name.err"; then
    echo "FAIL run $name: the mock GPU run failed"; cat "$tmp/$name.err"; fails=$((fails + 1)); return
  fi
  if close 2e-2 "$cpu" "$gpu"; then echo "ok run $name"; else echo "FAIL run $name: cpu [$cpu] gpu [$gpu]"; fails=$((fails + 1)); fi
}

check_run fashion_mlp "$src/examples/fashion_mlp.net" --dim B=5
# netc inspect --profile: every launch timed on the device (gpu_profile)
if on_mock "$tmp/fashion_mlp.cu" "$netc" inspect "$tmp/fashion_mlp.netm" --profile 2 >"$tmp/profile.txt" 2>&1 &&
   grep -q '^measured: .* 4 launches' "$tmp/profile.txt"; then echo "ok inspect --profile"; else
  echo "FAIL inspect --profile"; cat "$tmp/profile.txt"; fails=$((fails + 1)); fi
# ... of a training step: its scalars get the values netc train feeds its first step (the rate
# after a warmup of 4 steps, Adam's corrections, the initial loss scale), not random ones in [0.5, 1)
printf 'model m(x: f32[B, 4]) -> (loss: f32)\n{\n  param w: f32[4] = ones\n  return sum(w * w) + 0.0 * sum(x)\n}\ntrain m {\n  optimizer adam(lr: 0.25, beta1: 0.8)\n  schedule cosine(warmup: 4)\n  loss_scale dynamic(init: 1e30)\n}\n' > "$tmp/first.net"
if "$netc" build "$tmp/first.net" --entry train --target '' -o "$tmp/first.netm" --emit-cuda >"$tmp/first.cu" &&
   on_mock "$tmp/first.cu" "$netc" inspect "$tmp/first.netm" --entry train --dim B=2 --profile 1 >"$tmp/profile.txt" 2>&1 &&
   grep -q "^netc: --profile: a training step's first values: @lr 0.0625, @bias1 0.2, @bias2 0.001, @scale 1e+30$" "$tmp/profile.txt"; then
  echo "ok inspect --profile --entry train"; else
  echo "FAIL inspect --profile --entry train: want the first step's scalars"; cat "$tmp/profile.txt"; fails=$((fails + 1)); fi
check_run char_lm "$src/examples/char_lm.net" --dim B=2 --set T=16 --set C=32 --set L=1
# A scatter-add of constant indices in a forward pass (rows of x summed by iota / 3): its sort
# of the indices runs once, all of it; the GPU's result was zeros where the count, fill and rank
# ran once, before the clear and the scan that every run did
printf '%s\n' 'model sa(x: f32[B, 4]) -> (y: f32[3, 4]) {' '  return scatter_add(iota([B], axis: 0) / 3, x, rows: 3)' '}' > "$tmp/sa.net"
check_run scatter_constant "$tmp/sa.net" --dim B=7
# Integer sums past their dtype wrap on the GPU as on the CPU (u8 pixels
# 0-255, four to a row; i32 values near 2^31): the GPU's sum stored them
# saturated (255, 2147483647) where the CPU executor wraps
printf '%s\n' 'model isum(x: u8[B, 4], y: i32[B, 4]) -> (s: u8[B], t: i32[4], u: f32[B]) {' \
  '  return sum(x, -1), sum(y * 300000000, 0), f32(sum(x, -1)) }' > "$tmp/isum.net"
check_run int_sum_wraps "$tmp/isum.net" --dim B=3
# Sizes as numbers in a module built with a symbolic B: each a dim_value
# kernel storing the size the launch is given, no sum of ones (f32 and i32),
# the same bits as the CPU's; in a training step the float scalars made from
# them alone (f32(N) / f32(N - 1), as nn.batch_norm's) are prepare steps
printf '%s\n' 'model sz(x: f32[B, 5], k: i32[B]) -> (y: f32[B, 5], r: f32, p: i32[B]) {' \
  '  param w: f32[5] = ones' '  return x * w / B, f32(B * 5) / f32(B * 5 - 1), k + B * B' '}' \
  'train sz(t: f32[B, 5]) {' '  loss = mean(square(y * r - t))' '  optimizer sgd(lr: 0.5)' '}' > "$tmp/sz.net"
for entry in forward train; do
  "$netc" build "$tmp/sz.net" --entry $entry --target '' -o "$tmp/sz_$entry.netm" --emit-cuda >"$tmp/sz_$entry.cu"
  "$netc" run "$tmp/sz_$entry.netm" --entry $entry --dim B=3 --random-inputs 2 --device cpu \
    --output "$tmp/sz_${entry}_cpu" >/dev/null 2>&1 || true
  if ! grep -q 'dim_value' "$tmp/sz_$entry.cu" || { [[ $entry == forward ]] && grep -q '^// %[0-9]* = sum ' "$tmp/sz_$entry.cu"; }; then
    echo "FAIL run sizes as numbers ($entry): no dim_value kernel, or a sum"; fails=$((fails + 1))
  elif on_mock "$tmp/sz_$entry.cu" "$netc" run "$tmp/sz_$entry.netm" --entry $entry --dim B=3 --random-inputs 2 \
       --device gpu --output "$tmp/sz_${entry}_gpu" >/dev/null 2>"$tmp/sz.err" &&
     cmp -s "$tmp/sz_${entry}_cpu/r.npy" "$tmp/sz_${entry}_gpu/r.npy" && cmp -s "$tmp/sz_${entry}_cpu/p.npy" "$tmp/sz_${entry}_gpu/p.npy" &&
     cmp -s "$tmp/sz_${entry}_cpu/y.npy" "$tmp/sz_${entry}_gpu/y.npy"; then echo "ok run sizes as numbers ($entry)"
  else echo "FAIL run sizes as numbers ($entry): the GPU's outputs are not the CPU's"; cat "$tmp/sz.err"; fails=$((fails + 1)); fi
done
# A training step that returns a parameter: the GPU's output w is the value
# the step read, as the CPU's (the GPU read the weight the step had written;
# then both were refused)
printf '%s\n' 'model rp(x: f32[B, 4]) -> (y: f32[B, 2], w: f32[4, 2]) {' '  param w: f32[4, 2] = xavier' \
  '  return x @ w, w' '}' 'train rp(t: f32[B, 2]) {' '  loss = mean(square(y - t))' '  optimizer sgd(lr: 0.5)' '}' > "$tmp/rp.net"
"$netc" build "$tmp/rp.net" --entry train --dim B=3 --target '' -o "$tmp/rp.netm" --emit-cuda >"$tmp/rp.cu"
"$netc" run "$tmp/rp.netm" --entry train --random-inputs 1 --device cpu --output "$tmp/rp_cpu" >/dev/null 2>&1 || true
if on_mock "$tmp/rp.cu" "$netc" run "$tmp/rp.netm" --entry train --random-inputs 1 --device gpu --output "$tmp/rp_gpu" \
     >/dev/null 2>"$tmp/rp.err" && cmp -s "$tmp/rp_cpu/w.npy" "$tmp/rp_gpu/w.npy"; then echo "ok run step returning a parameter"
else echo "FAIL run step returning a parameter: the GPU's w is not the CPU's"; cat "$tmp/rp.err"; fails=$((fails + 1)); fi

# A copy to the device that fails (the mock's NETC_MOCK_FAIL_HTOD=N: the
# process's N-th): at the session's creation, in --weights' load (copies 4
# to 6: the message says the parameters hold the file's values, the next run
# copies the rest) or for the input, each a message and exit 1, nothing
# leaked; the copy after them all fails none, and the run has the file's weights.
printf '%s\n' 'model three(x: f32[B]) -> (y: f32[B]) {' '  param a: f32[1] = ones' '  param b: f32[1] = ones' \
  '  param c: f32[1] = ones' '  return x * a + x * b + x * c' '}' > "$tmp/three.net"
"$netc" build "$tmp/three.net" --entry forward --dim B=2 -o "$tmp/three.netm" --emit-cuda >"$tmp/three.cu"
hdr='{"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},"b":{"dtype":"F32","shape":[1],"data_offsets":[4,8]},"c":{"dtype":"F32","shape":[1],"data_offsets":[8,12]}}'
{ printf "\\x$(printf %02x ${#hdr})\\x00\\x00\\x00\\x00\\x00\\x00\\x00"; printf '%s' "$hdr"
  printf '\x00\x00\x00\x40\x00\x00\x40\x40\x00\x00\x80\x40'; } >"$tmp/three.safetensors"   # a 2, b 3, c 4
three=(run "$tmp/three.netm" --weights "$tmp/three.safetensors" --random-inputs 1)
cpu=$("$netc" "${three[@]}" --device cpu 2>&1 | run_numbers)
for n in 1 2 3 4 5 6 7 8; do
  rc=0; NETC_MOCK_FAIL_HTOD=$n on_mock "$tmp/three.cu" "$netc" "${three[@]}" --device gpu >"$tmp/three.out" 2>"$tmp/three.err" || rc=$?
  want='netc: (parameter [abc]|input x): cuMemcpyHtoDAsync failed'
  ((n < 4 || n > 6)) || want="$want: out of memory \\(2\\); the parameters hold the file's values, and the next run copies"
  good=0
  if ((n < 8)); then [[ $rc -eq 1 ]] && grep -qE "$want" "$tmp/three.err" || good=1
  else [[ $rc -eq 0 ]] && close 1e-5 "$cpu" "$(run_numbers <"$tmp/three.out")" || good=1; fi
  if ((good != 0)); then
    echo "FAIL copy $n to the device failing: exit $rc, cpu [$cpu]"; cat "$tmp/three.err" "$tmp/three.out"; fails=$((fails + 1))
  else echo "ok copy $n to the device failing (exit $rc)"; fi
done

# Training: char_lm (f32, small) on this repository's README, 6 steps of 4
# windows; the loss of each step on the GPU follows the CPU's.
# Training on the mock GPU against the CPU, the loss of the first step and
# the epoch's mean train and test losses: char_lm (f32, small) on this
# repository's README, and a model with dropout, whose masks change every step
# on both (its @step input; the CUDA graph replays from the third step).
check_train() {   # check_train NAME MODEL BATCH STEPS ARGS... (ACCUMULATE=K: K micro-batches a step; BUDGET=SIZE;
                  #   EPOCHS=N, TEXT=FILE: the data, README.md by default)
  local name=$1 model=$2 batch=$3 steps=$4 k=${ACCUMULATE:-1} budget=(); shift 4
  [[ -z ${BUDGET:-} ]] || budget=(--memory-budget "$BUDGET")
  local train=(train "$model" --data "${TEXT:-$tmp/text.txt}" --batch "$batch" --max-steps "$steps" --epochs "${EPOCHS:-1}" --seed 5
               --accumulate "$k" "${budget[@]}" "$@")
  "$netc" build "$model" --entry train --dim B=$((batch / k)) --accumulate "$k" "${budget[@]}" "$@" --emit-cuda -o "$tmp/t.netm" \
    >"$tmp/$name.train.cu" 2>"$tmp/$name.build.log"
  "$netc" build "$model" --entry forward "$@" --emit-cuda -o "$tmp/f.netm" >"$tmp/$name.forward.cu"
  "$netc" "${train[@]}" --device cpu --metrics "$tmp/$name.cpu.jsonl" >"$tmp/$name.cpu.log" 2>&1 ||
    { echo "FAIL train $name: cpu"; cat "$tmp/$name.cpu.log"; fails=$((fails + 1)); return; }
  mkdir -p "$tmp/$name.cuda"   # the evaluation's own source, where it is the loss graph
  if ! NETC_TRAIN_CUDA_DIR=$tmp/$name.cuda on_mock "$tmp/$name.train.cu:$tmp/$name.forward.cu:$tmp/$name.cuda/eval.cu" \
       "$netc" "${train[@]}" --device gpu --metrics "$tmp/$name.gpu.jsonl" \
       >"$tmp/$name.gpu.log" 2>&1 || ! grep -q 'training on cuda:0 netc mock GPU' "$tmp/$name.gpu.log"; then
    echo "FAIL train $name on the mock GPU"; tail -20 "$tmp/$name.gpu.log"; fails=$((fails + 1)); return
  fi
  losses() { grep -oE '"(train|test)_loss": *[-0-9.e+]*' "$1" | sed 's/.*: *//' | tr '\n' ' '; }
  local c g
  c=$(losses "$tmp/$name.cpu.jsonl") g=$(losses "$tmp/$name.gpu.jsonl")
  if [[ -n $c ]] && close 2e-3 "$c" "$g"; then echo "ok train $name: losses $g"; else
    echo "FAIL train $name: cpu losses [$c] gpu [$g]"; fails=$((fails + 1)); fi
}

cp "$src/README.md" "$tmp/text.txt"
check_train char_lm "$src/examples/char_lm.net" 4 6 --set T=16 --set C=32 --set L=1
# The evaluation's copy to the device failing (the run's last copy, counted by
# the mock at exit when the one asked to fail never came): the message named
# nothing ("netc: evaluation: " and whatever its buffer held); now the input.
ev=(train "$src/examples/char_lm.net" --data "$tmp/text.txt" --batch 4 --max-steps 6 --epochs 1 --seed 5 --accumulate 1
    --set T=16 --set C=32 --set L=1 --device gpu)
copies=$(NETC_MOCK_FAIL_HTOD=1000000000 on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${ev[@]}" 2>&1 |
         sed -nE 's/^mock libcuda: at exit: ([0-9]+) host-to-device copies.*/\1/p')
rc=0; NETC_MOCK_FAIL_HTOD=${copies:-1} on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${ev[@]}" >"$tmp/ev.log" 2>&1 || rc=$?
if [[ -n $copies && $rc -eq 1 ]] && tail -1 "$tmp/ev.log" | grep -qE '^netc: evaluation: input text: cuMemcpyHtoDAsync failed'; then
  echo "ok train char_lm: the evaluation's copy $copies failing"
else echo "FAIL train char_lm: the evaluation's copy ${copies:-?} failing: exit $rc"; tail -3 "$tmp/ev.log"; fails=$((fails + 1)); fi
# with no --target, train compiles for the device's own architecture: the mock is a 9.0 device
grep -q 'compiling the kernels for sm_90a' "$tmp/char_lm.gpu.log" ||
  { echo "FAIL train char_lm: not compiled for the mock's sm_90a"; grep compiling "$tmp/char_lm.gpu.log"; fails=$((fails + 1)); }
# Ctrl-C on the GPU (NETC_TEST_INTERRUPT=3: SIGINT as step 3 runs, the next batch already on
# its way; eval: in the evaluation after the 6 steps, dropped): exit 130, the checkpoint, the
# weights and whole metrics lines; the resumed run ends at the uninterrupted run's test loss
# (it evaluates alone after an interrupted evaluation). Without the handler: killed, nothing saved.
test_loss() { grep -oE '"test_loss": *[-0-9.e+]*' "$1" | sed 's/.*: *//' | tail -1; }
interrupted_gpu() {   # interrupted_gpu WHEN STEP
  local d=$tmp/int_$1 rc=0
  NETC_TEST_INTERRUPT=$1 on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${ev[@]}" --checkpoint-dir "$d" \
    --save "$d.safetensors" --metrics "$d.jsonl" >"$d.log" 2>&1 || rc=$?
  if [[ $rc -ne 130 ]] || ! grep -q "^netc: stopped by SIGINT after step $2; checkpoint" "$d.log" || [[ ! -s $d.safetensors ]] ||
     [[ $(tail -1 "$d.jsonl") != "{\"step\":$2,\"interrupted\":\"SIGINT\"}" ]] ||
     ! "$netc" run "$tmp/f.netm" --weights "$d.safetensors" --dim B=2 --random-inputs 1 --device cpu >/dev/null 2>&1; then
    echo "FAIL train char_lm: SIGINT ($1) on the GPU: exit $rc"; tail -5 "$d.log"; fails=$((fails + 1)); return
  fi
  on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${ev[@]}" --checkpoint-dir "$d" --resume --metrics "$d.b.jsonl" \
    >"$d.b.log" 2>&1 || true
  if grep -q "resumed from .* step $2$" "$d.b.log" && close 1e-5 "$(test_loss "$tmp/char_lm.gpu.jsonl")" "$(test_loss "$d.b.jsonl")"; then
    echo "ok train char_lm: SIGINT ($1) on the GPU, resumed"
  else echo "FAIL train char_lm: resumed after SIGINT ($1) on the GPU"; tail -5 "$d.b.log"; fails=$((fails + 1)); fi
}
interrupted_gpu 3 3
interrupted_gpu eval 6
# GPT-2 in bf16 (autocast, the bf16 weight copies, the chunked loss), small
# (the MLP bias's gradient planned into GELU's backward matmul, its sums a second product)
check_train gpt2_small "$src/examples/gpt2.net" 2 3 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
grep -q 'cublasLt_matmul+dgelu+bgrad' <("$netc" inspect "$tmp/t.netm" --entry train) &&
  grep -q '1 bias gradients as a second product$' "$tmp/gpt2_small.gpu.log" ||
  { echo "FAIL train gpt2_small: the MLP bias's gradient is not planned into GELU's backward matmul"; fails=$((fails + 1)); }
# the same with cuBLASLt's DGELU_BGRAD asked for, then asked for where cuBLASLt has no algorithm for it
NETC_DGELU_BGRAD=1 check_train gpt2_bgrad "$src/examples/gpt2.net" 2 3 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
grep -q 'second product' "$tmp/gpt2_bgrad.gpu.log" && { echo "FAIL train gpt2_bgrad: DGELU_BGRAD did not run"; fails=$((fails + 1)); }
NETC_DGELU_BGRAD=1 NETC_MOCK_CUBLASLT_REFUSE=208 check_train gpt2_no_bgrad "$src/examples/gpt2.net" 2 3 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
grep -q '1 bias gradients as a second product (no DGELU_BGRAD algorithm' "$tmp/gpt2_no_bgrad.gpu.log" ||
  { echo "FAIL train gpt2_no_bgrad: the fallback did not run"; fails=$((fails + 1)); }
# under a memory budget: forward values recomputed in the backward pass
BUDGET=59.5MiB check_train gpt2_budget "$src/examples/gpt2.net" 8 2 --set V=512 --set C=256 --set L=2 --set H=4 --set MAXT=32 --dim T=32
grep -qE 'recomputing [1-9]|recomputed in [1-9]' "$tmp/gpt2_budget.build.log" || { echo "FAIL train gpt2_budget: nothing recomputed"; fails=$((fails + 1)); }
# the budget bounds the step's session; here the evaluation's arena (its own copy of the
# weights) is larger than the step's scratch, so it has one of its own, outside the budget
grep -qE "holds [0-9.]+ GiB \(arena [0-9.]+ GiB; what --memory-budget bounds\), evaluation [0-9.]+ GiB \(outside the budget: too large for the step's arena\)" "$tmp/gpt2_budget.gpu.log" ||
  { echo "FAIL train gpt2_budget: the memory line does not say what the budget bounds"; grep 'GPU memory' "$tmp/gpt2_budget.gpu.log"; fails=$((fails + 1)); }
grep -q "budget" <(grep 'GPU memory' "$tmp/char_lm.gpu.log") && { echo "FAIL train char_lm: a budget named where none was given"; fails=$((fails + 1)); }
# two epochs: training goes on after an evaluation that ran in the step's arena (its scratch
# between steps, above the buffers the plan keeps); every loss of both epochs follows the CPU's
head -c 1500 "$src/README.md" > "$tmp/small.txt"
EPOCHS=2 TEXT=$tmp/small.txt check_train gpt2_two_epochs "$src/examples/gpt2.net" 8 100 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
[[ $(grep -c '"test_loss"' "$tmp/gpt2_two_epochs.gpu.jsonl") -eq 2 ]] && grep -q "it runs in the step's arena" "$tmp/gpt2_two_epochs.gpu.log" ||
  { echo "FAIL train gpt2_two_epochs: not two evaluations in the step's arena"; grep 'GPU memory' "$tmp/gpt2_two_epochs.gpu.log"; fails=$((fails + 1)); }
# launches on 2 streams, products tuned by timing cuBLASLt's candidates and kernels launched
# early (the mock checks each waits at its entry): the same losses
NETC_STREAMS=2 NETC_MATMUL_TUNE=1 NETC_PDL=1 check_train gpt2_streams_tuned "$src/examples/gpt2.net" 2 3 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
grep -qE "product shapes tuned.*launches side by side on 2 streams.*kernels launched early \(PDL\)" "$tmp/gpt2_streams_tuned.gpu.log" ||
  { echo "FAIL train gpt2_streams_tuned: not on 2 streams with tuned products and early launches"; grep 'training on' "$tmp/gpt2_streams_tuned.gpu.log"; fails=$((fails + 1)); }
ACCUMULATE=2 check_train char_lm_accumulate "$src/examples/char_lm.net" 4 4 --set T=16 --set C=32 --set L=1
# micro-batches in bf16: the guarded update stores the weights' copies for the next step too
ACCUMULATE=2 check_train gpt2_accumulate "$src/examples/gpt2.net" 4 4 --set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=32 --dim T=32
check_train drop_lm "$src/tests/train/drop_lm.net" 16 8

# float data from .npy files, scored by the train section's loss (a graph of the forward
# pass and the loss, no update, no dropout): a regression (f32 targets [N, 1], nn.mse, a
# dropout) and an autoencoder without labels; the test set of 20 is two batches of 8 on
# the GPU and the last 4 on the CPU executor. Before, netc train refused f32 samples.
npy_set() {   # npy_set DIR SPLIT N COLUMNS [TARGET_COLUMNS]: values in [-1, 1), targets a sum of them
  awk -v n="$3" -v c="$4" -v s="$RANDOM" 'BEGIN { srand(s); for (i = 0; i < n; i++) { t = 0.1
    for (k = 0; k < c; k++) { v = 2 * rand() - 1; t += (k % 2 ? -0.5 : 0.8) * v; printf "%.6f ", v } printf "\n"; print t > "/dev/stderr" } }' \
    2>"$tmp/targets.txt" | "$make_npy" "$1/$2_x.npy" '<f4' "$3,$4"
  [[ -z ${5:-} ]] || "$make_npy" "$1/$2_y.npy" '<f4' "$3,$5" <"$tmp/targets.txt"
}
mkdir -p "$tmp/reg" "$tmp/ae"
npy_set "$tmp/reg" train 64 4 1; npy_set "$tmp/reg" test 20 4 1
npy_set "$tmp/ae" train 64 8; npy_set "$tmp/ae" test 20 8
TEXT=$tmp/reg check_train regression "$src/tests/train/reg.net" 8 6
grep -q test_accuracy "$tmp/regression.gpu.jsonl" && { echo "FAIL train regression: a test accuracy"; fails=$((fails + 1)); }
TEXT=$tmp/ae check_train autoencoder "$src/tests/train/ae.net" 8 6
# a batch norm: the step assigns its running statistics on the device; the evaluation reads them
TEXT=$tmp/reg check_train regression_bn "$src/tests/train/reg_bn.net" 8 6

# a classifier computed in bf16 that returns its logits in bf16: the GPU's evaluation reads
# them in their own dtype (it asked for 4 bytes a value and stopped after the first epoch)
bars() {   # bars DIR SPLIT N N_AS_4_BYTES: 8x8 images, a bright row whose index is the label
  local i img=() r k row
  for ((k = 0; k < 4; k++)); do
    row=""; for ((r = 0; r < 8; r++)); do if ((r == k)); then row+=$'\xc8\xc8\xc8\xc8\xc8\xc8\xc8\xc8'; else row+=$'\x14\x14\x14\x14\x14\x14\x14\x14'; fi; done
    img[k]=$row
  done
  { printf '\x00\x00\x08\x03'"$4"'\x00\x00\x00\x08\x00\x00\x00\x08'; for ((i = 0; i < $3; i++)); do printf '%s' "${img[i % 4]}"; done; } > "$1/$2-images-idx3-ubyte"
  { printf '\x00\x00\x08\x01'"$4"; for ((i = 0; i < $3; i++)); do printf "\\x0$((i % 4))"; done; } > "$1/$2-labels-idx1-ubyte"
}
mkdir -p "$tmp/bars"
bars "$tmp/bars" train 64 '\x00\x00\x00\x40'
bars "$tmp/bars" t10k 1000 '\x00\x00\x03\xe8'
printf 'model c(x: u8[B, 8, 8]) -> (logits: bf16[B, 4])\n  precision bf16\n{\n  param w: f32[64, 4]\n  h = bf16(reshape(x, [B, 64])) / 255.0\n  return h @ w\n}\ntrain c(labels: i32[B]) {\n  loss = cross_entropy(logits, labels)\n  optimizer sgd(lr: 0.5)\n}\n' > "$tmp/bf16_logits.net"
TEXT=$tmp/bars check_train bf16_logits "$tmp/bf16_logits.net" 8 4


# A CNN (nn.conv2d, nn.max_pool2d: windows gathered by computed indices, their gradient a
# scatter-add where up to 9 windows pick a pixel) on 28x28 images, a bright band at rows
# 2 label to 2 label + 3 (10 classes): its training and evaluation on the GPU follow the CPU's
be32() { printf "\\x$(printf %02x $(($1 >> 24 & 255)))\\x$(printf %02x $(($1 >> 16 & 255)))\\x$(printf %02x $(($1 >> 8 & 255)))\\x$(printf %02x $(($1 & 255)))"; }
bands() {   # bands DIR SPLIT N
  local i k r img=() row dark bright
  dark=$(printf '\x10%.0s' {1..28}) bright=$(printf '\xb4%.0s' {1..28})
  for ((k = 0; k < 10; k++)); do
    row=""; for ((r = 0; r < 28; r++)); do if ((r >= 2 * k && r < 2 * k + 3)); then row+=$bright; else row+=$dark; fi; done
    img[k]=$row
  done
  { printf '\x00\x00\x08\x03'; be32 "$3"; be32 28; be32 28; for ((i = 0; i < $3; i++)); do printf '%s' "${img[i * 7 % 10]}"; done; } > "$1/$2-images-idx3-ubyte"
  { printf '\x00\x00\x08\x01'; be32 "$3"; for ((i = 0; i < $3; i++)); do printf "\\x0$((i * 7 % 10))"; done; } > "$1/$2-labels-idx1-ubyte"
}
mkdir -p "$tmp/bands"
bands "$tmp/bands" train 24
bands "$tmp/bands" t10k 12
TEXT=$tmp/bands check_train fashion_cnn "$src/examples/fashion_cnn.net" 4 4

# A resume with no step left (at --max-steps; of a finished run) on the GPU: no memory line and
# no memory metrics (it printed and wrote what the sessions held for no step), and the epoch it
# only evaluates has no samples_per_s or epoch_seconds in the metrics (it wrote 0 for them)
head -c 1200 "$src/README.md" >"$tmp/short.txt"
for again in max-steps finished; do
  nr=(train "$src/examples/char_lm.net" --batch 4 --epochs 1 --seed 5 --set T=16 --set C=32 --set L=1 --device gpu
      --checkpoint-dir "$tmp/nr.$again" --metrics "$tmp/nr.$again.jsonl")
  if [[ $again == max-steps ]]; then nr+=(--data "$tmp/text.txt" --max-steps 3); else nr+=(--data "$tmp/short.txt"); fi
  on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${nr[@]}" >/dev/null 2>&1
  lines=$(wc -l <"$tmp/nr.$again.jsonl")
  on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" "${nr[@]}" --resume >"$tmp/nr.log" 2>&1
  added=$(tail -n +$((lines + 1)) "$tmp/nr.$again.jsonl")
  if grep -q '^done: .* none in this run' "$tmp/nr.log" && ! grep -q 'GPU memory' "$tmp/nr.log" && (( lines > 1 )) &&
     [[ $added != *gpu_train_bytes* && $added != *samples_per_s* && $added != *epoch_seconds* ]]; then
    echo "ok train char_lm: a resume with no step left ($again) reports no memory or rate"
  else echo "FAIL train char_lm: a resume with no step left ($again) reports memory or a rate"; cat "$tmp/nr.log"; echo "$added"; fails=$((fails + 1)); fi
done
# ... and one that takes more steps drops the memory line of the run it resumes (it stayed in the
# metrics between the two runs' steps): the file ends with the resumed run's, its only one
on_mock "$tmp/char_lm.train.cu:$tmp/char_lm.forward.cu" "$netc" train "$src/examples/char_lm.net" --batch 4 --epochs 1 --seed 5 \
  --set T=16 --set C=32 --set L=1 --device gpu --checkpoint-dir "$tmp/nr.max-steps" --metrics "$tmp/nr.max-steps.jsonl" \
  --data "$tmp/text.txt" --max-steps 6 --resume >"$tmp/gm.log" 2>&1 || true
if [[ $(grep -c gpu_train_bytes "$tmp/nr.max-steps.jsonl") == 1 ]] && tail -1 "$tmp/nr.max-steps.jsonl" | grep -q '^{"step":6,"gpu_train_bytes"'; then
  echo "ok train char_lm: a resume past --max-steps ends its metrics with its own memory line only"
else echo "FAIL train char_lm: a resume past --max-steps left the memory line of the run it resumed"; cat "$tmp/nr.max-steps.jsonl"; fails=$((fails + 1)); fi

echo "$fails failed"
[[ $fails -eq 0 ]]
