#!/usr/bin/env bash
# netc train end to end on the CPU executor, on a small synthetic data set:
#  1. it learns (test accuracy > 0.9) and writes metrics, the SVG and weights, and says what
#     its values held;
#  2. a run killed with SIGKILL (mid-epoch) resumes from its last checkpoint and then
#     reproduces the uninterrupted run's losses exactly, and its epoch line;
#  3. a damaged checkpoint is refused with a clear error.
#  5. a resume goes on mid-epoch only with the --batch, --seed and training set it was made
#     with (and --epochs, where the cosine schedule spans them); a finished run runs nothing;
#     another learning rate is taken and said.
#  9. Ctrl-C (SIGINT) or SIGTERM stops the run at the end of its step: checkpoint, --save,
#     whole metrics lines, exit 130 / 143; --resume goes on with the next step.
# 10. a small CNN (nn.conv2d, nn.max_pool2d) learns, and its evaluation's values hold no more
#     than its training step's; at --batch 4 the evaluation runs more than 4 samples at a time.
# 11. a cosine schedule's total_steps short of the run is warned of.
# 12. an epoch cut by --max-steps says so; the run's last step has a progress line.
# 13. metrics resumed after two interruptions keep one "interrupted" line, the last, at the end.
# 14. a long run's workflow abused (a killed checkpoint write, another model's checkpoint, an
#     unreadable checkpoint, read-only or missing directories) works or stops with a clear message.
# 15. a resume with another optimizer is refused (adam and adamw: said); of an edited model, said.
# Args: NETC MAKE_IDX SOURCE_DIR JSONL_CHECK
set -euo pipefail
netc=$1 make_idx=$2 src=$3 jsonl_check=$4
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"
"$make_idx" "$tmp/data" 2048 512
model=$src/tests/train/tiny.net
common=(--data "$tmp/data" --batch 32 --epochs 2 --device cpu --seed 3)

# 1: learns, writes its outputs
"$netc" train "$model" "${common[@]}" --metrics "$tmp/full.jsonl" --save "$tmp/w.safetensors" 2>"$tmp/full.log"
cat "$tmp/full.log"
acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/full.jsonl" | tail -1 | cut -d: -f2)
awk -v a="$acc" 'BEGIN { exit !(a > 0.9) }' || { echo "accuracy $acc is not above 0.9"; exit 1; }
[[ -s "$tmp/full.svg" && -s "$tmp/w.safetensors" ]] || { echo "no SVG or weights"; exit 1; }
grep -Eq "^CPU memory: the training step's values held [0-9]+\.[0-9] MiB at most \(parameters and optimizer state aside\), evaluation [0-9]+\.[0-9] MiB in runs of [0-9]+ samples$" "$tmp/full.log" ||
  { echo "no line of what the CPU executor's values held"; exit 1; }
grep -q '"train_loss"' "$tmp/full.jsonl"
# a step's line gives the lr that step ran with: step 1 of tiny.net's 5 warmup steps at 3e-3 ran
# with 6e-4 (the line said 1.2e-3, the next step's)
lr1=$(head -1 "$tmp/full.jsonl" | grep -o '"lr":[-0-9.e]*' | cut -d: -f2)
awk -v l="$lr1" 'BEGIN { d = l - 6e-4; exit !(d < 1e-12 && d > -1e-12) }' || { head -1 "$tmp/full.jsonl"; echo "step 1's lr is $lr1, not 6e-4"; exit 1; }

# 2: kill -9 mid-run, resume, compare every logged loss after the checkpoint
ck=$tmp/ck
# The process SIGKILLs itself after step 75 (mid-epoch 2, 5 steps after the
# checkpoint at step 70): a deterministic stand-in for an external kill -9.
if NETC_TEST_KILL_AFTER_STEP=75 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$ck" --checkpoint-every 10 \
    --metrics "$tmp/a.jsonl" 2>/dev/null; then
  echo "the run was not killed"; exit 1
fi
[[ -s "$ck/checkpoint.safetensors" ]] || { echo "no checkpoint before the kill"; exit 1; }
"$netc" train "$model" "${common[@]}" --checkpoint-dir "$ck" --resume --metrics "$tmp/b.jsonl" 2>"$tmp/resume.log"
grep -q 'resumed from' "$tmp/resume.log" || { cat "$tmp/resume.log"; echo "did not resume"; exit 1; }
# the uninterrupted run's step losses, from the first step the resumed run logged
first=$(grep -o '"step":[0-9]*' "$tmp/b.jsonl" | head -1 | cut -d: -f2)
pick() { grep '"train_loss"' "$1" | grep -v test_accuracy | sed 's/.*"step":\([0-9]*\).*"train_loss":\([-0-9.e]*\).*/\1 \2/' | awk -v f="$first" '$1 >= f'; }
diff <(pick "$tmp/full.jsonl") <(pick "$tmp/b.jsonl") || { echo "resumed losses differ from the uninterrupted run"; exit 1; }
[[ -n "$(pick "$tmp/b.jsonl")" ]] || { echo "nothing to compare"; exit 1; }
# ... and so is its epoch 2 line, the whole epoch's train loss (it averaged the steps after the resume)
eline() { sed -n 's/^\(epoch 2: train loss [^,]*, test loss [^,]*\),.*/\1/p' "$1"; }
eloss() { grep '"epoch":2,.*"test_loss"' "$1" | grep -o '"train_loss":[-0-9.e]*'; }
[[ -n $(eline "$tmp/full.log") && $(eline "$tmp/full.log") == "$(eline "$tmp/resume.log")" && -n $(eloss "$tmp/full.jsonl") &&
   $(eloss "$tmp/full.jsonl") == "$(eloss "$tmp/b.jsonl")" ]] ||
  { grep '^epoch 2:' "$tmp/full.log" "$tmp/resume.log"; eloss "$tmp/b.jsonl"; echo "the resumed epoch's train loss is not the whole epoch's"; exit 1; }

# 2b: resumed with the killed run's --metrics, the file goes on from the checkpoint: every
# step's line of the uninterrupted run, once each (it was replaced: the first 70 steps lost)
NETC_TEST_KILL_AFTER_STEP=75 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ck2" --checkpoint-every 10 \
  --metrics "$tmp/k.jsonl" 2>/dev/null && { echo "the run was not killed"; exit 1; }
"$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ck2" --resume --metrics "$tmp/k.jsonl" 2>/dev/null
steps() { grep '"lr"' "$1" | sed 's/.*"step":\([0-9]*\).*"train_loss":\([-0-9.e]*\).*/\1 \2/'; }
diff <(steps "$tmp/full.jsonl") <(steps "$tmp/k.jsonl") || { echo "a resumed run's metrics are not the whole run's"; exit 1; }
# 3: a damaged checkpoint is refused
printf 'garbage' | dd of="$ck/checkpoint.safetensors" bs=1 seek=20 conv=notrunc 2>/dev/null
if "$netc" train "$model" "${common[@]}" --checkpoint-dir "$ck" --resume 2>"$tmp/bad.log"; then
  echo "a damaged checkpoint was accepted"; exit 1
