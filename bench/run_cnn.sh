#!/usr/bin/env bash
# The CNN's training step on the GPU machine: examples/fashion_cnn.net (two
# 3x3 convolutions, channels last, windows gathered by nn.windows) trained by
# netc against the same model in PyTorch eager and torch.compile with cuDNN,
# channels last (bench/torch_cnn_train.py, which says how the two models'
# weights correspond), on Fashion-MNIST: ms per step, the median over windows
# of 10 steps after the first 20, one JSON line each; and netc inspect's
# static numbers of the step (launches, bytes, roofline floor) beside it.
# TINY=1 (bench/rehearse.sh, on the mock GPU): PyTorch on the CPU with $PYTHON (--device
# cpu) for at least 30 steps (its one window of 10 after the first 20); otherwise the
# sizes are the arguments. NO_TORCH=1: no PyTorch.
# Usage: bench/run_cnn.sh NETC [STEPS] [BATCH...]   (default 100 steps, batches 128 and 512;
# 100 steps stay inside the first epoch at 512: 117 steps)
set -u
NETC=${1:-build/netc}; STEPS=${2:-100}; shift 2 2>/dev/null || shift $#
BATCHES=${*:-128 512}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}   # on the GPU machine: data/fashion-mnist (scripts/gpu_prepare.sh)
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
for b in $BATCHES; do
  log="$OUT/cnn_b$b"
  "$NETC" build examples/fashion_cnn.net --entry train --dim B="$b" --target '' -o "$log.netm" > "$log.build.log" 2>&1 &&
    "$NETC" inspect "$log.netm" --entry train | grep -E '^(module|total|once|memory plan)'
  "$NETC" train examples/fashion_cnn.net --data "$DATA" --epochs 1 --max-steps "$STEPS" --batch "$b" --device gpu \
    --metrics "$log.jsonl" > "$log.log" 2>&1 || { tail -5 "$log.log"; continue; }
  grep -E "^(netc: training on|GPU memory)" "$log.log"
  python3 - "$log.jsonl" "$b" "$STEPS" <<'PY'
import json, statistics, sys
b = int(sys.argv[2])
rows = [json.loads(l) for l in open(sys.argv[1])]
# a rate is the epoch's so far: step s ends s * b / rate seconds into the epoch;
# the windows between such lines after step 20 (the first: set-up, the graph's capture)
ends = [(r["step"], r["step"] * b / r["samples_per_s"]) for r in rows if r.get("epoch") == 1 and r.get("samples_per_s")]
ms = [(t1 - t0) / (s1 - s0) * 1e3 for (s0, t0), (s1, t1) in zip(ends, ends[1:]) if s0 >= 20 and s1 > s0]
print(json.dumps({"bench": "cnn_train_step", "impl": "netc", "batch": b, "steps": int(sys.argv[3]),
                  "ms_per_step": round(statistics.median(ms), 3) if ms else None, "ms_windows": [round(x, 3) for x in ms]}))
PY
done
if [[ -z ${TINY:-} ]]; then torch_cnn=(python3 bench/torch_cnn_train.py "$DATA" "$STEPS")
else torch_cnn=("${PYTHON:-python3}" bench/torch_cnn_train.py --device cpu "$DATA" $((STEPS < 30 ? 30 : STEPS))); fi
[[ -n ${NO_TORCH:-} ]] || "${torch_cnn[@]}" $BATCHES
