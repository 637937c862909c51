#!/usr/bin/env bash
# Issue 3's measurements on the GPU machine, side by side in one run:
# netc build time for gpt2.net (cold and with a warm NVRTC cache), module load
# time, and fashion_mlp inference latency at batch 1 and 512 against PyTorch
# eager and torch.compile. Usage: bench/run_infer.sh NETC INFER_NETC
set -u
NETC=${1:-build/netc}; INFER=${2:-build/bench/infer_netc}
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
export NETC_CACHE_DIR=$(mktemp -d)
for i in 1 2 3; do
  rm -rf "$NETC_CACHE_DIR"/*
  s=$(date +%s%N); "$NETC" build examples/gpt2.net -o "$OUT/gpt2.netm" || exit 1; e=$(date +%s%N)
  echo "{\"bench\": \"build_gpt2_cold\", \"ms\": $(( (e - s) / 1000000 ))}"
  s=$(date +%s%N); "$NETC" build examples/gpt2.net -o "$OUT/gpt2.netm" || exit 1; e=$(date +%s%N)
  echo "{\"bench\": \"build_gpt2_cached\", \"ms\": $(( (e - s) / 1000000 ))}"
done
"$NETC" build examples/fashion_mlp.net -o "$OUT/mlp.netm" || exit 1
for b in 1 512; do
  for i in 1 2 3; do "$INFER" "$OUT/mlp.netm" B=$b --iters 300; done
done
python3 bench/torch_infer.py 1 512
python3 bench/torch_infer.py 1 512
