#!/usr/bin/env bash
# Issue 3's measurements on the GPU machine, side by side in one run:
# fashion_mlp inference latency at batch 1 and 512 and GPT-2's forward pass
# at 1 x 64 and 16 x 1024 tokens against PyTorch eager and torch.compile,
# then netc build time for gpt2.net (cold and with a warm NVRTC cache) and
# module load time. The comparisons come first: run_all.sh may cut this short.
# TINY=1 (bench/rehearse.sh): batches, iterations and a GPT-2 of one narrow layer
# (--set) that the mock GPU runs in seconds, PyTorch's at those sizes on the CPU with
# $PYTHON (default python3, --device cpu; none with NO_TORCH=1): a rehearsal, not a measurement.
# Usage: bench/run_infer.sh NETC INFER_NETC
set -u
NETC=${1:-build/netc}; INFER=${2:-build/bench/infer_netc}
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
if [[ -n ${TINY:-} ]]; then
  batches="1 4" iters=2 gpt2_bt=("B=1 T=64" "B=2 T=64") small=(--set V=512 --set C=64 --set L=1 --set H=2 --set MAXT=64)
  torch_mlp=("${PYTHON:-python3}" bench/torch_infer.py --device cpu 1 4)
  torch_gpt2=("${PYTHON:-python3}" torch_gpt2_infer.py --device cpu --layers 1 --vocab 512 --width 64 --heads 2 --maxt 64 1:64 2:64)
else batches="1 512" iters=100 gpt2_bt=("B=1 T=64" "B=16 T=1024") small=()
  torch_mlp=(python3 bench/torch_infer.py 1 512) torch_gpt2=(python3 torch_gpt2_infer.py 1:64 16:1024); fi
export NETC_CACHE_DIR=$(mktemp -d)   # a cold cache: the build times below include NVRTC
trap 'rm -rf "$NETC_CACHE_DIR"' EXIT
# ms a command takes (its own output to stderr); fails with it
ms_of() { local s e; s=$(date +%s%N); "$@" >&2 || return 1; e=$(date +%s%N); echo $(( (e - s) / 1000000 )); }
"$NETC" build examples/fashion_mlp.net -o "$OUT/mlp.netm" || exit 1
for b in $batches; do
  for i in 1 2 3; do "$INFER" "$OUT/mlp.netm" B=$b --iters $((iters * 3)); done
done
[[ -n ${NO_TORCH:-} ]] || "${torch_mlp[@]}"
# GPT-2's forward pass and loss (bf16 over f32 weights): the module makes its
# bf16 weight copies once (prepare steps), PyTorch's autocast in every forward
ms=$(ms_of "$NETC" build examples/gpt2.net --entry forward "${small[@]}" -o "$OUT/gpt2_fwd.netm") || exit 1
echo "{\"bench\": \"build_gpt2_forward_cold\", \"ms\": $ms}"
"$NETC" inspect "$OUT/gpt2_fwd.netm" --dim B=1 --dim T=64 | grep -E "^total|^once"
for bt in "${gpt2_bt[@]}"; do
  for i in 1 2 3; do "$INFER" "$OUT/gpt2_fwd.netm" $bt --iters $iters; done
done
[[ -n ${NO_TORCH:-} ]] || (cd bench && "${torch_gpt2[@]}")
# build times, forward and train entries: on the H200 the second and third cold builds took
# 1 s against 14.5 s for the first (18 s each on 2 cores here), so count the entries the
# build left (3 a kernel set: sm_80, sm_90a, PTX) and time one with no cache at all
for i in 1 2; do
  rm -rf "$NETC_CACHE_DIR"; mkdir -p "$NETC_CACHE_DIR"
  ms=$(ms_of "$NETC" build examples/gpt2.net "${small[@]}" -o "$OUT/gpt2.netm") || exit 1
  echo "{\"bench\": \"build_gpt2_cold\", \"ms\": $ms, \"cache_entries_after\": $(ls -A "$NETC_CACHE_DIR" | wc -l)}"
  ms=$(ms_of "$NETC" build examples/gpt2.net "${small[@]}" -o "$OUT/gpt2.netm") || exit 1
  echo "{\"bench\": \"build_gpt2_cached\", \"ms\": $ms}"
done
ms=$(ms_of env NETC_NO_CACHE=1 "$NETC" build examples/gpt2.net "${small[@]}" -o "$OUT/gpt2.netm") || exit 1
echo "{\"bench\": \"build_gpt2_no_cache\", \"ms\": $ms}"   # NVRTC every time, whatever is on disk