fi
grep -q 'cannot resume' "$tmp/bad.log" || { cat "$tmp/bad.log"; exit 1; }
# 4: --accumulate 4 (micro-batches of 8) follows the batch-32 run: same losses to 1e-5
"$netc" train "$model" "${common[@]}" --accumulate 4 --metrics "$tmp/acc.jsonl" 2>/dev/null
losses() { grep -o '"train_loss":[-0-9.e]*' "$1" | cut -d: -f2; }
paste <(losses "$tmp/full.jsonl") <(losses "$tmp/acc.jsonl") |
  awk '{ d = $1 - $2; if (d < 0) d = -d; if (d > 1e-5 * ($1 < 0 ? -$1 : $1) + 1e-7) { print "accumulated loss differs: " $0; bad = 1 } }
       END { exit bad }' || exit 1
[[ $(losses "$tmp/acc.jsonl" | wc -l) == $(losses "$tmp/full.jsonl" | wc -l) ]] || { echo "accumulated run logged a different number of steps"; exit 1; }
if "$netc" train "$model" "${common[@]}" --accumulate 5 2>"$tmp/acc.log"; then echo "--accumulate 5 with --batch 32 was accepted"; exit 1; fi
grep -q 'must divide' "$tmp/acc.log"


# 5: a run stopped by --max-steps inside an epoch resumes inside it: 5 steps, then the
# other 123 of the two epochs of 64 batches (its checkpoint once said "epoch 1 done")
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/ms" 2>/dev/null
# resumed with the --max-steps it reached, it runs no step (it ran a sixth and moved the checkpoint)
cp "$tmp/ms/checkpoint.safetensors" "$tmp/ms5.safetensors"
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/ms" --resume 2>"$tmp/ms5.log"
grep -q '^done: 5 steps' "$tmp/ms5.log" && grep -q 'the checkpoint is at step 5, --max-steps 5: no steps to run' "$tmp/ms5.log" &&
  cmp -s "$tmp/ms/checkpoint.safetensors" "$tmp/ms5.safetensors" || { cat "$tmp/ms5.log"; echo "a resume at --max-steps ran on"; exit 1; }
# a checkpoint holds no gradient accumulators (they are zero after a whole step): one made
# without --accumulate resumes with it (it was refused: "parameter 'h.weight.grad_acc' is missing")
cp -r "$tmp/ms" "$tmp/ms_acc"
"$netc" train "$model" "${common[@]}" --accumulate 4 --max-steps 8 --checkpoint-dir "$tmp/ms_acc" --resume 2>"$tmp/msacc.log" &&
  grep -q '^done: 8 steps' "$tmp/msacc.log" || { cat "$tmp/msacc.log"; echo "no resume with --accumulate"; exit 1; }
# ... which are known by their role, not their name: a parameter of the model's own may be called
# grad_acc (s.grad_acc here), and a resume reads it back like any weight (zeroed, it would zero x):
# resumed at step 8, the run takes the uninterrupted run's losses
ga=$tmp/ga.net
sed -e '/^model tiny/i fn scaled(x: [..., C]) {\n  param grad_acc: f32[C] = ones\n  return x * grad_acc\n}\n' \
    -e 's/h = nn.linear(x, 32)/s = scaled(x)\n  h = nn.linear(s, 32)/' "$model" > "$ga"
"$netc" build "$ga" --entry train --accumulate 2 --dump-ir >"$tmp/ga.ir" 2>/dev/null && grep -q '^param s.grad_acc: f32\[64\]' "$tmp/ga.ir" ||
  { echo "$ga has no parameter s.grad_acc"; exit 1; }
"$netc" train "$ga" "${common[@]}" --accumulate 2 --max-steps 24 --metrics "$tmp/ga24.jsonl" 2>/dev/null
"$netc" train "$ga" "${common[@]}" --accumulate 2 --max-steps 8 --checkpoint-dir "$tmp/ga" 2>/dev/null
"$netc" train "$ga" "${common[@]}" --accumulate 2 --max-steps 24 --checkpoint-dir "$tmp/ga" --resume --metrics "$tmp/ga.jsonl" 2>"$tmp/ga.log"
test_loss() { grep -o '"test_loss":[-0-9.e]*' "$1" | tail -1; }
first=9; diff <(pick "$tmp/ga24.jsonl") <(pick "$tmp/ga.jsonl") && [[ $(pick "$tmp/ga.jsonl" | wc -l) == 2 ]] &&
  [[ -n $(test_loss "$tmp/ga.jsonl") && $(test_loss "$tmp/ga.jsonl") == "$(test_loss "$tmp/ga24.jsonl")" ]] ||
  { cat "$tmp/ga.log"; echo "a parameter named grad_acc was not resumed as a parameter"; exit 1; }
"$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ms" --resume 2>"$tmp/ms.log"
grep -q 'resumed from .* at epoch 1, step 5' "$tmp/ms.log" && grep -q '^done: 128 steps' "$tmp/ms.log" ||
  { cat "$tmp/ms.log"; echo "a run stopped mid-epoch did not resume where it stopped"; exit 1; }
# resumed with the --max-steps it stopped at, a run takes no step more (it took one)
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/ms5" 2>/dev/null
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/ms5" --resume 2>"$tmp/ms5.log"
grep -q '^done: 5 steps' "$tmp/ms5.log" || { cat "$tmp/ms5.log"; echo "resumed at --max-steps, the run went on"; exit 1; }
# ... and only with the --batch and --seed it was made with (the batch index means their samples)
for other in "--batch 64" "--seed 4"; do
  args=("${common[@]}"); [[ $other == --batch* ]] && args[3]=64 || args[9]=4
  if "$netc" train "$model" "${args[@]}" --checkpoint-dir "$tmp/ms" --resume 2>"$tmp/other.log"; then
    echo "resumed with $other"; exit 1
  fi
  want="it was made with --batch 32, this run has --batch 64"; [[ $other == --seed* ]] && want="it was made with --seed 3, this run has --seed 4"
  grep -q "cannot resume: .*@train_state: $want: resume with the same one" "$tmp/other.log" || { cat "$tmp/other.log"; exit 1; }
done
# ... and only on the training set it was made on: another size, or the same size with other samples
mkdir "$tmp/data1k"; "$make_idx" "$tmp/data1k" 1024 512
same=$tmp/samesize; cp -r "$tmp/data" "$same"
printf '\x00\x00' | dd of="$same/train-images-idx3-ubyte" bs=1 seek=20 conv=notrunc 2>/dev/null   # the first image's first row
for d in data1k samesize; do
  if "$netc" train "$model" "${common[@]}" --data "$tmp/$d" --checkpoint-dir "$tmp/ms5" --resume 2>"$tmp/other.log"; then
    echo "resumed on $d"; exit 1
  fi
  want="it was made on 2048 training samples, this run has 1024"
  [[ $d == samesize ]] && want="it was made on other training data (2048 samples too, other labels or samples)"
  grep -q "cannot resume: .*@train_state: $want: resume on the same data (--data)" "$tmp/other.log" || { cat "$tmp/other.log"; exit 1; }
