#!/usr/bin/env bash
# run_golden.sh - golden tests: netc's output compared with files kept in git.
#
#   run_golden.sh diag NETC SRC   every tests/golden/diag/X.net: `netc check`'s
#                                 stderr and exit status == X.expected; a first line
#                                 `# args: ...` gives check more arguments (a build
#                                 option's diagnostics: --dump-ir --accumulate 2)
#   run_golden.sh ir NETC SRC     every tests/golden/ir/X.net: the IR after each
#                                 pass (sema, cast-hoist, join, cse, dce) == X.after-PASS.ir; every
#                                 example's final IR == ir/examples/EX.ir
#   run_golden.sh passes NETC SRC every tests/golden/ir/X.net and example: the CPU
#                                 executor's outputs with all passes == with none,
#                                 on random inputs (passes preserve semantics)
#   run_golden.sh run NETC SRC DIGEST
#                                 each example built and run on the CPU executor
#                                 (random inputs, seeded): every output matches
#                                 tests/golden/run/EX.OUTPUT.digest (npy_digest)
#   run_golden.sh nvrtc NETC SRC  every example, IR case and GPU test model compiles with NVRTC
#                                 for sm_80, sm_90a and compute_90 (exit 77 when
#                                 netc was built without NVRTC)
#   run_golden.sh count SRC MIN   at least MIN diagnostic cases exist
#
# NETC_GOLDEN_UPDATE=1 rewrites the expected files instead of comparing (review
# the diff before committing). Paths are printed relative to the case's
# directory and the source root is replaced by <src>, so goldens do not depend
# on where the tree is checked out.
set -uo pipefail
mode=${1:?mode} ; shift
fail=0 n=0

compare() {  # expected-file actual-text
  local want=$1 got=$2
  if [[ "${NETC_GOLDEN_UPDATE:-0}" == 1 ]]; then
    printf '%s\n' "$got" > "$want"
    return 0
  fi
  if [[ ! -f "$want" ]]; then
    echo "MISSING $want (run with NETC_GOLDEN_UPDATE=1 to create it)"
    return 1
  fi
  if ! diff -u "$want" <(printf '%s\n' "$got"); then
    echo "FAIL $want"
    return 1
  fi
}

