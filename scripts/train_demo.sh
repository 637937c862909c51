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
mkdir -p out
build/netc build "$MODEL" -o out/fashion_mlp.netm
build/netc inspect out/fashion_mlp.netm --dim B=512 | tail -n 4
# Until `netc train` lands (issue 4): run the freshly initialised model on a
# batch of 8 synthetic images, on the GPU when one is usable, else on the CPU
# executor; the logits land in out/run/logits.npy.
build/netc run out/fashion_mlp.netm --dim B=8 --random-inputs 1 --output out/run
echo "train_demo: training ($MODEL on $DATA, $EPOCHS epochs) comes with 'netc train' (issue 4)"