done
# ... and with the --epochs it was made with where the schedule spans them (tiny.net's cosine):
# another would change every later step's learning rate, so the steps done would be another
# run's; in the warmup (5 steps) they are not, and it goes on (it was refused: "0.003, not 0.003")
"$netc" train "$model" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/ms10" 2>/dev/null
if "$netc" train "$model" "${common[@]}" --epochs 3 --checkpoint-dir "$tmp/ms10" --resume 2>"$tmp/other.log"; then
  echo "a cosine run resumed with other --epochs"; exit 1
fi
grep -q "cannot resume: .*@train_state: it was made with --epochs 2, this run has --epochs 3: the cosine schedule spans the run's epochs, so its learning rates would be another run's (step 11's: .*); resume with --epochs 2" \
  "$tmp/other.log" || { cat "$tmp/other.log"; exit 1; }
"$netc" train "$model" "${common[@]}" --epochs 3 --max-steps 5 --checkpoint-dir "$tmp/ms5" --resume 2>"$tmp/other.log" &&
  grep -q "this run goes on to --epochs 3 (the steps done took the learning rates these give them)" "$tmp/other.log" ||
  { cat "$tmp/other.log"; echo "a cosine run in its warmup did not resume with other --epochs"; exit 1; }
# a finished run (all its epochs done) runs nothing, says so and exits 0, its checkpoint untouched
cp "$tmp/ms/checkpoint.safetensors" "$tmp/done.safetensors"
"$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ms" --resume 2>"$tmp/done.log" &&
  grep -q "ms/checkpoint.safetensors is of a finished run: all 2 epochs done, step 128; nothing to run (its cosine schedule ended with them" "$tmp/done.log" &&
  grep -q '^done: 128 steps' "$tmp/done.log" && ! grep -q -e 'resumed from' -e '^epoch' "$tmp/done.log" &&
  cmp -s "$tmp/ms/checkpoint.safetensors" "$tmp/done.safetensors" || { cat "$tmp/done.log"; echo "a finished run's resume did not say so"; exit 1; }
# with a constant learning rate other --epochs are the run's to choose: stopped at step 70 of 2 epochs,
# resumed with --epochs 3, it takes the losses of an uninterrupted 3-epoch run; then finished, it says
# to give more --epochs
flat=$tmp/flat.net; sed '/schedule cosine/d' "$model" > "$flat"
"$netc" train "$flat" "${common[@]}" --epochs 3 --metrics "$tmp/flat3.jsonl" 2>/dev/null
"$netc" train "$flat" "${common[@]}" --max-steps 70 --checkpoint-dir "$tmp/fl" 2>/dev/null
"$netc" train "$flat" "${common[@]}" --epochs 3 --checkpoint-dir "$tmp/fl" --resume --metrics "$tmp/fl.jsonl" 2>"$tmp/fl.log" &&
  grep -q 'the checkpoint was made with --epochs 2; this run goes on to --epochs 3' "$tmp/fl.log" && grep -q '^done: 192 steps' "$tmp/fl.log" ||
  { cat "$tmp/fl.log"; echo "a constant-lr run did not resume with more --epochs"; exit 1; }
first=71; diff <(pick "$tmp/flat3.jsonl") <(pick "$tmp/fl.jsonl") && [[ -n "$(pick "$tmp/fl.jsonl")" ]] ||
  { echo "the run resumed with more --epochs is not the longer run"; exit 1; }
"$netc" train "$flat" "${common[@]}" --epochs 3 --checkpoint-dir "$tmp/fl" --resume 2>"$tmp/fl.log" &&
  grep -q 'is of a finished run: all 3 epochs done, step 192; nothing to run (give more --epochs to train on)' "$tmp/fl.log" ||
  { cat "$tmp/fl.log"; echo "a finished run's resume did not say so"; exit 1; }
# another learning rate on a resume (--lr, or the train section's edited) is the user's to choose:
# the run goes on with it and says so, naming both (it went on silently); the checkpoint then keeps
# the new one, so a resume with it again says nothing
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/lr" 2>/dev/null
"$netc" train "$model" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/lr" --resume --lr 1e-3 2>"$tmp/lr.log" &&
  grep -q '^netc: the checkpoint was made with learning rate 0.003; this run goes on with learning rate 0.001 (--lr) from step 6$' "$tmp/lr.log" &&
  grep -q '^done: 10 steps' "$tmp/lr.log" || { cat "$tmp/lr.log"; echo "a resume with another --lr did not say so"; exit 1; }
"$netc" train "$model" "${common[@]}" --max-steps 15 --checkpoint-dir "$tmp/lr" --resume --lr 1e-3 2>"$tmp/lr.log" &&
  grep -q 'resumed from .* step 10$' "$tmp/lr.log" && ! grep -q 'learning rate' "$tmp/lr.log" ||
  { cat "$tmp/lr.log"; echo "a resume with the checkpoint's --lr spoke of it"; exit 1; }
sed 's/lr: 3e-3/lr: 2.5e-3/' "$model" > "$tmp/lr.net"
"$netc" train "$tmp/lr.net" "${common[@]}" --max-steps 20 --checkpoint-dir "$tmp/lr" --resume 2>"$tmp/lr.log" &&
  grep -q "^netc: the checkpoint was made with learning rate 0.001; this run goes on with learning rate 0.0025 (the train section's lr) from step 16$" "$tmp/lr.log" ||
  { cat "$tmp/lr.log"; echo "a resume with another lr in the train section did not say so"; exit 1; }
# ... but not where --max-steps leaves no step to run at any rate
"$netc" train "$model" "${common[@]}" --max-steps 20 --checkpoint-dir "$tmp/lr" --resume --lr 5e-4 2>"$tmp/lr.log" &&
  grep -q 'no steps to run' "$tmp/lr.log" && ! grep -q 'learning rate' "$tmp/lr.log" ||
  { cat "$tmp/lr.log"; echo "a resume with no step to run spoke of its learning rate"; exit 1; }

# 6: labels outside the model's classes, and a test set of another sample shape, are
# refused as the data loads, not after an epoch of work (the labels 0-3 of tiny.net's 4 classes)
bad=$tmp/badlabel; cp -r "$tmp/data" "$bad"
printf '\x04' | dd of="$bad/t10k-labels-idx1-ubyte" bs=1 seek=71 conv=notrunc 2>/dev/null
if "$netc" train "$model" "${common[@]}" --data "$bad" 2>"$tmp/bl.log"; then echo "a label of 4 for 4 classes was accepted"; exit 1; fi
grep -q "t10k: sample 63's label is 4, outside the model's 4 classes (labels 0 to 3)" "$tmp/bl.log" && ! grep -q '^epoch' "$tmp/bl.log" ||
  { cat "$tmp/bl.log"; exit 1; }
