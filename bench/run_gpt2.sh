#!/usr/bin/env bash
# Issue 6's comparison on the GPU machine, side by side in one run: the GPT-2
# 124M training step (examples/gpt2.net, batch B x T) in netc against PyTorch
# eager and torch.compile (bench/torch_gpt2.py), and the netc build time, cold
# and with a warm NVRTC cache. netc trains on the bytes of a text file (the
# step's cost does not depend on the tokens); its samples/s over the steps
# after the first gives ms per step. Each netc line is one run; run the script
# three times for medians. bench/gpt2_losses.py: the first 10 losses against PyTorch
# from the same weights. `netc inspect --profile` times each launch of the step on the
# device: the measured step and its ten slowest launches (share, % of floor).
# TINY=1 (bench/rehearse.sh): a GPT-2 of one narrow layer (--set), which the mock GPU
# trains in seconds, PyTorch's step at that size on the CPU (torch_gpt2.py --device cpu,
# 3 steps) and the losses' check at that size, both with $PYTHON (default python3; its
# PyTorch on the CPU where it has no GPU): a rehearsal, not a measurement. NO_TORCH=1: no
# PyTorch at all (a python without it).
# Usage: bench/run_gpt2.sh NETC TEXT_FILE [B] [T] [STEPS]
set -u
NETC=${1:-build/netc}; TEXT=${2:?a text file, e.g. the fortunes}
B=${3:-16}; T=${4:-1024}; STEPS=${5:-60}; PYTHON=${PYTHON:-python3}
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
if [[ -n ${TINY:-} ]]; then
  small=(--set V=512 --set C=64 --set L=1 --set H=2 --set MAXT="$T")
  losses_size=(--steps 2 --batch "$B" --T "$T" --layers 1 --vocab 512 --width 64 --heads 2 --maxt "$T")
  torch_step=("$PYTHON" bench/torch_gpt2.py --device cpu --layers 1 --vocab 512 --width 64 --heads 2 --maxt "$T" "$B" "$T" 3)
else small=(); losses_size=(--steps 10 --batch 4 --T 256); torch_step=(python3 bench/torch_gpt2.py "$B" "$T" 20); fi
export NETC_CACHE_DIR=$(mktemp -d)   # a cold cache: the build times below include NVRTC
trap 'rm -rf "$NETC_CACHE_DIR"' EXIT
s=$(date +%s%N); "$NETC" build examples/gpt2.net --entry train --dim B="$B" --dim T="$T" "${small[@]}" -o "$OUT/gpt2.netm" || exit 1; e=$(date +%s%N)
echo "{\"bench\": \"build_gpt2_train_cold\", \"ms\": $(( (e - s) / 1000000 ))}"
s=$(date +%s%N); "$NETC" build examples/gpt2.net --entry train --dim B="$B" --dim T="$T" "${small[@]}" -o "$OUT/gpt2.netm" || exit 1; e=$(date +%s%N)
echo "{\"bench\": \"build_gpt2_train_cached\", \"ms\": $(( (e - s) / 1000000 ))}"
"$NETC" inspect "$OUT/gpt2.netm" --entry train | tail -12
# one netc training run: VARIANT "" (as built: for the device's architecture, sm_90a on
# Hopper), mma_sync (--target sm_90: attention by mma.sync, as on other GPUs),
# 4GiB (--memory-budget 4GiB), bgrad (the MLP biases' gradients by cuBLASLt's DGELU_BGRAD
# epilogue instead of a second product, NETC_DGELU_BGRAD in runtime/gpu.c: which of the two
# ways is faster on this GPU) or streams2/streams4 (independent launches side by side on 2 or
# 4 streams, NETC_STREAMS, runtime/launch_dag.c: whether that pays on this GPU) or tune (each
# product shape's algorithm the fastest of cuBLASLt's first 8 when timed, NETC_MATMUL_TUNE) or
# pdl (each kernel launched to start as the one before it ends, NETC_PDL) or fast (all three,
# on 2 streams) or slices8/slices2 (the head and its loss in 8 slices, as before the
# twenty-fourth session, or 2, instead of the 4 netc takes at 16 x 1024: --loss-slices)
netc_train() {
  local budget=$1 extra=() env=()
  case $budget in
    4GiB) extra=(--memory-budget 4GiB) ;; bgrad) env=(NETC_DGELU_BGRAD=1) ;; mma_sync) extra=(--target sm_90) ;;
    streams2) env=(NETC_STREAMS=2) ;; streams4) env=(NETC_STREAMS=4) ;; tune) env=(NETC_MATMUL_TUNE=1) ;;
    pdl) env=(NETC_PDL=1) ;; fast) env=(NETC_STREAMS=2 NETC_MATMUL_TUNE=1 NETC_PDL=1) ;; slices8) extra=(--loss-slices 8) ;; slices2) extra=(--loss-slices 2) ;;
  esac
  env "${env[@]}" "$NETC" train examples/gpt2.net --data "$TEXT" --dim T="$T" --batch "$B" --epochs 1000 --max-steps "$STEPS" \
    --device gpu "${small[@]}" "${extra[@]}" --metrics "$OUT/gpt2${budget}.jsonl" > "$OUT/gpt2${budget}.log" 2>&1 ||
    { cat "$OUT/gpt2${budget}.log"; return 1; }
  tail -2 "$OUT/gpt2${budget}.log"
  python3 - "$OUT/gpt2${budget}.jsonl" "$B" "$T" "${budget:-none}" <<'EOF'
