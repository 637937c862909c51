#!/usr/bin/env bash
# Bad command lines and bad files get one clear line and a non-zero exit,
# never a crash. Each case: expected exit status, a fragment of the message,
# then the netc arguments. Args: NETC SOURCE_DIR
set -uo pipefail
netc=$1 src=$2
tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
"$netc" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/m.netm" 2>/dev/null || { echo "cannot build the module"; exit 1; }
printf 'not a module at all' > "$tmp/junk.netm"
head -c 300 "$tmp/m.netm" > "$tmp/short.netm"
printf '\x93NUMPY\x01\x00\x10\x00{bad header}   \n' > "$tmp/bad.npy"
mkdir -p "$tmp/nodata"
"$netc" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --output "$tmp/out" >/dev/null 2>&1 || { echo "cannot run the module"; exit 1; }
fail=0 n=0
expect() {  # status fragment args...
  local want=$1 frag=$2; shift 2
  n=$((n + 1))
  out=$(timeout 120 "$netc" "$@" 2>&1 >/dev/null); got=$?   # 124: it hung
  if [[ $got != "$want" || $out != *"$frag"* ]]; then
    echo "FAIL: netc $*"; echo "  exit $got (want $want), stderr: $out"; fail=$((fail + 1))
  elif (( $(wc -l <<<"$out") > 4 )); then
    echo "FAIL: netc $*: more than four lines of error"; echo "$out"; fail=$((fail + 1))
  fi
}
expect 2 "unknown command"        frobnicate
expect 2 "unknown option"         build "$src/examples/fashion_mlp.net" --bogus
expect 2 "expects one .net file"  build
expect 1 "No such file"           check "$tmp/none.net"
expect 1 "No such file"           run "$tmp/none.netm"
expect 1 "not a netc module"      run "$tmp/junk.netm"
expect 1 "truncated"              run "$tmp/short.netm"
expect 1 "not a netc module"      inspect "$src/examples/fashion_mlp.net"
expect 1 "not bound"              run "$tmp/m.netm" --random-inputs 1
# an input not given says how netc run gives one (it said only 'input images was not set')
expect 1 "input images was not set (nrt_session_set_input; netc run: --input images=FILE.npy, or --random-inputs SEED" run "$tmp/m.netm" --dim B=2
expect 1 "has no input 'imgs'"    run "$tmp/m.netm" --input "imgs=$tmp/out/logits.npy"
expect 1 "holds f32[2, 10]"       run "$tmp/m.netm" --input "images=$tmp/out/logits.npy"
expect 1 "malformed header"       run "$tmp/m.netm" --input "images=$tmp/bad.npy"
# NumPy writes no bf16: an f32 file rounds to a bf16 input (it was refused: no way to give one)
printf 'model h(x: bf16[B, 4]) -> (y: f32[B, 4]) { return f32(x) * 2.0 }\n' > "$tmp/bfin.net"
"$netc" build "$tmp/bfin.net" --target '' -o "$tmp/bfin.netm" 2>/dev/null
"$netc" run "$tmp/bfin.netm" --dim B=2 --random-inputs 1 --device cpu --output "$tmp/bfin" >/dev/null 2>&1   # y.npy: f32[2, 4]
expect 0 "input 'x': $tmp/bfin/y.npy's f32 values rounded to bf16" run "$tmp/bfin.netm" --input "x=$tmp/bfin/y.npy" --device cpu
expect 1 "has no symbolic dim Q (its symbolic dims: B)" run "$tmp/m.netm" --dim Q=3 --random-inputs 1
expect 2 "has no symbolic dim Q (its symbolic dims: B)" inspect "$tmp/m.netm" --dim Q=3
expect 2 "NAME=VALUE"             build "$src/examples/fashion_mlp.net" --dim B
# a --dim, --set or --model that names nothing says what there is
expect 1 "hint: its symbolic dims: B, T" build "$src/examples/gpt2.net" --dim Q=3 -o "$tmp/q.netm"
printf 'model a(x: f32[B, 4]) -> (y: f32[B, 4]) { return relu(x) }\nmodel b(x: f32[T, 4]) -> (y: f32[T, 4]) { return relu(x) }\n' > "$tmp/two.net"
expect 1 "no model of the file has a symbolic dim named Q" check "$tmp/two.net" --dim Q=3
expect 1 "hint: their symbolic dims: B, T" check "$tmp/two.net" --dim Q=3
expect 1 "the model has no symbolic dim named T" check "$tmp/two.net" --model a --dim T=3
expect 1 "hint: the file's config constants: H, CLASSES" check "$src/examples/fashion_mlp.net" --set NOPE=3
expect 1 "hint: the file's models: fashion_mlp" check "$src/examples/fashion_mlp.net" --model nope
# --set gives a config a value of the kind the file gives it (an integer where it has a
# number), at the config's line; a dtype or string config is not set from the command line
printf 'model m(x: f32[B, 4]) -> (y: bf16[B, 4])\n  config D = bf16, H = 4, S = 0.5, F = true, N = "a"\n{\n  return cast(x * S, D)\n}\n' > "$tmp/setk.net"
expect 1 "setk.net:2:10: error: --set D=1: config 'D' is a dtype in the file" check "$tmp/setk.net" --set D=1
expect 1 "--set H=true: config 'H' is an integer in the file" check "$tmp/setk.net" --set H=true
expect 1 "hint: give a whole number" check "$tmp/setk.net" --set H=2.5
expect 1 "--set F=1: config 'F' is a bool in the file" check "$tmp/setk.net" --set F=1
expect 1 "--set N=3: config 'N' is a string in the file" check "$tmp/setk.net" --set N=3
expect 0 "" check "$tmp/setk.net" --set S=2 --set H=7 --set F=false
# an option the command does not read is refused, naming the commands it is for (it was ignored)
expect 2 "netc check reads --report only with --dump-ir" check "$src/examples/fashion_mlp.net" --report
expect 2 "netc check reads --accumulate only with --dump-ir" check "$src/examples/fashion_mlp.net" --accumulate 2
expect 2 "--accumulate shapes the training step, and --entry forward builds none" build "$src/examples/fashion_mlp.net" --entry forward --accumulate 2 --target '' -o "$tmp/fw.netm"
printf 'model m(x: f32[B, 4]) -> (y: f32[B, 4]) { return x * 2.0 }\n' > "$tmp/notrain1.net"
expect 2 "--accumulate shapes a training step, and $tmp/notrain1.net has no train section" build "$tmp/notrain1.net" --accumulate 2 --target '' -o "$tmp/nt1.netm"
expect 2 "netc run does not take --epochs: it is an option of train" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --epochs 2
expect 2 "netc check does not take --emit-cuda: it is an option of build" check "$src/examples/fashion_mlp.net" --emit-cuda
expect 2 "netc train does not take --dump-ir: it is an option of check and build" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --dump-ir
expect 2 "netc inspect does not take --set: it is an option of check, build and train" inspect "$tmp/m.netm" --set H=2
# a training step returns its loss as 'loss': once where the model returns it so (GPT-2),
# and a model output of that name holding another value is an error (it was a second
# output 'loss', written over the first)
printf 'model m(x: f32[B, 4]) -> (loss: f32)\n{\n  param w: f32[4] = ones\n  return sum(x * w)\n}\ntrain m {\n  loss = loss * 2.0\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/lossout.net"
expect 1 "lossout.net:6:7: error: the model has an output named 'loss' that is not the train section's loss" build "$tmp/lossout.net" --entry train --target '' -o "$tmp/lo.netm"
n=$((n + 1))
louts=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=2 --dim T=64 --target '' --dump-ir -o "$tmp/g2.netm" 2>/dev/null | grep -c '^output loss ')
[[ $louts == 1 ]] || { echo "FAIL: GPT-2's training step has $louts outputs named loss (want 1)"; fail=$((fail + 1)); }
# a model whose first output is not logits [B, classes] (a scalar first, integers first) is
# scored by its train section's loss, not refused (it was: the CPU's evaluation read floats
# from none; tests/train/test_npy.sh trains such models): here it gets as far as the data
printf 'model m(x: u8[B, 28, 28]) -> (e: f32, y: f32[B, 784])\n{\n  y = f32(reshape(x, [B, 784]))\n  param w: f32[784] = ones\n  y = y * w\n  return mean(square(y)), y\n}\ntrain m(labels: i32[B]) {\n  loss = e + 0.0 * f32(sum(labels))\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/lossfirst.net"
expect 1 "nodata/train-images-idx3-ubyte: No such file or directory" train "$tmp/lossfirst.net" --data "$tmp/nodata"
printf 'import nn\nmodel m(x: u8[B, 8, 8]) -> (pred: i32[B, 4], logits: f32[B, 4])\n{\n  out = nn.linear(f32(reshape(x, [B, 64])), 4)\n  return i32(out), out\n}\ntrain m(labels: i32[B]) {\n  loss = cross_entropy(logits, labels)\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/intfirst.net"
expect 1 "nodata/train-images-idx3-ubyte: No such file or directory" train "$tmp/intfirst.net" --data "$tmp/nodata"
# a batch norm's training step needs more than one value per channel (PyTorch refuses it too):
# its require N > 1, left to the session by a module built with B symbolic, refuses B = 1 there,
# its message showing the bound sizes beside the written ones and its hint (it showed x is f32[B, 16]
# alone, no hint)
"$netc" build "$src/tests/train/reg_bn.net" --entry train --target '' -o "$tmp/bn.netm" 2>/dev/null
bn_hint="
  hint: the running variance is unbiased, over N - 1: train with a batch of 2 or more"
expect 1 "(in the call at reg_bn.net:10) fails at B = 1, where B > 1 is false: batch_norm: training needs more than one value per channel, x is f32[B, 16] = f32[1, 16]$bn_hint" run "$tmp/bn.netm" --dim B=1 --random-inputs 1 --device cpu
expect 0 "" run "$tmp/bn.netm" --dim B=2 --random-inputs 1 --device cpu
# netc inspect binding every dim with --dim refuses what a session would (it showed numbers for B = 1)
expect 1 "a session refuses this binding: the require at nn.net:314 (in the call at reg_bn.net:10) fails at B = 1, where B > 1 is false: batch_norm: training needs more than one value per channel, x is f32[B, 16] = f32[1, 16]$bn_hint" inspect "$tmp/bn.netm" --entry train --dim B=1
expect 0 "" inspect "$tmp/bn.netm" --entry train --dim B=2
# ... and without --dim it takes B as the least a session accepts, 2, saying why (it took B as 1,
# checked nothing and showed a step no session runs, under a note); a dim no size fixes is an error
n=$((n + 1))
bnt=$("$netc" inspect "$tmp/bn.netm" --entry train 2>&1)
bnj=$("$netc" inspect "$tmp/bn.netm" --entry train --json 2>&1 | tr -d ' \n')
bn2=$("$netc" inspect "$tmp/bn.netm" --entry train --dim B=2 2>&1 | sed 1d)
[[ $bnt == *"(symbolic dims not bound with --dim are taken as 1, but B as 2, the least a session accepts: the require at nn.net:314 (in the call at reg_bn.net:10) fails at B = 1, where B > 1 is false: "* &&
   $(sed 1,2d <<<"$bnt") == "$bn2" && $bnj == *'"dims_taken_as_1":[],"dims_defaulted":{"B":2}'* ]] ||
  { echo "FAIL: inspect of a batch norm's step with B not given: $bnt $bnj"; fail=$((fail + 1)); }
printf 'model m(x: f32[B, 4]) -> f32[B, 4] {\n  require B == 2000, "B is {B}", "give 2000"\n  return x * 2.0\n}\n' > "$tmp/b2000.net"
"$netc" build "$tmp/b2000.net" --target '' -o "$tmp/b2000.netm" 2>/dev/null
expect 1 "netc: a session refuses this binding, with B taken as 1 (not given with --dim) and no value up to 1024 of B accepted either: the require at b2000.net:2 fails at B = 1, where B == 2000 is false: B is 1
  hint: give 2000
  hint: give the sizes to inspect with --dim (--dim B=N)" inspect "$tmp/b2000.netm"
# a require's message past 512 bytes, with its bound shapes and its hint, reaches the user whole
# (tc_error held 512 bytes: the text, the shapes and the end were cut)
long_msg=$(printf 'part %d, ' {1..60}) long_hint=$(printf 'step %d, ' {1..30})
printf 'model m(x: f32[B, 4]) -> f32[B, 4] {\n  require B > 1, "%sx is {x}, the end", "%sthen done"\n  return x * 2.0\n}\n' \
  "$long_msg" "$long_hint" > "$tmp/long.net"
"$netc" build "$tmp/long.net" --target '' -o "$tmp/long.netm" 2>/dev/null
long_want="fails at B = 1, where B > 1 is false: ${long_msg}x is f32[B, 4] = f32[1, 4], the end
  hint: ${long_hint}then done"
expect 1 "$long_want" inspect "$tmp/long.netm" --dim B=1
expect 1 "$long_want" run "$tmp/long.netm" --dim B=1 --random-inputs 1 --device cpu
# dims not given: a binding where no one dim raised alone gets past the refusals is found too (T
# was raised to 2, then B > T refused it, with B already tried alone and dropped back to 1; B * T
# > 1024 no dim up to 1024 meets alone), and the dims are named as defaulted
printf 'model m(x: f32[B, T]) -> f32[B, T] {\n  require T > 1 and B > T, "B is {B}, T is {T}"\n  return x * 2.0\n}\n' > "$tmp/bgt.net"
printf 'model m(x: f32[B, T]) -> f32[B, T] {\n  require B * T > 1024, "B is {B}, T is {T}"\n  return x * 2.0\n}\n' > "$tmp/bt.net"
for m in bgt bt; do "$netc" build "$tmp/$m.net" --target '' -o "$tmp/$m.netm" 2>/dev/null; done
n=$((n + 1))
bgt=$("$netc" inspect "$tmp/bgt.netm" 2>&1) bgtj=$("$netc" inspect "$tmp/bgt.netm" --json 2>&1 | tr -d ' \n')
bt=$("$netc" inspect "$tmp/bt.netm" 2>&1) btj=$("$netc" inspect "$tmp/bt.netm" --json 2>&1 | tr -d ' \n')
[[ $bgt == *"(symbolic dims not bound with --dim are taken as 1, but B as 3, T as 2, the least a session accepts: the require at bgt.net:2 fails at B = 1, T = 1, where T > 1 is false: "* &&
   $bgtj == *'"dims_taken_as_1":[],"dims_defaulted":{"B":3,"T":2}'* &&
   $bt == *"taken as 1, but B as 32, T as 33, the least"* && $btj == *'"dims_defaulted":{"B":32,"T":33}'* ]] ||
  { echo "FAIL: inspect with dims not given that only a pair of values gets past: $bgt $bgtj $bt $btj"; fail=$((fail + 1)); }