shape=$tmp/badshape; cp -r "$tmp/data" "$shape"
printf '\x00\x00\x00\x10\x00\x00\x00\x04' | dd of="$shape/t10k-images-idx3-ubyte" bs=1 seek=8 conv=notrunc 2>/dev/null
if "$netc" train "$model" "${common[@]}" --data "$shape" 2>"$tmp/bs.log"; then echo "a test set of 16x4 samples was accepted"; exit 1; fi
grep -q "the test set has u8 samples of 16x4" "$tmp/bs.log" && ! grep -q '^epoch' "$tmp/bs.log" || { cat "$tmp/bs.log"; exit 1; }

# 7: --save where it cannot be written is said before any step; -o through a symbolic
# link writes the file it points to and keeps the link
if "$netc" train "$model" "${common[@]}" --save "$tmp/none/w.safetensors" 2>"$tmp/sv.log"; then echo "--save into no directory"; exit 1; fi
grep -q -- "--save $tmp/none/w.safetensors: cannot write" "$tmp/sv.log" && ! grep -q '^epoch' "$tmp/sv.log" || { cat "$tmp/sv.log"; exit 1; }
ln -s "$tmp/real.safetensors" "$tmp/link.safetensors"
"$netc" train "$model" "${common[@]}" --epochs 1 --max-steps 2 --save "$tmp/link.safetensors" 2>/dev/null
[[ -L "$tmp/link.safetensors" && -s "$tmp/real.safetensors" ]] || { echo "--save replaced the symbolic link"; exit 1; }

# 8: a run that fails before its first step (a checkpoint it cannot resume from, which
# emptied the file, opened before; bad labels, too few samples for a batch, no data
# set) leaves an earlier run's --metrics file as it was: the file is opened with its
# first line; where it cannot be written is still said before any work
printf '{"earlier":"run"}\n' > "$tmp/keep.jsonl"
for why in "--checkpoint-dir $ck --resume" "--checkpoint-dir $tmp/ms --resume --seed 4" "--data $bad" "--batch 4096" \
           "--data $tmp/nodata"; do
  # shellcheck disable=SC2086  # $why is several words
  if "$netc" train "$model" "${common[@]}" $why --metrics "$tmp/keep.jsonl" 2>"$tmp/keep.log"; then echo "$why: the run did not fail"; exit 1; fi
  [[ $(cat "$tmp/keep.jsonl") == '{"earlier":"run"}' ]] || { cat "$tmp/keep.log"; echo "$why: the failed run emptied --metrics"; exit 1; }
done
if "$netc" train "$model" "${common[@]}" --data "$tmp/nodata" --metrics "$tmp/none/m.jsonl" 2>"$tmp/mx.log"; then echo "--metrics into no directory"; exit 1; fi
grep -q -- "--metrics $tmp/none/m.jsonl: cannot write" "$tmp/mx.log" && ! grep -q 'data set installed' "$tmp/mx.log" || { cat "$tmp/mx.log"; exit 1; }
mkdir "$tmp/mdir"
if "$netc" train "$model" "${common[@]}" --data "$tmp/nodata" --metrics "$tmp/mdir" 2>"$tmp/md.log"; then echo "--metrics a directory"; exit 1; fi
grep -q -- "cannot write --metrics $tmp/mdir: is a directory" "$tmp/md.log" || { cat "$tmp/md.log"; exit 1; }
"$netc" train "$model" "${common[@]}" --epochs 1 --max-steps 2 --metrics "$tmp/keep.jsonl" 2>/dev/null
grep -q '"train_loss"' "$tmp/keep.jsonl" && ! grep -q earlier "$tmp/keep.jsonl" || { echo "a run's --metrics did not replace the earlier run's"; exit 1; }

# 9: an interruption. In-process first (NETC_TEST_INTERRUPT=N: SIGINT raised as step N runs;
# eval: in the first evaluation), then a real signal from outside. Each case says FAIL and
# the rest still run.
ifails=0
ifail() { echo "FAIL interrupt: $*"; ifails=$((ifails + 1)); }
"$netc" build "$model" --entry forward --dim B=2 --target '' -o "$tmp/tiny.netm" 2>/dev/null
interrupted() {   # interrupted LOG METRICS SIGNAL STEP: what an interrupted run must have said and written
  grep -q "^netc: interrupted at step $4; saving the checkpoint, the weights and the metrics" "$1" &&
    grep -q "^netc: stopped by $3 after step $4; checkpoint .*/checkpoint.safetensors (--resume goes on with step $(($4 + 1)))" "$1" &&
    "$jsonl_check" "$2" >/dev/null && [[ $(tail -1 "$2") == "{\"step\":$4,\"interrupted\":\"$3\"}" ]] ||
    { cat "$1"; tail -2 "$2"; return 1; }
}
weights_load() { "$netc" run "$tmp/tiny.netm" --weights "$1" --random-inputs 1 --device cpu >/dev/null 2>"$tmp/wl.log" || { cat "$tmp/wl.log"; return 1; }; }
# mid-epoch (step 75 of 128): the resumed run's losses are the uninterrupted run's
rc=0; NETC_TEST_INTERRUPT=75 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/i75" --metrics "$tmp/i75.jsonl" \
  --save "$tmp/i75.safetensors" 2>"$tmp/i75.log" || rc=$?
if [[ $rc -eq 130 ]] && interrupted "$tmp/i75.log" "$tmp/i75.jsonl" SIGINT 75 && weights_load "$tmp/i75.safetensors"; then
  "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/i75" --resume --metrics "$tmp/i75b.jsonl" 2>"$tmp/i75b.log" || true
  first=$(grep -o '"step":[0-9]*' "$tmp/i75b.jsonl" | head -1 | cut -d: -f2)
  grep -q 'resumed from .* at epoch 2, step 75$' "$tmp/i75b.log" && diff <(pick "$tmp/full.jsonl") <(pick "$tmp/i75b.jsonl") &&
    [[ -n "$(pick "$tmp/i75b.jsonl")" ]] || { cat "$tmp/i75b.log"; ifail "the run resumed after step 75 does not follow the uninterrupted one"; }
else ifail "SIGINT in step 75: exit $rc"; fi
# in the first step
rc=0; NETC_TEST_INTERRUPT=1 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/i1" --metrics "$tmp/i1.jsonl" \
  --save "$tmp/i1.safetensors" 2>"$tmp/i1.log" || rc=$?
[[ $rc -eq 130 ]] && interrupted "$tmp/i1.log" "$tmp/i1.jsonl" SIGINT 1 && weights_load "$tmp/i1.safetensors" || ifail "SIGINT in the first step: exit $rc"
# in the evaluation: dropped, its epoch's line is the resumed run's, which takes no step first
rc=0; NETC_TEST_INTERRUPT=eval "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ie" --metrics "$tmp/ie.jsonl" \
  --save "$tmp/ie.safetensors" 2>"$tmp/ie.log" || rc=$?
