#!/usr/bin/env bash
# netc train on the CPU executor trains examples/fashion_vit.net (a Vision
# Transformer: patches by reshape and transpose, a class token, attention with
# no mask) and examples/reverse_seq2seq.net (an encoder-decoder transformer with
# cross-attention that reverses byte strings), each made small with --set:
#  1. fashion_vit on 8x8 images in 2x2 patches (make_idx's bars) reaches a test
#     accuracy above 0.9 in two epochs;
#  2. reverse_seq2seq on a text, each window's reversal made inside the model,
#     gets its test loss from ln(256) = 5.55 to below 1 in 150 steps.
# Args: NETC MAKE_IDX SOURCE_DIR
set -euo pipefail
netc=$1 make_idx=$2 src=$3
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
mkdir -p "$tmp/data"
"$make_idx" "$tmp/data" 2048 512

"$netc" train "$src/examples/fashion_vit.net" --data "$tmp/data" --set S=8 --set P=2 --set C=32 --set L=1 \
  --set HIDDEN=64 --batch 32 --epochs 2 --device cpu --seed 1 --metrics "$tmp/vit.jsonl" 2>"$tmp/vit.log" ||
  { cat "$tmp/vit.log"; echo "FAIL: fashion_vit did not train"; exit 1; }
acc=$(grep -o '"test_accuracy":[0-9.]*' "$tmp/vit.jsonl" | tail -1 | cut -d: -f2)
awk -v a="${acc:-0}" 'BEGIN { exit !(a > 0.9) }' || { cat "$tmp/vit.log"; echo "FAIL: fashion_vit's test accuracy ${acc:-?} is not above 0.9"; exit 1; }

for _ in $(seq 300); do printf 'Pack my box with five dozen liquor jugs; how vexingly quick daft zebras jump! '; done > "$tmp/text.txt"
"$netc" train "$src/examples/reverse_seq2seq.net" --data "$tmp/text.txt" --set C=32 --set L=1 --set HEADS=2 \
  --batch 16 --max-steps 150 --eval-samples 512 --device cpu --seed 1 --metrics "$tmp/rev.jsonl" 2>"$tmp/rev.log" ||
  { cat "$tmp/rev.log"; echo "FAIL: reverse_seq2seq did not train"; exit 1; }
loss=$(grep -o '"test_loss":[0-9.]*' "$tmp/rev.jsonl" | tail -1 | cut -d: -f2)
awk -v l="${loss:-9}" 'BEGIN { exit !(l < 1.0) }' || { cat "$tmp/rev.log"; echo "FAIL: reverse_seq2seq's test loss ${loss:-?} is not below 1"; exit 1; }
echo "test_examples_seq_vit: fashion_vit test accuracy $acc, reverse_seq2seq test loss $loss"