# a parameter read only while training (or only by the forward pass) is not "never used" in the
# build that does not read it: netc build warns of what neither build reads, as netc check does
for entry in forward train; do
  out=$("$netc" build "$src/tests/golden/diag/unused_training_branch.net" --entry $entry --target '' -o "$tmp/utb.netm" 2>&1 >/dev/null)
  [[ $out == *"parameter 'never' is never used"* && $out != *scale_* ]] ||
    { echo "FAIL: netc build --entry $entry of unused_training_branch.net: $out"; fail=$((fail + 1)); }
done
# max's gradient is shared by the elements that tie for the maximum: a row of four equal
# values passes a quarter to each (it passed all of it to each: 4 times the true gradient)
printf 'model m(x: f32[B, 4]) -> (loss: f32)\n{\n  param w: f32[4] = ones\n  return sum(max(w + 0.0 * x, axis: -1))\n}\ntrain m {\n  optimizer sgd(lr: 1.0)\n}\n' > "$tmp/tie.net"
"$netc" build "$tmp/tie.net" --entry train --target '' -o "$tmp/tie.netm" 2>/dev/null
tie=$("$netc" run "$tmp/tie.netm" --entry train --dim B=2 --random-inputs 1 --output "$tmp/tie" 2>&1 | grep '@grad_norm')
[[ $tie == *"mean 1 first 1"* ]] || { echo "FAIL: max's gradient over 4 ties in 2 rows: $tie (want a norm of 1)"; fail=$((fail + 1)); }
# --random-inputs gives a training step's scalars its first step's values, not random ones
# (a negative @lr, a loss scale below 1): the rate after a warmup of 4 steps, and a loss scale
# of 1e30 that overflows a gradient of 2e9 (@finite 0; a random @scale in [-1, 1) kept it finite)
printf 'model m(x: f32[B, 4]) -> (loss: f32)\n{\n  param w: f32[4] = ones\n  return 1e9 * sum(w * w) + 0.0 * sum(x)\n}\ntrain m {\n  optimizer adam(lr: 0.25, beta1: 0.8)\n  schedule cosine(warmup: 4)\n  loss_scale dynamic(init: 1e30)\n}\n' > "$tmp/first.net"
"$netc" build "$tmp/first.net" --entry train --target '' -o "$tmp/first.netm" 2>/dev/null
first=$("$netc" run "$tmp/first.netm" --entry train --dim B=2 --random-inputs 3 --output "$tmp/first" 2>&1)
[[ $first == *"first values: @lr 0.0625, @bias1 0.2, @bias2 0.001, @scale 1e+30"* && $first == *"@finite: bool[] mean 0 first 0"* ]] ||
  { echo "FAIL: --random-inputs on a train entry: $first (want the first step's @lr 0.0625, @bias1 0.2, @scale 1e+30, @finite 0)"; fail=$((fail + 1)); }
# --accumulate K averages K micro-batches' gradients: one batch's only for a loss that is a
# mean over the batch. A sum over it (the losses were silently not those of one batch) is warned of
printf 'model m(x: u8[B, 28, 28]) -> (y: f32[B, 10])\n{\n  param w: f32[784, 10] = normal(0.1)\n  return f32(reshape(x, [B, 784])) @ w\n}\ntrain m(labels: i32[B]) {\n  loss = cross_entropy(y, labels) + 0.01 * sum(square(y))\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/sumloss.net"
expect 1 "sumloss.net:7:44: error: --accumulate 4 averages the gradients of 4 micro-batches, one batch's only for a loss that is a mean over the batch; this sum is over the batch axis [-Werror]" \
  train "$tmp/sumloss.net" --data "$tmp/nodata" --accumulate 4 -Werror
expect 0 "sumloss.net:7:44: warning: --accumulate 2 averages" build "$tmp/sumloss.net" --entry train --accumulate 2 --target '' -o "$tmp/sl.netm"
sed 's/sum(square(y))/mean(sum(square(y), axis: 1))/' "$tmp/sumloss.net" > "$tmp/meanloss.net"
expect 0 "" build "$tmp/meanloss.net" --entry train --accumulate 2 --target '' -Werror -o "$tmp/ml.netm"
expect 0 "" build "$src/examples/char_lm.net" --entry train --accumulate 2 --target '' -Werror -o "$tmp/cl.netm"
# train reads -Werror (and --no-PASS) as build does
expect 1 "error: 'hidden' is assigned but never used [-Werror]" train "$src/tests/golden/diag/unused_binding_warning.net" --data "$tmp/nodata" -Werror
printf 'model m(x: f32[B, 4]) -> (y: f32[B, 4])\n  config H = 4\n{\n  return x * f32(H)\n}\n' > "$tmp/cast_int.net"
expect 0 "" check "$tmp/cast_int.net"   # f32 of a config's number is a number (4.0); it was refused
printf 'model m(x: f32[B, 4]) -> (y: f32[B, 4])\n  config NAME = "four"\n{\n  return x * f32(NAME)\n}\n' > "$tmp/cast_str.net"
expect 1 "f32(...) casts a tensor or a number, got a string" check "$tmp/cast_str.net"
expect 1 "not a safetensors"      run "$tmp/m.netm" --dim B=2 --random-inputs 1 --weights "$tmp/junk.netm"
# a context longer than the position table: a type error where T is known (the
# gather's line), and where it is bound only at run time, refused by name at the
# bind rather than as the gather's index error of the first run
expect 1 "gpt2.net:13:41: error: gather: the indices are an iota over 2048 positions, 0 to 2047, but wpe has 1024 rows" \
  check "$src/examples/gpt2.net" --dim T=2048
expect 1 "hint: the iota's length must be at most wpe's 16 rows" build "$src/examples/gpt2.net" --set MAXT=16 --dim T=17 --target '' -o "$tmp/g.netm"
printf 'model pos(tokens: i32[B, T]) -> f32[B, T, 4]\n  config MAXT = 8\n{\n  param wpe: f32[MAXT, 4] = normal(0.02)\n  param wte: f32[16, 4] = normal(0.02)\n  positions = iota([T], axis: 0, dtype: i32)\n  return gather(wte, tokens) + gather(wpe, positions)\n}\n' > "$tmp/pos.net"
"$netc" build "$tmp/pos.net" --target '' -o "$tmp/pos.netm" 2>/dev/null || echo "cannot build pos.net"
expect 1 "dim T = 9 is more than the 8 rows of wpe, which the gather at $tmp/pos.net:7 indexes with an iota over T: T must be at most 8" \
  run "$tmp/pos.netm" --dim B=1 --dim T=9 --random-inputs 1 --device cpu --output "$tmp/posout"
expect 0 "" run "$tmp/pos.netm" --dim B=1 --dim T=8 --random-inputs 1 --device cpu --output "$tmp/posout"
# nn.conv2d's gather indices, B * 8 * 8 rows in the forward pass (x where it lies; the
# training step's B * (8 * 8 + 1), x copied beside a padding row per image), computed
# in i32 from iotas: a batch past 2^31 of them (one more image than 33554432) would
# wrap them. A symbolic B bound that large is refused by name (no tensor allocated),
# the largest that fits named; before, it ran on indices that wrapped
printf 'import nn\nmodel cnn(x: f32[B, 8, 8, 1]) {\n  return nn.max_pool2d(relu(nn.conv2d(x, 4, 3, padding: 1)), 3, 2, 1)\n}\n' > "$tmp/wrap.net"
"$netc" build "$tmp/wrap.net" --target '' -o "$tmp/wrap.netm" 2>/dev/null || echo "cannot build wrap.net"
expect 1 "dim B = 33554433 is too large for the gather at $src/stdlib/nn.net:133, whose indices, i32 arithmetic on iotas, would wrap around: the mul at nn.net:132 computes values up to 2147483648, past i32's largest, 2147483647: B must be at most 33554432" \
  run "$tmp/wrap.netm" --dim B=33554433 --random-inputs 1 --device cpu --output "$tmp/wrapout"
expect 0 "" run "$tmp/wrap.netm" --dim B=2 --random-inputs 1 --device cpu --output "$tmp/wrapout"
# an input that is no regular file is refused by name: a FIFO (whose open
# would wait for a writer forever) and a directory (which read as a short file)
mkfifo "$tmp/fifo"
mkdir -p "$tmp/fifodata" "$tmp/fifoimport"
mkfifo "$tmp/fifodata/train-images-idx3-ubyte" "$tmp/fifoimport/nn.net"
printf 'import nn\nmodel m(x: f32[2, 4]) -> (y: f32[2, 3]) { return nn.linear(x, 3) }\n' > "$tmp/fifoimport/m.net"
expect 1 "fifo: not a regular file (a FIFO)" check "$tmp/fifo"
expect 1 "fifo: not a regular file (a FIFO)" inspect "$tmp/fifo"
expect 1 "fifo: not a regular file (a FIFO)" run "$tmp/fifo"
expect 1 "fifo: not a regular file (a FIFO)" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --weights "$tmp/fifo"
expect 1 "fifo: not a regular file (a FIFO)" run "$tmp/m.netm" --dim B=2 --input "images=$tmp/fifo"
expect 1 "nodata: is a directory" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --weights "$tmp/nodata"
expect 1 "nodata: is a directory" run "$tmp/m.netm" --dim B=2 --input "images=$tmp/nodata"
expect 1 "nodata: is a directory" inspect "$tmp/nodata"
expect 1 "train-images-idx3-ubyte: not a regular file (a FIFO)" train "$src/examples/fashion_mlp.net" --data "$tmp/fifodata"
expect 1 "fifo: not a regular file (a FIFO)" train "$src/examples/char_lm.net" --data "$tmp/fifo" --set C=32 --set L=1 --set H=2 --set T=16
expect 1 "cannot import 'nn': cannot open $tmp/fifoimport/nn.net: not a regular file (a FIFO)" check "$tmp/fifoimport/m.net"
expect 1 "is the data set installed" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata"
# a budget below what a GPU session holds beside its arena says so (a tiny model's 33 MiB were unexplained)
n=$((n + 1))
mb=$("$netc" build "$src/examples/char_lm.net" --set C=32 --set L=2 --set H=2 --set T=16 --entry train --dim B=16 \
  --memory-budget 1MiB --target '' -o "$tmp/mb.netm" 2>&1)
grep -q "error: cannot fit the memory budget of 1.00 MiB: the smallest plan recomputation reaches needs 33.[0-9]* MiB, of which 32.[0-9]* MiB is what a GPU session holds beside its arena (cuBLASLt's workspace, argument tables)" <<<"$mb" ||
  { echo "FAIL: an impossible budget's fixed part: $mb"; fail=$((fail + 1)); }
# the smallest plan an impossible budget names is never above the plan the step has without
# one (a CNN whose own @checkpoint blocks made 106.57 MiB was said to need at least 110.43)
n=$((n + 1))
cat > "$tmp/ckconv.net" <<'EOF'
import nn
model ck(images: u8[B, 28, 28]) -> (logits: f32[B, 10]) {
  x = f32(reshape(images, [B, 28, 28, 1])) / 255.0
  h = nn.conv2d(x, 16, 3, padding: 1)
  @checkpoint repeat 3 as blocks {
    c = nn.conv2d(relu(h), 16, 3, padding: 1)
    h = h + c
  }
  @checkpoint p = nn.max_pool2d(relu(h))
  @checkpoint q = nn.conv2d(p, 32, 3, stride: 2, padding: 1)
  return nn.linear(mean(relu(q), axis: [1, 2]), 10)
}
train ck(labels: i32[B]) {
  loss = cross_entropy(logits, labels)
  optimizer adam(lr: 1e-3)
}
EOF
mb_mib() { sed -nE "s/.*$1 ([0-9.]+) MiB.*/\1/p" <<<"$2" | head -1; }
mbfree=$("$netc" build "$tmp/ckconv.net" --entry train --dim B=64 --memory-budget 1TiB --target '' -o "$tmp/ck.netm" 2>&1)
mbtight=$("$netc" build "$tmp/ckconv.net" --entry train --dim B=64 --memory-budget 40MiB --target '' -o "$tmp/ck.netm" 2>&1)
free_mib=$(mb_mib "the plan needs" "$mbfree") tight_mib=$(mb_mib "recomputation reaches needs" "$mbtight")
[[ -n $free_mib && -n $tight_mib ]] && awk -v a="$tight_mib" -v b="$free_mib" 'BEGIN { exit !(a <= b) }' ||
  { echo "FAIL: the smallest plan of an impossible budget is above the step's own: $mbtight (without: $mbfree)"; fail=$((fail + 1)); }
# a training set smaller than one batch names the largest --batch it takes
head -c 200 "$src/README.md" > "$tmp/small.txt"
expect 2 "the training set has 11 samples, fewer than one batch of 128: give --batch 11 or less" \
  train "$src/examples/char_lm.net" --data "$tmp/small.txt" --set C=32 --set L=1 --set H=2 --set T=16 --device cpu
# a text directory's files are those named without a '.': one of only .txt files says so and names it
mkdir -p "$tmp/txtdir"; printf 'some text to learn from. ' > "$tmp/txtdir/corpus.txt"
expect 1 "a directory's text is its files named without a '.', and corpus.txt has one; give a file itself, --data $tmp/txtdir/corpus.txt" \
  train "$src/examples/char_lm.net" --data "$tmp/txtdir" --set C=32 --set L=1 --set H=2 --set T=16
