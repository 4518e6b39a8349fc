#!/usr/bin/env bash
# Every family's task head from the CLI (families.md; the numbers themselves
# are checked against the reference in reference_effectiveness.sh): on a
# small checkpoint of each family with a head (`init --layout`, its head's
# tensors drawn by the reference's gen-head fixture), `paths --effectiveness`
# names the head and prints agreement and KL for every length, exact and
# certified, and the report's effectiveness section compares predictions; the
# T5 encoder's output says in one line that it has no head of its own, and its
# JSON's "head_note" the same; a file without a head says none is in it; a bad
# or missing head tensor or config key is one line naming the file and the
# tensor or key, exit 3.
# Usage: bash task_heads.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks task_heads "$@"
source "$(dirname "$0")/../support/family_options.sh"
REF=$(dirname "$0")/../reference/sanpath_ref.py
attn=(--skip on --mlp none --layernorm none --effectiveness)
# edit_header FILE STATEMENT: the safetensors FILE's header, a dict h, changed by the Python STATEMENT.
edit_header() {
  /usr/bin/python3 - "$1" "$2" <<'PY'
import json, struct, sys
p = sys.argv[1]
raw = open(p, "rb").read()
n = struct.unpack("<Q", raw[:8])[0]
h = json.loads(raw[8:8 + n])
exec(sys.argv[2])
b = json.dumps(h).encode()
b += b" " * (-len(b) % 8)
open(p, "wb").write(struct.pack("<Q", len(b)) + b + raw[8 + n:])
PY
}

/usr/bin/python3 "$REF" gen-pixels --out "$dir/img" --size 8 --seed 3 >/dev/null || fail "gen-pixels"
/usr/bin/python3 "$REF" gen-input --out "$dir/x5" --tokens 5 --d-model 8 --seed 1 >/dev/null || fail "gen-input"
# The BERT family's sequence classifiers (init writes the stack and, but for ALBERT, its embeddings; gen-head
# adds the classifier and the ...ForSequenceClassification prefix): RoBERTa's tokens avoid its pad_token_id 1.
# family: kind and outputs of its head
declare -A HEAD=([llama]="language model:20" [mistral]="language model:20" [qwen2]="language model:20"
  [gemma]="language model:20" [gemma2]="language model:20" [xlnet]="language model:20"
  [gpt_neox]="language model:20" [phi]="language model:20" [opt]="language model:20" [vit]="classifier:5"
  [roberta]="classifier:4" [distilbert]="classifier:3" [albert]="classifier:5")
