#!/usr/bin/env bash
# scripts/setup.sh - install what netc needs to build and test on Debian 12.
#
# Idempotent: when every package is already installed it does no apt work at
# all, so running it again (test.sh and train_demo.sh do) costs a second.
# Runs as root, or through sudo when not root and sudo exists.
# NETC_SETUP_FORCE=1 runs apt-get update + install even when nothing is missing.
#
# The CUDA toolkit is optional and not installed here: without it netc builds
# the CPU parts only (CMake says so), and GPU tests exit 77 (skipped).
# Python is deliberately absent: nothing in the product needs it.
set -euo pipefail

PACKAGES=(
  build-essential cmake ninja-build flex bison pkg-config
  libopenblas-dev libjansson-dev zlib1g-dev
  clang libclang-rt-14-dev      # clang + its runtime: libFuzzer, ASan/UBSan for clang builds
  dataset-fashion-mnist         # /usr/share/datasets/fashion-mnist, for the training demo
  fortunes                      # /usr/share/games/fortunes: text for the language-model demo (examples/char_lm.net)
)

log() { printf 'setup: %s\n' "$*"; }

missing=()
for p in "${PACKAGES[@]}"; do
  status=$(dpkg-query -W -f='${db:Status-Status}' "$p" 2>/dev/null || true)
  if [[ "$status" != installed || "${NETC_SETUP_FORCE:-0}" == 1 ]]; then
    missing+=("$p")
  fi
done

if ((${#missing[@]} == 0)); then
  log "all ${#PACKAGES[@]} packages already installed"
  exit 0
fi

SUDO=()
if [[ $(id -u) -ne 0 ]]; then
  if command -v sudo >/dev/null 2>&1; then
    SUDO=(sudo)
  else
    log "error: not root and no sudo; install as root: apt-get install ${missing[*]}" >&2
    exit 1
  fi
fi

log "installing: ${missing[*]}"
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive apt-get update -qq
"${SUDO[@]}" env DEBIAN_FRONTEND=noninteractive \
  apt-get install -y -qq --no-install-recommends "${missing[@]}" >/dev/null
log "done"
