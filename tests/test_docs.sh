#!/bin/bash
# test_docs.sh NETC SRC: the documentation says what netc does. Every fenced block of
# README.md and docs/*.md that shows .net code, a netc command or netc's output is checked
# against the binary. The conventions (each doc names them in a comment at its top):
#
#   ```net              a whole program: `netc check` exits 0 and prints nothing.
#   ```net error        a program wrong on purpose: `netc check` exits 1. When the next
#                       block is a transcript, its first line `$ netc check NAME`, the lines
#                       after it up to the next `$ ` line are exactly what netc prints for
#                       the block saved as NAME (the standard library's directory written
#                       /path/to/stdlib), and `$ echo $?` then N is the exit status.
#   ```net part=PATH    a part of a program: checked as the file PATH of the tree with its
#                       train sections taken out, this block in their place.
#   a block of diagnostics (its first line `NAME.net:L:C: ...`) elsewhere: a run of lines
#                       of a transcript of NAME.net in the same doc.
#   a block of "$ netc ..." lines (not netc check of a ```net error block) each followed by
#                       what it prints (exactly; "..." for any lines), run in a scratch
#                       directory where examples/ is the tree's, a build with --target ''
#                       unless it gives one; "$ echo $?" then N is the last one's status.
#   <!-- output: netc ARGS -->  on the line before a block: the block's lines appear in
#                       that order in what `netc ARGS` prints (run in the tree), `...`
#                       standing for any lines.
#   every `netc CMD ...` line (```sh blocks, transcripts, synopses, inline `code`): CMD is a command
#                       and each option is one `netc help` lists for CMD (an option refused
#                       on purpose only in a sentence that says "usage error"); the cheap
#                       ones of ```sh blocks run for real (build with --target '', train
#                       with --max-steps 2 where the data is installed).
#   ```c                the block is in a source file of compiler/ or runtime/, spaces and
#                       line breaks aside (the docs quote ops.def, passes.c).
#   `bash SCRIPT` in a ```sh block: the script exists.
#   README's table of options (| option | for | meaning |) is `netc help`'s list: every
#                       option of either is in the other, for the same commands, with the
#                       default help gives; README's list of commands has
#                       every command of help.
#   Also: paths of the tree the docs name exist, links lead to a file and heading;
#   language.md has a row for every callable op of compiler/ops.def, with its arguments
#   and their defaults and its dtype rule, and names the internal ones; its table of nn
#   gives every fn of stdlib/nn.net as declared; module-format.md's version is the one netc writes; the usage comment of
#   runtime/netrt.h compiles against netrt.h (cc -fsyntax-only); architecture.md names
#   every .c of compiler/ and runtime/ (or its .h); every NETC_ variable
#   netc reads (getenv in compiler/, runtime/; NETC_TEST_ hooks aside) is named in a doc,
#   and every one a doc names is read somewhere in the tree.
set -u
netc=$(realpath "$1") src=$(realpath "$2")
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
export NETC_STDLIB=${NETC_STDLIB:-$src/stdlib}
export NETC_CACHE_DIR=$tmp/cache
fail=0 checked=0
bad() { echo "FAIL: $*"; fail=$((fail + 1)); }
docs=(README.md docs/language.md docs/training.md docs/architecture.md docs/module-format.md)

