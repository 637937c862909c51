#!/usr/bin/env bash
# Issue 5's measurements on the GPU machine, side by side in one run: the
# elementwise chain gelu(x * 1.5 + 0.25) * 0.5 over 64M bf16 values and
# layernorm over bf16 [16384, 768], causal attention at GPT-2's shape forward
# and backward (bench/kernels/; issue 6), examples/cast_chain.net
# with and without cast hoisting, and examples/fashion_mlp.net's training
# step with each pass on and off, in netc (each launch timed on the device by
# `netc inspect --profile`, medians) against PyTorch eager and torch.compile
# (bench/torch_kernels.py, CUDA events, medians). Prints JSON lines.
# The attention cases run twice: as built by default (on Hopper the sm_90a
# image: wgmma) and with --target sm_90 (mma.sync, what other GPUs run). ONLY=REGEX keeps the netc cases whose
# name matches (and skips PyTorch unless it matches "torch"); SKIP=REGEX
# leaves out those whose name matches. TINY=1 (bench/rehearse.sh): sizes the
# mock GPU runs in seconds, and PyTorch's at tiny sizes on the CPU with $PYTHON
# (default python3, --device cpu --tiny; none with NO_TORCH=1); a rehearsal of the script, not a
# measurement (the names keep the real sizes).
# Usage: bench/run_kernels.sh [NETC] [RUNS]
set -u
NETC=${1:-build/netc}; RUNS=${2:-50}; ONLY=${ONLY:-.}; SKIP=${SKIP:-^$}
if [[ -n ${TINY:-} ]]; then N=4096 R=8 BT="B=1 T=64" CB=2 FB=4; else N=67108864 R=16384 BT="B=16 T=1024" CB=64 FB=128; fi
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
export NETC_CACHE_DIR=${NETC_CACHE_DIR:-$(mktemp -d)}

# netc: NAME SOURCE DIMS BUILD-FLAGS... -> one JSON line with the measured and floor totals
# (and, for attention cases, the attention kernels' own time and model TFLOP/s; a training
# case's TFLOP/s are its backward kernels', as bench/torch_kernels.py times PyTorch's backward)
netc_case() {
  local name=$1 src=$2 dims=$3; shift 3
  [[ $name =~ $ONLY && ! $name =~ $SKIP ]] || return 0
  local entry=forward
  [[ " $* " == *" --entry train "* ]] && entry=train
  "$NETC" build "$src" -o "$OUT/$name.netm" "$@" >/dev/null 2>"$OUT/$name.build.log" || { cat "$OUT/$name.build.log"; return 1; }
  local dimargs=()
  for d in $dims; do dimargs+=(--dim "$d"); done
  "$NETC" inspect "$OUT/$name.netm" --entry "$entry" "${dimargs[@]}" --profile "$RUNS" --json >"$OUT/$name.json" 2>"$OUT/$name.log" ||
    { cat "$OUT/$name.log"; return 1; }
  python3 - "$OUT/$name.json" "$name" <<'PY'
import json, sys
d, name = json.load(open(sys.argv[1])), sys.argv[2]
row = {"bench": name, "impl": "netc", "device": d["profile_device"], "median_us": round(d["measured_us"], 2),
       "floor_us": round(d["floor_us"], 2), "bytes": d["total_bytes_moved"], "launches": d["launches"],
       "tb_per_s": round(d["total_bytes_moved"] / d["measured_us"] / 1e6, 3)}
if name.startswith("attention"):   # causal, 16 x 12 heads of 64 over 1024: forward 4 B H T^2 D / 2, backward 2.5 times that
    us = sum(k["measured_us"] or 0 for k in d["kernels"] if "attention" in k["name"])
    row["attention_us"] = round(us, 2)
    fwd_flops = 4 * 16 * 12 * 1024 ** 2 * 64 / 2
    if "train" in name:
        bwd = sum(k["measured_us"] or 0 for k in d["kernels"] if "attention_grad" in k["name"])
        row.update({"backward_us": round(bwd, 2), "model_tflops": round(2.5 * fwd_flops / bwd / 1e6, 1)})
    else:
        row["model_tflops"] = round(fwd_flops / us / 1e6, 1)
print(json.dumps(row))
PY
}

netc_case chain_64M_bf16 bench/kernels/chain.net "N=$N"
netc_case layernorm_16384x768_bf16 bench/kernels/layernorm.net "R=$R"
netc_case attention_B16_T1024 bench/kernels/attention.net "$BT"
netc_case attention_train_B16_T1024 bench/kernels/attention.net "$BT" --entry train
netc_case attention_B16_T1024_mma_sync bench/kernels/attention.net "$BT" --target sm_90
netc_case attention_train_B16_T1024_mma_sync bench/kernels/attention.net "$BT" --entry train --target sm_90
netc_case cast_chain_B64 examples/cast_chain.net "" --dim B=$CB
netc_case cast_chain_B64_no_cast_hoist examples/cast_chain.net "" --dim B=$CB --no-cast-hoist
for pass in "" --no-cast-hoist --no-cse --no-fuse --no-memplan --no-dce; do
  netc_case "fashion_train_B128${pass//-/_}" examples/fashion_mlp.net "B=$FB" --entry train $pass
done
if [[ -z ${TINY:-} ]]; then torch_kernels=(python3 bench/torch_kernels.py); else torch_kernels=("${PYTHON:-python3}" bench/torch_kernels.py --device cpu --tiny); fi
if [[ -z ${NO_TORCH:-} ]] && [[ torch =~ $ONLY || $ONLY == . ]]; then "${torch_kernels[@]}"; fi
