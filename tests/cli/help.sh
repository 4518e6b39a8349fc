#!/usr/bin/env bash
# Help and errors of every command: `sanpath --help` and `sanpath <command>
# --help` state a one-line purpose, every option with its default, and at
# least two examples; `--version` prints the version; errors are one line
# "sanpath: error: <what>: <why>" with the documented exit code.
# Usage: help.sh SANPATH SHARED_DIR TMP_DIR
set -euo pipefail
sanpath=$1
tmp=$3/help
rm -rf "$tmp"
mkdir -p "$tmp"

fail() {
  echo "FAIL: $*" >&2
  exit 1
}

# --version: the version, then the kernels the products use. The double
# kernel runs the best level of this CPU unless SANPATH_ISA chooses one; a
# name it does not know, or a level the CPU lacks, is a usage error (2) on
# one line naming the variable, before anything runs.
version=$("$sanpath" --version) || fail "--version exited with $?"
[[ $(head -n 1 <<<"$version") =~ ^sanpath\ [0-9]+\.[0-9]+\.[0-9]+$ ]] || fail "--version printed '$version'"
level=$(sed -n "s/^double products: sanpath's kernel, \([a-z0-9]*\) (the same bits on every level; SANPATH_ISA chooses one)$/\1/p" <<<"$version")
best=generic
grep -qw avx2 /proc/cpuinfo && grep -qw fma /proc/cpuinfo && best=avx2
grep -qw avx512f /proc/cpuinfo && best=avx512
[ "$level" = "$best" ] || fail "--version names double products '$level' on a CPU that runs $best: '$version'"
grep -q "^multiprecision products up to 1025 bits: \(AVX-512 IFMA\|GMP\) kernel$" <<<"$version" ||
  fail "--version does not name the multiprecision kernel: '$version'"
forced=$(SANPATH_ISA=generic "$sanpath" --version) || fail "SANPATH_ISA=generic --version exited with $?"
grep -q "^double products: sanpath's kernel, generic " <<<"$forced" || fail "SANPATH_ISA=generic gave '$forced'"
set +e
SANPATH_ISA=sse9 "$sanpath" --version >"$tmp/isa.out" 2>"$tmp/isa.err"
code=$?
set -e
[ "$code" -eq 2 ] || fail "SANPATH_ISA=sse9 exited with $code (want 2)"
[ "$(cat "$tmp/isa.err")" = "sanpath: error: SANPATH_ISA=sse9: unknown level (levels: generic, avx2, avx512)" ] ||
  fail "SANPATH_ISA=sse9 said '$(cat "$tmp/isa.err")'"
[ ! -s "$tmp/isa.out" ] || fail "SANPATH_ISA=sse9 printed on stdout"
if [ "$best" != avx512 ]; then
  set +e
  SANPATH_ISA=avx512 "$sanpath" --version >/dev/null 2>"$tmp/isa.err"
  code=$?
  set -e
  [ "$code" -eq 2 ] && grep -q "^sanpath: error: SANPATH_ISA=avx512: this CPU lacks AVX-512F" "$tmp/isa.err" ||
    fail "SANPATH_ISA=avx512 on a CPU without it: exit $code, '$(cat "$tmp/isa.err")'"
fi

# Top-level help: purpose, commands, exit codes, examples.
"$sanpath" --help >"$tmp/top.txt" || fail "--help exited with $?"
commands=$(sed -n '/^Subcommands:/,/^$/p' "$tmp/top.txt" | awk 'NR > 1 && NF { print $1 }')
[ -n "$commands" ] || fail "--help lists no commands"
for c in collapse forward init report; do
  grep -qx "$c" <<<"$commands" || fail "--help does not list '$c'"
done
for code in "0 success" "1 internal" "2 usage" "3 input" "4 numerical" "5 resource" "130 interrupted"; do
  grep -q "$code" "$tmp/top.txt" || fail "--help does not document exit code '$code'"
done

# Every command's help, audited by one script: purpose line, two examples,
# a default for every option that takes a value (or REQUIRED, or one of a
# group of alternatives). KNOWN_GAPS lists what other commands still lack
# (reported to their owners); a gap not listed fails; a listed gap that has
# been fixed prints a note (remove it from the list then).
for c in $commands; do
  "$sanpath" "$c" --help >"$tmp/$c.txt" || fail "sanpath $c --help exited with $?"
done
KNOWN_GAPS="
" python3 - "$tmp" $commands <<'EOF'
import os, re, sys

