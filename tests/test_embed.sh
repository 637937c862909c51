#!/usr/bin/env bash
# Install netc into a temporary prefix, build examples/embed against the
# installed libnetrt (CMake package), build a module, and run the program on
# the CPU. Args: SOURCE_DIR BUILD_DIR
set -euo pipefail
src=$1 build=$2
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
cmake --install "$build" --prefix "$tmp/prefix" >/dev/null
# NETC_EMBED_CFLAGS: the sanitizer flags of an ASan build, whose libnetrt needs them
cmake -S "$src/examples/embed" -B "$tmp/embed" -DCMAKE_PREFIX_PATH="$tmp/prefix" \
  -DCMAKE_C_FLAGS="${NETC_EMBED_CFLAGS:-}" -DCMAKE_EXE_LINKER_FLAGS="${NETC_EMBED_CFLAGS:-}" >/dev/null
cmake --build "$tmp/embed" >/dev/null
"$tmp/prefix/bin/netc" build "$src/examples/fashion_mlp.net" --target '' -o "$tmp/mlp.netm"
out=$(LD_LIBRARY_PATH="$tmp/prefix/lib" "$tmp/embed/embed" "$tmp/mlp.netm" cpu)
echo "$out"
grep -q '^device: cpu' <<<"$out"
[[ $(grep -c '^image [0-3]: class [0-9]' <<<"$out") == 4 ]]
# pkg-config finds it too, at the prefix it was installed to (netrt.pc said the
# configured one, /usr/local, whatever --install's --prefix), and a static link
# gets every library libnetrt.a needs (OpenBLAS was missing from Libs.private)
export PKG_CONFIG_PATH="$tmp/prefix/lib/pkgconfig:$tmp/prefix/lib/x86_64-linux-gnu/pkgconfig"
pkg-config --cflags --libs netrt
cc=${CC:-cc}
# shellcheck disable=SC2046,SC2086
$cc ${NETC_EMBED_CFLAGS:-} $(pkg-config --cflags netrt) "$src/examples/embed/main.c" -o "$tmp/embed_pc" $(pkg-config --libs netrt)
LD_LIBRARY_PATH="$(pkg-config --variable=libdir netrt)" "$tmp/embed_pc" "$tmp/mlp.netm" cpu | grep -q '^image 3: class'
# shellcheck disable=SC2046,SC2086
$cc ${NETC_EMBED_CFLAGS:-} $(pkg-config --cflags netrt) "$src/examples/embed/main.c" -o "$tmp/embed_static" \
  "$(pkg-config --variable=libdir netrt)/libnetrt.a" $(pkg-config --libs --static netrt | sed 's/-lnetrt\b//')
"$tmp/embed_static" "$tmp/mlp.netm" cpu | grep -q '^image 3: class'
echo "pkg-config: shared and static links run"