expect 2 "--epochs"               train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --epochs x
expect 2 "a positive integer, got '0'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --batch 0
expect 2 "a positive integer, got '0'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --max-steps 0
expect 2 "from 1 to 65536, got '-2'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --accumulate -2
expect 2 "--seed needs a non-negative integer, got '-1'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --seed -1
expect 2 "--dim needs a value: NAME=VALUE" build "$src/examples/fashion_mlp.net" --dim
expect 2 "--device is cpu, gpu or auto, not 'tpu'" run "$tmp/m.netm" --device tpu
expect 1 "is the data set installed" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --seed 0 --checkpoint-every 0
# where the checkpoints cannot go is said before any work, not at the first checkpoint
expect 1 "--checkpoint-dir $src/README.md: not a directory" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --checkpoint-dir "$src/README.md"
expect 1 "--checkpoint-dir $src/README.md/x: Not a directory" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --checkpoint-dir "$src/README.md/x"
expect 2 "--resume needs --checkpoint-dir" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --resume
expect 1 "--output $src/README.md/x: Not a directory" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --output "$src/README.md/x"
# a NAME=VALUE option given twice for one name, and numbers with a sign or a space before them
expect 2 "--dim B is given twice"  build "$src/examples/fashion_mlp.net" --dim B=2 --dim B=3
expect 2 "--set H is given twice"  build "$src/examples/fashion_mlp.net" --set H=2 --set H=3
expect 2 "--dim B is given twice"  build "$src/examples/fashion_mlp.net" --dim B=4 --dim B=4
# a size past 2^40, a 65th NAME=VALUE option of a kind, and --set values that are not
# decimal numbers that fit (strtoll would saturate, strtod would read hex, inf and nan)
expect 2 "--dim B: '140737488355328' is not a size from 1 to 2^40" build "$src/examples/fashion_mlp.net" --dim B=140737488355328
expect 2 "--dim B: '+5' is not a size from 1 to 2^40" build "$src/examples/fashion_mlp.net" --dim B=+5
expect 2 "at most 64 --set options" check "$src/examples/fashion_mlp.net" $(for i in $(seq 65); do echo "--set N$i=1"; done)
expect 2 "at most 64 --dim options" check "$src/examples/fashion_mlp.net" $(for i in $(seq 65); do echo "--dim N$i=1"; done)
expect 2 "at most 64 --input options" run "$tmp/m.netm" $(for i in $(seq 65); do echo "--input N$i=$tmp/a.npy"; done)
expect 2 "--set H=99999999999999999999: the integer does not fit in 64 bits" check "$src/examples/fashion_mlp.net" --set H=99999999999999999999
expect 2 "--set H=0x10: the value must be a decimal integer" check "$src/examples/fashion_mlp.net" --set H=0x10
expect 2 "--set H=nan: the value must be a decimal integer" check "$src/examples/fashion_mlp.net" --set H=nan
expect 2 "--set H=1e999: the number is out of range" check "$src/examples/fashion_mlp.net" --set H=1e999
expect 2 "--set H=f32: the value must be" check "$src/examples/fashion_mlp.net" --set H=f32
expect 2 "--input images is given twice" run "$tmp/m.netm" --input "images=$tmp/a.npy" --input "images=$tmp/b.npy"
expect 2 "--seed needs a non-negative integer, got ' -1'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --seed ' -1'
expect 2 "--random-inputs wants a seed" run "$tmp/m.netm" --dim B=2 --random-inputs ''
expect 2 "--random-inputs wants a seed" run "$tmp/m.netm" --dim B=2 --random-inputs 99999999999999999999999
expect 2 "from 1 to 65536, got '4294967297'" build "$src/examples/fashion_mlp.net" --entry train --accumulate 4294967297
expect 2 "--max-steps needs a positive integer, got '+3'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --max-steps +3
# the default model (the file's first) without a train section names the file's models with one
printf 'model enc(x: u8[B, 8, 8]) -> (y: f32[B, 64]) { return f32(reshape(x, [B, 64])) }\nmodel cls(x: u8[B, 8, 8]) -> (logits: f32[B, 4]) {\n  param w: f32[64, 4] = normal(0.1)\n  return f32(reshape(x, [B, 64])) @ w\n}\ntrain cls(labels: i32[B]) {\n  loss = cross_entropy(logits, labels)\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/notrain.net"
expect 1 "model enc has no train section; the file's models with one: cls (give --model NAME)" train "$tmp/notrain.net" --data "$tmp/nodata"
expect 1 "hint: the file's models with one: cls (give --model NAME)" build "$tmp/notrain.net" --entry train --target '' -o "$tmp/nt.netm"
# ... and a file without any, the section to add, named for the model (build said 'train <model>')
expect 1 "model m has no train section; add: train m { optimizer adam(lr: 1e-3) }" train "$tmp/notrain1.net" --data "$tmp/nodata"
expect 1 "hint: add: train m { optimizer adam(lr: 1e-3) }" build "$tmp/notrain1.net" --entry train --target '' -o "$tmp/nt1.netm"
# train takes --model as build does, and its batch dim from --batch, not --dim
expect 1 "hint: the file's models: fashion_mlp" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --model nope
expect 1 "do not give it with --dim" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --dim B=4
# --save naming a file the run writes otherwise: the weights replaced the metrics or the checkpoint at the end
expect 2 "--save $tmp/./w.jsonl is the file of --metrics: the weights would replace it" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --metrics "$tmp/w.jsonl" --save "$tmp/./w.jsonl"
expect 2 "is the file of the checkpoint of --checkpoint-dir" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --checkpoint-dir "$tmp/cksave" --save "$tmp/cksave/../cksave/checkpoint.safetensors"
# the loss curve goes to NAME.svg beside the metrics: metrics named so would be overwritten by it
# (it suggested m.svg.jsonl: the extension is replaced)
expect 2 "netc: --metrics $tmp/m.svg: the loss curve goes to NAME.svg beside it; give the metrics another name, e.g. $tmp/m.jsonl" \
  train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --metrics "$tmp/m.svg"
# a .npy header whose shape multiplies past 2^40 elements is refused before any arithmetic overflows
big="{'descr': '|u1', 'fortran_order': False, 'shape': (1099511627776, 1099511627776, 1099511627776), }"
npy_header() { printf "\\x93NUMPY\\x01\\x00\\x$(printf %02x $((${#1} + 1)))\\x00%s\\n" "$1"; }   # version 1, then the header
npy_header "$big" > "$tmp/big.npy"
expect 1 "holds more than 2^40 elements" run "$tmp/m.netm" --input "images=$tmp/big.npy"
# a float64 file (NumPy's default) reads as f32, but is said as what it holds (it said 'holds f32')
f8="{'descr': '<f8', 'fortran_order': False, 'shape': (1, 28, 28), }"
{ npy_header "$f8"; head -c 6272 /dev/zero; } > "$tmp/f8.npy"
expect 1 "input 'images' is u8[B, 28, 28] but $tmp/f8.npy holds float64[1, 28, 28]" run "$tmp/m.netm" --input "images=$tmp/f8.npy"
dup="{'descr': '|u1', 'shape': (2, 28, 28), 'fortran_order': False, 'shape': (3, 28, 28), }"
npy_header "$dup" > "$tmp/dup.npy"
expect 1 "header key 'shape' given twice" run "$tmp/m.netm" --input "images=$tmp/dup.npy"
expect 1 "$tmp: is a directory" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp"
# -o to a FIFO (or a device, as /dev/null) writes into it; a rename would put a file in its place
n=$((n + 1))
mkfifo "$tmp/out_fifo"; cat "$tmp/out_fifo" > "$tmp/from_fifo" &
if ! "$netc" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/out_fifo" 2>/dev/null || ! wait $! ||
   [[ ! -p $tmp/out_fifo ]] || ! cmp -s "$tmp/from_fifo" "$tmp/m.netm"; then
  echo "FAIL: build -o into a FIFO"; fail=$((fail + 1))
fi
n=$((n + 1))   # netc --version: the version and the module format it writes
if ! "$netc" --version | grep -qE '^netc [0-9]+\.[0-9]+\.[0-9]+ \(module format [0-9]+; '; then
  echo "FAIL: netc --version"; "$netc" --version; fail=$((fail + 1))
fi
n=$((n + 1))   # run's --output is made with its parents
if ! "$netc" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --output "$tmp/new/a/b" >/dev/null 2>&1 || [[ ! -s $tmp/new/a/b/logits.npy ]]; then
  echo "FAIL: run --output into a directory not there yet"; fail=$((fail + 1))
fi
expect 2 "one architecture"       train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --target sm_80,sm_90
expect 2 "one architecture"       train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --target ''
# a --target NVRTC does not know is the user's mistake, said before any work (where netc has NVRTC)
"$netc" build "$src/examples/fashion_mlp.net" --target compute_80 -o "$tmp/ptx.netm" 2>/dev/null
if "$netc" inspect "$tmp/ptx.netm" 2>/dev/null | grep -q '^targets: compute_80'; then
  expect 2 "'sm_999' is not a target NVRTC" build "$src/examples/fashion_mlp.net" --target sm_80,sm_999 -o "$tmp/bad.netm"
  expect 2 "it knows sm_"         train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --target bogus
fi
expect 1 "not a text file"        check "$tmp/m.netm"
# under -Werror a warning fails the check, and is said as an error, with the reason
expect 1 "error: 'hidden' is assigned but never used [-Werror]" check "$src/tests/golden/diag/unused_binding_warning.net" -Werror
# a buffer too large at the given dims is named, with its size
expect 1 "%0 (input images: u8[B, 28, 28], fashion_mlp.net:5) would hold 862017116176384 elements" inspect "$tmp/m.netm" --dim B=1099511627776
# a slice empty, or past its axis, at every binding of its dims is an error where it is written
printf 'model s(x: f32[B, 4]) {\n  return slice(x, axis: 0, start: B, end: B)\n}\n' > "$tmp/slice_empty.net"
printf 'model s(x: f32[B, 4]) {\n  return slice(x, axis: 0, start: 0, end: B + 1)\n}\n' > "$tmp/slice_past.net"
printf 'model s(x: f32[B, 4]) {\n  return slice(x, axis: 0, start: 1, end: 2 * B)\n}\n' > "$tmp/slice_twice.net"
expect 1 "slice_empty.net:2:38: error: slice: empty or reversed range [B, B)" check "$tmp/slice_empty.net"
expect 1 "slice_past.net:2:38: error: slice: end B + 1 is past the axis size B" check "$tmp/slice_past.net"
expect 1 "slice_twice.net:2:38: error: slice: end 2*B is past the axis size B" build "$tmp/slice_twice.net" --target '' -o "$tmp/s.netm"
# the gradients of 16 slices of a rank-4 tensor, one concat too many for a GPU kernel, are joined in groups
terms="slice(h, axis: 3, start: 0, end: 1)"
for i in $(seq 1 15); do terms+=" + slice(h, axis: 3, start: $i, end: $((i + 1)))"; done
printf 'model m(x: f32[B, 2, 3, 16]) -> (y: f32[B, 2, 3, 1]) {\n  param w: f32[2, 3, 16] = normal(0.1)\n  h = x * w\n  y = %s\n  return y\n}\ntrain m {\n  loss = sum(y * y)\n  optimizer sgd(lr: 0.1)\n}\n' "$terms" > "$tmp/slices16.net"
expect 0 "" build "$tmp/slices16.net" --entry train --dim B=2 --target '' -o "$tmp/slices16.netm"
expect 2 "run count from 1"       inspect "$tmp/m.netm" --dim B=2 --profile 0
expect 2 "count from 1 to 8"      build "$src/examples/gpt2.net" --loss-slices 9
expect 2 "count from 1 to 8"      train "$src/examples/gpt2.net" --data "$tmp/nodata" --loss-slices 0
expect 2 "count from 1 to 8"      build "$src/examples/gpt2.net" --loss-slices 4x
expect 2 "count from 1 to 8"      build "$src/examples/gpt2.net" --loss-slices +3   # digits only, as every count
expect 2 "--lr needs a number in (0, 1000], got '0x1p-3'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --lr 0x1p-3
expect 2 "--lr needs a number in (0, 1000], got ' 0.1'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --lr ' 0.1'
expect 2 "--lr needs a number in (0, 1000], got '1001'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --lr 1001
expect 1 "is the data set installed" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --lr 1000   # the file's own limit
# a budget under a byte was 0 bytes, that is none: the step built without one (and hex, a leading space, were taken)
expect 2 "--memory-budget wants a size such as 4GiB or 512MiB, got '0.5'" build "$src/examples/fashion_mlp.net" --dim B=8 --memory-budget 0.5
expect 2 "got '0x10GiB'" build "$src/examples/fashion_mlp.net" --dim B=8 --memory-budget 0x10GiB
expect 2 "got ' 4GiB'" build "$src/examples/fashion_mlp.net" --dim B=8 --memory-budget ' 4GiB'
probe=$("$netc" run "$tmp/m.netm" --dim B=1 --random-inputs 1 --output "$tmp/probe" 2>&1)   # not piped: pipefail and grep -q
if ! grep -q 'running on cuda' <<<"$probe"; then
  expect 1 "measures on a GPU"    inspect "$tmp/m.netm" --dim B=2 --profile   # no GPU here
fi
# a dim left unbound names the option of the command at hand (it said 'netc run:' to inspect too)
# ... and --dim, not the session's options dim_names/dim_values (an API's names)
expect 1 "netc: --profile measures on a GPU at bound sizes: symbolic dim B is not bound: give --dim B=N" inspect "$tmp/m.netm" --profile
n=$((n + 1))
[[ $("$netc" inspect "$tmp/m.netm" --profile 2>&1) != *dim_names* ]] || { echo "FAIL: inspect --profile names dim_names"; fail=$((fail + 1)); }
expect 1 "netc: symbolic dim B is not bound: give --dim B=N (or an --input whose shape has it)" run "$tmp/m.netm" --random-inputs 1
# --report names each decision with its source line
n=$((n + 1))
report=$("$netc" build "$src/examples/cast_chain.net" --dim B=64 --target '' --report -o "$tmp/cc.netm" 2>&1)
if ! grep -q 'cast-hoist: the f16 cast of cast_chain.net:26 moved above gather' <<<"$report" ||
   ! grep -q 'cast-hoist: the f16 cast of cast_chain.net:22 taken by matmul %[0-9]* (cast_chain.net:18): it stores its result in f16' <<<"$report" ||
   ! grep -q 'cast-hoist: the f16 -> f32 casts of matmul %[0-9]*.s operands (cast_chain.net:18) sunk into it' <<<"$report" ||
   ! grep -q 'cast-hoist: the f16 cast of cast_chain.net:22: about [0-9]* bytes less moved' <<<"$report"; then
  echo "FAIL: --report"; echo "$report"; fail=$((fail + 1))
