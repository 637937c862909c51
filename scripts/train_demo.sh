#!/usr/bin/env bash
# scripts/train_demo.sh - the README's main job: build netc and train the
# Fashion-MNIST MLP in examples/fashion_mlp.net on the CPU (GPU when present).
# Data: /usr/share/datasets/fashion-mnist (Debian's dataset-fashion-mnist,
# installed by scripts/setup.sh).
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."

EPOCHS=${EPOCHS:-5}
DATA=/usr/share/datasets/fashion-mnist
MODEL=examples/fashion_mlp.net

bash scripts/setup.sh
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo >/dev/null
cmake --build build -j "$(nproc)"

build/netc check "$MODEL"
build/netc build "$MODEL" --dump-ir

# TODO(lead): the real job, once `netc train` exists:
# build/netc train "$MODEL" --data "$DATA" --epochs "$EPOCHS"
echo "train_demo: 'netc train' is not written yet (would train $MODEL on $DATA for $EPOCHS epochs)"
