#!/usr/bin/env bash
# The layout families of families.md from the CLI: for each of xlnet, t5,
# gpt_neox, phi, opt, gemma, gemma2 and vit, `init --layout` writes a
# checkpoint whose config.json names the family, and forward (auto on the
# centred pass, which agrees with the direct one, math.md §7.1), collapse (both
# conventions), paths (--sums with Theorem 2.1, --enumerate, --top), bounds
# (saying whether the theorems apply, and why not) and report run on it;
# refusals of configurations families.md does not define (one line naming
# config.json and the key, exit 3, no output file); ViT's pixel input and its
# refusals. The numbers themselves are checked against the independent
# reference in reference_families.sh.
# Usage: bash families.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks families "$@"

source "$(dirname "$0")/../support/family_options.sh"
SIZE=("${FAMILY_SIZE[@]}")
# Whether math.md §5's cubic bounds apply to the family's SAN (families.md:
# not with rotary, position terms or a soft-cap).
declare -A BOUNDS=([xlnet]=no [t5]=no [gpt_neox]=no [phi]=no [opt]=yes [gemma]=no [gemma2]=no [vit]=yes)

# A ViT image: pixel_values [3, 8, 8] (and a wrong-sized one), F32.
/usr/bin/python3 - "$dir" <<'PY'
import json, struct, sys, math
d = sys.argv[1]
def write(path, shape, values, name="pixel_values"):
    data = struct.pack("<%df" % len(values), *values)
    header = json.dumps({name: {"dtype": "F32", "shape": shape, "data_offsets": [0, len(data)]}}).encode()
    header += b" " * (-len(header) % 8)
    open(path, "wb").write(struct.pack("<Q", len(header)) + header + data)
write(d + "/img.safetensors", [3, 8, 8], [math.sin(0.37 * k) for k in range(192)])
write(d + "/img2.safetensors", [2, 3, 8, 8], [math.cos(0.11 * k) for k in range(384)])
write(d + "/img16.safetensors", [3, 16, 16], [0.5] * 768)
write(d + "/img1ch.safetensors", [1, 8, 8], [0.5] * 64)
write(d + "/noname.safetensors", [3, 8, 8], [0.5] * 192, name="X")
bad = [0.5] * 192
bad[7] = float("nan")
write(d + "/imgnan.safetensors", [3, 8, 8], bad)
PY

for fam in xlnet t5 gpt_neox phi opt gemma gemma2 vit; do
  M="$dir/$fam"
  # shellcheck disable=SC2086
  expect 0 "$SANPATH" init --out "$M" --layout $fam "${SIZE[@]}" ${FAMILY_OPTS[$fam]}
  grep -q "\"model_type\": \"$fam\"" "$M/config.json" || fail "$fam: config.json does not say model_type $fam"
  if [ $fam = vit ]; then IN=(--pixels "$dir/img.safetensors"); else IN=(--tokens 1,5,7,3,19); fi

  expect 0 "$SANPATH" forward --model "$M" "${IN[@]}" --format json
  check "$fam forward" '
assert len(j["layers"]) == 3, len(j["layers"])
assert all(l["digits"] is not None and l["digits"] >= 15 for l in j["layers"]), [l["digits"] for l in j["layers"]]'
  check "$fam forward: auto runs the centred pass" 'assert j["method"] == "centred", j["method"]'
  cp "$dir/out" "$dir/$fam-centred.json"
  for v in "--skip off --mlp none --layernorm none" ""; do  # the SAN and the family's own block, centred and direct
    # shellcheck disable=SC2086
    expect 0 "$SANPATH" forward --model "$M" "${IN[@]}" $v --format json --precision 257
    cp "$dir/out" "$dir/$fam-c.json"
    # shellcheck disable=SC2086
    expect 0 "$SANPATH" forward --model "$M" "${IN[@]}" $v --format json --precision 257 --method direct
    agree "$dir/$fam-c.json" "$dir/out" || fail "$fam ($v): centred and direct passes disagree"
  done
  expect 0 "$SANPATH" forward --model "$M" "${IN[@]}" --precision double --format json
  check "$fam forward double" 'assert all(l["digits"] >= 8 for l in j["layers"]), [l["digits"] for l in j["layers"]]'
  expect 0 "$SANPATH" forward --model "$M" "${IN[@]}"
  grep -q "^model: .*(L=2, H=2" "$dir/out" || fail "$fam: no model line: $(head -3 "$dir/out")"

  for conv in theory paper; do
    expect 0 "$SANPATH" collapse --model "$M" "${IN[@]}" --conventions $conv --format json
    check "$fam collapse $conv" '
