#!/usr/bin/env bash
# netc train on text: examples/char_lm.net (a byte-level GPT, made tiny with
# --set) learns a repetitive text on the CPU executor: the test loss falls
# from ln(256) = 5.55 to below 2, and so does examples/llama_lm.net's (LLaMA's
# blocks). So does examples/gpt2.net itself (i32 tokens
# and targets, made tiny and byte-level with --set, T bound with --dim).
# Text too short for one window is refused, and so is an unbound window. A gzip-compressed
# text is read decompressed (a cut one refused).
# Args: NETC SOURCE_DIR
set -euo pipefail
netc=$1 src=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
for _ in $(seq 600); do printf 'the quick brown fox jumps over the lazy dog. '; done > "$tmp/fox.txt"
small=(--set C=32 --set L=1 --set H=2 --set T=16 --device cpu --seed 1)
"$netc" train "$src/examples/char_lm.net" --data "$tmp/fox.txt" --epochs 1 --batch 16 "${small[@]}" \
  --metrics "$tmp/m.jsonl" 2>"$tmp/log"
cat "$tmp/log"
loss=$(grep -o '"test_loss":[0-9.]*' "$tmp/m.jsonl" | tail -1 | cut -d: -f2)
awk -v l="$loss" 'BEGIN { exit !(l < 2.0) }' || { echo "test loss $loss is not below 2"; exit 1; }
if grep -q test_accuracy "$tmp/m.jsonl"; then echo "a language model reported an accuracy"; exit 1; fi
# examples/llama_lm.net (RMS norms, rotary q and k, SwiGLU, no biases) learns it too
"$netc" train "$src/examples/llama_lm.net" --data "$tmp/fox.txt" --epochs 1 --batch 16 "${small[@]}" --set HIDDEN=64 \
  --metrics "$tmp/l.jsonl" 2>"$tmp/llog"
cat "$tmp/llog"
lloss=$(grep -o '"test_loss":[0-9.]*' "$tmp/l.jsonl" | tail -1 | cut -d: -f2)
awk -v l="$lloss" 'BEGIN { exit !(l < 2.0) }' || { echo "llama_lm.net: test loss $lloss is not below 2"; exit 1; }
# cast hoisting is exact in a training step too: the same losses with and without it
narrow=(train "$src/tests/train/narrow_lm.net" --data "$tmp/fox.txt" --epochs 1 --batch 16 --device cpu --seed 1)
"$netc" "${narrow[@]}" --metrics "$tmp/n_on.jsonl" 2>/dev/null
"$netc" "${narrow[@]}" --no-cast-hoist --metrics "$tmp/n_off.jsonl" 2>/dev/null
nlosses() { grep -o '"train_loss":[0-9.e+-]*' "$1"; }
if [[ -z "$(nlosses "$tmp/n_on.jsonl")" ]] || ! diff <(nlosses "$tmp/n_on.jsonl") <(nlosses "$tmp/n_off.jsonl") >/dev/null; then
  echo "narrow_lm.net: the losses differ with and without cast hoisting"; exit 1
fi
printf 'too short' > "$tmp/short.txt"
if "$netc" train "$src/examples/char_lm.net" --data "$tmp/short.txt" "${small[@]}" 2>"$tmp/err"; then
  echo "a text shorter than one window was accepted"; exit 1
fi
grep -q 'too few for windows' "$tmp/err" || { cat "$tmp/err"; exit 1; }
# a gzip-compressed text is trained on as its text, decompressed, and says so (the compressed bytes
# were the tokens, silently): the same losses as the plain file; a cut stream is refused
gzip -c "$tmp/fox.txt" > "$tmp/fox.gz"
gz_run=(train "$src/tests/train/narrow_lm.net" --epochs 1 --batch 16 --device cpu --seed 1)
"$netc" "${gz_run[@]}" --data "$tmp/fox.gz" --metrics "$tmp/n_gz.jsonl" 2>"$tmp/gz.log" ||  { cat "$tmp/gz.log"; exit 1; }
grep -qF "netc: note: $tmp/fox.gz is gzip-compressed: its text is read, decompressed" "$tmp/gz.log" || { cat "$tmp/gz.log"; echo "no note of the gzip text"; exit 1; }
diff <(nlosses "$tmp/n_on.jsonl") <(nlosses "$tmp/n_gz.jsonl") >/dev/null || { echo "the gzip text trained otherwise than the plain one"; exit 1; }
head -c 100 "$tmp/fox.gz" > "$tmp/cut.gz"
if "$netc" "${gz_run[@]}" --data "$tmp/cut.gz" 2>"$tmp/err"; then echo "a cut gzip text was accepted"; exit 1; fi
grep -qF "cut.gz: damaged or truncated gzip stream: unexpected end of file" "$tmp/err" || { cat "$tmp/err"; exit 1; }
# a file of one byte says it in the singular, and how many bytes a training and a test window need
printf 'a' > "$tmp/one.txt"
if "$netc" train "$src/tests/train/narrow_lm.net" --data "$tmp/one.txt" --device cpu 2>"$tmp/err"; then echo "a text of 1 byte was accepted"; exit 1; fi
grep -qF 'one.txt: 1 byte of text, too few for windows of 9 bytes: a training and a test window need 17 at least' "$tmp/err" ||
  { cat "$tmp/err"; exit 1; }
gpt2_small=(--set V=256 --set C=32 --set L=1 --set H=2 --set MAXT=16 --dim T=16 --device cpu --seed 1 --lr 3e-3)
"$netc" train "$src/examples/gpt2.net" --data "$tmp/fox.txt" --epochs 4 --batch 16 "${gpt2_small[@]}" \
  --metrics "$tmp/g.jsonl" 2>"$tmp/glog"
cat "$tmp/glog"
gloss=$(grep -o '"test_loss":[0-9.]*' "$tmp/g.jsonl" | tail -1 | cut -d: -f2)
awk -v l="$gloss" 'BEGIN { exit !(l < 2.5) }' || { echo "gpt2.net: test loss $gloss is not below 2.5"; exit 1; }
if "$netc" train "$src/examples/gpt2.net" --data "$tmp/fox.txt" --set V=256 --device cpu 2>"$tmp/err"; then
  echo "an unbound window length was accepted"; exit 1
fi
grep -q 'bind it with --dim T=' "$tmp/err" || { cat "$tmp/err"; exit 1; }
# a resume with another window length (--dim T) is refused for what it is: the same text in other
# windows, not other data (it said "resume on the same data (--data)")
gpt2_ck=(train "$src/examples/gpt2.net" --data "$tmp/fox.txt" --epochs 1 --batch 16 --set V=256 --set C=32 --set L=1 --set H=2
         --set MAXT=16 --device cpu --seed 1 --checkpoint-dir "$tmp/gck")
"$netc" "${gpt2_ck[@]}" --dim T=16 --max-steps 2 2>/dev/null
if "$netc" "${gpt2_ck[@]}" --dim T=8 --resume 2>"$tmp/err"; then echo "a resume with another window length was accepted"; exit 1; fi
grep -qF "@train_state: it was made on 1603 training windows of text, this run has 3206: resume on the same text (--data) in windows of the same length (the model's input tokens, which --dim and --set may change)" "$tmp/err" ||
  { cat "$tmp/err"; exit 1; }
echo "test_text: the byte-level models learn (char_lm test loss $loss, llama_lm $lloss, gpt2.net $gloss), narrow_lm's losses are the same without cast hoisting, short text and unbound windows refused"