# Each doc's fenced blocks as $tmp/b/K, and "K doc line info comment-before-it" (\037 between) in $tmp/index.
mkdir -p "$tmp/b" "$tmp/w" "$tmp/out"
: >"$tmp/sh_cmds"
k=0
for d in "${docs[@]}"; do
  [[ -f $src/$d ]] || { bad "$d is missing"; continue; }
  k=$(awk -v dir="$tmp/b" -v doc="$d" -v k="$k" -v index_file="$tmp/index" '
    !inb && /^```/ { k++; inb = 1; info = substr($0, 4); sub(/[ \t]+$/, "", info)
                     printf "%d\037%s\037%d\037%s\037%s\n", k, doc, NR, info, prev >> index_file
                     printf "" > (dir "/" k); next }
    inb && /^```[ \t]*$/ { inb = 0; close(dir "/" k); prev = ""; next }
    inb { print > (dir "/" k); next }
    /[^ \t]/ { prev = $0 }
    END { if (inb) printf "FAIL: %s: a block is not closed\n", doc >> index_file ".fail"; print k }' "$src/$d")
done

[[ -f $tmp/index.fail ]] && { cat "$tmp/index.fail"; fail=$((fail + $(wc -l <"$tmp/index.fail"))); }

# netc check on a block saved as $tmp/w/NAME: stdout and stderr in $tmp/got, the status echoed
check_block() {  # FILE NAME
  cp "$1" "$tmp/w/$2"
  (cd "$tmp/w" && timeout 60 "$netc" check "$2") >"$tmp/got" 2>&1
  local rc=$?
  sed -i "s|$NETC_STDLIB/|/path/to/stdlib/|g; s|$src/stdlib/|/path/to/stdlib/|g" "$tmp/got"
  return $rc
}

# train sections out of a .net file: from a line `train NAME` to the `}` that closes it
strip_train() { awk '/^train[ \t]/ { skip = 1 } !skip { print } skip && /^}/ { skip = 0 }' "$1"; }

# The commands each option is for, from netc help
declare -A opt_cmds
while IFS=';' read -r opt cmds; do opt_cmds[$opt]=$cmds; done \
  < <("$netc" help | sed -n 's/^  \(-[-A-Za-z]*\)\(=[^ ]*\)\{0,1\}\( [^ (]*\)\{0,1\}  *(\([a-z, ]*\)).*/\1;\4/p' | tr -d ' ')
(( ${#opt_cmds[@]} >= 35 )) || bad "netc help: only ${#opt_cmds[@]} options read"

# README's table of options is netc help's list, both ways. A row: the options of its
# first column, the commands of its second (parentheses aside: `check (with --dump-ir)`),
# its meaning. Where the first column is a pattern (`--no-PASS`), the options its meaning
# names (the passes' --no-NAME) are that row's; every option a row names is one help lists.
# The word help gives as an option's default (128, auto, sm_80,...) is in its row's meaning.
sort_cmds() { tr -d ' ' <<<"$1" | tr ',' '\n' | grep -v '^$' | sort | paste -sd, -; }
declare -A doc_opt_cmds doc_opt_row doc_opt_named doc_opt_meaning
awk '/^\| option \| for \| meaning \|$/ { t = 1; next }
     t && /^\|---/ { next }
     t && !/^\|/ { exit }
     t { gsub(/\\\|/, "/"); n = split($0, f, "|"); m = f[4]; for (i = 5; i < n; i++) m = m "|" f[i]
         printf "%d\t%s\t%s\t%s\n", NR, f[2], f[3], m }' "$src/README.md" >"$tmp/opt_table"
(( $(wc -l <"$tmp/opt_table") >= 20 )) || bad "README.md: its table of options (| option | for | meaning |) has $(wc -l <"$tmp/opt_table") rows"
while IFS=$'\t' read -r nr col1 col2 col3; do
  cmds=$(sort_cmds "$(sed 's/([^)]*)//g' <<<"$col2")")
  for o in $(grep -oE '`-[-A-Za-z]+' <<<"$col1" | tr -d '`'); do
    [[ $o =~ [A-Z]{2} ]] && continue          # a pattern: --no-PASS
    doc_opt_cmds[$o]=$cmds doc_opt_row[$o]=$nr doc_opt_named[$o]=column doc_opt_meaning[$o]=$col3
    [[ -n ${opt_cmds[$o]:-} ]] || bad "README.md:$nr: the table of options has $o, which netc help does not list"
  done
done <"$tmp/opt_table"
while IFS=$'\t' read -r nr col1 col2 col3; do
  for o in $(grep -oE '`-[-A-Za-z]+' <<<"$col2 $col3" | tr -d '`' | sort -u); do
    [[ -n ${opt_cmds[$o]:-} ]] || bad "README.md:$nr: the table of options names $o, which netc help does not list"
  done
  [[ $col1 =~ \`-[-a-z]*[A-Z]{2} ]] || continue
  cmds=$(sort_cmds "$(sed 's/([^)]*)//g' <<<"$col2")")
  for o in $(grep -oE '`-[-A-Za-z]+' <<<"$col3" | tr -d '`'); do
    [[ -z ${doc_opt_cmds[$o]:-} ]] && doc_opt_cmds[$o]=$cmds doc_opt_row[$o]=$nr doc_opt_named[$o]=meaning doc_opt_meaning[$o]=$col3
  done
done <"$tmp/opt_table"
"$netc" help | awk '/^options:/ { on = 1; next }
  on && /^  -/ { if (o != "") print o "\t" text; o = $1; sub(/=.*/, "", o); text = $0; next }
  on && /^      / { text = text " " $0 }
  END { if (o != "") print o "\t" text }' >"$tmp/help_opts"
while IFS=$'\t' read -r o text; do
  checked=$((checked + 1))
  if [[ -z ${doc_opt_cmds[$o]:-} ]]; then bad "netc help lists $o, which README.md's table of options does not"; continue; fi
  want=$(sort_cmds "${opt_cmds[$o]:-}")
  [[ ${doc_opt_cmds[$o]} == "$want" ]] ||
    bad "README.md:${doc_opt_row[$o]}: $o is for ${doc_opt_cmds[$o]} in the table of options (its ${doc_opt_named[$o]}), for $want in netc help"
  for def in $(grep -oE 'default:? [^ :;)]+' <<<"$text" | sed 's/^default:\{0,1\} //; s/,$//'); do
    grep -qE "(^|[^A-Za-z0-9_.])${def//./\\.}([^A-Za-z0-9_]|\$)" <<<"${doc_opt_meaning[$o]}" ||
      bad "README.md:${doc_opt_row[$o]}: netc help gives $o the default $def, its row's meaning in the table of options does not"
  done
done <"$tmp/help_opts"
(( $(cut -f1 "$tmp/help_opts" | sort -u | wc -l) == ${#opt_cmds[@]} )) ||
  bad "netc help: $(cut -f1 "$tmp/help_opts" | sort -u | wc -l) options, but ${#opt_cmds[@]} read with their commands"

# README's list of commands (the block after "## Commands") names every command of netc help
help_cmds=$("$netc" help | sed -n '/^commands:/,/^options:/s/^  \([a-z][a-z]*\)  *.*/\1/p')
[[ $(wc -w <<<"$help_cmds") -ge 6 ]] || bad "netc help: only '$help_cmds' read as its commands"
doc_cmds=$(awk '/^## Commands/ { on = 1; next } on && /^```/ { if (inb) exit; inb = 1; next }
                inb && /^netc / { sub(/^--/, "", $2); print $2 }' "$src/README.md")
for c in $help_cmds; do
  grep -qxF -- "$c" <<<"$doc_cmds" || bad "netc help has the command $c, which README.md's list of commands (## Commands) does not"
  checked=$((checked + 1))
done

# the environment: every NETC_ variable netc and libnetrt read (the test hooks NETC_TEST_ aside)
# is named in a doc, and every one a doc names is read somewhere in the tree
doc_env=$(cd "$src" && grep -ohE 'NETC_[A-Z0-9_]+' "${docs[@]}" | sort -u)
for v in $(cd "$src" && grep -ohE '(getenv|env_flag)\("NETC_[A-Z0-9_]+"' compiler/*.c runtime/*.c |
           sed 's/.*"\(NETC_[A-Z0-9_]*\)"/\1/' | grep -v '^NETC_TEST_' | sort -u); do
  grep -qxF "$v" <<<"$doc_env" || bad "netc reads \$$v (compiler/, runtime/), which no doc names"
  checked=$((checked + 1))
done
for v in $doc_env; do
  grep -rqE --exclude=test_docs.sh "(getenv|env_flag)\\(\"$v\"|\\\$\\{?$v([^A-Z0-9_]|\$)" \
    "$src/compiler" "$src/runtime" "$src/tests" "$src/scripts" "$src/bench" ||
    bad "the docs name \$$v, which nothing in compiler/, runtime/, tests/, scripts/ or bench/ reads"
  checked=$((checked + 1))
done

# A command line a doc shows: its command and every option netc takes for it.
check_cmdline() {  # WHERE LINE [REFUSAL_OK]
  local where=$1 line=$2 refusal_ok=${3:-}
  read -r -a w <<<"$line"
  local cmd=${w[1]:-}
  checked=$((checked + 1))
  case $cmd in
    check|build|run|inspect|train|help|version|--version) ;;
    *) bad "$where: '$line': netc has no command '$cmd'"; return ;;
  esac
  local word opt
  for word in "${w[@]:2}"; do
    [[ $word == -* && $word != -[0-9]* ]] || continue
    opt=${word%%=*}
    [[ $opt == --no-PASS ]] && continue      # a pattern the docs spell out
    if [[ -z ${opt_cmds[$opt]:-} ]]; then
      bad "$where: '$line': netc help lists no option $opt"
    elif [[ ",${opt_cmds[$opt]}," != *",$cmd,"* && -z $refusal_ok ]]; then
      bad "$where: '$line': $opt is for ${opt_cmds[$opt]}, not $cmd"
    fi
  done
}

# Whether GOT holds WANT's lines in order, a "..." line of WANT standing for any lines (or
# none); WANT's first and last lines are GOT's unless they are "...". Says the first miss.
in_order() {  # WANT GOT
  awk 'NR == FNR { want[++n] = $0; next } { got[++m] = $0 }
    END { j = 1; gap = 0
          for (i = 1; i <= n; i++) {
            if (want[i] == "...") { gap = 1; continue }
            if (gap) while (j <= m && got[j] != want[i]) j++
            if (j > m || got[j] != want[i]) { printf "line %d of the block is not where it should be in what netc prints: %s\n", i, want[i]; exit 1 }
            j++; gap = 0 }
          if (!gap && j <= m) { printf "netc prints more after the block'"'"'s last line: %s\n", got[j]; exit 1 } }' "$1" "$2"
}

# A transcript of netc command lines: each "$ netc ..." line is run in a scratch directory
# where examples/ is the tree's (a build with --target '' unless it gives one: no NVRTC),
# and the lines after it, up to the next "$ " line, are what it prints (stdout and
# stderr; exactly, or in order where "..." stands for any lines); "$ echo $?" then N: its
# exit status.
run_transcript() {  # WHERE BLOCK
  local where=$1 b=$2 dir=$tmp/tx line cmd='' last='' want='' extra='' rc=0 i n
  local -a L
  mapfile -t L <"$b"
  rm -rf "$dir"; mkdir -p "$dir"; ln -s "$src/examples" "$dir/examples"
  n=${#L[@]}
  for ((i = 0; i <= n; i++)); do
    line=${L[i]:-}
    if (( i < n )) && [[ $line != '$ '* ]]; then want+=$line$'\n'; continue; fi
    if [[ -n $cmd ]]; then
      printf '%s' "$want" >"$tmp/tx_want"
      if grep -qx '\.\.\.' "$tmp/tx_want"; then
        in_order "$tmp/tx_want" "$tmp/tx_got" >"$tmp/diff"
      else
        diff -u "$tmp/tx_want" "$tmp/tx_got" >"$tmp/diff"
      fi || bad "$where: '$cmd' prints otherwise than the doc shows:$(printf '\n'; cat "$tmp/diff")"
      checked=$((checked + 1)) last=$cmd cmd=
    fi
    (( i < n )) || break
    if [[ $line == '$ echo $?' ]]; then
      [[ ${L[i + 1]:-} == "$rc" ]] || bad "$where: '$last' exits $rc, the doc says ${L[i + 1]:-nothing}"
      i=$((i + 1)); continue
    fi
    cmd=${line#\$ } want=
    if [[ ! $cmd =~ ^(build/)?netc\ [a-z-] ]]; then bad "$where: a transcript of something else than netc: $cmd"; cmd=; continue; fi
    check_cmdline "$where" "$cmd" refusal-shown
    extra=''; [[ $cmd =~ ^(build/)?netc\ build\  && $cmd != *--target* ]] && extra=" --target ''"   # no NVRTC
    (cd "$dir" && eval "timeout 60 \"\$netc\" ${cmd#*netc }$extra") >"$tmp/tx_got" 2>&1
    rc=$?
    sed -i "s|$NETC_STDLIB/|/path/to/stdlib/|g; s|$src/stdlib/|/path/to/stdlib/|g" "$tmp/tx_got"
  done
}

pending_error= pending_doc=
declare -a excerpts=()
while IFS=$'\037' read -r k doc line info comment; do   # \037: empty fields kept
  b=$tmp/b/$k where="$doc:$line"
  first=$(head -n 1 "$b")
  # a transcript of a ```net error block: right after it (a path with a / is a file of the tree)
  if [[ $first =~ ^\$\ (build/)?netc\ check\ ([^ ]+)$ && ( ${BASH_REMATCH[2]} != */* || -n $pending_error ) ]]; then
    name=${BASH_REMATCH[2]}
    check_cmdline "$where" "${first#\$ }"
    if [[ -z $pending_error || $pending_doc != "$doc" ]]; then
      bad "$where: a transcript of $name with no \`\`\`net error block before it"
    else
      check_block "$tmp/b/$pending_error" "$name"; rc=$?
      awk 'NR > 1 && /^\$ / { exit } NR > 1' "$b" >"$tmp/want"
      cp "$tmp/got" "$tmp/out/${doc//\//_}-$name"
      diff -u "$tmp/want" "$tmp/got" >"$tmp/diff" ||
        bad "$where: netc check $name prints otherwise than the doc shows:$(printf '\n'; cat "$tmp/diff")"
      want_rc=$(awk 'prev == "$ echo $?" { print; exit } { prev = $0 }' "$b")
      [[ -z $want_rc || $want_rc == "$rc" ]] || bad "$where: netc check $name exits $rc, the doc says $want_rc"
      checked=$((checked + 1))
    fi
    pending_error=
    continue
  fi
  pending_error=
  out_re='^<!-- output: (build/)?netc (.*) -->$'
  if [[ $comment =~ $out_re ]]; then
    args=${BASH_REMATCH[2]}
    check_cmdline "$where" "netc $args"
    (cd "$src" && eval "timeout 60 \"$netc\" $args") >"$tmp/got" 2>/dev/null ||
      bad "$where: netc $args failed"
    # the block's lines in order, each run between "..." lines consecutive; the block may start anywhere
    awk 'NR == FNR { want[++n] = $0; next }
      i == n { next }
      { while (i < n && want[i + 1] == "...") { i++; gap = 1 }
        if (i == n) next
        if ($0 == want[i + 1]) { i++; gap = 0 }
        else if (!gap) { printf "after line %d of the block netc prints: %s\n", i, $0; failed = 1; exit 1 } }
      BEGIN { gap = 1 }
      END { if (failed) exit 1
            while (i < n && want[i + 1] == "...") i++
            if (i < n) { printf "line %d of the block is not in order in the output: %s\n", i + 1, want[i + 1]; exit 1 } }' \
      "$b" "$tmp/got" >"$tmp/msg" || bad "$where: the output of netc $args differs from the block: $(cat "$tmp/msg")"
    checked=$((checked + 1))
    continue
  fi
  case $info in
    net)
      check_block "$b" block.net; rc=$?
      [[ $rc == 0 && ! -s $tmp/got ]] ||
        bad "$where: a \`\`\`net block does not check cleanly (exit $rc):$(printf '\n'; cat "$tmp/got")"
      checked=$((checked + 1)) ;;
    "net error")
      check_block "$b" block.net; rc=$?
      [[ $rc == 1 && -s $tmp/got ]] || bad "$where: a \`\`\`net error block: netc check exits $rc"
      pending_error=$k pending_doc=$doc
      checked=$((checked + 1)) ;;
    "net part="*)
      part=${info#net part=}
      if [[ ! -f $src/$part ]]; then bad "$where: part=$part: no such file"; continue; fi
      { strip_train "$src/$part"; cat "$b"; } >"$tmp/part.net"
      check_block "$tmp/part.net" "$(basename "$part")"; rc=$?
      [[ $rc == 0 && ! -s $tmp/got ]] ||
        bad "$where: a \`\`\`net part=$part block does not check cleanly (exit $rc):$(printf '\n'; cat "$tmp/got")"
      checked=$((checked + 1)) ;;
    net*) bad "$where: unknown block kind '$info'" ;;
    sh)
      while read -r cl; do
        cl=${cl%%#*}; cl=${cl%"${cl##*[! ]}"}
        [[ $cl =~ ^bash\ ([^ ]+) && ! -f $src/${BASH_REMATCH[1]} ]] && echo "FAIL: $where: $cl: no such script" >>"$tmp/index.fail2"
        [[ $cl =~ ^(build/)?netc\  ]] && echo "$where	$cl"
      done < <(sed -e ':a' -e '/\\$/N; s/\\\n[ \t]*//; ta' "$b") >>"$tmp/sh_cmds" ;;
    c)   # the block, spaces and line breaks aside, in one source file
      t=$(tr -s ' \t\n' '   ' <"$b" | sed 's/^ //; s/ $//')
      found=
      for f in "$src"/compiler/*.[ch] "$src"/compiler/*.def "$src"/runtime/*.[ch]; do
        tr -s ' \t\n' '   ' <"$f" | grep -qF -- "$t" && { found=$f; break; }
      done
      [[ -n $found ]] || bad "$where: this \`\`\`c block is in no source file of compiler/ or runtime/:$(printf '\n'; cat "$b")"
      checked=$((checked + 1)) ;;
    "")
      if [[ $first =~ ^([A-Za-z0-9_.-]+\.net):[0-9]+:[0-9]+:\  ]]; then
        excerpts+=("$where	$doc	${BASH_REMATCH[1]}	$k")
      elif [[ $first == '$ '* ]]; then
        run_transcript "$where" "$b"
      fi
      # a synopsis (README's list of commands): each line's command and options
      while read -r cl; do
        [[ $cl =~ ^(build/)?netc\ [-a-z] ]] && check_cmdline "$where" "$(sed 's/  .*//; s/\[//g; s/\]//g' <<<"$cl")"
      done <"$b" ;;
  esac
done <"$tmp/index"

# diagnostics excerpts: a run of lines of the transcript of that file in the same doc
for e in "${excerpts[@]}"; do
  IFS=$'\t' read -r where doc name k <<<"$e"
  t=$tmp/out/${doc//\//_}-$name
  if [[ ! -f $t ]]; then bad "$where: diagnostics of $name, but the doc has no transcript of it"; continue; fi
  awk 'NR == FNR { want[++n] = $0; next } { got[++m] = $0 }
    END { for (s = 0; s + n <= m; s++) { for (i = 1; i <= n && got[s + i] == want[i]; i++) ;
                                         if (i > n) exit 0 }
          exit 1 }' "$tmp/b/$k" "$t" || bad "$where: these diagnostics of $name are not in what netc prints:$(printf '\n'; cat "$t")"
  checked=$((checked + 1))
done

# inline `netc ...` in the prose (a span may run over a line break)
for d in "${docs[@]}"; do
  awk '/^```/ { inb = !inb; print ""; next } !inb' "$src/$d" | awk 'BEGIN { RS = "" } { gsub(/\n/, " "); print }' |
    while IFS= read -r para; do
      grep -oE '`(build/)?netc [^`]*`' <<<"$para" | tr -d '`' | while IFS= read -r cl; do
        refusal=; [[ $para == *"usage error"* ]] && refusal=yes
        check_cmdline "$d (inline)" "$cl" "$refusal"
        echo "checked: $cl"
      done
    done
done >"$tmp/inline_out"   # a pipeline's subshells: their failures counted from what they print
grep '^FAIL' "$tmp/inline_out"
fail=$((fail + $(grep -c '^FAIL' "$tmp/inline_out")))
checked=$((checked + $(grep -c '^checked: ' "$tmp/inline_out")))

# ```sh commands: options, and the cheap ones for real on tiny inputs
mkdir -p "$tmp/run"
while IFS=$'\t' read -r where cl; do
  check_cmdline "$where" "$cl"
  read -r -a w <<<"$cl"
  w=("${w[@]/#examples\//$src/examples/}")
  w[0]=$netc
  case ${w[1]} in
    check|build|inspect|run) [[ ${w[1]} == build ]] && w+=(--target '') ;;
    train) [[ " ${w[*]} " == *" --data /usr/share/datasets/fashion-mnist "* && -d /usr/share/datasets/fashion-mnist ]] || continue
           w+=(--max-steps 2 --device cpu) ;;
    *) continue ;;
  esac
  (cd "$tmp/run" && timeout 120 "${w[@]}") >"$tmp/got" 2>&1 || bad "$where: '$cl' failed:$(printf '\n'; tail -5 "$tmp/got")"
