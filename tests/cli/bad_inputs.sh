#!/usr/bin/env bash
# The bad-input catalogue: every malformed, hostile or absurd input gets the
# documented exit code, a one-line message "sanpath: error: <what>: <why>"
# that names the file and the field, and leaves no output file behind.
#
# Usage: bash bad_inputs.sh <sanpath binary> <shared dir> <tmp dir>
# Hostile files are built here (python3), from models made by `sanpath init`
# and from copies of the real checkpoints' config.json (the weights are
# linked, never copied).
set -uo pipefail

source "$(dirname "$0")/../support/cli.sh"
cli_workdir bad_inputs "$@"
trap 'chmod -R u+w "$T" 2>/dev/null; rm -rf "$T"' EXIT  # some cases make read-only files

count=0
failed=0
fails=0  # the checks that are not one command's error (fail, tests/support/cli.sh)

# check NAME CODE REGEX OUTPUT -- command...
# Runs the command; requires exit code CODE, an empty stdout, exactly one
# line on stderr matching "^sanpath: error: " and the extended regex REGEX,
# and no file OUTPUT (nor OUTPUT.tmp-*) afterwards.
check() {
  local name=$1 code=$2 regex=$3 out=$4
  shift 5
  count=$((count + 1))
  rm -f "$out" "$out".tmp-*
  "$@" >"$T/stdout" 2>"$T/stderr" </dev/null
  local got=$?
  local err lines problems=()
  err=$(cat "$T/stderr")
  lines=$(wc -l <"$T/stderr")
  [ "$got" = "$code" ] || problems+=("exit code $got, expected $code")
  [ "$lines" = 1 ] || problems+=("stderr has $lines lines, expected exactly 1")
  [[ $err == "sanpath: error: "* ]] || problems+=("message does not start with 'sanpath: error: '")
  [[ $err =~ $regex ]] || problems+=("message does not match /$regex/")
  [ -s "$T/stdout" ] && problems+=("stdout is not empty")
  if [ -n "$out" ] && compgen -G "$out*" >/dev/null; then problems+=("output left behind: $(ls "$out"*)"); fi
  if [ ${#problems[@]} -eq 0 ]; then
    printf 'ok   %-44s %s  %s\n' "$name" "$got" "$err"
  else
    failed=$((failed + 1))
    printf 'FAIL %-44s %s  %s\n' "$name" "$got" "$err"
    for p in "${problems[@]}"; do printf '       - %s\n' "$p"; done
  fi
}

OUT=$T/out.json
# fwd NAME CODE REGEX forward-arguments...: `sanpath forward ... --output $OUT`
fwd() {
  local name=$1 code=$2 regex=$3
  shift 3
  check "$name" "$code" "$regex" "$OUT" -- "$SANPATH" forward --quiet --format json --output "$OUT" "$@"
}

# ---- helpers that build hostile safetensors files -----------------------------
cat >"$T/st.py" <<'EOF'
import json, struct, sys

def read(path):
    b = open(path, 'rb').read()
    n = struct.unpack('<Q', b[:8])[0]
    return json.loads(b[8:8 + n]), b[8 + n:]

def write(path, header, data=b'', text=None, length=None):
    """header: a dict (dumped as JSON) unless `text` (str or bytes) is given."""
    t = json.dumps(header) if text is None else text
    t = t.encode('utf-8', 'surrogateescape') if isinstance(t, str) else t
    n = len(t) if length is None else length
    open(path, 'wb').write(struct.pack('<Q', n) + t + data)

def rebuild(src, dst, drop=(), rename=None):
    """Copies src to dst without the tensors in `drop`, data re-packed."""
    h, data = read(src)
    out, blob = {}, b''
    if '__metadata__' in h:
        out['__metadata__'] = h['__metadata__']
    tensors = sorted((v['data_offsets'][0], k) for k, v in h.items() if k != '__metadata__')
    for _, k in tensors:
        if k in drop:
            continue
        v = dict(h[k]); b, e = v['data_offsets']
        v['data_offsets'] = [len(blob), len(blob) + e - b]
        blob += data[b:e]
        out[(rename or {}).get(k, k)] = v
    write(dst, out, blob)

def set_f64(src, dst, name, index, value):
    """Overwrites element `index` of an F64 tensor."""
    h, data = read(src)
    assert h[name]['dtype'] == 'F64'
    b = h[name]['data_offsets'][0] + 8 * index
    data = data[:b] + struct.pack('<d', value) + data[b + 8:]
    write(dst, h, data)

def set_config(src, dst, key, value):
    """Changes one field of a native model's __metadata__["sanpath.config"]."""
    h, data = read(src)
    c = json.loads(h['__metadata__']['sanpath.config'])
    c[key] = value
    h['__metadata__']['sanpath.config'] = json.dumps(c)
    write(dst, h, data)

def edit_json(src, dst, **changes):
    c = json.load(open(src))
    c.update(changes)
    json.dump(c, open(dst, 'w'), indent=2)
EOF
py() { python3 -c "import sys; sys.path.insert(0, '$T'); from st import *; $1"; }

# Valid models to corrupt: a native file and a HuggingFace BERT folder, both
# with embeddings (vocabulary 20, 8 positions).
M=$T/m.safetensors
"$SANPATH" init --out "$M" --layers 2 --heads 2 --d-model 8 --vocab 20 --max-positions 8 --seed 1 || exit 1
"$SANPATH" init --layout bert --out "$T/bert" --layers 2 --heads 2 --d-model 8 --vocab 20 --max-positions 8 || exit 1
# An HF folder over real weights, with its own (editable) config.json.
real_folder() {  # real_folder <model> <dest>: copy of config.json + link to the weights
  mkdir -p "$2"
  cp "$REAL/$1/config.json" "$2/config.json"
  chmod u+w "$2/config.json"
  ln -sf "$REAL/$1/model.safetensors" "$2/model.safetensors"
}

echo "== files"
fwd missing-file 3 "$T/nope.safetensors: file: does not exist" --model "$T/nope.safetensors" --random-input 4
mkdir -p "$T/emptydir"
fwd model-is-a-directory 3 "$T/emptydir: model.safetensors: missing" --model "$T/emptydir" --random-input 4
: >"$T/empty.safetensors"
fwd empty-file 3 "empty.safetensors: header length: the file has 0 bytes" --model "$T/empty.safetensors" --random-input 4
head -c 5 "$M" >"$T/short.safetensors"
fwd file-shorter-than-length-field 3 "short.safetensors: header length: the file has 5 bytes" \
  --model "$T/short.safetensors" --random-input 4
head -c 100 "$M" >"$T/cut-header.safetensors"
fwd truncated-header 3 "cut-header.safetensors: header length: [0-9]+ bytes exceeds the 92 bytes that follow" \
  --model "$T/cut-header.safetensors" --random-input 4
size=$(stat -c %s "$M")
head -c $((size - 100)) "$M" >"$T/cut-data.safetensors"
fwd truncated-data 3 "cut-data.safetensors: [a-zA-Z0-9_.]+\.data_offsets: .* ends beyond the data section .* truncated" \
  --model "$T/cut-data.safetensors" --random-input 4
py "write('$T/len-gt-file.safetensors', None, text=b'{}', length=1000)"
fwd header-length-beyond-file 3 "len-gt-file.safetensors: header length: 1000 bytes exceeds the 2 bytes" \
  --model "$T/len-gt-file.safetensors" --random-input 4
py "write('$T/len-huge.safetensors', None, text=b'{}', length=200*1000*1000)"
fwd header-length-over-100MB 3 "len-huge.safetensors: header length: 200000000 bytes exceeds the limit of 100 MB" \
  --model "$T/len-huge.safetensors" --random-input 4
py "write('$T/len-max.safetensors', None, text=b'{}', length=2**64-1)"
fwd header-length-2^64-1 3 "len-max.safetensors: header length: 18446744073709551615 bytes exceeds the limit" \
  --model "$T/len-max.safetensors" --random-input 4

echo "== header"
py "write('$T/notjson.safetensors', None, text='{\"a\": {\"dtype\": F64}}')"
fwd header-not-json 3 "notjson.safetensors: header: not valid JSON: .*parse error" --model "$T/notjson.safetensors" --random-input 4
py "write('$T/notjson-nl.safetensors', None, text='{\"a\\n\\nb\": ')"
fwd header-not-json-newlines 3 "notjson-nl.safetensors: header: not valid JSON" --model "$T/notjson-nl.safetensors" --random-input 4
py "write('$T/array.safetensors', None, text='[1, 2, 3]')"
fwd header-not-object 3 "array.safetensors: header: not a JSON object" --model "$T/array.safetensors" --random-input 4
py "write('$T/string.safetensors', None, text='\"F64\"')"
fwd header-is-string 3 "string.safetensors: header: not a JSON object" --model "$T/string.safetensors" --random-input 4
py "write('$T/deep.safetensors', None, text='{\"w\": {\"dtype\": ' + '['*2000000 + ']'*2000000 + '}}')"
fwd header-nested-2M-deep 3 "deep.safetensors: header: .*nest" --model "$T/deep.safetensors" --random-input 4
py "write('$T/meta-num.safetensors', {'__metadata__': {'format': 1}})"
fwd metadata-value-not-string 3 "meta-num.safetensors: __metadata__.format: must be a string, got number 1" \
  --model "$T/meta-num.safetensors" --random-input 4
py "write('$T/meta-arr.safetensors', {'__metadata__': ['a']})"
fwd metadata-not-object 3 "meta-arr.safetensors: __metadata__: must be an object of strings, got array" \
  --model "$T/meta-arr.safetensors" --random-input 4
py "write('$T/meta-ctl.safetensors', {'__metadata__': {'a\nb': 2}})"
fwd metadata-key-with-newline 3 "meta-ctl.safetensors: __metadata__.a.x0ab: must be a string" \
  --model "$T/meta-ctl.safetensors" --random-input 4

echo "== tensors"
py "write('$T/dtype.safetensors', {'w': {'dtype': 'F128', 'shape': [1], 'data_offsets': [0, 16]}}, b'\0'*16)"
fwd unknown-dtype 3 "dtype.safetensors: w.dtype: unknown dtype 'F128'" --model "$T/dtype.safetensors" --random-input 4
py "write('$T/neg.safetensors', {'w': {'dtype': 'F64', 'shape': [-1, 2], 'data_offsets': [0, 16]}}, b'\0'*16)"
fwd negative-shape 3 "neg.safetensors: w.shape: must be a list of non-negative integers, got \[-1,2\]" \
  --model "$T/neg.safetensors" --random-input 4
py "write('$T/ovf.safetensors', {'w': {'dtype': 'F64', 'shape': [2**62, 2**62], 'data_offsets': [0, 8]}}, b'\0'*8)"
fwd overflowing-shape 3 "ovf.safetensors: w.shape: \[4611686018427387904, 4611686018427387904\]: the element count overflows" \
  --model "$T/ovf.safetensors" --random-input 4
py "write('$T/ovf2.safetensors', {'w': {'dtype': 'F64', 'shape': [2**61], 'data_offsets': [0, 8]}}, b'\0'*8)"
fwd overflowing-byte-size 3 "ovf2.safetensors: w.shape: \[2305843009213693952\]: the byte size overflows" \
  --model "$T/ovf2.safetensors" --random-input 4
py "write('$T/big.safetensors', {'w': {'dtype': 'F64', 'shape': [2**64]}}, b'')"
fwd dimension-above-2^64 3 "big.safetensors: w.shape: must be a list of non-negative integers" \
  --model "$T/big.safetensors" --random-input 4
py "write('$T/outside.safetensors', {'w': {'dtype': 'F64', 'shape': [4], 'data_offsets': [0, 32]}}, b'\0'*16)"
fwd offsets-outside-data 3 "outside.safetensors: w.data_offsets: \[0, 32\) ends beyond the data section of 16 bytes" \
  --model "$T/outside.safetensors" --random-input 4
py "write('$T/reversed.safetensors', {'w': {'dtype': 'F64', 'shape': [0], 'data_offsets': [16, 8]}}, b'\0'*16)"
fwd offsets-reversed 3 "reversed.safetensors: w.data_offsets: must be \[begin, end\] with integers 0 <= begin <= end" \
  --model "$T/reversed.safetensors" --random-input 4
py "write('$T/overlap.safetensors', {'a': {'dtype': 'F64', 'shape': [2], 'data_offsets': [0, 16]}, 'b': {'dtype': 'F64', 'shape': [2], 'data_offsets': [8, 24]}}, b'\0'*24)"
fwd overlapping-offsets 3 "overlap.safetensors: b.data_offsets: \[8, 24\) overlaps a \[0, 16\)" \
  --model "$T/overlap.safetensors" --random-input 4
py "write('$T/gap.safetensors', {'a': {'dtype': 'F64', 'shape': [1], 'data_offsets': [0, 8]}, 'b': {'dtype': 'F64', 'shape': [1], 'data_offsets': [16, 24]}}, b'\0'*24)"
fwd non-contiguous-offsets 3 "gap.safetensors: b.data_offsets: starts at 16, leaving bytes \[8, 16\) of the data section covered by no tensor" \
  --model "$T/gap.safetensors" --random-input 4
py "write('$T/tail.safetensors', {'a': {'dtype': 'F64', 'shape': [1], 'data_offsets': [0, 8]}}, b'\0'*12)"
fwd trailing-bytes 3 "tail.safetensors: data section: 4 trailing bytes after offset 8" --model "$T/tail.safetensors" --random-input 4
py "write('$T/size.safetensors', {'w': {'dtype': 'F32', 'shape': [3], 'data_offsets': [0, 16]}}, b'\0'*16)"
fwd size-not-dtype-times-shape 3 "size.safetensors: w.data_offsets: \[0, 16\) holds 16 bytes, but F32 \[3\] needs 12" \
  --model "$T/size.safetensors" --random-input 4
py "write('$T/dup.safetensors', None, b'\0'*16, text='{\"w\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [0, 8]}, \"w\": {\"dtype\": \"F64\", \"shape\": [1], \"data_offsets\": [8, 16]}}')"
fwd duplicate-names 3 "dup.safetensors: w: duplicate tensor name" --model "$T/dup.safetensors" --random-input 4
py "write('$T/ctlname.safetensors', {'w\x1b[31m\nx': {'dtype': 'F9', 'shape': [], 'data_offsets': [0, 0]}})"
fwd tensor-name-with-control-chars 3 'ctlname.safetensors: w\\x1b\[31m\\x0ax.dtype: unknown dtype' \
  --model "$T/ctlname.safetensors" --random-input 4

echo "== architecture"
py "rebuild('$M', '$T/missing.safetensors', drop={'layers.1.heads.0.W_Q', 'layers.1.b_O'})"
fwd native-missing-tensors 3 "missing.safetensors: tensors: 2 missing: layers.1.heads.0.W_Q, layers.1.b_O" \
  --model "$T/missing.safetensors" --random-input 4
py "rebuild('$M', '$T/extra.safetensors', rename={'layers.1.b_O': 'layers.1.b_Z'})"
fwd native-unexpected-tensor 3 "extra.safetensors: tensors: 1 missing: layers.1.b_O" --model "$T/extra.safetensors" --random-input 4
mkdir -p "$T/bert-missing"
cp "$T/bert/config.json" "$T/bert-missing/"
py "rebuild('$T/bert/model.safetensors', '$T/bert-missing/model.safetensors', drop={'bert.encoder.layer.1.output.dense.weight', 'bert.encoder.layer.0.attention.self.key.bias'})"
fwd hf-missing-tensors 3 "bert-missing/model.safetensors: tensors: 2 missing for a bert checkpoint: bert.encoder.layer.0.attention.self.key.bias, bert.encoder.layer.1.output.dense.weight" \
  --model "$T/bert-missing" --random-input 4
real_folder bert-ticket-classifier "$T/real-3layers"
py "edit_json('$T/real-3layers/config.json', '$T/real-3layers/config.json', num_hidden_layers=3)"
fwd real-config-declares-more-layers 3 "real-3layers/model.safetensors: tensors: 16 missing for a bert checkpoint: bert.encoder.layer.2.attention.self.query.weight, .* \(and 11 more\)" \
  --model "$T/real-3layers" --random-input 4
real_folder bert-ticket-classifier "$T/real-millionlayers"
py "edit_json('$T/real-millionlayers/config.json', '$T/real-millionlayers/config.json', num_hidden_layers=2000000000)"
fwd real-config-2e9-layers 3 "real-millionlayers/config.json: num_hidden_layers: 2000000000 layers" \
  --model "$T/real-millionlayers" --random-input 4
real_folder bert-ticket-classifier "$T/real-hidden"
py "edit_json('$T/real-hidden/config.json', '$T/real-hidden/config.json', hidden_size=64)"
fwd real-config-hidden-vs-shapes 3 "real-hidden/model.safetensors: bert\.[a-zA-Z0-9_.]+: shape \[[0-9, ]+\], expected \[[0-9, ]+\] from .*real-hidden/config.json" \
  --model "$T/real-hidden" --random-input 4
real_folder bert-ticket-classifier "$T/real-ff"
py "edit_json('$T/real-ff/config.json', '$T/real-ff/config.json', intermediate_size=100)"
fwd real-config-intermediate-vs-shapes 3 "real-ff/model.safetensors: bert.encoder.layer.0.intermediate.dense.bias: shape \[192\], expected \[100\]" \
  --model "$T/real-ff" --random-input 4
real_folder bert-ticket-classifier "$T/real-vocab"
py "edit_json('$T/real-vocab/config.json', '$T/real-vocab/config.json', vocab_size=500)"
fwd real-config-vocab-vs-shapes 3 "real-vocab/model.safetensors: bert.embeddings.word_embeddings.weight: shape \[424, 96\], expected \[500, 96\]" \
  --model "$T/real-vocab" --random-input 4
real_folder gpt2-capp "$T/gpt2-embd"
py "edit_json('$T/gpt2-embd/config.json', '$T/gpt2-embd/config.json', n_embd=68)"
fwd real-gpt2-config-vs-shapes 3 "gpt2-embd/model.safetensors: transformer\.[a-zA-Z0-9_.]+: shape \[[0-9, ]+\], expected" \
  --model "$T/gpt2-embd" --random-input 4

echo "== config.json"
real_folder bert-ticket-classifier "$T/real-0layers"
py "edit_json('$T/real-0layers/config.json', '$T/real-0layers/config.json', num_hidden_layers=0)"
fwd config-zero-layers 3 "real-0layers/config.json: num_hidden_layers: must be a positive integer, got 0" \
  --model "$T/real-0layers" --random-input 4
real_folder gpt2-capp "$T/gpt2-0heads"
py "edit_json('$T/gpt2-0heads/config.json', '$T/gpt2-0heads/config.json', n_head=0)"
fwd config-zero-heads 3 "gpt2-0heads/config.json: n_head: must be a positive integer, got 0" \
  --model "$T/gpt2-0heads" --random-input 4
real_folder bert-ticket-classifier "$T/real-5heads"
py "edit_json('$T/real-5heads/config.json', '$T/real-5heads/config.json', num_attention_heads=5)"
fwd config-hidden-not-divisible 3 "real-5heads/config.json: hidden_size: 96 is not divisible by num_attention_heads = 5" \
  --model "$T/real-5heads" --random-input 4
real_folder gpt2-capp "$T/gpt2-huge"
py "edit_json('$T/gpt2-huge/config.json', '$T/gpt2-huge/config.json', n_embd=2147483644, n_head=4)"
fwd config-huge-width 3 "gpt2-huge/config.json: n_embd: 2147483644 is too large \(the default n_inner = 4·n_embd exceeds 2\^31 - 1\)" \
  --model "$T/gpt2-huge" --random-input 4
real_folder gpt2-capp "$T/gpt2-huge2"
py "edit_json('$T/gpt2-huge2/config.json', '$T/gpt2-huge2/config.json', n_embd=2147483644, n_head=4, n_inner=256)"
fwd config-huge-width-vs-shapes 3 "gpt2-huge2/model.safetensors: transformer\.[a-zA-Z0-9_.]+: shape \[[0-9, ]+\], expected \[6442450932\]" \
  --model "$T/gpt2-huge2" --random-input 4
real_folder bert-ticket-classifier "$T/real-act"
py "edit_json('$T/real-act/config.json', '$T/real-act/config.json', hidden_act='swish\n')"
fwd config-unsupported-activation 3 "real-act/config.json: hidden_act: 'swish\\\\x0a' is not supported" \
  --model "$T/real-act" --random-input 4
real_folder bert-ticket-classifier "$T/real-notjson"
printf '{"model_type": "bert",\n  "hidden_size": 96,,}\n' >"$T/real-notjson/config.json"
fwd config-not-json 3 "real-notjson/config.json: json: not valid JSON" --model "$T/real-notjson" --random-input 4
real_folder bert-ticket-classifier "$T/real-array"
echo '[1]' >"$T/real-array/config.json"
fwd config-not-object 3 "real-array/config.json: json: must be a JSON object, got array" --model "$T/real-array" --random-input 4
real_folder bert-ticket-classifier "$T/real-deep"
py "open('$T/real-deep/config.json', 'w').write('{\"num_hidden_layers\": ' + '['*1000000 + ']'*1000000 + '}')"
fwd config-nested-1M-deep 3 "real-deep/config.json: json: .*nest" --model "$T/real-deep" --random-input 4
py "set_config('$M', '$T/native-0layers.safetensors', 'layers', 0)"
fwd native-config-zero-layers 3 "native-0layers.safetensors: __metadata__.sanpath.config.layers: must be an integer >= 1, got 0" \
  --model "$T/native-0layers.safetensors" --random-input 4
py "set_config('$M', '$T/native-0heads.safetensors', 'heads', 0)"
fwd native-config-zero-heads 3 "native-0heads.safetensors: __metadata__.sanpath.config.heads: must be an integer >= 1, got 0" \
  --model "$T/native-0heads.safetensors" --random-input 4
py "set_config('$M', '$T/native-3heads.safetensors', 'heads', 3)"
fwd native-config-heads-vs-tensors 3 "native-3heads.safetensors: tensors: 14 missing: layers.0.heads.2.W_Q" \
  --model "$T/native-3heads.safetensors" --random-input 4

echo "== values"
py "set_f64('$M', '$T/nan.safetensors', 'layers.1.heads.0.W_K', 5, float('nan'))"
fwd nan-in-weights 3 "nan.safetensors: layer 1 head 0 W_K: NaN at \[1, 1\]" --model "$T/nan.safetensors" --random-input 4
py "set_f64('$M', '$T/inf.safetensors', 'embeddings.word', 0, float('-inf'))"
fwd inf-in-weights 3 "inf.safetensors: embeddings.word: Inf at \[0, 0\]" --model "$T/inf.safetensors" --random-input 4
# A NaN in a word row no input embeds: refused alike whatever rows the run decodes.
mkdir -p "$T/bert-nan" && cp "$T/bert/config.json" "$T/bert-nan/"
py "set_f64('$T/bert/model.safetensors', '$T/bert-nan/model.safetensors', 'bert.embeddings.word_embeddings.weight', 13 * 8 + 5, float('nan'))"
printf '1,2\n3\n' >"$T/nan-tokens.txt"
for input in "--tokens 1,2,3" "--tokens-file $T/nan-tokens.txt" "--random-input 4"; do
  # shellcheck disable=SC2086
  fwd "nan-in-unused-word-row ${input%% *}" 3 "bert-nan/model.safetensors: bert.embeddings.word_embeddings.weight: NaN at \[13, 5\]" \
    --model "$T/bert-nan" $input
done
py "import struct; write('$T/xnan.safetensors', {'X': {'dtype': 'F64', 'shape': [2, 8], 'data_offsets': [0, 128]}}, struct.pack('<16d', *([0.5]*9 + [float('nan')] + [0.5]*6)))"
fwd nan-in-input 3 "xnan.safetensors: X: NaN at \[1, 1\]" --model "$M" --input "$T/xnan.safetensors"
py "import struct; write('$T/xinf.safetensors', {'X': {'dtype': 'F32', 'shape': [2, 8], 'data_offsets': [0, 64]}}, struct.pack('<16f', *([0.5]*15 + [float('inf')])))"
fwd inf-in-input 3 "xinf.safetensors: X: Inf at \[1, 7\]" --model "$M" --input "$T/xinf.safetensors"
py "import struct; write('$T/xshape.safetensors', {'X': {'dtype': 'F64', 'shape': [2, 4], 'data_offsets': [0, 64]}}, struct.pack('<8d', *([0.5]*8)))"
fwd input-wrong-width 3 "xshape.safetensors: X: has 4 columns, the model expects d_model = 8" --model "$M" --input "$T/xshape.safetensors"
py "write('$T/xnone.safetensors', {'Y': {'dtype': 'F64', 'shape': [1], 'data_offsets': [0, 8]}}, bytes(8))"
fwd input-without-X 3 "xnone.safetensors: X: no such tensor" --model "$M" --input "$T/xnone.safetensors"

py "
h, data = read('$M')
for k in h:
    if k.endswith('W_V') or k.endswith('W_O'):
        b, e = h[k]['data_offsets']
        vals = struct.unpack('<%dd' % ((e - b) // 8), data[b:e])
        data = data[:b] + struct.pack('<%dd' % len(vals), *[x * 1e100 for x in vals]) + data[e:]
write('$T/huge.safetensors', h, data)"
fwd double-overflow 4 "huge.safetensors: layer [0-9]+: the forward pass at double overflowed .* --precision 65 or higher" \
  --model "$T/huge.safetensors" --random-input 4 --precision double --mlp none --layernorm none --skip off

echo "== tokens and positions"
fwd token-outside-vocabulary 3 "$T/m.safetensors: tokens: token 2 has id 20, outside the vocabulary \[0, 20\)" \
  --model "$M" --tokens 1,2,20
fwd token-outside-real-vocabulary 3 "bert-ticket-classifier: tokens: token 1 has id 424, outside the vocabulary \[0, 424\)" \
  --model "$REAL/bert-ticket-classifier" --tokens 2,424,3
fwd token-negative 2 "--tokens: token id -1 is negative" --model "$M" --tokens 1,-1
# RoBERTa's padding token (pad_token_id 1, as init writes it) has no position of its own in HuggingFace.
"$SANPATH" init --layout roberta --out "$T/roberta" --layers 1 --heads 2 --d-model 8 --vocab 20 --max-positions 8 \
  >/dev/null || exit 1
fwd roberta-padding-token 3 "roberta: tokens: token 1 has id 1, the padding token \(pad_token_id\), which has no position of its own; give the sequence without padding" \
  --model "$T/roberta" --tokens 0,1,2
fwd token-not-integer 2 "--tokens: '1e3' at position 1 is not an integer token id" --model "$M" --tokens 1,1e3
fwd token-above-long 2 "--tokens: '99999999999999999999' at position 0 is not an integer token id" \
  --model "$M" --tokens 99999999999999999999
fwd sequence-longer-than-positions 3 "$T/m.safetensors: tokens: sequence of 9 tokens is longer than the position table \(8\)" \
  --model "$M" --tokens 1,2,3,4,5,6,7,8,9
"$SANPATH" init --out "$T/m2.safetensors" --layers 1 --heads 1 --d-model 4 || exit 1
fwd model-without-embeddings 3 "m2.safetensors: embeddings: the model has no embedding tables" \
  --model "$T/m2.safetensors" --tokens 1

echo "== precision"
fwd precision-below-53 2 "--precision: precision: 52 bits is below the minimum of 53" --model "$M" --random-input 4 --precision 52
fwd precision-above-max 2 "--precision: precision: 40000 bits is above the supported maximum of [0-9]+ bits" \
  --model "$M" --random-input 4 --precision 40000
fwd precision-not-a-number 2 "--precision: precision: 'quad' is not 'double', 'auto' or a number of bits" \
  --model "$M" --random-input 4 --precision quad
fwd max-bits-below-53 2 "--max-bits: 40 is outside \[53, [0-9]+\]" --model "$M" --random-input 4 --max-bits 40

echo "== unsigned options (CLI11 would wrap -1 around to 2^64 - 1)"
fwd seed-negative 2 "--seed: '-1' is not an integer in \[0, 2\^64\)" --model "$M" --random-input 4 --seed -1
check rerun-negative 2 "--rerun: '-1' is not an integer in \[0, 2\^64\)" "$OUT" -- \
  "$SANPATH" paths --quiet --output "$OUT" --model "$M" --random-input 4 --skip on --mlp none --layernorm none \
  --effectiveness --rerun -1
check top-too-large 2 "--top: '18446744073709551616' is not an integer in \[0, 2\^64\)" "$OUT" -- \
  "$SANPATH" paths --quiet --output "$OUT" --model "$M" --random-input 4 --enumerate --top 18446744073709551616
check init-seed-not-integer 2 "--seed: '1.5' is not an integer in \[0, 2\^64\)" "$T/never.safetensors" -- \
  "$SANPATH" init --out "$T/never.safetensors" --seed 1.5

echo "== resources"
fwd memory-budget-exceeded 5 "m.safetensors: (centred )?forward pass: needs an estimated .* of memory .*, above the memory budget of 1.00 MiB \(1048576 bytes\)" \
  --model "$M" --random-input 600 --memory-budget 1M
fwd memory-budget-default 5 "m.safetensors: (centred )?forward pass: needs an estimated .* above the memory budget of .*75% of physical memory" \
  --model "$M" --random-input 1048576 --precision double
check memory-budget-from-environment 5 "m.safetensors: (centred )?forward pass: needs an estimated .* above the memory budget of 1.00 MiB" "$OUT" -- \
  env SANPATH_MEMORY_BUDGET=1M "$SANPATH" forward --quiet --output "$OUT" --model "$M" --random-input 600
"$SANPATH" init --out "$T/shared.safetensors" --layers 3 --shared-layers --heads 2 --d-model 8 || exit 1
py "set_config('$T/shared.safetensors', '$T/shared-2e9.safetensors', 'layers', 2000000000)"
fwd shared-layers-2e9-copies 5 "shared-2e9.safetensors: __metadata__.sanpath.config.layers: needs an estimated .* of memory \(2000000000 copies of the shared layer weights\), above the memory budget" \
  --model "$T/shared-2e9.safetensors" --random-input 4
# A HuggingFace checkpoint whose weights as doubles exceed the budget is
# refused before any is decoded, naming the file (BERT's and Llama's loaders).
fwd weights-above-budget-native 5 "m.safetensors: weights: needs an estimated .* of memory \([0-9]+ values decoded as doubles\), above the memory budget of 1.00 KiB" \
  --model "$M" --random-input 4 --memory-budget 1K
for layout in bert llama; do
  "$SANPATH" init --out "$T/big-$layout" --layout $layout --layers 2 --heads 4 --d-model 64 --d-ff 256 --vocab 1000 \
    >/dev/null || exit 1
  fwd weights-above-budget-$layout 5 "big-$layout/model.safetensors: weights: needs an estimated .* of memory \([0-9]+ values decoded as doubles\), above the memory budget of 1.00 MiB" \
    --model "$T/big-$layout" --random-input 4 --memory-budget 1M --stream-layers off
done
# --stream-layers: forward passes read the layers one at a time. auto streams
# a checkpoint whose weights exceed the budget (4 layers) when the 3 layers a
# run holds at once fit; the digits are those of the whole model; below that
# the error names the streamed need.
for spec in bert:1300K llama:1700K; do
  layout=${spec%%:*} budget=${spec#*:}
  "$SANPATH" init --out "$T/four-$layout" --layout $layout --layers 4 --heads 4 --d-model 64 --d-ff 256 --vocab 1000 \
    >/dev/null || exit 1
  fwd stream-off-above-budget-$layout 5 "four-$layout/model.safetensors: weights: needs an estimated" \
    --model "$T/four-$layout" --random-input 4 --memory-budget "$budget" --stream-layers off
  for mode in auto on; do
    "$SANPATH" forward --quiet --model "$T/four-$layout" --random-input 4 --memory-budget "$budget" \
      --stream-layers $mode --precision double --format json >"$T/streamed.json" 2>"$T/streamed.err" ||
      fail "--stream-layers $mode under $budget ($layout): $(cat "$T/streamed.err")"
    "$SANPATH" forward --quiet --model "$T/four-$layout" --random-input 4 --precision double --format json \
      --stream-layers off >"$T/whole.json" || exit 1
    grep -q '"layers_streamed": true' "$T/streamed.json" || fail "--stream-layers $mode ($layout): JSON does not say so"
    grep -q '"layers_streamed": false' "$T/whole.json" || fail "whole model ($layout): JSON says streamed"
    cmp -s <(grep -v layers_streamed "$T/streamed.json") <(grep -v layers_streamed "$T/whole.json") ||
      fail "--stream-layers $mode ($layout): output differs from the whole model's"
  done
  "$SANPATH" forward --quiet --model "$T/four-$layout" --random-input 4 --memory-budget "$budget" --precision double |
    grep -q "^model: $T/four-$layout (L=4, H=4, d=64; layers streamed from the checkpoint)$" ||
    fail "--stream-layers auto ($layout): the model line does not say the layers were streamed"
  fwd stream-above-budget-$layout 5 "four-$layout/model.safetensors: layers: needs an estimated .* \(3 layers at a time, streamed from the file\), above the memory budget of 1.00 MiB" \
    --model "$T/four-$layout" --random-input 4 --memory-budget 1M
done
# auto with room for the whole model: streamed for one input (its passes read
# each layer once between them) and for a batch in double (its passes read
# the weights where they lie), held whole for a batch at a multiprecision
# tier (whose inputs would each decode every layer again).
"$SANPATH" forward --quiet --model "$T/four-bert" --random-input 4 --precision double --format json \
  >"$T/one.json" || exit 1
grep -q '"layers_streamed": true' "$T/one.json" || fail "--stream-layers auto, one input: not streamed"
for confirm in "" --no-confirm; do
  "$SANPATH" forward --quiet --model "$T/four-bert" --random-input 4 --batch 2 --precision double $confirm \
    --format json >"$T/batch.json" || exit 1
  grep -q '"layers_streamed": true' "$T/batch.json" || fail "--stream-layers auto, a batch in double $confirm: not streamed"
  "$SANPATH" forward --quiet --model "$T/four-bert" --random-input 4 --batch 2 --precision double $confirm \
    --format json --stream-layers off >"$T/batch-whole.json" || exit 1
  cmp -s <(grep -v layers_streamed "$T/batch.json") <(grep -v layers_streamed "$T/batch-whole.json") ||
    fail "a batch in double $confirm: streamed output differs from the whole model's"
done
# collapse in double: its four networks' passes read the weights where they lie.
for stream in auto off; do
  "$SANPATH" collapse --quiet --model "$T/four-bert" --random-input 4 --batch 2 --precision double \
    --stream-layers $stream --format json >"$T/collapse-$stream.json" || exit 1
done
grep -q '"layers_streamed": true' "$T/collapse-auto.json" || fail "collapse --precision double: not streamed"
cmp -s <(grep -v layers_streamed "$T/collapse-auto.json") <(grep -v layers_streamed "$T/collapse-off.json") ||
  fail "collapse --precision double: streamed output differs from the whole model's"
for args in "--precision 128" "--precision double --check mpfr"; do
  "$SANPATH" forward --quiet --model "$T/four-bert" --random-input 4 --batch 2 $args --format json \
    >"$T/batch.json" || exit 1
  grep -q '"layers_streamed": false' "$T/batch.json" || fail "--stream-layers auto, a batch ($args): streamed"
done
fwd stream-layers-bad-value 2 "--stream-layers: yes not in \{auto,on,off\}" --model "$M" --stream-layers yes --random-input 4
# --first-layers: a prefix that fits where the whole does not; bad counts refused.
expect_first_layers_ok() {
  "$SANPATH" forward --quiet --model "$T/big-bert" --first-layers 1 --random-input 4 --memory-budget 1M \
    --precision double --no-confirm >"$T/first.out" 2>"$T/first.err" || fail "--first-layers 1 under 1M: $(cat "$T/first.err")"
  grep -q "^model: $T/big-bert (first 1 of 2 layers) (L=1," "$T/first.out" || fail "--first-layers: model line: $(head -1 "$T/first.out")"
}
expect_first_layers_ok
fwd first-layers-zero 2 "--first-layers: '0' is not a number of layers \(1, 2, ...\)" --model "$M" --first-layers 0 --random-input 4
fwd first-layers-above-L 3 "big-bert/config.json: num_hidden_layers: 2 layers, fewer than the first 3 asked for" \
  --model "$T/big-bert" --first-layers 3 --random-input 4
fwd memory-budget-bad-value 2 "--memory-budget: .*'lots' is not a size" --model "$M" --random-input 4 --memory-budget lots
if "$SANPATH" paths --help 2>/dev/null | grep -q -- '--enumerate'; then
  "$SANPATH" init --out "$T/wide.safetensors" --layers 12 --heads 12 --d-model 24 --skip off --mlp none \
    --layernorm none || exit 1
  check enumeration-above-path-limit 5 "path enumeration refused: 8916100448256 paths to visit exceed the limit of 1000000 paths" "$OUT" -- \
    "$SANPATH" paths --quiet --format json --output "$OUT" --model "$T/wide.safetensors" --random-input 4 --enumerate
  check enumeration-above-given-limit 5 "path enumeration refused: 27 paths to visit exceed the limit of 26 paths" "$OUT" -- \
    "$SANPATH" paths --quiet --format json --output "$OUT" --model "$T/wide.safetensors" --random-input 4 --enumerate \
    --limit 26 --heads-per-layer '0,1,2/0,1,2/0,1,2/0/0/0/0/0/0/0/0/0'
else
  echo "skip enumeration-above-path-limit: this sanpath has no 'paths --enumerate'"
fi

echo "== sharded checkpoints"
# shard(src, dst, lie): dst = the HF folder src as two shards with a
# model.safetensors.index.json, then made to lie: drop-shard, duplicate,
# contradict (the index maps a tensor to the other shard), missing.
cat >>"$T/st.py" <<'EOF'
import os, shutil

def shard(src, dst, lie=None):
    os.makedirs(dst, exist_ok=True)
    shutil.copy(src + '/config.json', dst + '/config.json')
    h, data = read(src + '/model.safetensors')
    names = [k for _, k in sorted((v['data_offsets'][0], k) for k, v in h.items() if k != '__metadata__')]
    parts = [names[:len(names) // 2], names[len(names) // 2:]]
    files = ['model-00001-of-00002.safetensors', 'model-00002-of-00002.safetensors']
    if lie == 'duplicate':
        parts[1].append(parts[0][0])
    if lie == 'missing':
        parts = [[n for n in p if n != 'bert.encoder.layer.1.output.dense.bias'] for p in parts]
    wm = {n: files[i] for i, p in enumerate(parts) for n in p}
    if lie == 'contradict':
        wm[parts[0][-1]] = files[1]
    total = 0
    for f, p in zip(files, parts):
        out, blob = {}, b''
        for k in p:
            v = dict(h[k]); b, e = v['data_offsets']
            v['data_offsets'] = [len(blob), len(blob) + e - b]
            blob += data[b:e]
            out[k] = v
        total += len(blob)
        write(dst + '/' + f, out, blob)
    json.dump({'metadata': {'total_size': total}, 'weight_map': wm}, open(dst + '/model.safetensors.index.json', 'w'))
    if lie == 'drop-shard':
        os.remove(dst + '/' + files[1])
EOF
py "shard('$T/bert', '$T/sharded')"
count=$((count + 1))
if "$SANPATH" forward --quiet --model "$T/sharded" --random-input 4 >/dev/null 2>&1; then
  echo "ok   sharded-honest-index-loads"
else
  failed=$((failed + 1))
  echo "FAIL sharded-honest-index-loads"
fi
py "shard('$T/bert', '$T/sh-drop', 'drop-shard')"
fwd sharded-missing-shard 3 "sh-drop/model.safetensors.index.json: weight_map\.[a-zA-Z0-9_.]+: shard model-00002-of-00002.safetensors does not exist" \
  --model "$T/sh-drop" --random-input 4
py "shard('$T/bert', '$T/sh-dup', 'duplicate')"
fwd sharded-tensor-in-two-shards 3 "model-00002-of-00002.safetensors: [a-zA-Z0-9_.]+: also in shard model-00001-of-00002.safetensors" \
  --model "$T/sh-dup" --random-input 4
py "shard('$T/bert', '$T/sh-contra', 'contradict')"
fwd sharded-header-contradicts-index 3 "model-00001-of-00002.safetensors: [a-zA-Z0-9_.]+: the index .* maps it to shard model-00002-of-00002.safetensors" \
  --model "$T/sh-contra" --random-input 4
py "shard('$T/bert', '$T/sh-miss', 'missing')"
fwd sharded-tensor-in-no-shard 3 "sh-miss/model.safetensors.index.json: tensors: 1 missing for a bert checkpoint: bert.encoder.layer.1.output.dense.bias" \
  --model "$T/sh-miss" --random-input 4
echo "== layouts"
real_folder bert-ticket-classifier "$T/bloom"
py "edit_json('$T/bloom/config.json', '$T/bloom/config.json', model_type='bloom')"
fwd unknown-model-type 3 "bloom/config.json: model_type: 'bloom' is not a layout sanpath knows \(known: albert, bert, distilbert, gemma, gemma2, gemma3, gemma3_text, gpt2, gpt_neox, llama, mistral, opt, phi, qwen2, qwen3, roberta, t5, vit, xlnet\)" \
  --model "$T/bloom" --random-input 4

echo "== output"
# out NAME CODE REGEX OUTPUT: forward with --output OUTPUT
out() {
  check "$1" "$2" "$3" "$4" -- "$SANPATH" forward --quiet --format json --model "$M" --random-input 4 --output "$4"
}
out output-directory-missing 3 "$T/no/such/dir/out.json: file: directory $T/no/such/dir does not exist" "$T/no/such/dir/out.json"
mkdir -p "$T/isdir.json"
check output-is-a-directory 3 "isdir.json: file: is a directory" "" -- \
  "$SANPATH" forward --quiet --model "$M" --random-input 4 --output "$T/isdir.json"
out output-under-a-file 3 "m.safetensors/out.json: file: .*m.safetensors is not a directory" "$M/out.json"
out output-in-proc 3 "/proc/sanpath-out.json: file: cannot create a file in /proc" /proc/sanpath-out.json
mkdir -p "$T/ro"
chmod 555 "$T/ro"
if [ "$(id -u)" -ne 0 ]; then
  out output-directory-unwritable 3 "ro/out.json: file: cannot create a file in .*ro: Permission denied" "$T/ro/out.json"
elif command -v setpriv >/dev/null && setpriv --reuid=65534 --regid=65534 --clear-groups test -r "$M" -a -x "$SANPATH"; then
  # root writes anywhere: run as nobody
  check output-directory-unwritable 3 "ro/out.json: file: cannot create a file in .*ro: Permission denied" "$T/ro/out.json" -- \
    setpriv --reuid=65534 --regid=65534 --clear-groups "$SANPATH" forward --quiet --model "$M" --random-input 4 \
    --output "$T/ro/out.json"
else
  echo "skip output-directory-unwritable: running as root and cannot drop privileges"
fi
# The output location is checked before the computation, not after it: this
# run would be refused for memory (exit 5) if it got that far.
check output-checked-before-work 3 "no/such/dir/out.json: file: directory" "$T/no/such/dir/out.json" -- \
  "$SANPATH" forward --quiet --model "$M" --random-input 1048576 --precision double --output "$T/no/such/dir/out.json"

echo "$count cases, $failed failed; $fails other checks failed"
[ "$failed" -eq 0 ] && [ "$fails" -eq 0 ]
