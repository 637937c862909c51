#!/usr/bin/env bash
# Issue 4's comparison on the GPU machine, side by side in one run: training
# examples/fashion_mlp.net on Fashion-MNIST with netc against the same MLP,
# optimizer, schedule and batch in PyTorch eager and torch.compile
# (bench/torch_mlp_train.py): seconds per epoch (median of the epochs after the
# first) and the final test accuracy (target >= 0.89). One JSON line each.
# TINY=1 (bench/rehearse.sh, on the mock GPU): PyTorch on the CPU with $PYTHON (--device
# cpu); the sizes are the arguments. NO_TORCH=1: no PyTorch.
# Usage: bench/run_train.sh NETC [EPOCHS] [BATCH...]   (default 10 epochs, batches 512 and 128)
set -u
NETC=${1:-build/netc}; EPOCHS=${2:-10}; shift 2 2>/dev/null || shift $#
BATCHES=${*:-512 128}
DATA=${DATA:-/usr/share/datasets/fashion-mnist}   # the GPU machine has no such package: data/fashion-mnist (scripts/gpu_prepare.sh)
OUT=${OUT:-/tmp/bench-out}; mkdir -p "$OUT"
if [[ -z ${TINY:-} ]]; then torch_train=(python3 bench/torch_mlp_train.py)
else torch_train=("${PYTHON:-python3}" bench/torch_mlp_train.py --device cpu); fi
for b in $BATCHES; do
  log="$OUT/train_b$b"
  "$NETC" train examples/fashion_mlp.net --data "$DATA" --epochs "$EPOCHS" --batch "$b" --device gpu \
    --metrics "$log.jsonl" > "$log.log" 2>&1 || { tail -5 "$log.log"; exit 1; }
  grep -E "^(netc: training on|GPU memory|done)" "$log.log"
  python3 - "$log.jsonl" "$b" <<'PY'
import json, statistics, sys
rows = [json.loads(l) for l in open(sys.argv[1])]
epochs = [r for r in rows if "test_accuracy" in r]
secs = [r["epoch_seconds"] for r in epochs]
med = statistics.median(secs[1:]) if len(secs) > 1 else secs[0]
print(json.dumps({"impl": "netc", "epochs": len(epochs), "batch": int(sys.argv[2]),
                  "epoch_seconds": [round(s, 3) for s in secs], "median_epoch_s": round(med, 3),
                  "test_accuracy": round(epochs[-1]["test_accuracy"], 4),
                  "gpu_input_wait_s": round(sum(r.get("gpu_input_wait_s", 0) for r in epochs), 3)}))
PY
  [[ -n ${NO_TORCH:-} ]] || "${torch_train[@]}" "$DATA" "$EPOCHS" "$b"
done