if [[ $rc -eq 130 ]] && interrupted "$tmp/ie.log" "$tmp/ie.jsonl" SIGINT 64 && ! grep -q test_loss "$tmp/ie.jsonl"; then
  "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ie" --resume --max-steps 64 --metrics "$tmp/ieb.jsonl" 2>"$tmp/ieb.log" || true
  # the checkpoint kept the epoch's losses: its line is the uninterrupted run's (it said "train loss -")
  e1=$(sed -n 's/^\(epoch 1: train loss [^,]*, test loss [^,]*\),.*/\1/p' "$tmp/full.log")
  grep -q 'resumed from .* at epoch 1, step 64$' "$tmp/ieb.log" && grep -qF "$e1," "$tmp/ieb.log" &&
    grep -q '^done: 64 steps' "$tmp/ieb.log" && [[ $(grep -c test_loss "$tmp/ieb.jsonl") == 1 ]] &&
    [[ $(grep -o '"train_loss":[-0-9.e]*' "$tmp/ieb.jsonl") == $(grep '"epoch":1,.*test_loss' "$tmp/full.jsonl" | grep -o '"train_loss":[-0-9.e]*') ]] ||
    { cat "$tmp/ieb.log" "$tmp/ieb.jsonl"; ifail "the resumed run did not evaluate what the interrupted one left"; }
else ifail "SIGINT in the evaluation: exit $rc"; fi
# pressed twice: the second quits at once (the default action: no checkpoint, no weights)
rc=0; NETC_TEST_INTERRUPT=5,2 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/i2" --save "$tmp/i2.safetensors" \
  2>"$tmp/i2.log" || rc=$?
[[ $rc -eq 130 && ! -e $tmp/i2/checkpoint.safetensors && ! -e $tmp/i2.safetensors ]] && grep -q 'interrupted: stopping' "$tmp/i2.log" &&
  ! grep -q 'saving' "$tmp/i2.log" || { cat "$tmp/i2.log"; ifail "a second SIGINT did not quit at once: exit $rc"; }
# from outside, as a terminal's Ctrl-C or a scheduler's SIGTERM: once an epoch is done (its
# line in the metrics, polled), the signal; the run stops, saves and exits 128 + the signal
long=(--data "$tmp/data" --batch 32 --epochs 100000 --device cpu --seed 3)
signalled() {   # signalled SIGNAL STATUS
  local d=$tmp/sig$1 rc=0 i pid step
  # `&` in a script starts a job with SIGINT ignored (and netc leaves it so): trap - INT gives it back
  (trap - INT; exec "$netc" train "$model" "${long[@]}" --checkpoint-dir "$d" --metrics "$d.jsonl" --save "$d.safetensors" 2>"$d.log") &
  pid=$!
  for ((i = 0; i < 600; i++)); do grep -qs test_loss "$d.jsonl" && break; sleep 0.05; done
  kill -s "$1" "$pid"
  for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && { kill -9 "$pid"; echo "$1: still running 30 s after the signal"; return 1; }
  wait "$pid" || rc=$?
  step=$(sed -n 's/^netc: interrupted at step \([0-9]*\);.*/\1/p' "$d.log")
  [[ $rc -eq $2 && -n $step ]] && interrupted "$d.log" "$d.jsonl" "SIG$1" "$step" && weights_load "$d.safetensors" ||
    { echo "$1: exit $rc (not $2), step '$step'"; return 1; }
  "$netc" train "$model" "${long[@]}" --checkpoint-dir "$d" --resume --max-steps $((step + 1)) 2>"$d.resume.log" || true
  grep -q "resumed from .* step $step$" "$d.resume.log" && grep -q "^done: $((step + 1)) steps" "$d.resume.log" ||
    { cat "$d.resume.log"; echo "$1: did not resume with step $((step + 1))"; return 1; }
}
signalled INT 130 || ifail "SIGINT from outside"
signalled TERM 143 || ifail "SIGTERM from outside"
# a script running netc train, then more: Ctrl-C reaches both (one process group); netc
# saves, then dies of SIGINT, and so the script stops too (after an exit 130 it went on)
loop_stops() {
  local d=$tmp/loop i pid
  (trap - INT; exec setsid bash -c '"$1" train "$2" "${@:4}" 2>"$3.log"; echo went on >"$3.after"' _ \
    "$netc" "$model" "$d" "${long[@]}" --checkpoint-dir "$d" --metrics "$d.jsonl") &
  pid=$!   # setsid: a session and process group of its own, led by that pid
  for ((i = 0; i < 600; i++)); do grep -qs test_loss "$d.jsonl" && break; sleep 0.05; done
  kill -s INT -- -"$pid"
  for ((i = 0; i < 600; i++)); do kill -0 "$pid" 2>/dev/null || break; sleep 0.05; done
  kill -0 "$pid" 2>/dev/null && { kill -9 -- -"$pid"; echo "still running 30 s after the signal"; return 1; }
  wait "$pid" || true
  [[ -e $d/checkpoint.safetensors ]] && grep -q '^netc: stopped by SIGINT' "$d.log" && [[ ! -e $d.after ]] ||
    { cat "$d.log"; echo "checkpoint: $(ls "$d" 2>&1); the script: $(cat "$d.after" 2>&1)"; return 1; }
}
loop_stops || ifail "Ctrl-C in a script that runs netc train did not stop the script"
((ifails == 0)) || exit 1

# 10: a CNN of the stdlib's conv2d and max_pool2d learns (windows by gather, gradients by
# scatter-add): the loss falls from its first epoch to its second, and the test accuracy is high
"$netc" train "$src/tests/train/tiny_cnn.net" "${common[@]}" --metrics "$tmp/cnn.jsonl" 2>"$tmp/cnn.log" ||
  { cat "$tmp/cnn.log"; echo "FAIL: tiny_cnn did not train"; exit 1; }
cnn_acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/cnn.jsonl" | tail -1 | cut -d: -f2)
awk -v a="$cnn_acc" 'BEGIN { exit !(a > 0.9) }' || { cat "$tmp/cnn.log"; echo "FAIL: tiny_cnn's accuracy $cnn_acc is not above 0.9"; exit 1; }
mapfile -t cnn_loss < <(grep '"test_loss"' "$tmp/cnn.jsonl" | grep -o '"train_loss":[-0-9.e]*' | cut -d: -f2)
awk -v a="${cnn_loss[0]:-}" -v b="${cnn_loss[1]:-}" 'BEGIN { exit !(a != "" && b != "" && b < a) }' ||
  { cat "$tmp/cnn.log"; echo "FAIL: tiny_cnn's train loss did not fall: ${cnn_loss[*]}"; exit 1; }