folder, commands = sys.argv[1], sys.argv[2:]
known = {tuple(l.split()) for l in os.environ["KNOWN_GAPS"].strip().splitlines() if l.strip()}
errors, gaps = [], set()
for c in commands:
    lines = open(os.path.join(folder, c + ".txt"), encoding="utf-8").read().splitlines()
    if not lines or not lines[0].strip() or lines[0].startswith("Usage"):
        errors.append(f"{c}: the help does not start with a one-line purpose")
    if not any(l.startswith("Usage: sanpath " + c) for l in lines):
        errors.append(f"{c}: no usage line")
    if "Examples:" not in lines:
        errors.append(f"{c}: no 'Examples:' section")
    else:
        after = lines[lines.index("Examples:") + 1:]
        examples = [l for l in after if l.startswith("  sanpath " + c + " ") or l == "  sanpath " + c]
        if len(examples) < 2:
            errors.append(f"{c}: fewer than two examples")
    # Options: "  --name TYPE[=default] ...  description" (the description
    # may follow on the next line); groups of alternatives are exempt.
    alternatives = False
    for i, l in enumerate(lines):
        if l.startswith("[Option Group:"):
            alternatives = False
        if re.search(r"\[(Exactly 1|At most 1) of the following", l):
            alternatives = True
        m = re.match(r"^ {2,4}(-[-\w]+(?:,-[-\w]+)*)(?: ([A-Z]+)(=\S*)?)?(.*)$", l)
        if not m or m.group(1) in ("-h,--help",):
            continue
        name, kind, default, rest = m.groups()
        long_name = [n for n in name.split(",") if n.startswith("--")][-1]
        if kind is None:
            continue  # a flag
        text = rest
        if i + 1 < len(lines) and re.match(r"^ {20,}\S", lines[i + 1]):
            text += " " + lines[i + 1]
        states_default = default is not None or "REQUIRED" in rest or re.search(r"\bdefault\b", text, re.I) \
            or "instead of stdout" in text
        if not states_default and not alternatives:
            gaps.add((c, long_name))
for c, o in sorted(gaps - known):
    errors.append(f"{c} {o}: the help states no default")
for c, o in sorted(known - gaps):
    if c in commands:
        print(f"note: {c} {o} now states its default: remove it from KNOWN_GAPS in tests/cli/help.sh")
if errors:
    print("\n".join("FAIL: " + e for e in errors), file=sys.stderr)
    sys.exit(1)
print(f"help ok: {len(commands)} commands; known gaps: " + ", ".join(" ".join(g) for g in sorted(gaps)))
EOF

# The family lists come from the library's registry (io/families.hpp): --model's help names every family
# and init --layout offers every layout, with its display name.
tr -s ' \n' ' ' <"$tmp/forward.txt" | grep -q "BERT, GPT-2, ALBERT, RoBERTa, DistilBERT, Llama, Mistral, Qwen2, XLNet, T5 encoder, GPT-NeoX, Phi, OPT, Gemma, Gemma 2, ViT, Qwen3, Gemma 3" ||
  fail "forward --help: --model does not name every family"
for layout in "bert (BERT)," "gpt_neox (GPT-NeoX)," "gemma2 (Gemma 2)," "vit (ViT; images)," "qwen3 (Qwen3)," \
  "gemma3 (Gemma 3)"; do
  tr -s ' \n' ' ' <"$tmp/init.txt" | grep -qF "$layout" || fail "init --help: --layout lacks '$layout'"
done

# Errors: one line "sanpath: error: ...", the documented exit code.
expect_error() {
  local code=$1 pattern=$2
  shift 2
  set +e
  "$sanpath" "$@" >"$tmp/out.txt" 2>"$tmp/err.txt"
  local rc=$?
  set -e
  [ "$rc" -eq "$code" ] || fail "sanpath $*: exit code $rc, expected $code ($(cat "$tmp/err.txt"))"
  [ "$(wc -l <"$tmp/err.txt")" -eq 1 ] || fail "sanpath $*: the error is not one line: $(cat "$tmp/err.txt")"
  grep -q "^sanpath: error: " "$tmp/err.txt" || fail "sanpath $*: stderr '$(cat "$tmp/err.txt")'"
  grep -qE -- "$pattern" "$tmp/err.txt" || fail "sanpath $*: stderr '$(cat "$tmp/err.txt")' does not match '$pattern'"
  [ ! -s "$tmp/out.txt" ] || fail "sanpath $*: wrote to stdout on error"
}
expect_error 2 "frobnicate: not a sanpath command \(commands: collapse, " frobnicate
expect_error 2 "A subcommand is required"
expect_error 2 "see sanpath forward --help" forward --model x --random-input 2 --bogus
expect_error 2 "^sanpath: error: --method: method: 'centered' is not one of direct, centred" \
  forward --model x --random-input 2 --method centered
expect_error 2 "--out is required.*see sanpath report --help" report
expect_error 2 "^sanpath: error: --gamma: " report --gamma 0 --out "$tmp/r.html"
expect_error 2 "^sanpath: error: --precision: " report --precision 12 --out "$tmp/r.html"
expect_error 3 "^sanpath: error: $tmp/missing/r.html: " report --out "$tmp/missing/r.html"
expect_error 3 "^sanpath: error: $tmp/nope: " report --model "$tmp/nope" --out "$tmp/r.html"
[ ! -e "$tmp/r.html" ] || fail "a failed report left a file behind"
echo "help: PASS"
