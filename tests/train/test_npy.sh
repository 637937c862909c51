#!/usr/bin/env bash
# netc train on .npy data sets other than a classifier's u8 images, on the CPU executor:
#  1. a regression (f32 features, f32 targets [N, 1], nn.mse, a dropout) learns: its train
#     loss falls, and its test loss is the mean squared error of the trained model on the
#     test set, computed here apart (netc run of pred - target with the saved weights, no
#     dropout); no accuracy is printed or written; --accumulate slices the targets too; the
#     same with a batch norm, whose running statistics --save writes and netc run reads;
#  2. an autoencoder whose train section takes no inputs trains from train_x.npy and
#     test_x.npy alone (no _y files), scored by its own loss;
#  3. an autoencoder with `train ae(_labels: i32[B])` on IDX images: scored by its loss, the
#     warning that the numbers said nothing is gone; a classifier whose first output is
#     integers (not refused now) is scored by its loss;
#  4. f16 samples (<f2) for an f16 input, NumPy's int64 for an i32 one; NumPy's float64
#     read as f32 (the same losses as the float32 copy, a note a file) and as f16 (a value
#     beyond f16's range refused, with its sample); float32 read as f16 likewise (the
#     losses of the float64 copy), and netc run refuses one beyond f16's range too, and
#     rounds a float64 for an f16 or bf16 input once, as netc train does;
#  5. refusals before any step, status 1, each naming the file: another dtype (float64 for
#     integers, uint8, integer targets for float ones), another sample or target shape, NaN
#     and inf (with the sample, float64 too), a float64 beyond f32, counts that differ, a
#     missing train_y.npy;
#  6. a model of two inputs (tests/train/two_in.net: a, b and the target) trained from
#     train_a.npy, train_b.npy, train_target.npy (and test_*), each array by its input's
#     name: it learns, to a test loss only b's rows kept with a's allow (a run on b's rows
#     reversed stays above it); --accumulate slices every array; float64 for b is read with
#     its note, and refused beyond f32's range; a missing array names the file and the input,
#     arrays of differing counts name both files, another shape for b is refused, and an
#     array no input reads (train_x.npy) is a note, not an error; a model of tokens and
#     targets with no train inputs trains on train_tokens.npy and train_targets.npy.
# Each case says FAIL and the rest still run.
# Args: NETC MAKE_NPY SOURCE_DIR MAKE_IDX NPY_DIGEST
set -euo pipefail
netc=$1 make_npy=$2 src=$3 make_idx=$4 npy_digest=$5
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
fails=0
fail() { echo "FAIL: $*"; fails=$((fails + 1)); }
common=(--batch 32 --device cpu --seed 3)

# y = 0.8 x0 - 0.5 x1 + 0.6 x2 x3 + 0.1 on x uniform in [-1, 1]^4 (the targets' variance: 0.34)
reg_rows() {   # reg_rows N SEED: features on stderr, targets on stdout
  awk -v n="$1" -v s="$2" 'BEGIN { srand(s); for (i = 0; i < n; i++) { for (k = 0; k < 4; k++) {
    x[k] = 2 * rand() - 1; printf "%.6f ", x[k] > "/dev/stderr" }
    printf "\n" > "/dev/stderr"; printf "%.6f\n", 0.8 * x[0] - 0.5 * x[1] + 0.6 * x[2] * x[3] + 0.1 } }'
}
reg_split() {   # reg_split DIR SPLIT N SEED
  reg_rows "$3" "$4" 2>"$tmp/x.txt" >"$tmp/y.txt"
  "$make_npy" "$1/$2_x.npy" '<f4' "$3,4" <"$tmp/x.txt" && "$make_npy" "$1/$2_y.npy" '<f4' "$3,1" <"$tmp/y.txt"
}
reg=$tmp/reg; mkdir "$reg"
reg_split "$reg" train 512 1; reg_split "$reg" test 128 2