# ... and its evaluation holds no more than its step: it runs the test set in the step's batches (it ran
# 1000 images at once, here the whole 512: 13.5 MiB of convolution windows against the step's 1.4 MiB)
read -r step_mib eval_mib < <(sed -n "s/^CPU memory: the training step's values held \([0-9.]*\) MiB.*evaluation \([0-9.]*\) MiB in runs.*/\1 \2/p" "$tmp/cnn.log") || true
awk -v s="${step_mib:-}" -v e="${eval_mib:-}" 'BEGIN { exit !(s != "" && e != "" && e + 0 <= s + 0) }' ||
  { cat "$tmp/cnn.log"; echo "FAIL: tiny_cnn's evaluation held ${eval_mib:-?} MiB, more than its step's ${step_mib:-?} MiB"; exit 1; }
# ... and a small --batch does not make the evaluation as many small runs: tiny.net at --batch 4 scores its
# 512 test images in runs of more than 4 (it ran 128 runs of 4, each with its fixed cost), as many as the
# step's planned values (its weights' gradients and Adam's) hold room for
"$netc" train "$model" "${common[@]}" --batch 4 --max-steps 3 2>"$tmp/b4.log" >/dev/null ||
  { cat "$tmp/b4.log"; echo "FAIL: tiny.net at --batch 4 did not train"; exit 1; }
runs=$(sed -n "s/^CPU memory: .* in runs of \([0-9]*\) samples$/\1/p" "$tmp/b4.log")
[[ -n $runs ]] && (( runs > 4 && runs <= 512 )) ||
  { cat "$tmp/b4.log"; echo "FAIL: tiny.net at --batch 4 evaluated in runs of ${runs:-?} samples, want more than 4"; exit 1; }

# 11. a cosine schedule whose total_steps ends before the run's last step is warned of before any
# step (the steps after it ran at min_lr 0, silently), an error under -Werror; one that spans it is not
sed 's/schedule cosine(warmup: 5)/schedule cosine(warmup: 5, total_steps: 30)/' "$model" >"$tmp/cos30.net"
"$netc" train "$tmp/cos30.net" "${common[@]}" --max-steps 40 2>"$tmp/cos.log" >/dev/null || { cat "$tmp/cos.log"; exit 1; }
grep -qF "warning: the cosine schedule's total_steps 30 ends before this run's 40 steps: steps 31 to 40 run at min_lr 0" "$tmp/cos.log" ||
  { cat "$tmp/cos.log"; echo "FAIL: no warning of a cosine schedule that ends before the run"; exit 1; }
rc=0; "$netc" train "$tmp/cos30.net" "${common[@]}" --max-steps 40 -Werror 2>"$tmp/cos.log" >/dev/null || rc=$?
[[ $rc == 2 ]] && ! grep -q '^epoch' "$tmp/cos.log" || { cat "$tmp/cos.log"; echo "FAIL: -Werror: exit $rc, want 2 before any step"; exit 1; }
"$netc" train "$tmp/cos30.net" "${common[@]}" --max-steps 30 2>"$tmp/cos.log" >/dev/null && ! grep -q 'total_steps' "$tmp/cos.log" ||
  { cat "$tmp/cos.log"; echo "FAIL: a cosine schedule that spans the run was warned of"; exit 1; }

# 12. an epoch --max-steps stops inside says so on its line and in its metrics (a resume scores that
# epoch again at its end, and the two lines read alike), and the run's last step has its progress line
"$netc" train "$model" "${common[@]}" --max-steps 40 --metrics "$tmp/part.jsonl" 2>"$tmp/part.log" >/dev/null || { cat "$tmp/part.log"; exit 1; }
grep -q '^epoch 1: train loss .*; --max-steps stopped it after 40 of its 64 batches$' "$tmp/part.log" &&
  grep -q '^epoch 1/2 step 40 (40/64) loss' "$tmp/part.log" &&
  tail -1 "$tmp/part.jsonl" | grep -q '"epoch_batches_done":40,"epoch_batches":64}$' ||
  { cat "$tmp/part.log"; tail -1 "$tmp/part.jsonl"; echo "FAIL: a partial epoch's line does not say it"; exit 1; }
! grep -q 'epoch_batches' "$tmp/full.jsonl" || { echo "FAIL: whole epochs' metrics say epoch_batches"; exit 1; }

# 13. a run interrupted, resumed on its --metrics and interrupted again, then resumed to its end: the
# file reads as the uninterrupted run's, its one "interrupted" line the last stop's, at the end (the
# first stop's stayed in the middle, between steps 75 and 85)
rc=0; NETC_TEST_INTERRUPT=75 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ir" --metrics "$tmp/ir.jsonl" 2>/dev/null || rc=$?
[[ $rc == 130 ]] || { echo "FAIL: the first interruption exited $rc"; exit 1; }
rc=0; NETC_TEST_INTERRUPT=100 "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ir" --resume --metrics "$tmp/ir.jsonl" \
  2>/dev/null || rc=$?
[[ $rc == 130 && $(grep -c interrupted "$tmp/ir.jsonl") == 1 && $(tail -1 "$tmp/ir.jsonl") == '{"step":100,"interrupted":"SIGINT"}' ]] ||
  { cat "$tmp/ir.jsonl"; echo "FAIL: resumed and interrupted again (exit $rc), the metrics do not end with the one interruption"; exit 1; }
"$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/ir" --resume --metrics "$tmp/ir.jsonl" 2>/dev/null
! grep -q interrupted "$tmp/ir.jsonl" && "$jsonl_check" "$tmp/ir.jsonl" >/dev/null && diff <(steps "$tmp/full.jsonl") <(steps "$tmp/ir.jsonl") ||
  { cat "$tmp/ir.jsonl"; echo "FAIL: a run resumed to its end after two interruptions does not have the uninterrupted run's metrics"; exit 1; }

# 14. a long run's workflow, abused: each works, or stops before any step with a clear message and a
# non-zero exit, the checkpoint as it was. Each case says FAIL and the rest still run.
wfails=0
wfail() { echo "FAIL workflow: $*"; wfails=$((wfails + 1)); }
refused() {   # refused LOG MESSAGE: exit non-zero before any step, saying MESSAGE
  ! grep -q '^epoch' "$1" && grep -qF -- "$2" "$1" || { cat "$1"; return 1; }
}
"$netc" train "$model" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/w" 2>/dev/null
cp "$tmp/w/checkpoint.safetensors" "$tmp/w10.safetensors"
same_ckpt() { cmp -s "$tmp/w/checkpoint.safetensors" "$tmp/w10.safetensors"; }
# kill -9 as a checkpoint is written leaves its temporary (atomic_file's NAME.tmp.PID.N) beside the whole
# previous one: the resume goes on from that one and removes the temporary of a process gone (they
# stayed, a model's size each), not one of a live process
true & wait $!; gone=$!
head -c 100 "$tmp/w10.safetensors" > "$tmp/w/checkpoint.safetensors.tmp.$gone.0"
: > "$tmp/w/checkpoint.safetensors.tmp.$$.0"
"$netc" train "$model" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/w" --resume 2>"$tmp/w.log" &&
  grep -q "note: removed $tmp/w/checkpoint.safetensors.tmp.$gone.0, a checkpoint that process $gone, gone, was writing" "$tmp/w.log" &&
  [[ ! -e $tmp/w/checkpoint.safetensors.tmp.$gone.0 && -e $tmp/w/checkpoint.safetensors.tmp.$$.0 ]] && same_ckpt ||
  { cat "$tmp/w.log"; ls "$tmp/w"; wfail "a killed write's temporary was not removed"; }