done <"$tmp/sh_cmds"

# language.md's op tables follow compiler/ops.def: a row for every op that can be called,
# and the internal ones named
while read -r op internal rule; do
  if [[ $internal == 1 ]]; then
    grep -qF "\`$op\`" "$src/docs/language.md" || bad "docs/language.md does not name the internal op $op"
  else
    row=$(grep -E "^\| (\`[a-z_0-9]+\` )*\`$op\`" "$src/docs/language.md" | head -n 1)
    if [[ -z $row ]]; then bad "docs/language.md has no row for the op $op (compiler/ops.def)"; continue; fi
    case $rule in   # the dtype column, for the rules most ops share
      DT_NUMERIC) want='numeric → same' ;; DT_FLOAT) want='float → same' ;; DT_ANY) want='any → same' ;; *) want= ;;
    esac
    [[ -z $want || $(cut -d'|' -f5 <<<"$row") == " $want " ]] || bad "docs/language.md: $op's dtypes are not '$want' ($rule in ops.def)"
  fi
  checked=$((checked + 1))
done < <(awk '/^X\(OP_/ { n = $0; while (n !~ /\)[ \t]*$/ && (getline more) > 0) n = n " " more
                           split(n, f, /, */); print f[2], (n ~ /OPF_INTERNAL/), f[5] }' "$src/compiler/ops.def")