fi
# issue 5's measure: with cast hoisting, cast_chain at B=64 moves at most 0.6 of the bytes it moves without
n=$((n + 1))
moved() { "$netc" inspect "$1" --json | tr -d ' \n' | grep -o '"total_bytes_moved":[0-9.e+]*' | cut -d: -f2; }
"$netc" build "$src/examples/cast_chain.net" --dim B=64 --target '' --no-cast-hoist -o "$tmp/cc_off.netm" 2>/dev/null
with=$(moved "$tmp/cc.netm") without=$(moved "$tmp/cc_off.netm")
if [[ -z $with || -z $without ]] || ! awk -v a="$with" -v b="$without" 'BEGIN { exit !(a > 0 && a <= 0.6 * b) }'; then
  echo "FAIL: cast_chain moves $with bytes with cast hoisting, $without without (want at most 0.6)"; fail=$((fail + 1))
fi
# ... and each fused kernel, matmul epilogue and shared buffer of the generated code
n=$((n + 1))
report=$("$netc" build "$src/examples/fashion_mlp.net" --entry train --target '' --report -o "$tmp/fm.netm" 2>&1)
if ! grep -q 'epilogue: step [0-9]*, one cuBLASLt call computes %[0-9]* matmul (nn.net:12), %[0-9]* add (nn.net:12), %[0-9]* relu (fashion_mlp.net:10)' <<<"$report" ||
   ! grep -q 'fuse: step [0-9]*, kernel k[0-9a-z_]*_fused computes .*(fashion_mlp.net:[0-9]*)' <<<"$report" ||
   ! grep -q 'share: %[0-9]* sub (nn.net:10) lives in the buffer of %[0-9]* param (nn.net:10): the update is computed in place' <<<"$report"; then
  echo "FAIL: --report (codegen)"; echo "$report"; fail=$((fail + 1))
fi
# --report also says what kernels do beyond their own op (GPT-2's attention in place, the
# gradient norm's joined sums) and what the schedule moved; the head in 8 slices, as asked
# (at these dims netc would leave it whole: below)
n=$((n + 1))
report=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=2 --dim T=64 --target '' --report --loss-slices 8 -o "$tmp/g.netm" 2>&1)
if ! grep -q 'along: step [0-9]*, kernel k[0-9]*_attention_tc reads %[0-9]* transpose (nn.net:55) where it lies, in %[0-9]* add (nn.net:12)' <<<"$report" ||
   ! grep -q 'along: step [0-9]*, kernel k[0-9]*_attention_grad_tc writes its columns of %[0-9]* concat (nn.net:52)' <<<"$report" ||
   ! grep -q 'along: step [0-9]*, kernel k[0-9]*_concat_sums computes the [0-9]* sums joined by' <<<"$report" ||
   ! grep -q "along: step [0-9]*, kernel k[0-9]*_sum_cols_sum adds up the column sums the attention gradients' kernels made of %[0-9]* concat (nn.net:52)" <<<"$report" ||
   ! grep -q "schedule: the parameters' low-precision copies run first" <<<"$report" ||
   ! grep -q "schedule: 8 cross-entropy gradients run before their loss" <<<"$report" ||
   ! grep -q "schedule: 1 rounding round trips run just before the op that reads them" <<<"$report" ||
   ! grep -q 'along: step [0-9]*, kernel k[0-9]*_cross_entropy_grad also computes the row losses of %[0-9]* cross_entropy' <<<"$report" ||
   ! grep -q 'along: step [0-9]*, kernel k[0-9]*_layernorm_grad\(_colsums\)\? adds the other gradient of its input and stores %[0-9]* add' <<<"$report" ||
   ! grep -q "along: step [0-9]*, kernel k[0-9]*_layernorm_grad_colsums also sums the terms of %[0-9]* norm_param_grad (nn.net:33) and %[0-9]* norm_param_grad (nn.net:33) over the rows it holds" <<<"$report" ||
   ! grep -q 'batch: steps [0-9]*-[0-9]* run as one launch, kernel k_batch_step[0-9]* .*: 48 of the step.s 48 assignments' <<<"$report"; then   # the whole update: one launch
  echo "FAIL: --report (along)"; echo "$report" | grep -v '^share'; fail=$((fail + 1))
fi
# a gradient norm's concat of sums spread over blocks (fashion_cnn's 3x3x32x64 conv weight):
# the first kernel computes the sums, the second adds up the blocks' partial sums
n=$((n + 1))
report=$("$netc" build "$src/examples/fashion_cnn.net" --entry train --dim B=2 --target '' --report -o "$tmp/c.netm" 2>&1)
if ! grep -q 'along: step [0-9]*, kernel k[0-9]*_concat_sums computes the [0-9]* sums joined by' <<<"$report" ||
   ! grep -q "along: step [0-9]*, kernel k[0-9]*_concat_totals adds up in order the blocks' partial sums of %[0-9]* concat" <<<"$report" ||
   grep -q 'kernel k[0-9]*_concat_totals computes' <<<"$report"; then
  echo "FAIL: --report (spread sums)"; grep 'concat' <<<"$report"; fail=$((fail + 1))
fi
# netc's own choice of slices for a training step's head: as few as keep a slice's logits
# within 512 MiB; the most (8) under a memory budget
n=$((n + 1))
small=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=2 --dim T=64 --target '' --report -o "$tmp/g1.netm" 2>&1)
large=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=16 --dim T=1024 --target '' --report -o "$tmp/g4.netm" 2>&1)
lean=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=16 --dim T=1024 --target '' --report \
       --memory-budget 4GiB -o "$tmp/g8.netm" 2>&1)
if ! grep -q 'chunk-loss: cross_entropy over %[0-9]* in one piece: its logits fit one slice' <<<"$small" ||
   ! grep -q 'chunk-loss: cross_entropy over %[0-9]* computed in 4 slices of axis 1' <<<"$large" ||
   ! grep -q 'chunk-loss: cross_entropy over %[0-9]* computed in 8 slices of axis 1' <<<"$lean"; then
  echo "FAIL: the head's slices by size"; grep chunk-loss <<<"$small$large$lean"; fail=$((fail + 1))
fi
# a reduction to one output or a few is split into runs a warp each, then added up in order
# (one warp an output took 30 ms for 12.6M elements on an H200); many outputs keep a warp each
n=$((n + 1))
"$netc" build "$src/tests/gpu/reduce.net" --target '' -o "$tmp/red.netm" 2>/dev/null
kernels=$("$netc" inspect "$tmp/red.netm" --dim B=200)
if ! grep -qE '^[0-9]+ +k[0-9]+_sum_split +%[0-9]+ sum reduce.net:20' <<<"$kernels" ||
   ! grep -qE '^[0-9]+ +k[0-9]+_mean_fused_split +%[0-9]+ mean reduce.net:21' <<<"$kernels" ||
   ! grep -qE '^[0-9]+ +k[0-9]+_sum_cols_sum +%[0-9]+ sum reduce.net:23' <<<"$kernels" ||
   ! grep -qE '^[0-9]+ +k[0-9]+_sum +%[0-9]+ sum reduce.net:15' <<<"$kernels"; then
  echo "FAIL: split reductions"; echo "$kernels"; fail=$((fail + 1))
fi
# inspect --json says which entry point it reports, the module's entry points and the dims
# taken as 1, as the text's first lines do (a forward and a train report could not be told apart)
n=$((n + 1))
"$netc" build "$src/tests/train/tiny.net" --target '' -o "$tmp/tiny.netm" 2>/dev/null
fj=$("$netc" inspect "$tmp/tiny.netm" --json | tr -d ' \n')
tj=$("$netc" inspect "$tmp/tiny.netm" --entry train --dim B=4 --json | tr -d ' \n')
if [[ $fj != *'"entry":"forward","entry_points":["forward","train"],"dims_taken_as_1":["B"]'* ||
      $tj != *'"entry":"train","entry_points":["forward","train"],"dims_taken_as_1":[]'* ]]; then
  echo "FAIL: inspect --json's entry and dims: $fj"; fail=$((fail + 1))
fi
# --no-memplan: the same module without buffer sharing plans more memory
n=$((n + 1))
peak() { "$netc" inspect "$1" --dim B=64 --json | tr -d ' \n' | grep -o '"peak_memory_bytes":[0-9]*' | cut -d: -f2; }
"$netc" build "$src/examples/fashion_mlp.net" --target '' --no-memplan -o "$tmp/nomp.netm" 2>/dev/null
with=$(peak "$tmp/m.netm") without=$(peak "$tmp/nomp.netm")
if ! [[ -n $with && -n $without && $with -lt $without ]]; then
  echo "FAIL: --no-memplan: planned $with bytes, unplanned $without"; fail=$((fail + 1))
fi
# a bf16 chain's vector loop rounds each op's results a pair at a time (one cvt for
# two; sm_90 runs conversions at a fraction of a multiply's rate) and stores its
# already-rounded result by packing, no conversion
n=$((n + 1))
cuda=$("$netc" build "$src/bench/kernels/chain.net" --dim N=4096 --target '' --emit-cuda -o "$tmp/chain.netm" 2>&1)
if [[ $(grep -c 'nc_round_pair_bf16(t[0-9]*);' <<<"$cuda") -ne 4 ]] || ! grep -q 'nc_st8_rounded(y0, i0, w0);' <<<"$cuda"; then
  echo "FAIL: pair rounding in the chain's vector loop"; echo "$cuda" | grep -n 'round\|nc_st8'; fail=$((fail + 1))
fi
# a layernorm a warp a row loads its weight and bias 16 bytes at a time, as it loads its row
# (not 8 scalar loads a chunk: 48 load instructions a row)
n=$((n + 1))
cuda=$("$netc" build "$src/bench/kernels/layernorm.net" --dim R=64 --target '' --emit-cuda -o "$tmp/ln.netm" 2>&1)
if ! grep -q 'if (vec) nc_ld8(w, j, wv);' <<<"$cuda" || ! grep -q 'if (vec) nc_ld8(b, j, bv);' <<<"$cuda"; then
  echo "FAIL: the layernorm's weight and bias in 16-byte loads"; grep -n 'nc_ld.*(w\|nc_ld.*(b' <<<"$cuda"; fail=$((fail + 1))
fi
# and its backward copies the residual stream's other gradient to shared memory at the top
# of the row (cp.async), where it used to load it after the row's reductions
n=$((n + 1))
cuda=$("$netc" build "$src/examples/gpt2.net" --entry train --set L=1 --dim B=2 --dim T=64 --target '' --emit-cuda -o "$tmp/gs.netm" 2>&1)
if ! grep -q 'nc_cp16((unsigned \*)&other_stage\[threadIdx.x\]' <<<"$cuda" ||
   ! grep -q 'if (vec) nc_ld8((const nc_bf16 \*)&other_stage\[threadIdx.x\]' <<<"$cuda"; then
  echo "FAIL: the norm gradient's other gradient staged in shared memory"; fail=$((fail + 1))
fi
# the forward build of a large-vocabulary loss over 2048 rows computes it in 8 slices,
# one slice's logits alive at a time; --no-chunk-loss keeps it whole
n=$((n + 1))
lm=$'model lm(tokens: i32[4, 512], targets: i32[4, 512]) -> (loss: f32) {\n  param wte: f32[4096, 32] = normal(0.02)\n  return cross_entropy(matmul(gather(wte, tokens), wte, transpose_b: true), targets)\n}\n'
printf '%s' "$lm" >"$tmp/lm.net"
lm_peak() { "$netc" inspect "$1" --json | tr -d ' \n' | grep -o '"peak_memory_bytes":[0-9]*' | cut -d: -f2; }
report=$("$netc" build "$tmp/lm.net" --target '' --report -o "$tmp/lm.netm" 2>&1)
"$netc" build "$tmp/lm.net" --target '' --no-chunk-loss -o "$tmp/lm_whole.netm" 2>/dev/null
sliced=$("$netc" inspect "$tmp/lm.netm" | grep -c ' cross_entropy lm.net:3')
whole=$("$netc" inspect "$tmp/lm_whole.netm" | grep -c ' cross_entropy lm.net:3')
if ! grep -q 'chunk-loss: cross_entropy over %[0-9]* (output loss) computed in 8 slices of axis 1' <<<"$report" ||
   [[ $(lm_peak "$tmp/lm.netm") -ge $(lm_peak "$tmp/lm_whole.netm") ]] || [[ $sliced -le $whole ]]; then
  echo "FAIL: chunked forward loss ($sliced against $whole cross-entropy kernels)"; echo "$report"; fail=$((fail + 1))