rm -f "$tmp/w/checkpoint.safetensors.tmp.$$.0"
# another model's checkpoint, and this model's with a layer added or taken out (taken out, it resumed,
# and the next checkpoint would have lost the layer's weights)
sed 's/h = nn.linear(x, 32)/h = nn.linear(x, 32)\n  h = h + nn.linear(h, 32)/' "$model" > "$tmp/wide.net"
"$netc" train "$tmp/wide.net" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/wide" 2>/dev/null
cp "$tmp/wide/checkpoint.safetensors" "$tmp/wide5.safetensors"
hint="(hint: a checkpoint of another model, or of this one with other layers or sizes: resume with the .net file, --set and --dim it was made with, or give this run a --checkpoint-dir of its own)"
for c in "$src/tests/train/tiny_cnn.net w tensor 'h.bias' is not a parameter of model 'tiny_cnn'" \
         "$tmp/wide.net w parameter 'linear.weight' is missing" \
         "$model wide tensor 'linear.bias' is not a parameter of model 'tiny'"; do
  read -r m d why <<<"$c"
  rc=0; "$netc" train "$m" "${common[@]}" --checkpoint-dir "$tmp/$d" --resume 2>"$tmp/wm.log" || rc=$?
  [[ $rc == 1 ]] && refused "$tmp/wm.log" "cannot resume: $tmp/$d/checkpoint.safetensors: $why $hint" && same_ckpt &&
    cmp -s "$tmp/wide/checkpoint.safetensors" "$tmp/wide5.safetensors" || wfail "$m on $d's checkpoint: exit $rc"
done
# a checkpoint there but unreadable is an error (it was "no checkpoint yet: starting from scratch", and replaced)
as_user=(); [[ $(id -u) == 0 ]] && as_user=(setpriv --reuid=65534 --regid=65534 --clear-groups)
if [[ $(id -u) != 0 ]] || command -v setpriv >/dev/null; then
  cp -r "$tmp/w" "$tmp/wu"; chmod 777 "$tmp/wu"; chmod 000 "$tmp/wu/checkpoint.safetensors"; chmod -R a+rX "$tmp/data"
  chmod a+x "$tmp"; rc=0
  "${as_user[@]}" "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/wu" --resume 2>"$tmp/wu.log" || rc=$?
  chmod 644 "$tmp/wu/checkpoint.safetensors"
  [[ $rc == 1 ]] && refused "$tmp/wu.log" "cannot resume: $tmp/wu/checkpoint.safetensors: Permission denied" &&
    cmp -s "$tmp/wu/checkpoint.safetensors" "$tmp/w10.safetensors" || wfail "an unreadable checkpoint: exit $rc"
  # ... and a directory it cannot write to, before any step
  mkdir "$tmp/wro"; chmod 555 "$tmp/wro"; rc=0
  "${as_user[@]}" "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/wro" 2>"$tmp/wro.log" || rc=$?
  [[ $rc == 1 ]] && refused "$tmp/wro.log" "--checkpoint-dir $tmp/wro: Permission denied" || wfail "a read-only --checkpoint-dir: exit $rc"
fi
# the checkpoint's file given for --checkpoint-dir (it said "not a directory")
rc=0; "$netc" train "$model" "${common[@]}" --checkpoint-dir "$tmp/w/checkpoint.safetensors" --resume 2>"$tmp/wf.log" || rc=$?
[[ $rc == 1 ]] && refused "$tmp/wf.log" "--checkpoint-dir $tmp/w/checkpoint.safetensors is a file: give the directory that holds (or is to hold) checkpoint.safetensors, $tmp/w" ||
  wfail "the checkpoint file as --checkpoint-dir: exit $rc"
# --resume into a directory that is not there yet (a typo?) starts from scratch, and says it made it
"$netc" train "$model" "${common[@]}" --max-steps 2 --checkpoint-dir "$tmp/wnew" --resume 2>"$tmp/wn.log" &&
  grep -q "no checkpoint in $tmp/wnew yet (the directory did not exist: this run made it): starting from scratch" "$tmp/wn.log" ||
  { cat "$tmp/wn.log"; wfail "--resume into a new directory"; }
# --save onto a directory (it said "is a directory", without the name to give)
mkdir "$tmp/wsave"; rc=0; "$netc" train "$model" "${common[@]}" --save "$tmp/wsave" 2>"$tmp/ws.log" || rc=$?
[[ $rc == 1 ]] && refused "$tmp/ws.log" "--save $tmp/wsave is a directory: give the weights a file name ($tmp/wsave/weights.safetensors)" ||
  wfail "--save onto a directory: exit $rc"
# --checkpoint-every past the run's steps: the checkpoints of the epoch ends and of --max-steps's stop
"$netc" train "$model" "${common[@]}" --max-steps 70 --checkpoint-every 1000 --checkpoint-dir "$tmp/wev" 2>/dev/null &&
  "$netc" train "$model" "${common[@]}" --max-steps 72 --checkpoint-dir "$tmp/wev" --resume 2>"$tmp/wev.log" &&
  grep -q 'resumed from .* at epoch 2, step 70$' "$tmp/wev.log" || { cat "$tmp/wev.log"; wfail "--checkpoint-every past the run"; }
# --save and --metrics into a directory not there (docs/training.md's out/ in a fresh checkout) say to make it
for o in --save --metrics; do
  rc=0; "$netc" train "$model" "${common[@]}" "$o" "$tmp/wnone/x.jsonl" 2>"$tmp/wd.log" || rc=$?
  [[ $rc == 1 ]] && refused "$tmp/wd.log" "(hint: the directory $tmp/wnone is not there: make it first, mkdir -p $tmp/wnone)" ||
    wfail "$o into no directory: exit $rc"
done
# another --batch or --seed is refused (section 5); another --lr is taken and said (section 5)
((wfails == 0)) || exit 1