import json, statistics, sys
lines = [json.loads(l) for l in open(sys.argv[1])]
rows = [r for r in lines if "samples_per_s" in r]
mem = ([r for r in lines if "gpu_train_bytes" in r] or [{}])[-1]
b, t = int(sys.argv[2]), int(sys.argv[3])
# a rate is the epoch's so far: step s of the first epoch ends s * b / rate seconds in; the
# time between the second such line and the last is the steps', the first step's set-up left out
first = [r for r in rows if r["epoch"] == 1]
ends = [(r["step"], r["step"] * b / r["samples_per_s"]) for r in first]
if len(ends) >= 3:
    ms = (ends[-1][1] - ends[1][1]) / (ends[-1][0] - ends[1][0]) * 1e3
else:   # too few lines: the rates themselves
    rates = [r["samples_per_s"] for r in rows[1:]] or [r["samples_per_s"] for r in rows]
    ms = b / statistics.median(rates) * 1e3
print(json.dumps({"bench": "gpt2_train_step", "impl": "netc", "variant": sys.argv[4], "batch": b, "T": t,
                  "ms_per_step": round(ms, 2), "tokens_per_s": round(b * t / ms * 1e3),
                  "session_gib": round(mem.get("gpu_train_bytes", 0) / 2**30, 3),
                  "device_used_gib": round(mem.get("gpu_device_used_bytes", 0) / 2**30, 3)}))
EOF
}
# most needed first (bench/run_all.sh may cut the script short): the step against PyTorch,
# where its time goes (cut short by the step's cap in the twenty-first session, after the
# variants), the step with the three launch options off by default together, the head in 8
# and 2 slices, then each launch option alone, the 4GiB budget, the losses against PyTorch,
# the step with attention on mma.sync, then the epilogue's variant
netc_train "" || exit 1
[[ -n ${NO_TORCH:-} ]] || "${torch_step[@]}"
# each launch timed on the device: the measured step and the 10 slowest launches with their share and % of floor
"$NETC" inspect "$OUT/gpt2.netm" --entry train --profile 10 > "$OUT/gpt2.profile.txt" 2>&1 && sed -n '/^measured/,/^targets/p' "$OUT/gpt2.profile.txt"
netc_train fast
netc_train slices8
netc_train slices2
netc_train pdl
netc_train streams2
netc_train tune
netc_train streams4
netc_train 4GiB
# the first 10 steps' losses against PyTorch from the same initial weights and batches (bf16 tolerance)
[[ -n ${NO_TORCH:-} ]] || "$PYTHON" bench/gpt2_losses.py "${losses_size[@]}" --netc "$NETC" --losses-tool "$(dirname "$NETC")/bench/gpt2_losses" --out "$OUT/losses" | tail -1
netc_train mma_sync
netc_train bgrad
