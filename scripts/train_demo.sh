#!/usr/bin/env bash
# scripts/train_demo.sh - the README's main job: install, build netc, and train
# examples/fashion_mlp.net on Fashion-MNIST, on the GPU when one is usable and
# on the CPU executor otherwise, then report the test accuracy.
# Data: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist,
# installed by scripts/setup.sh).
#   EPOCHS=N   epochs (default: 10 on a GPU, 1 on the CPU: about 15 s on 2 cores)
#   BATCH=N    batch size (default 128)
#   DEVICE=cpu|gpu|auto (default auto)
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

DATA=/usr/share/datasets/fashion-mnist
MODEL=examples/fashion_mlp.net
DEVICE=${DEVICE:-auto}
BATCH=${BATCH:-128}

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"

build/netc check "$MODEL"
mkdir -p out
# The inference module, and what it costs per batch of 512.
build/netc build "$MODEL" -o out/fashion_mlp.netm
build/netc inspect out/fashion_mlp.netm --dim B=512 | tail -n 4

if [[ -z "${EPOCHS:-}" ]]; then
  EPOCHS=1
  if [[ $DEVICE != cpu ]]; then   # netc names the device it runs on: "running on cuda:0 NVIDIA H100 ..." or "running on cpu"
    probe=$(build/netc run out/fashion_mlp.netm --dim B=1 --random-inputs 1 2>&1 || true)
    if grep -q 'running on cuda' <<<"$probe"; then EPOCHS=10; fi
  fi
fi
echo "train_demo: training $MODEL on $DATA for $EPOCHS epoch(s), batch $BATCH"
build/netc train "$MODEL" --data "$DATA" --epochs "$EPOCHS" --batch "$BATCH" --device "$DEVICE" \
  --metrics out/metrics.jsonl --save out/fashion_mlp.safetensors
acc=$(grep -o '"test_accuracy":[0-9.]*' out/metrics.jsonl | tail -1 | cut -d: -f2 | awk '{ printf "%.4f", $1 }')
echo "train_demo: test accuracy $acc after $EPOCHS epoch(s); metrics in out/metrics.jsonl, curve in out/metrics.svg, weights in out/fashion_mlp.safetensors"

# The trained weights serve through the module: logits for 8 test-like inputs.
build/netc run out/fashion_mlp.netm --dim B=8 --random-inputs 1 --weights out/fashion_mlp.safetensors --output out/run >/dev/null