fi
# netc train with dropout on the CPU: it learns, and a run killed after step 25 and
# resumed from its checkpoint at step 20 draws the masks the uninterrupted run drew
# (@step is the step count, which the checkpoint restores): the same losses
n=$((n + 1))
for _ in $(seq 200); do printf 'the quick brown fox jumps over the lazy dog. '; done > "$tmp/fox.txt"
dtrain=(train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --epochs 1 --max-steps 60 --device cpu --seed 1)
dlosses() { grep '"train_loss"' "$1" | grep -v test_loss | sed 's/.*"step":\([0-9]*\).*"train_loss":\([-0-9.e]*\).*/\1 \2/' | awk '$1 > 20'; }
"$netc" "${dtrain[@]}" --metrics "$tmp/d_full.jsonl" 2>"$tmp/d_full.log"
NETC_TEST_KILL_AFTER_STEP=25 "$netc" "${dtrain[@]}" --checkpoint-dir "$tmp/dck" --checkpoint-every 10 >/dev/null 2>&1
"$netc" "${dtrain[@]}" --checkpoint-dir "$tmp/dck" --resume --metrics "$tmp/d_res.jsonl" 2>"$tmp/d_res.log"
dloss=$(grep -o '"test_loss":[0-9.]*' "$tmp/d_full.jsonl" | tail -1 | cut -d: -f2)
if ! awk -v l="$dloss" 'BEGIN { exit !(l < 3.0) }' || ! grep -q 'resumed from' "$tmp/d_res.log" ||
   [[ -z "$(dlosses "$tmp/d_res.jsonl")" ]] || ! diff <(dlosses "$tmp/d_full.jsonl") <(dlosses "$tmp/d_res.jsonl"); then
  echo "FAIL: train with dropout (test loss $dloss, below 3 wanted; resumed losses must equal the uninterrupted run's)"
  cat "$tmp/d_full.log" "$tmp/d_res.log"; fail=$((fail + 1))
fi
# a checkpoint loads as weights into netc run (its optimizer and loop state passed over; it was
# refused: "tensor '@train_state' is not a parameter"), and a training step's module says
# where its optimizer state is when given weights without it
"$netc" build "$src/tests/train/drop_lm.net" --target '' -o "$tmp/drop.netm" 2>/dev/null
"$netc" train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 3 --device cpu --save "$tmp/drop3.st" \
  --checkpoint-dir "$tmp/dck3" >/dev/null 2>&1
expect 0 "running on cpu" run "$tmp/drop.netm" --dim B=2 --random-inputs 1 --weights "$tmp/dck3/checkpoint.safetensors" --output "$tmp/ck_out"
expect 0 "running on cpu" run "$tmp/drop.netm" --dim B=2 --random-inputs 1 --weights "$tmp/drop3.st" --output "$tmp/st_out"
n=$((n + 1))
cmp -s "$tmp/ck_out/loss.npy" "$tmp/st_out/loss.npy" || { echo "FAIL: a checkpoint's weights run otherwise than --save's"; fail=$((fail + 1)); }
expect 1 "parameter 'wte.adam_m' is missing (optimizer state: netc train --save writes the weights only; a checkpoint of --checkpoint-dir holds it too)" \
  run "$tmp/drop.netm" --entry train --dim B=2 --random-inputs 1 --weights "$tmp/drop3.st"
# a run without --resume into a directory holding a checkpoint warns that it will replace it
n=$((n + 1))
"$netc" train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu \
  --checkpoint-dir "$tmp/dck3" 2>"$tmp/fresh.log" >/dev/null
grep -qz "warning: $tmp/dck3/checkpoint.safetensors holds a checkpoint; this run starts from scratch and replaces it at its first
  hint: give --resume to continue from it" "$tmp/fresh.log" ||
  { echo "FAIL: no warning before a checkpoint is replaced"; cat "$tmp/fresh.log"; fail=$((fail + 1)); }
# dropouts written without a seed draw their own masks (one seed each, also
# across the layers of a repeat); a seed written by hand is kept
n=$((n + 1))
cat > "$tmp/d2.net" <<'NET'
model d2(x: f32[B, 8]) -> (y: f32)
{
  param w: f32[8, 8] = xavier
  repeat 2 as i {
    x = dropout(x @ w, p: 0.5)
  }
  return sum(dropout(x, p: 0.5, seed: 9))
}
train d2 { optimizer sgd(lr: 0.1) }
NET
seeds=$("$netc" build "$tmp/d2.net" --entry train --dump-ir --target '' -o "$tmp/d2.netm" 2>&1 | grep -o 'dropout.*seed=[0-9]*' | sed 's/.*seed=//' | sort -u | tr '\n' ' ')
if [[ $(wc -w <<<"$seeds") -ne 3 || " $seeds" != *" 9 "* ]]; then
  echo "FAIL: dropout seeds: want two defaults of their own and 9, got [$seeds]"; fail=$((fail + 1))
fi
# a damaged NVRTC cache entry is a miss: compiled again (one note on stderr),
# overwritten, and the module is the same as a clean build's (NVRTC only);
# a cold build says what it compiles and how long it took, a cached one is quiet
if "$netc" --version | grep -q 'NVRTC [0-9]'; then
  n=$((n + 1))
  cache=(env NETC_CACHE_DIR="$tmp/nvcache")
  "${cache[@]}" "$netc" build "$src/tests/train/tiny.net" --target sm_80,compute_80 -o "$tmp/clean.netm" 2>"$tmp/nv0.log"
  if ! grep -q '^netc: NVRTC: compiling [0-9]* KiB of CUDA C for sm_80, compute_80 (once' "$tmp/nv0.log" ||
     ! grep -q '^netc: NVRTC: done in [0-9.]* s$' "$tmp/nv0.log"; then
    echo "FAIL: a cold build's progress lines"; cat "$tmp/nv0.log"; fail=$((fail + 1))
  fi
  for e in "$tmp"/nvcache/*; do
    case $e in
      *sm_80*) printf garbage > "$e" ;;
      *) head -c 100 "$e" > "$e.cut" && mv "$e.cut" "$e" ;;   # PTX, truncated
    esac
  done
  entries=$(ls "$tmp/nvcache" | wc -l)
  "${cache[@]}" "$netc" build "$src/tests/train/tiny.net" --target sm_80,compute_80 -o "$tmp/rebuilt.netm" 2>"$tmp/nv.log"
  "${cache[@]}" "$netc" build "$src/tests/train/tiny.net" --target sm_80,compute_80 -o "$tmp/cached.netm" 2>"$tmp/nv2.log"
  if ! cmp -s "$tmp/clean.netm" "$tmp/rebuilt.netm" || ! cmp -s "$tmp/clean.netm" "$tmp/cached.netm" ||
     [[ $(grep -c 'NVRTC cache entry .*compiling it again' "$tmp/nv.log") != "$entries" || -s "$tmp/nv2.log" || $entries -lt 2 ]]; then
    echo "FAIL: damaged NVRTC cache entries ($entries): the rebuilt module differs, or the notes are wrong"
    cat "$tmp/nv.log" "$tmp/nv2.log"; fail=$((fail + 1))
  fi
fi
# a chain of 2500 adds is cut into fused kernels of at most 64 ops (CUDA_FUSE_MAX_OPS), 40
# launches of 2 distinct kernels; NVRTC (where netc has it) compiles them in seconds (2.8 s
# on 2 cores for the three default targets, uncached), where one kernel of 2500 took minutes
printf 'model m(x: f32[B, 4]) {\n  repeat 50 { repeat 50 { x = x + 1.0 } }\n  return x\n}\n' > "$tmp/chain.net"
n=$((n + 1))
fused=$("$netc" build "$tmp/chain.net" --target '' --report -o "$tmp/chain.netm" 2>&1 | grep -c '^fuse: ')
kernels=$("$netc" inspect "$tmp/chain.netm" 2>&1 | sed -n 's/.* \([0-9]*\) launches, \([0-9]*\) kernels$/\1 \2/p')
[[ $fused == 40 && $kernels == "40 2" ]] || { echo "FAIL: the chain of 2500 adds: $fused fused kernels, launches and kernels '$kernels' (want 40, '40 2')"; fail=$((fail + 1)); }
if "$netc" inspect "$tmp/ptx.netm" 2>/dev/null | grep -q '^targets: compute_80'; then
  n=$((n + 1))
  start=$SECONDS
  NETC_NO_CACHE=1 timeout 300 "$netc" build "$tmp/chain.net" -o "$tmp/chain_nvrtc.netm" 2>/dev/null; rc=$?
  if ((rc != 0 || SECONDS - start > 60)); then
    echo "FAIL: building the chain of 2500 adds with NVRTC: exit $rc after $((SECONDS - start)) s (want 0, within 60 s)"; fail=$((fail + 1))
  fi
fi
# --random-inputs draws an integer input below what its uses accept: a 4-class
# model's labels in [0, 4), indices in [0, rows) of a 4-row table (through a
# reshape), the smaller of a 5-class loss and a 3-row table for one read by both;
# each max is reached with B = 64 (it was [0, 10): a target or index out of range)
printf 'model cls(x: f32[B, 8], labels: i32[B]) -> (loss: f32, top: f32) {\n  param w: f32[8, 4] = normal(0.1)\n  return cross_entropy(matmul(x, w), labels), max(f32(labels))\n}\n' > "$tmp/cls.net"
printf '%s\n' 'model emb(x: f32[B, 5], ids: i32[B, 6], both: i32[B]) -> (rows: f32[B * 6, 2], top: f32, loss: f32, both_top: f32) {' \
  '  param table: f32[4, 2] = normal(0.1)' '  param small: f32[3, 5] = normal(0.1)' \
  '  loss = cross_entropy(x, both) + sum(gather(small, both))' \
  '  return gather(table, reshape(ids, [B * 6])), max(f32(ids)), loss, max(f32(both))' '}' > "$tmp/emb.net"
for m in cls emb; do
  n=$((n + 1))
  "$netc" build "$tmp/$m.net" --target '' -o "$tmp/$m.netm" 2>/dev/null
  got=$("$netc" run "$tmp/$m.netm" --dim B=64 --random-inputs 1 --device cpu 2>&1)
  case $m in
    cls) want=("output top: f32[] mean 3 first 3") ;;
    emb) want=("output top: f32[] mean 3 first 3" "output both_top: f32[] mean 2 first 2") ;;
  esac
  for w in "${want[@]}"; do
    [[ $got == *"$w"* ]] || { echo "FAIL: --random-inputs on $m.net: want '$w', got: $got"; fail=$((fail + 1)); break; }
  done
done
# netc help lists every option (from the option table); README's table names each one too
n=$((n + 1))
listed=$("$netc" help | sed -n 's/^  \(-[-A-Za-z]*\).*/\1/p')
for opt in $listed; do
  case $opt in --no-cast-hoist|--no-join|--no-cse|--no-recompute|--no-dce|--dump-ir) continue ;; esac   # README: --no-PASS, --dump-ir
  grep -qF -- "\`$opt" "$src/README.md" || { echo "FAIL: README's table of options does not name $opt"; fail=$((fail + 1)); }
done
[[ $listed == *--resume* && $listed == *--memory-budget* ]] || { echo "FAIL: netc help lists [$listed]"; fail=$((fail + 1)); }
# netc help names the commands of each option, and exactly those take it:
# every other refuses it by name (one table says both)
n=$((n + 1)) checked=0
while IFS=';' read -r opt arg cmds; do
  case $arg in
    NAME=VALUE) val=N=1 ;; NAME=FILE.npy) val=x=$tmp/none.npy ;; forward*) val=forward ;; cpu*) val=cpu ;;
    SIZE) val=4GiB ;; LIST) val=sm_80 ;; X) val=0.1 ;; '') val= ;; *) val=1 ;;
  esac
  checked=$((checked + 1))
  for cmd in check build run inspect train; do
    out=$(timeout 60 "$netc" "$cmd" "$opt" ${val:+"$val"} "$tmp/none.file" 2>&1 >/dev/null)
    refused=no; [[ $out == *"netc $cmd does not take $opt"* ]] && refused=yes
    listed=no; [[ ",$cmds," == *",$cmd,"* ]] && listed=yes
    [[ $refused != "$listed" ]] || { echo "FAIL: netc help lists $opt for [$cmds], but netc $cmd: $out"; fail=$((fail + 1)); }
  done
done < <("$netc" help | sed -n 's/^  \(-[-A-Za-z]*\)\( [^ (]*\)\{0,1\}  *(\([a-z, ]*\)).*/\1;\2;\3/p' | tr -d ' ')
(( checked >= 35 )) || { echo "FAIL: netc help: only $checked options with their commands"; fail=$((fail + 1)); }
# README's table of options names the same commands for each as netc help
n=$((n + 1)) checked=0
declare -A help_cmds
while IFS=';' read -r opt arg cmds; do help_cmds[$opt]=$cmds; done \
  < <("$netc" help | sed -n 's/^  \(-[-A-Za-z]*\)\( [^ (]*\)\{0,1\}  *(\([a-z, ]*\)).*/\1;\2;\3/p' | tr -d ' ')
while IFS='|' read -r _ names cmds _; do
  want=$(grep -oE '\b(check|build|run|inspect|train)\b' <<<"$cmds" | sort | tr '\n' ' ')
  for opt in $(grep -oE '`-[-A-Za-z]+' <<<"$names" | tr -d '`'); do
    [[ -n ${help_cmds[$opt]:-} ]] || continue   # --no-PASS: a pattern
    checked=$((checked + 1))
    got=$(tr ',' '\n' <<<"${help_cmds[$opt]}" | sort | tr '\n' ' ')
    [[ $got == "$want" ]] || { echo "FAIL: README gives $opt to [$want], netc help to [$got]"; fail=$((fail + 1)); }
  done
done < <(grep -E '^\| `-' "$src/README.md" | sed 's/\\|/\//g')   # forward\|train: not a column
(( checked >= 30 )) || { echo "FAIL: README's table: only $checked options compared with netc help"; fail=$((fail + 1)); }
# a bf16 iota over a symbolic T counts exactly only to 256: a session binding
# T past 257 is refused by name (it ran, with 256 where 257 belonged); 257 runs
printf 'model pos(x: bf16[B, T]) { return x + iota([B, T], axis: 1, dtype: bf16) }\n' > "$tmp/pos.net"
"$netc" build "$tmp/pos.net" --target '' -o "$tmp/pos.netm" 2>/dev/null
expect 1 "T = 300 is too long for the bf16 iota" run "$tmp/pos.netm" --dim B=2 --dim T=300 --random-inputs 1 --device cpu
expect 0 "running on cpu" run "$tmp/pos.netm" --dim B=2 --dim T=257 --random-inputs 1 --device cpu
# a symbolic size beside an i32 tensor is an i32 (dim_value): a binding past
# 2^31 - 1 is refused by name (the count of ones it was wrapped, -2.09e9 at 1300)
printf 'model cube(x: i32[B]) { return x + B * B * B }\n' > "$tmp/cube.net"
"$netc" build "$tmp/cube.net" --target '' -o "$tmp/cube.netm" 2>/dev/null
expect 1 "B*B*B = 2197000000 is too large for the i32 value of that size at $tmp/cube.net:1" \
  run "$tmp/cube.netm" --dim B=1300 --random-inputs 1 --device cpu
