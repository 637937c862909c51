#!/usr/bin/env bash
# scripts/gpu_prepare.sh - make here what a call to the lent GPU machine
# carries, since that machine has no flex, bison, OpenBLAS, jansson or
# Fashion-MNIST and reaches no network:
#   build-gpu/          Release, no debug information, the CPU executor's own
#                       matmul (no OpenBLAS); build-gpu/lib: the shared
#                       libraries netc needs that the machine may lack
#   data/fashion-mnist  the IDX files of Debian's dataset-fashion-mnist
# Both are ignored by git and stay under the 64 MiB a call carries. Then one
# device call runs everything, most needed first, within 9 minutes:
#   run(command="bash bench/run_all.sh", carry=["build-gpu", "data"], timeout_s=600)
# and, with device time left, a second for the steps it had no time for
# (`bash bench/run_all.sh STEP...`, naming the steps it had no time for).
set -euo pipefail
cd "$(dirname "$0")/.."
bash scripts/setup.sh
cmake -S . -B build-gpu -G Ninja -DCMAKE_BUILD_TYPE=Release -DNETC_USE_OPENBLAS=OFF >/dev/null
# only what run_all.sh runs there: each other test binary is ~1 MB of the 64 MiB
gpu_targets=(netc netrt infer_netc gpt2_losses test_gpu_ops test_gpu_models test_wgmma)
cmake --build build-gpu --target "${gpu_targets[@]}"
# and none an earlier full build left
find build-gpu/tests -maxdepth 1 -type f -executable -name 'test_*' | while read -r t; do
  [[ " ${gpu_targets[*]} " == *" ${t##*/} "* ]] || rm -f "$t"
done
mkdir -p build-gpu/lib data/fashion-mnist
# every library netc links beyond glibc, the compiler's runtime, zlib and CUDA's (the machine has those)
ldd build-gpu/netc | awk '$3 ~ /^\// {print $3}' |
  grep -vE '/(libc|libm|libdl|libpthread|librt|libgcc_s|libstdc\+\+|libz|ld-linux[^/]*)\.so|/usr/local/cuda' |
  while read -r lib; do cp -L "$lib" build-gpu/lib/; done
cp /usr/share/datasets/fashion-mnist/*-ubyte.gz data/fashion-mnist/
du -sh build-gpu data | sed 's/^/gpu_prepare: /'
# in bytes, with the tree's files that travel too (du -sm rounds each folder up: 60 passed at 61 MiB)
tree=$(git ls-files -co --exclude-standard -z | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
total=$(( $(du -sb build-gpu data | awk '{s += $1} END {print s}') + ${tree:-0} ))
mib() { awk -v b="$1" 'BEGIN {printf "%.1f MiB", b / 1048576}'; }
echo "gpu_prepare: $(mib "$total") with the tree's $(mib "${tree:-0}"), of the 64 MiB a device call carries"
if ((total > 64 * 1048576)); then echo "gpu_prepare: over what a device call carries" >&2; exit 1; fi