# 15. a resume with another optimizer, or of an edited model. Another optimizer's state is not this one's:
# adam's moments dropped by sgd (it went on silently), or sgd's checkpoint called another model's by
# adam (its moments missing); refused, naming both, before any step, the checkpoint as it was. adam and
# adamw share theirs: taken and said. An edited model whose parameters still fit goes on, with a note
# of what changed (it went on without a word); a copy of the .net file is the same model.
ofails=0
ofail() { echo "FAIL optimizer/model: $*"; ofails=$((ofails + 1)); }
sed 's/optimizer adam(lr: 3e-3)/optimizer sgd(lr: 3e-3)/' "$model" > "$tmp/o_sgd.net"
sed 's/optimizer adam(lr: 3e-3)/optimizer adamw(lr: 3e-3)/' "$model" > "$tmp/o_adamw.net"
sed 's/optimizer adam(lr: 3e-3)/optimizer sgd(lr: 3e-3, momentum: 0.9)/' "$model" > "$tmp/o_mom.net"
"$netc" train "$model" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/oa" 2>/dev/null
"$netc" train "$tmp/o_sgd.net" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/os" 2>/dev/null
cp "$tmp/oa/checkpoint.safetensors" "$tmp/oa5.safetensors"; cp "$tmp/os/checkpoint.safetensors" "$tmp/os5.safetensors"
ohint="(hint: resume with the optimizer it was made with, the train section's \`optimizer\` or the --set that chose it; to change optimizers on purpose, start a new run with a --checkpoint-dir of its own)"
adam_keeps=", which keeps moments (NAME.adam_m, NAME.adam_v)"
for c in "o_sgd.net oa adam$adam_keeps; this run has sgd without momentum, which keeps no state" \
         "o_mom.net oa adam$adam_keeps; this run has sgd with momentum, which keeps a momentum buffer (NAME.momentum)" \
         "tiny.net os sgd without momentum, which keeps no state; this run has adam$adam_keeps"; do
  read -r m d why <<<"$c"
  [[ $m == tiny.net ]] && m=$model || m=$tmp/$m
  rc=0; "$netc" train "$m" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/$d" --resume 2>"$tmp/o.log" || rc=$?
  [[ $rc == 1 ]] && refused "$tmp/o.log" "cannot resume: $tmp/$d/checkpoint.safetensors: it was made with optimizer $why: it would not go on as the run it resumes $ohint" &&
    cmp -s "$tmp/$d/checkpoint.safetensors" "$tmp/${d}5.safetensors" || ofail "$m on $d's checkpoint: exit $rc"
done
cp -r "$tmp/oa" "$tmp/oaw"
"$netc" train "$tmp/o_adamw.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oaw" --resume 2>"$tmp/o.log" &&
  grep -q "^netc: note: the checkpoint was made with optimizer adam; this run goes on with adamw from step 6 (the moments carried over)$" "$tmp/o.log" &&
  grep -q '^done: 10 steps' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "adam to adamw was not taken and said"; }
# checkpoints before the optimizer and the model's identity were kept (their __metadata__ no more than
# "format"): the optimizer is told by the state's names, and an edited model resumes without a note
for d in oa os; do
  mkdir -p "$tmp/old$d"; perl -0777 -pe 's/("format":"netc")(,"netc\.[^}]*)/$1 . " " x length($2)/e' "$tmp/${d}5.safetensors" > "$tmp/old$d/checkpoint.safetensors"
done
rc=0; "$netc" train "$tmp/o_sgd.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oldoa" --resume 2>"$tmp/o.log" || rc=$?
[[ $rc == 1 ]] && refused "$tmp/o.log" "it was made with optimizer adam or adamw, which keeps moments (NAME.adam_m, NAME.adam_v); this run has sgd without momentum" ||
  ofail "an older adam checkpoint resumed with sgd: exit $rc"
sed 's/relu(h)/gelu(h)/' "$model" > "$tmp/o_edit.net"
"$netc" train "$tmp/o_edit.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oldoa" --resume 2>"$tmp/o.log" &&
  grep -q 'resumed from .* step 5$' "$tmp/o.log" && ! grep -q 'note:' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "an older checkpoint of an edited model"; }
"$netc" train "$tmp/o_sgd.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oldos" --resume 2>"$tmp/o.log" &&
  grep -q '^done: 10 steps' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "an older sgd checkpoint resumed with sgd"; }
# an edited model is said, once: the checkpoint it writes keeps the new source
cp -r "$tmp/oa" "$tmp/oe"; cp "$model" "$tmp/o_copy.net"
"$netc" train "$tmp/o_copy.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oe" --resume 2>"$tmp/o.log" &&
  grep -q '^done: 10 steps' "$tmp/o.log" && ! grep -q 'note:' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "a copy of the .net file was said to differ"; }
"$netc" train "$tmp/o_edit.net" "${common[@]}" --max-steps 15 --checkpoint-dir "$tmp/oe" --resume 2>"$tmp/o.log" &&
  grep -q "^netc: note: the model's source is not the checkpoint's (o_edit.net edited); this run goes on with it from step 11$" "$tmp/o.log" &&
  grep -q '^done: 15 steps' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "an edited model was not said"; }
"$netc" train "$tmp/o_edit.net" "${common[@]}" --max-steps 20 --checkpoint-dir "$tmp/oe" --resume 2>"$tmp/o.log" &&
  ! grep -q 'note:' "$tmp/o.log" || { cat "$tmp/o.log"; ofail "the edited model was said again"; }
# ... and so is another --set (a config constant the parameters do not depend on)
sed 's|^model tiny|config S = 1.0\nmodel tiny|; s|/ 255.0|/ 255.0 * S|' "$model" > "$tmp/o_set.net"
"$netc" train "$tmp/o_set.net" "${common[@]}" --max-steps 5 --checkpoint-dir "$tmp/oset" 2>/dev/null
"$netc" train "$tmp/o_set.net" "${common[@]}" --max-steps 10 --checkpoint-dir "$tmp/oset" --resume --set S=0.5 2>"$tmp/o.log" &&
  grep -q '^netc: note: the checkpoint was made with no --set or --dim; this run has --set S=0.5$' "$tmp/o.log" ||
  { cat "$tmp/o.log"; ofail "another --set was not said"; }
((ofails == 0)) || exit 1

echo "test_train: learns, resumes exactly after kill -9, refuses a damaged checkpoint, --accumulate matches the large batch," \
     "resumes mid-epoch with the same batch, seed, data and (cosine) epochs only, with the whole epoch's train loss, and says so of another learning rate; says a finished run has nothing to run, refuses bad labels and test shapes and an unwritable --save or --metrics up front," \
     "keeps an earlier run's metrics when it fails before its first step," \
     "stops on SIGINT/SIGTERM at the end of a step (first, mid-epoch, in the evaluation) with a checkpoint to resume from, the weights and whole metrics," \
     "trains a CNN of nn.conv2d and nn.max_pool2d (evaluating in no more memory than its step, in runs the step's plan sizes)," \
     "warns of a cosine schedule that ends before the run, says an epoch --max-steps cut short," \
     "keeps one interruption line in metrics resumed twice, and fails safe on a long run's workflow abused (a killed write, another model's checkpoint, unreadable or unwritable places)"