for fam in "${!HEAD[@]}"; do
  M="$dir/$fam"
  # shellcheck disable=SC2086
  expect 0 "$SANPATH" init --out "$M" --layout $fam "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[$fam]:-${FAMILY_OPTS[llama]}}
  /usr/bin/python3 "$REF" gen-head --model "$M" --seed 7 >/dev/null || fail "$fam: gen-head"
  case $fam in
    vit) IN=(--pixels "$dir/img") ;;
    albert) IN=(--input "$dir/x5") ;;
    roberta | distilbert) IN=(--tokens 0,5,7,3,19) ;;
    *) IN=(--tokens 1,5,7,3,19) ;;
  esac
  kind=${HEAD[$fam]%:*} outputs=${HEAD[$fam]#*:}
  unit=tokens
  [ "$kind" = classifier ] && unit=classes
  predictions=5
  [ "$kind" = classifier ] && predictions=1

  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" "${attn[@]}"
  grep -q "^task head: $kind ($outputs $unit), $predictions prediction" "$dir/out" ||
    fail "$fam: no head line: $(grep -m1 'task head' "$dir/out")"
  # the table: length, distance, agree (a/n), KL (a number), digits, paths; one row per k = 0..2
  /usr/bin/python3 - "$dir/out" "$predictions" <<'PY' || fail "$fam: the effectiveness table has no agreement or KL"
import re, sys
lines = open(sys.argv[1]).read().splitlines()
head = next(i for i, l in enumerate(lines) if l.startswith("length"))
assert "agree" in lines[head] and "KL" in lines[head], lines[head]
rows = [re.split(r"\s{2,}", l.strip()) for l in lines[head + 1:head + 4]]
assert [r[0] for r in rows] == ["0", "1", "2"], rows
for r in rows:
    assert re.fullmatch(r"\d+/" + sys.argv[2], r[2]), r
    float(r[3][2:] if r[3].startswith("< ") else r[3])
assert rows[2][2] == sys.argv[2] + "/" + sys.argv[2], rows[2]   # k = L: X_{<=L} = X^L
PY
  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" "${attn[@]}" --check certified --format json
  check "$fam certified effectiveness" '
assert j["head"]["kind"] == "'"$kind"'" and j["head"]["outputs"] == '"$outputs"', j["head"]
for e in j["effectiveness"]:
    assert e["kl"] is not None and set(e["intervals"]) == {"distance", "kl"}, e
    assert 0 <= e["agree"] <= e["agree_most"] <= j["head"]["predictions"], e'
  expect 0 "$SANPATH" report --model "$M" "${IN[@]}" --out "$dir/$fam.html" -q
  grep -q "chart-effectiveness-head" "$dir/$fam.html" || fail "$fam: the report compares no predictions"
done

# Each sequence classifier's maps under HF's names (the pooler map's activation: DistilBERT's ReLU, tanh else).
for name in roberta:classifier.out_proj distilbert:pre_classifier albert:albert.pooler; do
  grep -q "\"${name#*:}.weight\"" "$dir/${name%%:*}/model.safetensors" || fail "gen-head: no ${name#*:} in ${name%%:*}"
done

# The T5 encoder: one line, no head, no agreement column.
# shellcheck disable=SC2086
expect 0 "$SANPATH" init --out "$dir/t5" --layout t5 "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[t5]}
expect 0 "$SANPATH" paths --model "$dir/t5" --tokens 1,5,7,3,19 "${attn[@]}"
[ "$(grep -c "task head" "$dir/out")" = 1 ] || fail "t5: not one task head line: $(grep 'task head' "$dir/out")"
grep -q "^task head: none of its own (a T5 encoder: T5's LM head reads the decoder's output" "$dir/out" ||
  fail "t5: $(grep 'task head' "$dir/out")"
grep -q "none in the file" "$dir/out" && fail "t5: says none in the file"
expect 0 "$SANPATH" paths --model "$dir/t5" --tokens 1,5,7,3,19 "${attn[@]}" --format json
check "t5 head note" '
assert j["head"] is None, j["head"]
assert j["head_note"].startswith("none of its own (a T5 encoder: T5'"'"'s LM head reads the decoder"), j["head_note"]'

grep -E "^length" "$dir/out" | grep -q "agree" && fail "t5: an agreement column without a head"
expect 0 "$SANPATH" report --model "$dir/t5" --tokens 1,5,7,3,19 --out "$dir/t5.html" -q
grep -q "none of its own (a T5 encoder" "$dir/t5.html" || fail "t5: the report does not say it has no head"

# A Llama folder without lm_head and not tied: no head in the file.
expect 0 "$SANPATH" init --out "$dir/bare" --layout llama "${FAMILY_SIZE[@]}" ${FAMILY_OPTS[llama]}
sed -i 's/"tie_word_embeddings": true/"tie_word_embeddings": false/' "$dir/bare/config.json"
expect 0 "$SANPATH" paths --model "$dir/bare" --tokens 1,5,7 "${attn[@]}"
grep -q "^task head: none in the file" "$dir/out" || fail "bare llama: $(grep 'task head' "$dir/out")"
note=$(sed -n 's/^task head: //p' "$dir/out")
expect 0 "$SANPATH" paths --model "$dir/bare" --tokens 1,5,7 "${attn[@]}" --format json
check "bare llama head note" '
assert j["head"] is None and j["head_note"] == """'"$note"'""", (j["head"], j.get("head_note"))
assert all(e["agree"] is None and e["kl"] is None for e in j["effectiveness"])'
# A DistilBERT classifier without its pre_classifier: one line naming the file and the missing tensor.
cp -r "$dir/distilbert" "$dir/nopre"
edit_header "$dir/nopre/model.safetensors" 'h["pre_classifier_gone.weight"] = h.pop("pre_classifier.weight")'
expect 3 "$SANPATH" paths --model "$dir/nopre" --tokens 0,5,7 "${attn[@]}"
grep -q "nopre/model.safetensors: pre_classifier.weight: missing" "$dir/err" ||
  fail "no pre_classifier: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" = 1 ] || fail "no pre_classifier: not one line: $(cat "$dir/err")"

# Bad heads: one line naming the file and the tensor or key, exit 3.
cp -r "$dir/gemma2" "$dir/badcap"
sed -i 's/"final_logit_softcapping": 0.75/"final_logit_softcapping": -1/' "$dir/badcap/config.json"
expect 3 "$SANPATH" paths --model "$dir/badcap" --tokens 1,5,7 "${attn[@]}"
grep -q "config.json: final_logit_softcapping: must be a finite number > 0, got -1" "$dir/err" ||
  fail "bad soft cap: $(cat "$dir/err")"
[ "$(wc -l <"$dir/err")" = 1 ] || fail "bad soft cap: not one line: $(cat "$dir/err")"
edit_header "$dir/mistral/model.safetensors" 'h["lm_head.weight"]["shape"] = [40, 4]'  # 160 values, the wrong shape
expect 3 "$SANPATH" paths --model "$dir/mistral" --tokens 1,5,7 "${attn[@]}"
grep -q "model.safetensors: lm_head.weight: shape \[40, 4\], expected \[N, 8\]" "$dir/err" ||
  fail "bad lm_head: $(cat "$dir/err")"

[ "$fails" -eq 0 ] && echo "task_heads: every family's head read and compared; T5 says it has none"
exit $((fails > 0))