case $mode in
diag)
  netc=$1 src=$2
  cd "$src/tests/golden/diag" || exit 1
  for f in *.net; do
    n=$((n + 1))
    read -ra args < <(sed -n '1s/^# args: //p' "$f")
    out=$(timeout 20 "$netc" check "${args[@]}" "$f" 2>&1 >/dev/null; echo "exit: $?")
    out=${out//$src/<src>}
    compare "${f%.net}.expected" "$out" || fail=$((fail + 1))
  done
  ;;
ir)
  netc=$1 src=$2
  cd "$src/tests/golden/ir" || exit 1
  for f in *.net; do
    for pass in sema cast-hoist join cse dce; do
      n=$((n + 1))
      out=$(timeout 20 "$netc" check --dump-ir=after:$pass "$f" 2>/dev/null; echo "exit: $?")
      compare "${f%.net}.after-$pass.ir" "$out" || fail=$((fail + 1))
    done
  done
  # the examples: their final IR (after every pass)
  for f in "$src"/examples/*.net; do
    n=$((n + 1))
    name=$(basename "${f%.net}")
    out=$(cd "$src/examples" && timeout 60 "$netc" check --dump-ir "$name.net" 2>/dev/null; echo "exit: $?")
    compare "examples/$name.ir" "$out" || fail=$((fail + 1))
  done
  ;;
passes)
  netc=$1 src=$2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  for f in "$src"/tests/golden/ir/*.net "$src"/examples/fashion_mlp.net "$src"/examples/cast_chain.net "$src"/examples/fashion_rows.net \
           "$src"/examples/fashion_cnn.net "$src"/examples/fashion_resnet.net; do
    n=$((n + 1))
    name=$(basename "${f%.net}")
    ok=1
    dims=(); grep -q '\[B' "$f" && dims=(--dim B=3)
    for variant in all none; do
      flags=(); [[ $variant == none ]] && flags=(--no-cast-hoist --no-cse --no-dce)
      if ! "$netc" build "$f" --target '' "${flags[@]}" -o "$tmp/$name.$variant.netm" 2>"$tmp/err" ||
         ! "$netc" run "$tmp/$name.$variant.netm" --device cpu "${dims[@]}" --random-inputs 7 \
              --output "$tmp/$name.$variant" >/dev/null 2>>"$tmp/err"; then
        echo "FAIL $name ($variant passes):"; cat "$tmp/err"; ok=0; break
      fi
    done
    if ((ok)); then
      for out in "$tmp/$name.all"/*.npy; do
        cmp -s "$out" "$tmp/$name.none/$(basename "$out")" || { echo "FAIL $name: $(basename "$out") differs with and without passes"; ok=0; }
      done
      [[ -n $(ls "$tmp/$name.all"/*.npy 2>/dev/null) ]] || { echo "FAIL $name: no outputs written"; ok=0; }
    fi
    ((ok)) || fail=$((fail + 1))
  done
  ;;
run)
  netc=$1 src=$2 digest=$3
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  # example and the dims it runs at (small: the CPU executor is the reference, not fast)
  for spec in "fashion_mlp:--dim B=2" "cast_chain:--dim B=1" "gpt2:--dim B=1 --dim T=8" "fashion_rows:--dim B=2" "fashion_cnn:--dim B=2" "fashion_resnet:--dim B=2" "llama_lm:--dim B=1"; do
    ex=${spec%%:*} dims=${spec#*:}
    n=$((n + 1))
    # shellcheck disable=SC2086
    if ! "$netc" build "$src/examples/$ex.net" --target '' -o "$tmp/$ex.netm" 2>"$tmp/err" ||
       ! "$netc" run "$tmp/$ex.netm" --device cpu $dims --random-inputs 7 --output "$tmp/$ex" >/dev/null 2>>"$tmp/err"; then
      echo "FAIL $ex:"; cat "$tmp/err"; fail=$((fail + 1)); continue
    fi
    for out in "$tmp/$ex"/*.npy; do
      want="$src/tests/golden/run/$ex.$(basename "${out%.npy}").digest"
      if [[ "${NETC_GOLDEN_UPDATE:-0}" == 1 ]]; then
        mkdir -p "$(dirname "$want")"; "$digest" "$out" > "$want"
      elif ! "$digest" "$out" "$want"; then
        echo "FAIL $ex: $(basename "$out") differs from $want"; fail=$((fail + 1))
      fi
    done
  done
  ;;
nvrtc)
  netc=$1 src=$2
  tmp=$(mktemp -d); trap 'rm -rf "$tmp"' EXIT
  for f in "$src"/examples/*.net "$src"/tests/golden/ir/*.net "$src"/tests/gpu/*.net; do
    n=$((n + 1))
    name=$(basename "${f%.net}")
    if ! NETC_NO_CACHE=1 "$netc" build "$f" -o "$tmp/$name.netm" 2>"$tmp/err"; then
      echo "FAIL $name:"; cat "$tmp/err"; fail=$((fail + 1)); continue
    fi
    # one kernel per op too (--no-fuse), with the training step where there is one
    if ! NETC_NO_CACHE=1 "$netc" build "$f" --no-fuse -o "$tmp/$name.unfused.netm" 2>"$tmp/err"; then
      echo "FAIL $name (--no-fuse):"; cat "$tmp/err"; fail=$((fail + 1)); continue
    fi
    if grep -q 'built without NVRTC' "$tmp/err"; then
      echo "SKIP: netc has no NVRTC (no CUDA toolkit at build time)"; exit 77
    fi
    targets=$("$netc" inspect "$tmp/$name.netm" --json | tr -d ' \n' | grep -o '"targets":\[[^]]*\]')
    for arch in sm_80 sm_90a compute_90; do
      [[ $targets == *"\"$arch\""* ]] || { echo "FAIL $name: no $arch image (${targets:-no targets})"; fail=$((fail + 1)); break; }
    done
  done
  # sm_90: attention by mma.sync on Hopper (what --target sm_90 gives; the default's sm_90a image
  # has the wgmma path), forward and the training step's gradients, through ptxas
  n=$((n + 1))
  if ! NETC_NO_CACHE=1 "$netc" build "$src/examples/gpt2.net" --set L=1 --dim B=2 --dim T=128 --entry train --target sm_90 \
       -o "$tmp/gpt2_sm90.netm" 2>"$tmp/err"; then
    echo "FAIL gpt2 (--target sm_90):"; cat "$tmp/err"; fail=$((fail + 1))
  elif ! "$netc" inspect "$tmp/gpt2_sm90.netm" --entry train --json | tr -d ' \n' | grep -q '"targets":\["sm_90"\]'; then
    echo "FAIL gpt2 (--target sm_90): the module has not just an sm_90 image"; fail=$((fail + 1))
  fi
  ;;
count)
  src=$1 min=$2
  n=$(ls "$src"/tests/golden/diag/*.net | wc -l)
  e=$(ls "$src"/tests/golden/diag/*.expected | wc -l)
  echo "$n diagnostic cases, $e expected files (minimum $min)"
  ((n >= min && e == n)) || fail=1
  ;;
*) echo "run_golden.sh: unknown mode '$mode'" >&2; exit 2 ;;
esac

echo "golden $mode: $((n - fail)) of $n passed"
((fail == 0))