assert len(j["variants"]) == 4, [v["name"] for v in j["variants"]]'
  done

  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" --sums --skip off --mlp none --layernorm none --format json
  check "$fam paths --sums (SAN)" '
assert j["total_paths"] == "4"
assert j["decomposition_holds"] is True, j["decomposition_error"]'
  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" --sums --skip on --mlp none --layernorm none --format json
  check "$fam paths --sums (skip)" '
assert j["total_paths"] == "9"
assert j["decomposition_holds"] is True, j["decomposition_error"]'
  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" --enumerate --verify-decomposition --skip on --mlp none --layernorm none --format json
  check "$fam paths --enumerate" 'assert len(j["paths"]) == 9, len(j["paths"])'
  expect 0 "$SANPATH" paths --model "$M" "${IN[@]}" --enumerate --top 3 --skip on --mlp none --layernorm none --format json
  check "$fam paths --top 3" 'assert len(j["paths"]) == 3, len(j["paths"])'


  expect 0 "$SANPATH" bounds --model "$M" "${IN[@]}" --skip off --mlp none --layernorm none --format json
  if [ "${BOUNDS[$fam]}" = yes ]; then
    check "$fam bounds (SAN, covered)" 'assert j["applicable"] is True, j["not_applicable"]'
  else
    check "$fam bounds (SAN, not covered)" '
assert j["applicable"] is False
assert j["beyond_theorems"]["statement"], j
assert all(d["verdict"] == "NOT_APPLICABLE" for d in j["depths"])'
  fi
  expect 0 "$SANPATH" report --model "$M" "${IN[@]}" --out "$dir/$fam.html" -q
  [ -s "$dir/$fam.html" ] || fail "$fam: no report"
  if [ "${BOUNDS[$fam]}" = no ]; then
    grep -q "Beyond the theorems" "$dir/$fam.html" || fail "$fam: the report does not say what the theorems do not cover"
  fi
done

# --- the paper's path-effectiveness experiment with the family's task head (LM heads of GPT-NeoX, OPT
# with and without project_out, Gemma's RMSNorm head; every family's in task_heads.sh), with sub-networks
# re-run per path.
expect 0 "$SANPATH" init --out "$dir/opt-same" --layout opt "${SIZE[@]}" --vocab 20
for m in gpt_neox opt-same opt gemma; do
  expect 0 "$SANPATH" paths --model "$dir/$m" --tokens 1,5,7,3,19 --effectiveness --rerun 4 --skip on --mlp none \
    --layernorm none --format json
  check "$m effectiveness" '
assert j["head"]["kind"] == "language model" and j["head"]["outputs"] == 20, j.get("head")
assert len(j["effectiveness"]) == 3, len(j["effectiveness"])
assert all(e["exact"]["agree"] is not None for e in j["effectiveness"])'
done

# --- every family from BF16 / F16 weights, in one file and in two shards (model.safetensors.index.json):
# the same weights give the same JSON byte for byte, whatever the files.
/usr/bin/python3 - "$dir" <<'PY'
import json, os, struct, sys
import numpy as np
d = sys.argv[1]
def read(path):
    raw = open(path, "rb").read()
    n = struct.unpack("<Q", raw[:8])[0]
    header = json.loads(raw[8:8 + n])
    data = raw[8 + n:]
    out = {}
    for k, v in header.items():
        if k == "__metadata__":
            continue
        b, e = v["data_offsets"]
        dt = {"F64": "<f8", "F32": "<f4"}[v["dtype"]]
        out[k] = np.frombuffer(data[b:e], dtype=dt).reshape(v["shape"])
    return out