# 1: the regression learns; its test loss is the mse of its predictions, computed apart
# with the saved weights (with a batch norm: the running statistics, saved with them)
check_regression() {   # check_regression NAME MODEL
  local name=$1 model=$2 first last tl dg
  if "$netc" train "$model" --data "$reg" "${common[@]}" --epochs 3 --metrics "$tmp/$name.jsonl" \
       --save "$tmp/$name.safetensors" 2>"$tmp/$name.log"; then
    first=$(head -1 "$tmp/$name.jsonl" | grep -o '"train_loss":[-0-9.e]*' | cut -d: -f2)
    last=$(grep test_loss "$tmp/$name.jsonl" | tail -1 | grep -o '"train_loss":[-0-9.e]*' | cut -d: -f2)
    tl=$(grep test_loss "$tmp/$name.jsonl" | tail -1 | grep -o '"test_loss":[-0-9.e]*' | cut -d: -f2)
    awk -v a="$first" -v b="$last" -v t="$tl" 'BEGIN { exit !(b < a / 4 && t < 0.05) }' ||
      { cat "$tmp/$name.log"; fail "$name did not learn: first step's loss $first, last epoch's $last, test loss $tl"; }
    grep -q test_accuracy "$tmp/$name.jsonl" && fail "a regression's metrics give a test accuracy"
    grep -qE '^epoch 3: train loss [0-9.]+, test loss [0-9.]+, [0-9.]+ s,' "$tmp/$name.log" ||
      { cat "$tmp/$name.log"; fail "$name's epoch line is not 'train loss, test loss' alone"; }
    grep -q 'warning' "$tmp/$name.log" && { cat "$tmp/$name.log"; fail "$name was warned of"; }
    # the same model, its output pred - target, run on the test set with the trained weights
    sed -e 's/^model reg(x: f32\[B, 4\]) -> (pred: f32\[B, 1\])/model reg(x: f32[B, 4], target: f32[B, 1]) -> (err: f32[B, 1])/' \
        -e 's/^  return out$/  return out - target/' -e '/^train/,$d' "$model" >"$tmp/$name.err.net"
    if "$netc" build "$tmp/$name.err.net" --target '' -o "$tmp/$name.err.netm" 2>"$tmp/$name.err.log" &&
       "$netc" run "$tmp/$name.err.netm" --weights "$tmp/$name.safetensors" --input "x=$reg/test_x.npy" --input "target=$reg/test_y.npy" \
         --device cpu --output "$tmp/$name.err" >/dev/null 2>>"$tmp/$name.err.log"; then
      mapfile -t dg < <("$npy_digest" "$tmp/$name.err/err.npy")   # dtype[shape], mean, standard deviation, ...
      [[ ${dg[0]} == 'f32[128, 1]' ]] &&
        awk -v m="${dg[1]}" -v s="${dg[2]}" -v t="$tl" 'BEGIN { mse = m * m + s * s; d = mse - t; exit !(d < 1e-5 * mse && d > -1e-5 * mse) }' ||
        fail "$name's test loss $tl is not the mse of its predictions (mean ${dg[1]}, deviation ${dg[2]})"
    else cat "$tmp/$name.err.log"; fail "$name's errors could not be computed"; fi
  else cat "$tmp/$name.log"; fail "$name did not train"; fi
}
check_regression regression "$src/tests/train/reg.net"
check_regression regression_bn "$src/tests/train/reg_bn.net"
# ... at a batch of 1, or micro-batches of 1, the batch norm's require N > 1 refuses the step
# when it is built (PyTorch: "Expected more than 1 value per channel when training")
for opts in "--batch 1" "--batch 4 --accumulate 4"; do
  rc=0; "$netc" train "$src/tests/train/reg_bn.net" --data "$reg" --device cpu --epochs 1 $opts >/dev/null 2>"$tmp/bn1.log" || rc=$?
  [[ $rc == 1 ]] && grep -qF "error: batch_norm: training needs more than one value per channel, x is f32[1, 16]" "$tmp/bn1.log" &&
    grep -qF "reg_bn.net:10:10: note: in the call from here" "$tmp/bn1.log" && ! grep -q '^epoch' "$tmp/bn1.log" ||
    { cat "$tmp/bn1.log"; fail "reg_bn.net trained with $opts: exit $rc, want 1 and batch_norm's require at the call"; }
done

# ... and --accumulate 4 slices the targets with the samples: the same losses (without the dropout,
# whose masks are drawn per micro-batch)
sed 's/  d = dropout(relu(h), p: 0.1)/  d = relu(h)/' "$src/tests/train/reg.net" >"$tmp/regnd.net"
eplines() { grep '^epoch .:' "$1" | sed 's/, [0-9.]* s,.*//'; }
"$netc" train "$tmp/regnd.net" --data "$reg" "${common[@]}" --epochs 2 2>"$tmp/acc1.log" &&
  "$netc" train "$tmp/regnd.net" --data "$reg" "${common[@]}" --epochs 2 --accumulate 4 2>"$tmp/acc4.log" &&
  [[ -n $(eplines "$tmp/acc1.log") && $(eplines "$tmp/acc1.log") == "$(eplines "$tmp/acc4.log")" ]] ||
  { eplines "$tmp/acc1.log"; eplines "$tmp/acc4.log"; fail "--accumulate 4 did not follow the whole batches"; }

# 2: an autoencoder without labels: 8 features of 2 numbers, no _y files
ae=$tmp/ae; mkdir "$ae"
ae_rows() {
  awk -v n="$1" -v s="$2" 'BEGIN { srand(s); for (i = 0; i < n; i++) { u = 2 * rand() - 1; v = 2 * rand() - 1;
    printf "%.6f %.6f %.6f %.6f %.6f %.6f %.6f %.6f\n", u, v, 0.5 * (u + v), 0.5 * (u - v), 0.5 * u, -v, 0.3 * u + 0.6 * v, 0.7 * u - 0.2 * v } }'
}
ae_rows 512 3 | "$make_npy" "$ae/train_x.npy" '<f4' 512,8; ae_rows 128 4 | "$make_npy" "$ae/test_x.npy" '<f4' 128,8
if "$netc" train "$src/tests/train/ae.net" --data "$ae" "${common[@]}" --epochs 3 --metrics "$tmp/ae.jsonl" 2>"$tmp/ae.log"; then
  mapfile -t tls < <(grep -o '"test_loss":[-0-9.e]*' "$tmp/ae.jsonl" | cut -d: -f2)
  awk -v a="${tls[0]:-}" -v b="${tls[2]:-}" 'BEGIN { exit !(a != "" && b != "" && b < a / 2) }' ||
    { cat "$tmp/ae.log"; fail "the autoencoder's test loss did not fall: ${tls[*]}"; }
  grep -q -e test_accuracy -e warning "$tmp/ae.jsonl" "$tmp/ae.log" && { cat "$tmp/ae.log"; fail "the autoencoder was scored as a classifier"; }