expect 0 "running on cpu" run "$tmp/cube.netm" --dim B=1290 --random-inputs 1 --device cpu
# a training step that returns a parameter: its output is the value the step
# read, the forward pass's; it stopped with 'output w is parameter w itself,
# changed since the last run read it' (the step had updated it)
printf '%s\n' 'model rp(x: f32[B, 4]) -> (y: f32[B, 2], w: f32[4, 2]) {' '  param w: f32[4, 2] = xavier' \
  '  return x @ w, w' '}' 'train rp(t: f32[B, 2]) {' '  loss = mean(square(y - t))' '  optimizer sgd(lr: 0.5)' '}' > "$tmp/rp.net"
"$netc" build "$tmp/rp.net" --target '' -o "$tmp/rp.netm" 2>/dev/null
expect 0 "running on cpu" run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --output "$tmp/rpt"
expect 0 "running on cpu" run "$tmp/rp.netm" --dim B=3 --random-inputs 1 --device cpu --output "$tmp/rpf"
n=$((n + 1))
cmp -s "$tmp/rpt/w.npy" "$tmp/rpf/w.npy" || { echo "FAIL: the step's output w is not the forward pass's w"; fail=$((fail + 1)); }
# an option given where it does nothing says so, with what to do instead (each was read by
# nothing without a word); an option given as netc's default would be does not
says() {  # status fragment args...: as expect, for a command that says more as it works (netc train)
  local want=$1 frag=$2; shift 2
  n=$((n + 1))
  out=$(timeout 120 "$netc" "$@" 2>&1 >/dev/null); got=$?
  if [[ $got != "$want" || $out != *"$frag"* ]]; then echo "FAIL: netc $*"; echo "  exit $got (want $want), stderr: $out"; fail=$((fail + 1)); fi
}
quiet() {  # args...: netc succeeds and says no warning
  n=$((n + 1))
  out=$(timeout 120 "$netc" "$@" 2>&1 >/dev/null); got=$?
  if [[ $got != 0 || $out == *warning* ]]; then echo "FAIL: netc $*: a warning (or exit $got)"; echo "$out"; fail=$((fail + 1)); fi
}
unsliced="has no effect: the model has no loss of the form cross_entropy(matmul(h, W, transpose_b: true)) over 4096 or more classes to slice
  hint: drop --loss-slices: only such a large-vocabulary loss is sliced (a smaller one's logits are small)"
expect 0 "netc: warning: --loss-slices 4 $unsliced" build "$src/examples/fashion_mlp.net" --loss-slices 4 --target '' -o "$tmp/ls.netm"
expect 0 "netc: warning: --loss-slices 3 $unsliced" check "$src/examples/fashion_mlp.net" --dump-ir --loss-slices 3
says 0 "netc: warning: --loss-slices 2 $unsliced" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --loss-slices 2
quiet build "$src/examples/fashion_mlp.net" --no-chunk-loss --target '' -o "$tmp/ls.netm"   # asks for the whole loss, and gets it
quiet build "$src/examples/gpt2.net" --set L=1 --dim B=2 --dim T=64 --loss-slices 2 --target '' -o "$tmp/ls.netm"   # the train entry's loss is sliced
# a value option given twice is read at its last (a later one overriding an earlier, as a script may): the first is named
expect 0 "netc: warning: -o $tmp/a.netm is overridden by -o $tmp/b.netm, given after it
  hint: give -o once: only the last one given is read" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/a.netm" -o "$tmp/b.netm"
expect 0 "netc: warning: --loss-slices 4 is overridden by --no-chunk-loss, given after it
  hint: give one of --loss-slices and --no-chunk-loss: only the last one given is read" \
  build "$src/examples/fashion_mlp.net" --loss-slices 4 --no-chunk-loss --target '' -o "$tmp/ls.netm"
quiet build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/ls.netm" -o "$tmp/ls.netm" --loss-slices 1 --no-chunk-loss --no-fuse --no-fuse
says 0 "netc: warning: --epochs 2 is overridden by --epochs 1, given after it" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --epochs 2 --epochs 1
# netc train: checkpoints need a directory, and a target a GPU
says 0 "netc: warning: --checkpoint-every 5 has no effect without --checkpoint-dir: no checkpoint is written
  hint: give --checkpoint-dir D to keep checkpoints in D, or drop --checkpoint-every" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --checkpoint-every 5
says 0 "netc: warning: --checkpoint-every 0 has no effect without --checkpoint-dir" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --checkpoint-every 0
quiet train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu
says 0 "netc: warning: --target sm_80 has no effect: training runs on the CPU executor
  hint: drop --target, or give --device gpu to train on the GPU" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --target sm_80
# check runs no pass without --dump-ir: a pass turned off is refused, as --no-fuse is
expect 2 "netc check reads --no-cse only with --dump-ir" check "$src/examples/fashion_mlp.net" --no-cse
quiet check "$src/examples/fashion_mlp.net" --no-cse --dump-ir
# netc run: random values for no input
expect 0 "netc: warning: --random-inputs 3 has no effect: every input the entry point reads is given with --input
  hint: drop --random-inputs" run "$tmp/bfin.netm" --input "x=$tmp/bfin/y.npy" --device cpu --random-inputs 3
# -Werror makes netc's own warnings about the command line errors too (they were
# warnings whatever -Werror said), a bad command line's status 2; given before them or after
expect 2 "netc: error: -o $tmp/a.netm is overridden by -o $tmp/b.netm, given after it [-Werror]
  hint: give -o once: only the last one given is read" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/a.netm" -o "$tmp/b.netm" -Werror
expect 2 "netc: error: --loss-slices 4 is overridden by --no-chunk-loss, given after it [-Werror]" \
  build "$src/examples/fashion_mlp.net" -Werror --loss-slices 4 --no-chunk-loss --target '' -o "$tmp/wl.netm"
expect 2 "netc: error: --loss-slices 4 ${unsliced%%$'\n'*} [-Werror]" build "$src/examples/fashion_mlp.net" --loss-slices 4 --target '' -Werror -o "$tmp/wl.netm"
n=$((n + 1))
[[ ! -e "$tmp/wl.netm" ]] || { echo "FAIL: a build failed by -Werror wrote its module"; fail=$((fail + 1)); }
expect 2 "netc: error: --loss-slices 3 ${unsliced%%$'\n'*} [-Werror]" check "$src/examples/fashion_mlp.net" --dump-ir --loss-slices 3 -Werror
expect 2 "netc: error: --checkpoint-every 5 has no effect without --checkpoint-dir: no checkpoint is written [-Werror]" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --checkpoint-every 5 -Werror
says 2 "netc: error: --target sm_80 has no effect: training runs on the CPU executor [-Werror]
  hint: drop --target, or give --device gpu to train on the GPU" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --target sm_80 -Werror
says 2 "netc: error: --epochs 2 is overridden by --epochs 1, given after it [-Werror]" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --epochs 2 --epochs 1 -Werror
expect 2 "netc: error: $tmp/dck3/checkpoint.safetensors holds a checkpoint; this run starts from scratch and replaces it at its first [-Werror]
  hint: give --resume to continue from it" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --checkpoint-dir "$tmp/dck3" -Werror
quiet build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/a.netm" -o "$tmp/a.netm" -Werror   # the same value twice asks for one thing
expect 2 "netc run does not take -Werror: it is an option of check, build and train" run "$tmp/bfin.netm" --input "x=$tmp/bfin/y.npy" --device cpu --random-inputs 3 -Werror
# --loss-slices N past the rows a loss has to split gets that many, and says so (it was
# cut down without a word); as many as there are rows is quiet
expect 0 "netc: warning: --loss-slices 8 asks for more slices than the loss has rows to split: its logits have 4 along the axis sliced, so it is computed in 4 slices
  hint: give --loss-slices 4 or less" build "$src/examples/gpt2.net" --set L=1 --dim B=2 --dim T=4 --loss-slices 8 --target '' -o "$tmp/ls.netm"
expect 2 "netc: error: --loss-slices 5 asks for more slices than the loss has rows to split: its logits have 4 along the axis sliced, so it is computed in 4 slices [-Werror]" \
  check "$src/examples/gpt2.net" --set L=1 --dim B=2 --dim T=4 --loss-slices 5 --dump-ir -Werror
quiet build "$src/examples/gpt2.net" --set L=1 --dim B=2 --dim T=4 --loss-slices 4 --target '' -o "$tmp/ls.netm"
# a sliced loss with no trained parameter behind its logits (an input's rows, a buffer's
# weight) has no backward to interleave: --report says so (it said 'each with its backward')
printf '%s\n' 'model ng(x: f32[B, 4, 8], t: i32[B, 4]) -> (y: f32[B, 8], loss: f32) {' '  param p: f32[8] = ones' \
  '  buffer w: f32[4096, 8] = zeros' '  return x[:, 0, :] * p, cross_entropy(matmul(x, w, transpose_b: true), t)' '}' \
  'train ng { optimizer sgd(lr: 0.1) }' > "$tmp/nograd.net"
n=$((n + 1))
"$netc" build "$tmp/nograd.net" --entry train --loss-slices 2 --report --target '' -o "$tmp/ng.netm" 2>&1 |
  grep -q "computed in 2 slices of axis 1 with no backward, no trained parameter being behind its logits" ||
  { echo "FAIL: a sliced loss with nothing trained behind it is reported with a backward"; fail=$((fail + 1)); }
# a scalar input from the command line (--input @lr=0.25): a finite number, as a step needs;
# NaN or inf is refused, from the command line or a file (a NaN @lr ran a step of NaNs)
expect 1 "netc: --input @lr=NaN: a finite number is needed (input '@lr' is f32[])" \
  run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input @lr=NaN
expect 1 "netc: --input @lr=-inf: a finite number is needed" run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input @lr=-inf
expect 1 "netc: --input @lr=0x1p3: a decimal number is needed (1.5e-3), not hex" \
  run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input @lr=0x1p3
expect 1 "netc: --input x=2: a number gives a scalar input only; give a .npy file (input 'x' is f32[B, 4])" \
  run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input x=2
expect 0 "running on cpu" run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input @lr=0.25
n=$((n + 1))   # given, it is not filled with the train section's 0.5
out=$("$netc" run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input @lr=0.25 2>&1 >/dev/null)
[[ $out != *"@lr"* ]] || { echo "FAIL: --input @lr=0.25 and still: $out"; fail=$((fail + 1)); }
hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (), }"
printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n\x00\x00\xc0\x7f' "$hdr" $((117 - ${#hdr})) '' > "$tmp/lrnan.npy"
expect 1 "netc: input '@lr': $tmp/lrnan.npy holds nan: a training step's @lr must be a finite number" \
  run "$tmp/rp.netm" --entry train --dim B=3 --random-inputs 1 --device cpu --input "@lr=$tmp/lrnan.npy"
# '-' and '' as files: refused as a bad command line ('-o -' wrote a file named '-';
# '-o ""' said ': write failed'; '--data ""' looked for /train-images-idx3-ubyte)
stdio="'-': netc reads and writes named files, not standard input or output; ./- names a file '-'"
expect 2 "netc: -o $stdio" build "$src/examples/fashion_mlp.net" --target '' -o -
expect 2 "netc: --output $stdio" run "$tmp/m.netm" --dim B=2 --random-inputs 1 --output -
expect 2 "netc: $stdio" check -
expect 2 "netc: a file name is empty ('')" check ''
expect 2 "netc: -o needs a value: a file name, got ''" build "$src/examples/fashion_mlp.net" --target '' -o ''
expect 2 "netc: --data needs a value: a data set's directory or a text file, got ''" train "$src/examples/fashion_mlp.net" --data ''
expect 1 "no model named '-'" check "$src/examples/fashion_mlp.net" --model -
# random inputs too large to make are refused by name (the run read them from a
# one-byte buffer and crashed)
expect 1 "netc: input images holds 3136000000 values at these dims, too many to fill with random values" \
  run "$tmp/m.netm" --dim B=4000000 --random-inputs 1 --device cpu
# a --target list with an empty or repeated name is refused (each was passed over, or built twice)
expect 2 "netc: --target: an empty name in the list 'sm_80,,sm_90'" build "$src/examples/fashion_mlp.net" --target sm_80,,sm_90 -o "$tmp/t.netm"
expect 2 "netc: --target: an empty name in the list ','" build "$src/examples/fashion_mlp.net" --target , -o "$tmp/t.netm"
expect 2 "netc: --target: sm_80 is in the list 'sm_80,sm_80' twice" build "$src/examples/fashion_mlp.net" --target sm_80,sm_80 -o "$tmp/t.netm"
# version and help read no more arguments (they were dropped)
expect 2 "netc: netc version takes nothing more, got 'foo'" version foo
expect 2 "netc: netc help --bogus: no such command" help --bogus
expect 2 "netc: netc help takes nothing more, got 'x'" help build x
# netc help CMD (and netc CMD --help): CMD's lines and the options it takes, no others
n=$((n + 1))
build_help=$("$netc" help build 2>&1) || { echo "FAIL: netc help build exits non-zero"; fail=$((fail + 1)); }
[[ $build_help == *"  build FILE -o M.netm"* && $build_help == *--memory-budget* && $build_help == *--no-cse* ]] ||
  { echo "FAIL: netc help build lacks build's line or options: $build_help"; fail=$((fail + 1)); }
[[ $build_help != *--epochs* && $build_help != *"  train FILE"* ]] || { echo "FAIL: netc help build shows train's: $build_help"; fail=$((fail + 1)); }
# --accumulate and --memory-budget apply to the training step a plain build makes too (help said: with --entry train)
n=$((n + 1))
joined=$(tr '\n' ' ' <<<"$build_help" | tr -s ' ')
[[ $joined == *"N micro-batches per optimizer step (build: to its training step, built unless --entry forward)"* &&
   $joined == *"peak fits SIZE (4GiB, 512MiB; all dims bound; build: to its training step, built unless --entry forward)"* ]] ||
  { echo "FAIL: netc help build says --accumulate, --memory-budget need --entry train: $joined"; fail=$((fail + 1)); }