def encode(a, dtype):
    if dtype == "F16":
        return a.astype("<f2").tobytes()
    u = a.astype("<f4").view("<u4").astype(np.uint64)   # BF16: round to nearest even, keep the high half
    u = (u + 0x7FFF + ((u >> 16) & 1)) >> 16
    return u.astype("<u2").tobytes()
def write(path, tensors, dtype):
    header, blobs, off = {}, [], 0
    for k, a in tensors.items():
        blob = encode(a, dtype)
        header[k] = {"dtype": dtype, "shape": list(a.shape), "data_offsets": [off, off + len(blob)]}
        blobs.append(blob)
        off += len(blob)
    h = json.dumps(header).encode()
    h += b" " * (-len(h) % 8)
    open(path, "wb").write(struct.pack("<Q", len(h)) + h + b"".join(blobs))
for fam, dtype in [("xlnet", "BF16"), ("t5", "F16"), ("gpt_neox", "BF16"), ("phi", "F16"), ("opt", "BF16"),
                   ("gemma", "BF16"), ("gemma2", "F16"), ("vit", "BF16")]:
    src = os.path.join(d, fam)
    t = read(os.path.join(src, "model.safetensors"))
    cfg = open(os.path.join(src, "config.json")).read()
    one, two = os.path.join(d, fam + "-one"), os.path.join(d, fam + "-two")
    for folder in (one, two):
        os.makedirs(folder, exist_ok=True)
        open(os.path.join(folder, "config.json"), "w").write(cfg)
    write(os.path.join(one, "model.safetensors"), t, dtype)
    names = list(t)
    halves = [dict((k, t[k]) for k in names[: len(names) // 2]), dict((k, t[k]) for k in names[len(names) // 2:])]
    wm = {}
    for i, part in enumerate(halves):
        shard = "model-%05d-of-00002.safetensors" % (i + 1)
        write(os.path.join(two, shard), part, dtype)
        wm.update({k: shard for k in part})
    json.dump({"metadata": {}, "weight_map": wm}, open(os.path.join(two, "model.safetensors.index.json"), "w"))
PY
strip_source() { /usr/bin/python3 -c "import json, sys
j = json.load(open('$dir/out')); j['model'].pop('source'); print(json.dumps(j, sort_keys=True))"; }
for fam in xlnet t5 gpt_neox phi opt gemma gemma2 vit; do
  if [ $fam = vit ]; then IN=(--pixels "$dir/img.safetensors"); else IN=(--tokens 1,5,7,3,19); fi
  for form in one two; do
    expect 0 "$SANPATH" forward --model "$dir/$fam-$form" "${IN[@]}" --stream-layers off --format json
    strip_source >"$dir/$fam-$form.json"
  done
  cmp -s "$dir/$fam-one.json" "$dir/$fam-two.json" || fail "$fam: the sharded checkpoint gives another forward than the single file"
done

# --- variants families.md refuses -----------------------------------------------------
expect 3 "$SANPATH" forward --model "$dir/gpt_neox" --tokens 1,2 --mlp plain
grep -q "mlp: plain is not defined for a parallel block" "$dir/err" || fail "parallel mlp plain: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/gemma" --tokens 1,2 --layernorm post
grep -q "layernorm: post is not this model's placement" "$dir/err" || fail "gemma layernorm post: $(cat "$dir/err")"
expect 0 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/img.safetensors" --layernorm post  # ViT takes post
expect 2 "$SANPATH" init --out "$dir/x" --layout gemma --skip off
grep -q "fixed by its config.json" "$dir/err" || fail "init --layout gemma --skip off: $(cat "$dir/err")"
expect 2 "$SANPATH" init --out "$dir/x" --layout bert --rotary-fraction 0.5
expect 2 "$SANPATH" init --out "$dir/x" --layout t5 --rotary-fraction 0.5
grep -q "rotary_fraction: not an option of the t5 layout" "$dir/err" || fail "t5 --rotary-fraction: $(cat "$dir/err")"

# --- refusals of configurations families.md does not define -------------------------
refuse() {  # FAMILY KEY JSON-VALUE
  rm -rf "$dir/bad" "$dir/report.html"
  cp -r "$dir/$1" "$dir/bad"
  /usr/bin/python3 -c "import json; p='$dir/bad/config.json'; c=json.load(open(p)); c['$2']=json.loads('$3'); json.dump(c, open(p, 'w'))"
  if [ "$1" = vit ]; then IN=(--pixels "$dir/img.safetensors"); else IN=(--tokens 1,2); fi
  expect 3 "$SANPATH" report --model "$dir/bad" "${IN[@]}" --out "$dir/report.html" -q
  [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "$1 $2: error is not one line: $(cat "$dir/err")"
  grep -q "bad/config.json: $2" "$dir/err" || fail "$1 $2: error does not name config.json and the key: $(cat "$dir/err")"
  [ ! -e "$dir/report.html" ] || fail "$1 $2: a report was written"
}
refuse xlnet attn_type '"xyz"'
refuse xlnet bi_data true
refuse t5 feed_forward_proj '"gated-foo"'
refuse t5 is_decoder true
refuse gpt_neox rope_scaling '{"type": "linear", "factor": 2.0}'
refuse gpt_neox rotary_pct 0.3
refuse phi qk_layernorm true
refuse gemma rope_scaling '{"type": "linear", "factor": 2.0}'
refuse gemma use_bidirectional_attention true
refuse gemma2 layer_types '["sliding_attention"]'
refuse opt activation_function '"swish_x"'
refuse vit image_size '[8, 16]'

# --- ViT pixels --------------------------------------------------------------------------
expect 0 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/img2.safetensors" --format json
check "vit batch of 2 images" 'assert j["batch"] == 2, j.get("batch")'
expect 3 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/img16.safetensors"
grep -q "img16.safetensors: pixel_values: image 16×16, the model's image_size is 8" "$dir/err" ||
  fail "wrong image size: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/img1ch.safetensors"
grep -q "pixel_values: 1 channels, the model's num_channels is 3" "$dir/err" || fail "channels: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/noname.safetensors"
grep -q "noname.safetensors: pixel_values: no tensor of that name" "$dir/err" || fail "no pixel_values: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/vit" --pixels "$dir/imgnan.safetensors"
grep -q "imgnan.safetensors: pixel_values: NaN at flat index 7" "$dir/err" || fail "NaN pixel: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/vit" --tokens 1,2
grep -q "a vit model takes images (--pixels), not token ids" "$dir/err" || fail "tokens to vit: $(cat "$dir/err")"
expect 3 "$SANPATH" forward --model "$dir/gemma" --pixels "$dir/img.safetensors"
grep -q "pixel_values: .* takes no pixels" "$dir/err" || fail "pixels to gemma: $(cat "$dir/err")"

# --- Figure 2 conventions on a post-LN family (XLNet: the paper's third model) ----------
expect 0 "$SANPATH" collapse --model "$dir/xlnet" --tokens 1,5,7,3,19 --conventions paper
grep -q "conventions: paper (Figure 2: SAN = LN_1(Attn(X))" "$dir/out" || fail "xlnet paper conventions: $(head -5 "$dir/out")"
expect 0 "$SANPATH" collapse --model "$dir/gemma" --tokens 1,5,7,3,19 --conventions paper
grep -q "allows its own norm placement only" "$dir/out" || fail "gemma paper conventions: $(head -5 "$dir/out")"

[ "$fails" -eq 0 ] || { echo "$fails failure(s)" >&2; exit 1; }
echo "families: all checks passed"