else cat "$tmp/ae.log"; fail "the autoencoder did not train"; fi

# 3: an autoencoder of u8 images whose train section takes labels it does not read
idx=$tmp/idx; mkdir "$idx"; "$make_idx" "$idx" 256 64
printf 'model ae(x: u8[B, 8, 8]) -> (y: f32[B, 64])\n{\n  param w: f32[64] = ones\n  return f32(reshape(x, [B, 64])) / 255.0 * w\n}\ntrain ae(_labels: i32[B]) {\n  loss = mean(square(y - f32(reshape(x, [B, 64])) / 255.0))\n  optimizer sgd(lr: 0.1)\n}\n' >"$tmp/ael.net"
if "$netc" train "$tmp/ael.net" --data "$idx" "${common[@]}" --epochs 2 2>"$tmp/ael.log"; then
  grep -q -e 'test accuracy' -e warning "$tmp/ael.log" && { cat "$tmp/ael.log"; fail "an autoencoder with _labels was scored as a classifier"; }
  grep -qE '^epoch 2: train loss [0-9.]+, test loss [0-9.]+, [0-9.]+ s,' "$tmp/ael.log" || { cat "$tmp/ael.log"; fail "no test loss for _labels"; }
else cat "$tmp/ael.log"; fail "an autoencoder with _labels did not train"; fi

# ... and a classifier whose first output is not its logits (a prediction as integers first):
# scored by its loss, the cross entropy (it was refused)
printf 'import nn\nmodel m(x: u8[B, 8, 8]) -> (pred: i32[B, 4], logits: f32[B, 4])\n{\n  out = nn.linear(f32(reshape(x, [B, 64])) / 255.0, 4)\n  return i32(out), out\n}\ntrain m(labels: i32[B]) {\n  loss = cross_entropy(logits, labels)\n  optimizer adam(lr: 1e-2)\n}\n' >"$tmp/intfirst.net"
if "$netc" train "$tmp/intfirst.net" --data "$idx" "${common[@]}" --epochs 3 --metrics "$tmp/if.jsonl" 2>"$tmp/if.log"; then
  mapfile -t tls < <(grep -o '"test_loss":[-0-9.e]*' "$tmp/if.jsonl" | cut -d: -f2)
  awk -v a="${tls[0]:-}" -v b="${tls[2]:-}" 'BEGIN { exit !(a != "" && b != "" && b < a && b < 1.0) }' && ! grep -q test_accuracy "$tmp/if.jsonl" ||
    { cat "$tmp/if.log"; fail "a classifier with integers first was not scored by its loss: ${tls[*]}"; }
else cat "$tmp/if.log"; fail "a classifier with integers first did not train"; fi