n=$((n + 1))
[[ $("$netc" train --help 2>&1) == "$("$netc" help train 2>&1)" && $("$netc" help train) == *--epochs* ]] ||
  { echo "FAIL: netc train --help is not netc help train's text"; fail=$((fail + 1)); }
# an output that is a file the command reads is refused before it is written (build -o m.net
# wrote the module over its source, train --save the weights over it, --metrics over the data)
cp "$src/tests/train/drop_lm.net" "$tmp/own.net"; cp "$tmp/fox.txt" "$tmp/own.txt"
expect 2 "netc: -o $tmp/own.net is the .net file built, which this command reads: give another file name" build "$tmp/own.net" --target '' -o "$tmp/own.net"
expect 2 "netc: --save $tmp/own.net is the .net file trained, which this command reads" \
  train "$tmp/own.net" --data "$tmp/own.txt" --batch 16 --max-steps 1 --device cpu --save "$tmp/own.net"
expect 2 "netc: --metrics $tmp/../${tmp##*/}/own.txt is the --data file, which this command reads" \
  train "$tmp/own.net" --data "$tmp/own.txt" --batch 16 --max-steps 1 --device cpu --metrics "$tmp/../${tmp##*/}/own.txt"
n=$((n + 1))
cmp -s "$tmp/own.net" "$src/tests/train/drop_lm.net" && cmp -s "$tmp/own.txt" "$tmp/fox.txt" || { echo "FAIL: an input was written over"; fail=$((fail + 1)); }
expect 2 "netc: --input '-': netc reads and writes named files" run "$tmp/m.netm" --input images=-
# a damaged module's output name with a '/' is written nowhere (--output D wrote D/../lgt.npy)
mkdir -p "$tmp/esc/out"
LC_ALL=C sed 's|logits|../lgt|g' "$tmp/m.netm" > "$tmp/esc/evil.netm"
expect 1 "" run "$tmp/esc/evil.netm" --dim B=2 --random-inputs 1 --device cpu --output "$tmp/esc/out"
n=$((n + 1))
[[ ! -e "$tmp/esc/lgt.npy" ]] || { echo "FAIL: a module's output was written outside --output"; fail=$((fail + 1)); }
# an --input the entry point does not read (the train section's labels, given to forward)
# warns, with how to give it to the step (it was set for nothing without a word)
hdr="{'descr': '<i4', 'fortran_order': False, 'shape': (2,), }"
printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n\x01\x00\x00\x00\x02\x00\x00\x00' "$hdr" $((117 - ${#hdr})) '' > "$tmp/lab.npy"
expect 0 "netc: warning: --input labels has no effect: the forward entry point does not read it
  hint: drop --input labels, or give --entry train: it is the train section's input" \
  run "$tmp/m.netm" --dim B=2 --random-inputs 1 --device cpu --input "labels=$tmp/lab.npy"