# and each row's further arguments are the op's kwargs in ops.def: every name, "required"
# where it has no default, and "`name` (default)" or "(default: ...)" where it is a value
while IFS='|' read -r op kwargs; do
  row=$(grep -E "^\| (\`[a-z_0-9]+\` )*\`$op\`" "$src/docs/language.md" | head -n 1 | cut -d'|' -f4)
  for kw in $kwargs; do
    name=${kw%%:*} def=${kw#*=} kind=${kw#*:}; kind=${kind%%=*}
    checked=$((checked + 1))
    if [[ $row != *"\`$name\`"* ]]; then bad "docs/language.md: the row of $op does not name its argument $name"
    elif [[ $def == '!' ]]; then [[ $row == *required* ]] || bad "docs/language.md: the row of $op does not say $name is required"
    elif [[ $def != - && $kind != seed ]]; then
      [[ $row == *"\`$name\` ($def)"* || $row == *"\`$name\` ($def:"* ]] || bad "docs/language.md: the row of $op does not give $name's default ($def)"
    fi
  done
done < <(awk '/^X\(OP_/ { n = $0; while (n !~ /\)[ \t]*$/ && (getline more) > 0) n = n " " more
                           if (n ~ /OPF_INTERNAL/) next
                           split(n, f, /, */); kw = ""
                           if (match(n, /grad_[a-z_]+, *"[^"]*"/)) { kw = substr(n, RSTART, RLENGTH); sub(/^grad_[a-z_]+, *"/, "", kw); sub(/"$/, "", kw) }
                           print f[2] "|" kw }' "$src/compiler/ops.def")

# language.md's table of the standard library: every fn of stdlib/nn.net, as declared
while IFS= read -r sig; do
  grep -qF "| \`$sig\`" "$src/docs/language.md" || bad "docs/language.md's table of nn does not give $sig (stdlib/nn.net)"
  checked=$((checked + 1))
done < <(sed -n 's/^fn \([^{]*)\) *{.*/\1/p' "$src/stdlib/nn.net")

[[ -f $tmp/index.fail2 ]] && { cat "$tmp/index.fail2"; fail=$((fail + $(wc -l <"$tmp/index.fail2"))); }

# the tree's paths the docs name exist, and their links lead somewhere: a file, and a
# heading for #anchor (GitHub's anchors: lower case, punctuation dropped, spaces to -)
anchors() { sed -n 's/^#\{1,6\} //p' "$1" | tr 'A-Z' 'a-z' | sed 's/[^a-z0-9 _-]//g; s/ /-/g'; }
for d in "${docs[@]}"; do
  for p in $(grep -oE '`(compiler|runtime|tests|scripts|examples|bench|stdlib|grammar|docs)/[A-Za-z0-9_./-]*`' "$src/$d" | tr -d '`' | sort -u); do
    [[ $p == *NAME* || -e $src/$p ]] || bad "$d names $p, which is not in the tree"
    checked=$((checked + 1))
  done
  for l in $(grep -oE '\]\([^) ]+\)' "$src/$d" | sed 's/^](//; s/)$//' | grep -v '^https\?:' | sort -u); do
    f=${l%%#*} a=; [[ $l == *'#'* ]] && a=${l#*#}
    t=$src/$d; [[ -n $f ]] && t=$(dirname "$src/$d")/$f
    checked=$((checked + 1))
    [[ -e $t ]] || { bad "$d links to $l: no such file"; continue; }
    [[ -z $a ]] || anchors "$t" | grep -qxF -- "$a" || bad "$d links to $l: no such heading"
  done
done

# architecture.md's pipeline names every source file of compiler/ and runtime/ (or its header)
for f in "$src"/compiler/*.c "$src"/runtime/*.c; do
  b=$(basename "$f" .c)
  grep -qE "\b$b\.[ch]\b" "$src/docs/architecture.md" ||
    bad "docs/architecture.md names neither $b.c nor $b.h ($(basename "$(dirname "$f")")/): say what the file is for"
  checked=$((checked + 1))
done

# the module format version module-format.md describes is the one netc writes
doc_v=$(sed -n '1s/.*(version \([0-9]*\)).*/\1/p' "$src/docs/module-format.md")
netc_v=$("$netc" --version | sed -n 's/.*module format \([0-9]*\).*/\1/p')
[[ -n $doc_v && $doc_v == "$netc_v" ]] || bad "docs/module-format.md describes version '$doc_v', netc writes '$netc_v'"
checked=$((checked + 1))

# runtime/netrt.h's usage comment, as the body of a function
# (its lines indented by more than " * " in the file's first comment)
awk '/\*\// { exit } /^ \*   / { sub(/^ \* /, ""); print }' "$src/runtime/netrt.h" >"$tmp/usage.c"
{ printf '#include <stdio.h>\n#include "netrt.h"\nint usage(void);\nint usage(void) {\n'
  cat "$tmp/usage.c"; printf 'return 0;\n}\n'; } >"$tmp/usage_main.c"
[[ $(wc -l <"$tmp/usage.c") -ge 5 ]] || bad "runtime/netrt.h: no usage comment found"
cc -std=c11 -Wall -Wextra -Werror -fsyntax-only -I"$src/runtime" "$tmp/usage_main.c" 2>"$tmp/cc" ||
  bad "runtime/netrt.h's usage comment does not compile:$(printf '\n'; cat "$tmp/usage_main.c" "$tmp/cc")"

(( checked >= 40 )) || bad "only $checked things checked: the extraction is broken"
echo "test_docs: $checked checks, $fail failures"
[[ $fail == 0 ]]