# 4: other dtypes the model declares: f16 (<f2) and i32 (from NumPy's int64)
f16=$tmp/f16; mkdir "$f16"; cp "$reg"/*_y.npy "$f16"
for s in train:512:1 test:128:2; do
  IFS=: read -r split n seed <<<"$s"; reg_rows "$n" "$seed" 2>"$tmp/x.txt" >/dev/null
  "$make_npy" "$f16/${split}_x.npy" '<f2' "$n,4" <"$tmp/x.txt"
done
sed -e 's/x: f32\[B, 4\]/x: f16[B, 4]/' -e 's/nn.linear(x, 16)/nn.linear(f32(x), 16)/' "$src/tests/train/reg.net" >"$tmp/reg16.net"
"$netc" train "$tmp/reg16.net" --data "$f16" "${common[@]}" --epochs 1 2>"$tmp/f16.log" && grep -q '^epoch 1: train loss' "$tmp/f16.log" ||
  { cat "$tmp/f16.log"; fail "f16 samples did not train an f16 input"; }
i64=$tmp/i64; mkdir "$i64"; cp "$reg"/*_y.npy "$i64"
for s in train:512 test:128; do
  IFS=: read -r split n <<<"$s"; awk -v n="$n" 'BEGIN { for (i = 0; i < 4 * n; i++) print i % 7 - 3 }' | "$make_npy" "$i64/${split}_x.npy" '<i8' "$n,4"
done
sed -e 's/x: f32\[B, 4\]/x: i32[B, 4]/' -e 's/nn.linear(x, 16)/nn.linear(f32(x), 16)/' "$src/tests/train/reg.net" >"$tmp/regi.net"
"$netc" train "$tmp/regi.net" --data "$i64" "${common[@]}" --epochs 1 2>"$tmp/i64.log" && grep -q '^epoch 1: train loss' "$tmp/i64.log" ||
  { cat "$tmp/i64.log"; fail "int64 samples did not train an i32 input"; }

# ... and NumPy's default float64, read as the input's float dtype: the regression on a float64 copy
# of its data trains to the same losses, to the digit, as on the float32 one, with one note a file
f64=$tmp/f64; mkdir "$f64"
for s in train:512:1 test:128:2; do
  IFS=: read -r split n seed <<<"$s"; reg_rows "$n" "$seed" 2>"$tmp/x.txt" >"$tmp/y.txt"
  "$make_npy" "$f64/${split}_x.npy" '<f8' "$n,4" <"$tmp/x.txt" && "$make_npy" "$f64/${split}_y.npy" '<f8' "$n,1" <"$tmp/y.txt"
done
if "$netc" train "$src/tests/train/reg.net" --data "$f64" "${common[@]}" --epochs 2 --metrics "$tmp/f64.jsonl" 2>"$tmp/f64.log" &&
   "$netc" train "$src/tests/train/reg.net" --data "$reg" "${common[@]}" --epochs 2 --metrics "$tmp/f32.jsonl" 2>"$tmp/f32.log"; then
  tl() { grep -o '"test_loss":[-0-9.e]*' "$1"; }
  [[ -n $(tl "$tmp/f64.jsonl") && $(tl "$tmp/f64.jsonl") == "$(tl "$tmp/f32.jsonl")" && $(eplines "$tmp/f64.log") == "$(eplines "$tmp/f32.log")" ]] ||
    { eplines "$tmp/f64.log"; eplines "$tmp/f32.log"; fail "float64 data did not train as its float32 copy does"; }
  [[ $(grep -c '^netc: note: .* holds float64: read as f32' "$tmp/f64.log") == 4 ]] &&
    grep -qF "netc: note: $f64/train_x.npy holds float64: read as f32 for the model's input x, each value rounded as a.astype(np.float32) does" "$tmp/f64.log" ||
    { cat "$tmp/f64.log"; fail "float64 data: not one note a file"; }
  grep -q 'note' "$tmp/f32.log" && { cat "$tmp/f32.log"; fail "float32 data got a note"; }
else cat "$tmp/f64.log" "$tmp/f32.log" 2>/dev/null || true; fail "float64 data did not train an f32 input"; fi
# for an f16 input each value is rounded to f16 once; one beyond f16's range is refused (NumPy would make it inf)
f64h=$tmp/f64h; cp -r "$f64" "$f64h"
"$netc" train "$tmp/reg16.net" --data "$f64h" "${common[@]}" --epochs 1 2>"$tmp/f64h.log" && grep -q '^epoch 1: train loss' "$tmp/f64h.log" &&
  grep -qF "f64h/test_x.npy holds float64: read as f16 for the model's input x" "$tmp/f64h.log" ||
  { cat "$tmp/f64h.log"; fail "float64 samples did not train an f16 input"; }
reg_rows 128 2 2>&1 >/dev/null | awk 'NR == 6 { $4 = "70000" } 1' | "$make_npy" "$f64h/test_x.npy" '<f8' 128,4
rc=0; "$netc" train "$tmp/reg16.net" --data "$f64h" "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/f64h.log" || rc=$?
[[ $rc == 1 ]] && ! grep -q '^epoch' "$tmp/f64h.log" &&
  grep -qF "f64h/test_x.npy: sample 5 holds 70000 (at element 3 of its 4), beyond f16's range (its largest is 65504, the value would be inf)" "$tmp/f64h.log" ||
  { cat "$tmp/f64h.log"; fail "a float64 beyond f16's range: exit $rc, want 1 and the sample named"; }
# float32 for an f16 input likewise (it was refused): the f32 set trains the f16 model to the test losses of its
# float64 copy, to the digit (make_npy's <f2 flushes subnormals), with a note for each x file; a value beyond
# f16's range is refused with its sample
tl() { grep -o '"test_loss":[-0-9.e]*' "$1"; }
if "$netc" train "$tmp/reg16.net" --data "$reg" "${common[@]}" --epochs 1 --metrics "$tmp/f32h.jsonl" 2>"$tmp/f32h.log" &&
   "$netc" train "$tmp/reg16.net" --data "$f64" "${common[@]}" --epochs 1 --metrics "$tmp/f16h.jsonl" 2>/dev/null; then
  [[ -n $(tl "$tmp/f32h.jsonl") && $(tl "$tmp/f32h.jsonl") == "$(tl "$tmp/f16h.jsonl")" ]] ||
    { tl "$tmp/f32h.jsonl"; tl "$tmp/f16h.jsonl"; fail "float32 data did not train an f16 input as its float64 copy does"; }
  [[ $(grep -c '^netc: note: .* holds float32: read as f16' "$tmp/f32h.log") == 2 ]] &&
    grep -qF "netc: note: $reg/train_x.npy holds float32: read as f16 for the model's input x, each value rounded as a.astype(np.float16) does" "$tmp/f32h.log" ||
    { cat "$tmp/f32h.log"; fail "float32 data for an f16 input: not one note an x file"; }
else cat "$tmp/f32h.log"; fail "float32 samples did not train an f16 input"; fi
f32h=$tmp/f32h; cp -r "$reg" "$f32h"
reg_rows 128 2 2>&1 >/dev/null | awk 'NR == 6 { $4 = "70000" } 1' | "$make_npy" "$f32h/test_x.npy" '<f4' 128,4
rc=0; "$netc" train "$tmp/reg16.net" --data "$f32h" "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/f32h.log" || rc=$?
[[ $rc == 1 ]] && ! grep -q '^epoch' "$tmp/f32h.log" &&
  grep -qF "f32h/test_x.npy: sample 5 holds 70000 (at element 3 of its 4), beyond f16's range (its largest is 65504, the value would be inf)" "$tmp/f32h.log" ||
  { cat "$tmp/f32h.log"; fail "a float32 beyond f16's range: exit $rc, want 1 and the sample named"; }
# ... and netc run refuses it too (it rounded 70000 to inf silently), where it rounds the rest
printf 'model h(x: f16[B, 4]) -> (y: f32[B, 4]) { return f32(x) * 2.0 }\n' >"$tmp/h16.net"
"$netc" build "$tmp/h16.net" --target '' -o "$tmp/h16.netm" 2>/dev/null
rc=0; "$netc" run "$tmp/h16.netm" --input "x=$f32h/test_x.npy" --device cpu --output "$tmp/h16" >/dev/null 2>"$tmp/h16.log" || rc=$?
[[ $rc == 1 && ! -e $tmp/h16/y.npy ]] &&
  grep -qF "netc: input 'x': $f32h/test_x.npy holds 70000 at [5, 3] (element 23), beyond f16's range (its largest is 65504, the value would be inf)" "$tmp/h16.log" ||
  { cat "$tmp/h16.log"; fail "netc run of a float32 beyond an f16 input's range: exit $rc, want 1 and where it is"; }
"$netc" run "$tmp/h16.netm" --input "x=$reg/test_x.npy" --device cpu --output "$tmp/h16" >/dev/null 2>"$tmp/h16.log" && [[ -s $tmp/h16/y.npy ]] ||
  { cat "$tmp/h16.log"; fail "netc run of float32 data for an f16 input"; }
# ... and reads float64 for an f16 or bf16 input as netc train does, each value rounded once: 1 + 2^-11 + 1e-13 (and
# 1 + 2^-8 + 1e-13) lies just past a tie of f16 (of bf16), which f32 would round onto, and then to even, 1 (y: 2)
printf 'model hb(x: bf16[B, 4]) -> (y: f32[B, 4]) { return f32(x) * 2.0 }\n' >"$tmp/hb.net"
"$netc" build "$tmp/hb.net" --target '' -o "$tmp/hb.netm" 2>/dev/null
once() {   # once MODEL VALUES WORDS: y's f32 bits from netc run of the float64 [1, 4] VALUES
  echo "$2" | "$make_npy" "$tmp/once.npy" '<f8' 1,4
  rm -rf "$tmp/once"
  "$netc" run "$tmp/$1.netm" --input "x=$tmp/once.npy" --device cpu --output "$tmp/once" >/dev/null 2>"$tmp/once.log" &&
    [[ $(tail -c 16 "$tmp/once/y.npy" | od -An -tx4 | xargs) == "$3" ]] &&
    grep -qF "netc: input 'x': $tmp/once.npy's float64 values rounded to" "$tmp/once.log" ||
    { cat "$tmp/once.log"; tail -c 16 "$tmp/once/y.npy" 2>/dev/null | od -An -tx4; fail "netc run of float64 data for a $1 input: want y $3"; }
}
once h16 "1.0004882812501 -1.0004882812501 0.5 1.0004882812499" "40002000 c0002000 3f800000 40000000"
once hb "1.0039062500001 -1.0039062500001 0.5 1.0039062499999" "40010000 c0010000 3f800000 40000000"
# ... and refuses a float64 beyond an f32 input's range as it does one beyond f16's, saying where it is
printf 'model h32(x: f32[B, 4]) -> (y: f32[B, 4]) { return x * 2.0 }\n' >"$tmp/h32.net"
"$netc" build "$tmp/h32.net" --target '' -o "$tmp/h32.netm" 2>/dev/null
echo "1 2 3 4 5 1e300 7 8" | "$make_npy" "$tmp/big.npy" '<f8' 2,4
rc=0; "$netc" run "$tmp/h32.netm" --input "x=$tmp/big.npy" --device cpu >/dev/null 2>"$tmp/big.log" || rc=$?
[[ $rc == 1 ]] && grep -qF "netc: input 'x': $tmp/big.npy holds 1e+300 at [1, 1] (element 5), beyond f32's range (its largest is 3.40282e+38" "$tmp/big.log" ||
  { cat "$tmp/big.log"; fail "netc run of a float64 beyond an f32 input's range: exit $rc, want 1 and where it is"; }

# 5: what does not fit is refused as the data loads, before any step, with status 1
refused() {   # refused NAME MESSAGE: the regression on $tmp/NAME (a copy of $reg, changed)
  local rc=0
  "$netc" train "$src/tests/train/reg.net" --data "$tmp/$1" "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/$1.log" || rc=$?
  [[ $rc == 1 ]] && grep -qF -- "$2" "$tmp/$1.log" && ! grep -q '^epoch' "$tmp/$1.log" ||
    { cat "$tmp/$1.log"; fail "$1: exit $rc, want 1 and: $2"; }
}
variant() { rm -rf "${tmp:?}/$1"; cp -r "$reg" "$tmp/$1"; }   # variant NAME: a copy of the regression's data to change
variant f64i; reg_rows 512 1 2>&1 >/dev/null | "$make_npy" "$tmp/f64i/train_x.npy" '<f8' 512,4
rc=0; "$netc" train "$tmp/regi.net" --data "$tmp/f64i" "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/f64i.log" || rc=$?
[[ $rc == 1 ]] && grep -qF "f64i/train_x.npy holds float64, but the model's input x is i32 (hint: convert the array with NumPy, np.save('train_x.npy', a.astype(np.int32)))" "$tmp/f64i.log" ||
  { cat "$tmp/f64i.log"; fail "float64 samples for an i32 input: exit $rc, want 1 and the astype(np.int32) hint"; }
variant huge; reg_rows 512 1 2>&1 >/dev/null | awk 'NR == 8 { $2 = "1e300" } 1' | "$make_npy" "$tmp/huge/train_x.npy" '<f8' 512,4
refused huge "huge/train_x.npy: sample 7 holds 1e+300 (at element 1 of its 4), beyond f32's range"
variant nan64; reg_rows 128 2 2>/dev/null | awk 'NR == 4 { $1 = "nan" } 1' | "$make_npy" "$tmp/nan64/test_y.npy" '<f8' 128,1
refused nan64 "nan64/test_y.npy: sample 3 holds NaN (at element 0 of its 1)"
variant u8; awk 'BEGIN { for (i = 0; i < 512; i++) print i % 256 }' | "$make_npy" "$tmp/u8/test_x.npy" '|u1' 128,4
refused u8 "u8/test_x.npy holds uint8, but the model's input x is f32"
variant ints; awk 'BEGIN { for (i = 0; i < 512; i++) print i % 3 }' | "$make_npy" "$tmp/ints/train_y.npy" '<i8' 512,1
refused ints "ints/train_y.npy holds int64, but the model's input target is f32 (hint: convert the array with NumPy, np.save('train_y.npy', a.astype(np.float32)))"
variant wide; awk 'BEGIN { for (i = 0; i < 640; i++) print i / 640 }' | "$make_npy" "$tmp/wide/test_x.npy" '<f4' 128,5
refused wide "netc: input x is f32[B, 4]; the test set has f32 samples of 5"
variant flat; reg_rows 512 1 2>/dev/null | "$make_npy" "$tmp/flat/train_y.npy" '<f4' 512
refused flat "netc: the train input target is f32[B, 1]; the training set has f32 targets of one value (hint: give the array an axis of 1, a.reshape(-1, 1)"
variant nan; reg_rows 128 2 2>/dev/null | awk 'NR == 4 { $1 = "nan" } 1' | "$make_npy" "$tmp/nan/test_y.npy" '<f4' 128,1
refused nan "nan/test_y.npy: sample 3 holds NaN (at element 0 of its 1)"
variant inf; reg_rows 512 1 2>&1 >/dev/null | awk 'NR == 11 { $3 = "-inf" } 1' | "$make_npy" "$tmp/inf/train_x.npy" '<f4' 512,4
refused inf "inf/train_x.npy: sample 10 holds -inf (at element 2 of its 4)"
variant short; reg_rows 127 2 2>/dev/null | "$make_npy" "$tmp/short/test_y.npy" '<f4' 127,1
refused short "short/test_x.npy holds 128 samples but $tmp/short/test_y.npy holds 127: want one target per sample"
variant noy; rm "$tmp/noy/train_y.npy"
refused noy "noy/train_y.npy: No such file or directory (the train section's loss reads its input target: train_y.npy holds it, one row per sample)"
# a dtype netc does not read names the model's input and the conversion, as one it reads does
# (it said only "unsupported dtype '<i2'"); samples or targets saved flat get the reshape that fits
variant i2; awk 'BEGIN { for (i = 0; i < 2048; i++) print 0 }' | "$make_npy" "$tmp/i2/train_x.npy" '<f4' 512,4
sed -i "s/'<f4'/'<i2'/" "$tmp/i2/train_x.npy"
refused i2 "i2/train_x.npy holds dtype '<i2', which netc does not read; the model's input x is f32 (hint: convert the array with NumPy, np.save('train_x.npy', a.astype(np.float32)))"
variant sq; reg_rows 128 2 2>&1 >/dev/null | "$make_npy" "$tmp/sq/test_x.npy" '<f4' 128,2,2
refused sq "netc: input x is f32[B, 4]; the test set has f32 samples of 2x2 (hint: each holds the 4 values the input takes, in another shape: save the array as a.reshape(-1, 4))"

# 6: a model of two inputs, each array by its input's name: test_a/b/target.npy; b's part of
# the target (0.6 b0 b1 - 0.4 b1) has a variance of 0.093, which a model without b's own rows misses
two_rows() {   # two_rows N SEED: a0 a1 a2 b0 b1 target
  awk -v n="$1" -v s="$2" 'BEGIN { srand(s); for (i = 0; i < n; i++) { for (k = 0; k < 5; k++) { x[k] = 2 * rand() - 1; printf "%.6f ", x[k] }
    printf "%.6f\n", 0.8 * x[0] - 0.5 * x[1] + 0.3 * x[2] + 0.6 * x[3] * x[4] - 0.4 * x[4] + 0.1 } }'
}
two=$tmp/two; mkdir "$two"
for s in train:512:1 test:128:2; do
  IFS=: read -r split n seed <<<"$s"; two_rows "$n" "$seed" >"$tmp/rows.txt"
  cut -d' ' -f1-3 "$tmp/rows.txt" | "$make_npy" "$two/${split}_a.npy" '<f4' "$n,3"
  cut -d' ' -f4-5 "$tmp/rows.txt" | "$make_npy" "$two/${split}_b.npy" '<f4' "$n,2"
  cut -d' ' -f6 "$tmp/rows.txt" | "$make_npy" "$two/${split}_target.npy" '<f4' "$n,1"
done
two_net=$src/tests/train/two_in.net
last_test() { grep '^epoch 5:' "$1" | grep -o 'test loss [0-9.]*' | cut -d' ' -f3; }
if "$netc" train "$two_net" --data "$two" "${common[@]}" --epochs 5 --metrics "$tmp/two.jsonl" 2>"$tmp/two.log"; then
  first=$(head -1 "$tmp/two.jsonl" | grep -o '"train_loss":[-0-9.e]*' | cut -d: -f2)
  awk -v a="$first" -v b="$(last_test "$tmp/two.log")" 'BEGIN { exit !(a != "" && b != "" && b < a / 4 && b < 0.06) }' &&
    ! grep -q -e note -e warning "$tmp/two.log" ||
    { cat "$tmp/two.log"; fail "two_in.net did not learn from train_a.npy and train_b.npy: first step's loss $first"; }
else cat "$tmp/two.log"; fail "two_in.net did not train from an array for each input"; fi
# ... its rows of b taken apart from a's (b's reversed) leave it above that loss: the batches keep the arrays' rows together
rm -rf "$tmp/two_rev"; cp -r "$two" "$tmp/two_rev"
two_rows 512 1 | tac | cut -d' ' -f4-5 | "$make_npy" "$tmp/two_rev/train_b.npy" '<f4' 512,2
"$netc" train "$two_net" --data "$tmp/two_rev" "${common[@]}" --epochs 5 2>"$tmp/two_rev.log" &&
  awk -v b="$(last_test "$tmp/two_rev.log")" 'BEGIN { exit !(b != "" && b > 0.08) }' ||
  { cat "$tmp/two_rev.log"; fail "two_in.net learned as well with b's rows apart from a's"; }
# ... --accumulate 4 slices all three arrays: the same losses
"$netc" train "$two_net" --data "$two" "${common[@]}" --epochs 2 2>"$tmp/two1.log" &&
  "$netc" train "$two_net" --data "$two" "${common[@]}" --epochs 2 --accumulate 4 2>"$tmp/two4.log" &&
  [[ -n $(eplines "$tmp/two1.log") && $(eplines "$tmp/two1.log") == "$(eplines "$tmp/two4.log")" ]] ||
  { eplines "$tmp/two1.log" || true; eplines "$tmp/two4.log" || true; fail "--accumulate 4 did not slice every array of two_in.net"; }
two_refused() {   # two_refused NAME MESSAGE: two_in.net on $tmp/NAME (a copy of $two, changed)
  local rc=0
  "$netc" train "$two_net" --data "$tmp/$1" "${common[@]}" --epochs 1 >/dev/null 2>"$tmp/$1.log" || rc=$?
  [[ $rc == 1 ]] && grep -qF -- "$2" "$tmp/$1.log" && ! grep -q '^epoch' "$tmp/$1.log" ||
    { cat "$tmp/$1.log"; fail "$1: exit $rc, want 1 and: $2"; }
}
two_variant() { rm -rf "${tmp:?}/$1"; cp -r "$two" "$tmp/$1"; }
two_variant two_nob; rm "$tmp/two_nob/train_b.npy"
two_refused two_nob "two_nob/train_b.npy: No such file or directory (the model's input b: train_b.npy holds it, one row per sample, as train_a.npy holds a)"
two_variant two_noa; rm "$tmp/two_noa/test_a.npy"
two_refused two_noa "two_noa/test_a.npy: No such file or directory (the model's input a: test_a.npy holds it, one row per sample; a model of several inputs reads each array by its input's name)"
two_variant two_not; rm "$tmp/two_not/train_target.npy"
two_refused two_not "two_not/train_target.npy: No such file or directory (the train section's loss reads its input target: train_target.npy holds it, one row per sample)"
two_variant two_short; two_rows 127 2 | cut -d' ' -f4-5 | "$make_npy" "$tmp/two_short/test_b.npy" '<f4' 127,2
two_refused two_short "two_short/test_a.npy holds 128 samples but $tmp/two_short/test_b.npy holds 127: every array of a split holds one row per sample"
two_variant two_wide; awk 'BEGIN { for (i = 0; i < 384; i++) print i / 384 }' | "$make_npy" "$tmp/two_wide/test_b.npy" '<f4' 128,3
two_refused two_wide "netc: input b is f32[B, 2]; the test set has f32 samples of 3"
two_variant two_huge; two_rows 512 1 | cut -d' ' -f4-5 | awk 'NR == 8 { $2 = "1e300" } 1' | "$make_npy" "$tmp/two_huge/train_b.npy" '<f8' 512,2
two_refused two_huge "two_huge/train_b.npy: sample 7 holds 1e+300 (at element 1 of its 2), beyond f32's range"
two_variant two_nan; two_rows 128 2 | cut -d' ' -f4-5 | awk 'NR == 4 { $1 = "nan" } 1' | "$make_npy" "$tmp/two_nan/test_b.npy" '<f4' 128,2
two_refused two_nan "two_nan/test_b.npy: sample 3 holds NaN (at element 0 of its 2)"
# ... float64 for b is read as f32 with its note, to the losses of the float32 copy; an array no input reads is a note
two_variant two_f64; two_rows 512 1 | cut -d' ' -f4-5 | "$make_npy" "$tmp/two_f64/train_b.npy" '<f8' 512,2
cp "$two/train_a.npy" "$tmp/two_f64/train_x.npy"
"$netc" train "$two_net" --data "$tmp/two_f64" "${common[@]}" --epochs 2 2>"$tmp/two_f64.log" &&
  [[ $(eplines "$tmp/two_f64.log") == "$(eplines "$tmp/two1.log")" ]] &&
  grep -qF "netc: note: $tmp/two_f64/train_b.npy holds float64: read as f32 for the model's input b, each value rounded as a.astype(np.float32) does" "$tmp/two_f64.log" &&
  grep -qF "netc: note: $tmp/two_f64/train_x.npy is not read: the model has no data input named x (a model of several inputs reads train_<input>.npy for each)" "$tmp/two_f64.log" ||
  { cat "$tmp/two_f64.log"; fail "float64 for b and an unread train_x.npy: want the losses of the float32 copy and a note each"; }

# ... and a model whose train section takes no inputs, its two inputs tokens and targets, trains on
# train_tokens.npy and train_targets.npy (the next token, t + 1 mod 8) where --data holds them, not on text
printf 'import nn\nmodel lm(tokens: i32[B, 4], targets: i32[B, 4]) -> (loss: f32)\n{\n  logits = nn.linear(nn.embedding(tokens, 8, 16), 8)\n  return mean(cross_entropy(reshape(logits, [B * 4, 8]), reshape(targets, [B * 4])))\n}\ntrain lm {\n  loss = loss\n  optimizer adam(lr: 1e-2)\n}\n' >"$tmp/lm.net"
lm=$tmp/lm; mkdir "$lm"
for s in train:256 test:64; do
  IFS=: read -r split n <<<"$s"
  awk -v n="$n" 'BEGIN { srand(n); for (i = 0; i < 4 * n; i++) print int(rand() * 8) }' >"$tmp/tok.txt"
  "$make_npy" "$lm/${split}_tokens.npy" '<i4' "$n,4" <"$tmp/tok.txt"
  awk '{ print ($1 + 1) % 8 }' "$tmp/tok.txt" | "$make_npy" "$lm/${split}_targets.npy" '<i4' "$n,4"
done
if "$netc" train "$tmp/lm.net" --data "$lm" "${common[@]}" --epochs 3 --metrics "$tmp/lm.jsonl" 2>"$tmp/lm.log"; then
  mapfile -t tls < <(grep -o '"test_loss":[-0-9.e]*' "$tmp/lm.jsonl" | cut -d: -f2)
  awk -v a="${tls[0]:-}" -v b="${tls[2]:-}" 'BEGIN { exit !(a != "" && b != "" && b < a / 1.5) }' ||
    { cat "$tmp/lm.log"; fail "a model of tokens and targets did not learn from train_tokens.npy: ${tls[*]}"; }
else cat "$tmp/lm.log"; fail "a model of tokens and targets did not train from train_tokens.npy and train_targets.npy"; fi

# ... and a checkpoint knows every array it was made on: resumed on b's rows changed (a and the
# target the same, as many samples), it is refused as other data, not continued
ck=$tmp/two_ck; rm -rf "$ck"
rc=0
"$netc" train "$two_net" --data "$two" "${common[@]}" --epochs 2 --max-steps 4 --checkpoint-dir "$ck" 2>"$tmp/two_ck1.log" &&
  "$netc" train "$two_net" --data "$tmp/two_rev" "${common[@]}" --epochs 2 --checkpoint-dir "$ck" --resume 2>"$tmp/two_ck2.log" || rc=$?
[[ $rc == 1 ]] && grep -qF "it was made on other training data" "$tmp/two_ck2.log" ||
  { cat "$tmp/two_ck1.log" "$tmp/two_ck2.log"; fail "a resume on another train_b.npy (rc $rc): want it refused as other training data"; }

((fails == 0)) || exit 1
echo "test_npy: a regression on f32 data learns and its test loss is its mse, autoencoders train without labels (and with unread" \
     "ones), f16, int64 and float64 data fit their inputs, other dtypes, shapes, NaN, inf, counts and a missing train_y.npy are refused;" \
     "a model of two inputs learns from an array for each, by name, and its missing, short or misfit arrays are refused"