quiet run "$tmp/m.netm" --entry train --dim B=2 --random-inputs 1 --device cpu --input "labels=$tmp/lab.npy"
# nor is it filled by --random-inputs: every input forward reads given, it fills none, and says so
hdr="{'descr': '|u1', 'fortran_order': False, 'shape': (2, 28, 28), }"
{ printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n' "$hdr" $((117 - ${#hdr})) ''; head -c 1568 /dev/zero; } > "$tmp/img.npy"
expect 0 "netc: warning: --random-inputs 1 has no effect: every input the entry point reads is given with --input" \
  run "$tmp/m.netm" --random-inputs 1 --device cpu --input "images=$tmp/img.npy"
# a scalar input not given says it can be a number
expect 1 "input @lr was not set (nrt_session_set_input; netc run: --input @lr=NUMBER or FILE.npy, or --random-inputs SEED" \
  run "$tmp/m.netm" --input "images=$tmp/img.npy" --input "labels=$tmp/lab.npy" --entry train --device cpu
# GPT-2 with T unbound has such a loss, but no constant axis to slice it along: the warning
# says to bind it (it said the model had no such loss)
expect 0 "netc: warning: --loss-slices 2 has no effect: the large-vocabulary loss is sliced along its logits' second-to-last axis, whose size is symbolic here
  hint: bind the logits' axis that is sliced with --dim (T of [B, T, V]: --dim T=1024), or drop --loss-slices" \
  build "$src/examples/gpt2.net" --set L=1 --loss-slices 2 --target '' -o "$tmp/ls.netm"
# a resume with other --epochs where a cosine schedule spans them: refused only where the steps
# done would have had other learning rates (one in warmup was refused, "step 3's: 3e-05, not
# 3e-05"), and then with the digits that tell the two apart (%.4g printed 0.01 twice)
{ sed '/^train/,$d' "$src/tests/train/drop_lm.net"; printf 'train drop_lm {\n  optimizer adam(lr: 1e-2)\n  schedule cosine(warmup: 2)\n}\n'; } > "$tmp/cos.net"
ctrain=(train "$tmp/cos.net" --data "$tmp/fox.txt" --batch 16 --device cpu)
"$netc" "${ctrain[@]}" --epochs 10 --max-steps 2 --checkpoint-dir "$tmp/cw" >/dev/null 2>&1
"$netc" "${ctrain[@]}" --epochs 10 --max-steps 4 --checkpoint-dir "$tmp/cp" >/dev/null 2>&1
says 0 "netc: the checkpoint was made with --epochs 10; this run goes on to --epochs 11 (the steps done took the learning rates these give them)" \
  "${ctrain[@]}" --epochs 11 --max-steps 3 --checkpoint-dir "$tmp/cw" --resume
says 1 "the cosine schedule spans the run's epochs, so its learning rates would be another run's (step 5's: 0.00999981, not 0.00999977); resume with --epochs 10" \
  "${ctrain[@]}" --epochs 11 --max-steps 5 --checkpoint-dir "$tmp/cp" --resume
# a resume at --max-steps runs no step: no rate or memory of one (it said "0 samples/s", "values held 0.0 MiB")
n=$((n + 1))
out=$("$netc" "${ctrain[@]}" --epochs 10 --max-steps 4 --checkpoint-dir "$tmp/cp" --resume 2>&1 >/dev/null)
[[ $out == *"
done: 4 steps, none in this run: no rate or step memory to report" && $out == *"no step of it in this run, waited"* &&
   $out != *samples/s* && $out != *"CPU memory"* ]] || { echo "FAIL: a resume at --max-steps reports a rate or memory: $out"; fail=$((fail + 1)); }
# a buffer too large is named whole however long its input's name (it was cut at 95 characters, the message at 383)
long=$(printf 'p%.0s' {1..400})
printf 'model l(%s: f32[B, 4096]) -> (y: f32[B, 4096]) {\n  return %s * 2.0\n}\n' "$long" "$long" > "$tmp/long_input.net"
"$netc" build "$tmp/long_input.net" --target '' -o "$tmp/long_input.netm" 2>/dev/null
expect 1 "%0 (input $long: f32[B, 4096], long_input.net:1) would hold 4503599627370496 elements" inspect "$tmp/long_input.netm" --dim B=1099511627776
# a symbolic dim that no size binds, where a parameter's shape takes it (through nn.linear) or the
# data's shape would, says to bind it with --dim, with the data's size (it said only that
# parameter shapes are fixed, or that the shapes differ)
printf 'import nn\nmodel r(x: f32[B, F]) -> (pred: f32[B, 1]) {\n  return nn.linear(x, 1)\n}\n' > "$tmp/symparam.net"
says 1 "nn.net:10:21: error: parameter 'weight' has a symbolic dimension F
    param weight: f32[In, out] = xavier
                      ^
  hint: parameter and buffer shapes are fixed when the model is built: bind F with --dim F=N" check "$tmp/symparam.net"
mkdir -p "$tmp/symnpy"
for split in train test; do
  { npy_header "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 4), }"; head -c 128 /dev/zero; } > "$tmp/symnpy/${split}_x.npy"
  { npy_header "{'descr': '<f4', 'fortran_order': False, 'shape': (8, 1), }"; head -c 32 /dev/zero; } > "$tmp/symnpy/${split}_y.npy"
done
printf 'import nn\nmodel r(x: f32[B, 4]) -> (pred: f32[B, 1]) {\n  return nn.linear(x, 1)\n}\ntrain r(t: f32[B, K]) {\n  loss = nn.mse(pred, t[:, 0:1])\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/symdata.net"
expect 1 "netc: the train input t is f32[B, K]; the training set has f32 targets of 1 (hint: bind K with --dim K=1)" \
  train "$tmp/symdata.net" --data "$tmp/symnpy" --batch 4 --device cpu
says 0 "done: 2 steps" train "$tmp/symdata.net" --data "$tmp/symnpy" --batch 4 --device cpu --dim K=1
# an epoch a resume only evaluates has no rate or time in the metrics (samples_per_s was 0)
rm -f "$tmp/cpm.jsonl"
says 0 "no step of it in this run" "${ctrain[@]}" --epochs 10 --max-steps 4 --checkpoint-dir "$tmp/cp" --resume --metrics "$tmp/cpm.jsonl"
n=$((n + 1))
cpm=$(cat "$tmp/cpm.jsonl")
[[ $cpm == '{"epoch":1,"step":4,"train_loss":'*',"test_loss":'* && $cpm != *samples_per_s* && $cpm != *epoch_seconds* ]] ||
  { echo "FAIL: an epoch only evaluated has a rate or time in the metrics: $(cat "$tmp/cpm.jsonl")"; fail=$((fail + 1)); }
# a file name too long to join with a file's (D/checkpoint.safetensors in 4 KiB) or to show in a
# message is refused before any work (a 4075-byte --checkpoint-dir trained an epoch, then failed
# with its message cut before the reason; a 1000-byte --output named the path alone)
long=$(printf 'd%.0s' {1..1000})
expect 2 "netc: --output dddddddddddddddddddddddddddddddddddddddd...: a name of 1000 bytes; netc takes file names of up to 960 bytes" \
  run "$tmp/m.netm" --dim B=2 --random-inputs 1 --device cpu --output "$long"
expect 2 "netc: --checkpoint-dir /tmp/" train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --checkpoint-dir "$tmp/$long/$long"
expect 2 "netc: dddddddddddddddddddddddddddddddddddddddd...: a name of 1002 bytes; netc takes file names of up to 960 bytes" check "$long.n"
# --help after a command's other arguments is its help (it was an unknown option)
n=$((n + 1))
[[ $("$netc" build "$src/examples/fashion_mlp.net" -o "$tmp/h.netm" --help 2>&1) == "$("$netc" help build 2>&1)" ]] ||
  { echo "FAIL: netc build FILE -o M --help is not netc help build's text"; fail=$((fail + 1)); }
expect 0 "" run "$tmp/m.netm" --dim B=-2 -h
# a negative --profile count is a bad count (it was an unknown option '-3'); a count past the
# range says the range (--batch 99999999999999 'needs a positive integer')
expect 2 "netc: --profile takes a run count from 1 to 10000, got '-3'" inspect "$tmp/m.netm" --profile -3
expect 2 "netc: --batch needs a positive integer up to 2^40, got '99999999999999'" train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --batch 99999999999999
# one step, one epoch, one input: no plural (it said "done: 1 steps", "all 1 epochs done", "has 1 inputs")
rm -rf "$tmp/one"
says 0 "
done: 1 step in " train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu
head -c 200 "$tmp/fox.txt" > "$tmp/fox200.txt"
"$netc" train "$src/tests/train/drop_lm.net" --data "$tmp/fox200.txt" --batch 16 --device cpu --checkpoint-dir "$tmp/one" >/dev/null 2>&1
says 0 "netc: $tmp/one/checkpoint.safetensors is of a finished run: its 1 epoch done, step 1; nothing to run (give more --epochs to train on)
done: 1 step, none in this run" train "$src/tests/train/drop_lm.net" --data "$tmp/fox200.txt" --batch 16 --device cpu --checkpoint-dir "$tmp/one" --resume
printf 'import nn\nmodel m(x: u8[B, 28, 28]) -> (logits: f32[B, 10]) {\n  return nn.linear(f32(reshape(x, [B, 784])), 10)\n}\ntrain m(labels: i32[B], w: f32[B]) {\n  loss = cross_entropy(logits, labels) + sum(w)\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/twoy.net"
# (a train section of two inputs was refused; now each is an array by its name, x's too)
expect 1 "nodata/train_x.npy: No such file or directory (the model's input x: train_x.npy holds it, one row per sample; a model of several inputs reads each array by its input's name)" train "$tmp/twoy.net" --data "$tmp/nodata"
# a text file for a model that trains on a data set says so (it said fox.txt/train-images-idx3-ubyte: Not a directory)
expect 1 "netc: --data $tmp/fox.txt is a file, and model fashion_mlp trains on a data set: give a directory of train_x.npy, train_y.npy, test_x.npy, test_y.npy or of Fashion-MNIST's IDX files (a text file feeds a byte-level language model, whose train section takes no input)" \
  train "$src/examples/fashion_mlp.net" --data "$tmp/fox.txt"
# an output that is a file of the --data directory, which train reads, is refused (--metrics
# D/train_x.npy wrote the metrics over the samples); a new file there is fine
mkdir -p "$tmp/dd"; printf 'x' > "$tmp/dd/train_x.npy"; printf 'x' > "$tmp/dd/notes"
expect 2 "netc: --metrics $tmp/dd/train_x.npy is a file of the --data directory, which this command reads: give another file name" \
  train "$src/tests/train/reg.net" --data "$tmp/dd" --metrics "$tmp/dd/train_x.npy"
expect 2 "netc: --save $tmp/dd/notes is a file of the --data directory, which this command reads" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/dd" --save "$tmp/dd/notes"
n=$((n + 1))
[[ $(cat "$tmp/dd/train_x.npy" "$tmp/dd/notes") == xx ]] || { echo "FAIL: a --data file was written over"; fail=$((fail + 1)); }
# a pass that is not there says which are (it said only "no pass named" or "unknown option")
expect 2 "netc: --dump-ir: no pass named 'nope' (the passes: sema, cast-hoist, join, cse, recompute, dce)" check "$src/examples/fashion_mlp.net" --dump-ir=after:nope
expect 2 "netc: unknown option '--no-cs' (--no-PASS skips a pass: cast-hoist, join, cse, recompute, dce)" build "$src/examples/fashion_mlp.net" --no-cs
# a first word that is no command says what it is (an option before the command, a command in
# other case) and lists the commands (it said only "unknown command '--dim'"); netc help --help
# is the help; train without --data names what is missing (it said a .net file was missing too)
expect 2 "netc: '--dim' is not a command: the command comes first, then its options (netc COMMAND [options] FILE...; the commands: check, build, run, inspect, train, help, version)" \
  --dim B=2 build "$src/examples/fashion_mlp.net"
expect 2 "netc: unknown command 'Build' (did you mean 'build'?)" Build "$src/examples/fashion_mlp.net"
expect 2 "netc: unknown command 'frob' (the commands: check, build, run, inspect, train, help, version)" frob
n=$((n + 1))
[[ $("$netc" help --help 2>&1) == "$("$netc" help 2>&1)" ]] || { echo "FAIL: netc help --help is not the help"; fail=$((fail + 1)); }
expect 2 "netc: train needs --data: the data set's directory, or a text file" train "$src/examples/fashion_mlp.net"
# an output that is a FIFO nothing reads is refused, not waited on (build -o waited for a reader;
# train --metrics and --save waited through Ctrl-C and SIGTERM, whose handlers let the open go on)
mkfifo "$tmp/unread.fifo"
expect 1 "netc: $tmp/unread.fifo: a FIFO that nothing reads (start its reader first)" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/unread.fifo"
says 1 "netc: $tmp/unread.fifo: a FIFO that nothing reads (start its reader first)" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --save "$tmp/unread.fifo"
says 1 "netc: cannot write --metrics $tmp/unread.fifo: a FIFO that nothing reads (start its reader first)" \
  train "$src/tests/train/drop_lm.net" --data "$tmp/fox.txt" --batch 16 --max-steps 1 --device cpu --metrics "$tmp/unread.fifo"
# a module file that is empty, cut in its header, or a .net source says which (each said "bad magic")
: > "$tmp/empty40.netm"
expect 1 "empty40.netm: not a netc module (the file is empty)" run "$tmp/empty40.netm"
printf 'NETC' > "$tmp/cut40.netm"
expect 1 "cut40.netm: not a netc module (cut short in its header)" inspect "$tmp/cut40.netm"
expect 1 "fashion_mlp.net: not a netc module: it is text (a .net source is built into a module first: netc build M.net -o M.netm)" \
  inspect "$src/examples/fashion_mlp.net"
# a training set of one sample says so in the singular, and --batch 1 alone (it said "1 samples ... --batch 1 or less")
head -c 40 "$src/README.md" > "$tmp/one40.txt"
expect 2 "the training set has 1 sample, fewer than one batch of 128: give --batch 1" \
  train "$src/examples/char_lm.net" --data "$tmp/one40.txt" --set C=32 --set L=1 --set H=2 --set T=16 --device cpu
[[ $out != *"or less"* ]] || { echo "FAIL: one sample: $out"; fail=$((fail + 1)); }
# weights saved in float64 (NumPy's default) name the dtypes netc reads and the cast (it said only "unsupported dtype F64")
h='{"fc1.weight":{"dtype":"F64","shape":[1],"data_offsets":[0,8]}}'
{ printf "\\x$(printf %02x ${#h})\\0\\0\\0\\0\\0\\0\\0%s" "$h"; printf '\0%.0s' 1 2 3 4 5 6 7 8; } > "$tmp/f64.safetensors"
expect 1 "f64.safetensors: tensor 'fc1.weight': unsupported dtype F64: netc reads F32, F16, BF16, I32, U8 and BOOL (hint: save it as float32: t.float() in PyTorch, a.astype(np.float32) in NumPy)" \
  run "$tmp/m.netm" --dim B=2 --random-inputs 1 --weights "$tmp/f64.safetensors"
# --dim binding the batch axis says so and names the --batch to give (it said the axis "must be a symbolic batch dim such as B")
expect 1 "netc: --dim B=64 fixes the batch axis of input images, which netc train binds from --batch: give --batch 64 (do not give it with --dim)" \
  train "$src/examples/fashion_mlp.net" --data "$tmp/nodata" --dim B=64 --device cpu
# long names (a 600-byte input, a 300-byte dim and label) are shown whole: the list of inputs
# (512 bytes), an input's declared shape (256) and the --input hint (160) cut them silently,
# and the module reader refused a dim name over 256 bytes that netc build had written
lx=x$(printf 'q%.0s' $(seq 599)) ld=D$(printf 'd%.0s' $(seq 299)) ly=t$(printf 'y%.0s' $(seq 299))
printf 'import nn\nmodel reg(%s: f32[%s, 4]) -> (pred: f32[%s, 1]) {\n  return nn.linear(%s, 1)\n}\ntrain reg(%s: f32[%s, 1]) {\n  loss = nn.mse(pred, %s)\n  optimizer adam(lr: 1e-2)\n}\n' \
  "$lx" "$ld" "$ld" "$lx" "$ly" "$ld" "$ly" > "$tmp/long40.net"
"$netc" build "$tmp/long40.net" --target '' -o "$tmp/long40.netm" 2>/dev/null
hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (2, 1), }"
printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n\x00\x00\x80\x3f\x00\x00\x80\x3f' "$hdr" $((117 - ${#hdr})) '' > "$tmp/y40.npy"
expect 1 "netc: the module has no input 'nope' (its inputs: $lx, $ly)" run "$tmp/long40.netm" --input "nope=$tmp/y40.npy"
expect 1 "(input '$lx' is f32[$ld, 4])" run "$tmp/long40.netm" --input "$lx=2.5"
hdr="{'descr': '<f4', 'fortran_order': False, 'shape': (2,), }"
printf '\x93NUMPY\x01\x00\x76\x00%s%*s\n\x00\x00\x80\x3f\x00\x00\x80\x3f' "$hdr" $((117 - ${#hdr})) '' > "$tmp/z40.npy"
expect 1 "netc: input '$lx' is f32[$ld, 4] but $tmp/z40.npy holds f32[2]" run "$tmp/long40.netm" --input "$lx=$tmp/z40.npy"
expect 0 "  hint: drop --input $ly" run "$tmp/long40.netm" --device cpu --random-inputs 1 --dim "$ld=2" --input "$ly=$tmp/y40.npy"
# inspect's note of the dims taken as 1 that no value satisfies names them whole (256 bytes cut them)
printf 'model m(x: f32[%s, 4]) -> f32[%s, 4] {\n  require %s == 2000, "too few"\n  return x * 2.0\n}\n' "$ld" "$ld" "$ld" > "$tmp/long40b.net"
"$netc" build "$tmp/long40b.net" --target '' -o "$tmp/long40b.netm" 2>/dev/null
expect 1 "netc: a session refuses this binding, with $ld taken as 1 (not given with --dim) and no value up to 1024 of $ld accepted either" \
  inspect "$tmp/long40b.netm"
# netc train's hint for a model without a train section is cut visibly ("...") where its
# 256-byte buffer is too small for the model's name (it was cut silently)
lm=m$(printf 'n%.0s' $(seq 299))
printf 'model %s(x: f32[B, 8]) -> (y: f32[B, 8]) {\n  return x * 2.0\n}\n' "$lm" > "$tmp/notrain40.net"
expect 1 "has no train section; add: train ${lm:0:200}" train "$tmp/notrain40.net" --data "$tmp/nodata"
n=$((n + 1))
[[ $("$netc" train "$tmp/notrain40.net" --data "$tmp/nodata" 2>&1) == *"nnnn..." ]] || { echo "FAIL: a cut no-train hint ends in '...'"; fail=$((fail + 1)); }
# inspect's note of a dim raised to the least a session accepts names it, and quotes the require,
# whole (768 bytes cut a 300-byte dim's note silently)
printf 'model m(x: f32[%s, 4]) -> f32[%s, 4] {\n  require %s > 1, "needs two"\n  return x * 2.0\n}\n' "$ld" "$ld" "$ld" > "$tmp/long40c.net"
"$netc" build "$tmp/long40c.net" --target '' -o "$tmp/long40c.netm" 2>/dev/null
n=$((n + 1))
[[ $("$netc" inspect "$tmp/long40c.netm" 2>&1) == *"(symbolic dims not bound with --dim are taken as 1, but $ld as 2, the least a session accepts: the require at long40c.net:2 fails at $ld = 1, where $ld > 1 is false: needs two)"* ]] ||
  { echo "FAIL: inspect's note of a raised dim with a long name is not whole"; fail=$((fail + 1)); }
# a source that cannot be read at a long path says why (512 bytes cut the reason off)
lp="$tmp/$(printf 'a%.0s' $(seq 200))/$(printf 'b%.0s' $(seq 200))/$(printf 'c%.0s' $(seq 200))/x.net"
expect 1 "netc: cannot open $lp: No such file or directory" check "$lp"
# a name longer than a module holds is refused by build, not written for run to call corrupt
long5k=$(printf 'q%.0s' {1..5000})
printf 'model l(%s: f32[B, 4]) -> (y: f32[B, 4]) {\n  return %s * 2.0\n}\n' "$long5k" "$long5k" > "$tmp/long5k.net"
expect 1 "netc: a name of 5000 bytes (qqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqqq...) is longer than a module holds (4096 bytes): shorten it" \
  build "$tmp/long5k.net" --target '' -o "$tmp/long5k.netm"
# --eval-samples scores part of the test set and says so (on the line and in the metrics);
# without it the line is as it was
n=$((n + 1))
out=$("$netc" "${ctrain[@]}" --epochs 1 --max-steps 1 --eval-samples 16 --metrics "$tmp/evs.jsonl" 2>&1 >/dev/null)
[[ $out =~ test\ loss\ [0-9.]+\ \(on\ 16\ of\ [0-9]+\ test\ samples\) && $(tail -1 "$tmp/evs.jsonl") == *'"test_samples":16'* ]] ||
  { echo "FAIL: --eval-samples 16: $out"; fail=$((fail + 1)); }
n=$((n + 1))
out=$("$netc" "${ctrain[@]}" --epochs 1 --max-steps 1 2>&1 >/dev/null)
[[ $out == *"test loss"* && $out != *"test samples)"* ]] || { echo "FAIL: without --eval-samples: $out"; fail=$((fail + 1)); }
expect 2 "--eval-samples needs a positive integer, got '0'" "${ctrain[@]}" --eval-samples 0
# a model of several inputs with neither arrays nor text: the refusal names the arrays by input
printf 'model m2(a: f32[B, 3], b: f32[B]) -> (loss: f32) {\n  return mean(a) + mean(b)\n}\ntrain m2 {\n  loss = loss\n  optimizer sgd(lr: 0.1)\n}\n' > "$tmp/m2in.net"
mkdir -p "$tmp/m2empty"
expect 1 "[B, ...] (a model of several inputs: train_<input>.npy for each)" train "$tmp/m2in.net" --data "$tmp/m2empty" --device cpu
# a symbolic size that is 0 at the bound dims (T - 1 at --dim T=1) is refused when the session
# binds them, naming the dim to raise (the run went ahead: an empty t, a NaN for its mean); netc
# train binds --dim when it compiles, where the empty shape is an error at its line
printf 'model e(x: f32[B, T], t: f32[T - 1]) -> (y: f32[B]) {\n  return mean(x, axis: 1) + mean(t)\n}\n' > "$tmp/empty.net"
"$netc" build "$tmp/empty.net" --target '' -o "$tmp/empty.netm" 2>/dev/null
expect 1 "netc: at B = 2, T = 1 a tensor of f32[T - 1] would be empty (its size is 0: T - 1 = 0)
  hint: bind a larger T (netc run: --dim T=N)" run "$tmp/empty.netm" --device cpu --dim B=2 --dim T=1 --random-inputs 1
expect 0 "" run "$tmp/empty.netm" --device cpu --dim B=2 --dim T=2 --random-inputs 1
printf 'model e(text: u8[B, T]) -> (loss: f32) {\n  param wte: f32[256, 256] = normal(0.1)\n  param b: f32[T - 1] = zeros\n  return cross_entropy(gather(wte, i32(text)), i32(text)) + mean(b)\n}\ntrain e { optimizer sgd(lr: 0.1) }\n' > "$tmp/emptyt.net"
expect 1 "emptyt.net:3:18: error: a dimension of size 0" train "$tmp/emptyt.net" --data "$tmp/fox.txt" --batch 4 --max-steps 1 --device cpu --dim T=1
# nesting past the parser's stack (5000 nested calls, 10^5 parentheses, 10^5 unary minuses) is
# "nesting is too deep" with the limit at the bracket where it passes it (was: "the parser ran out
# of memory (input nested too deeply?)" at the end of the run)
printf 'model m(x: f32[2]) -> f32[2] {\n  return %sx%s\n}\n' "$(printf 'relu(%.0s' {1..5000})" "$(printf ')%.0s' {1..5000})" > "$tmp/deepcall.net"
expect 1 "deepcall.net:2:1294: error: nesting is too deep (more than 256 levels)" check "$tmp/deepcall.net"
printf 'model m(x: f32[2]) -> f32[2] {\n  return %sx%s\n}\n' "$(head -c 100000 /dev/zero | tr '\0' '(')" "$(head -c 100000 /dev/zero | tr '\0' ')')" > "$tmp/deepparen.net"
expect 1 "deepparen.net:2:266: error: nesting is too deep (more than 256 levels)" check "$tmp/deepparen.net"
printf 'model m(x: f32[2]) -> f32[2] {\n  return %sx\n}\n' "$(head -c 100000 /dev/zero | tr '\0' '-')" > "$tmp/deepneg.net"
expect 1 "error: nesting is too deep (more than 256 levels)" check "$tmp/deepneg.net"
echo "test_cli: $((n - fail)) of $n passed"
((fail == 0))
