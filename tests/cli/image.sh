#!/usr/bin/env bash
# --image (io/image.hpp): PNG and JPEG files preprocessed as a ViT
# checkpoint's preprocessor_config.json says, against the independent
# reference tests/reference/vit_image_reference.py (PIL and numpy). Images
# made here by PIL: odd sizes, upscaled and downscaled, one pass or both,
# PNG modes 1, L, LA, P (with transparency, 2-bit), RGB, RGBA, 16-bit RGB,
# interlaced; baseline, progressive, grey and 4:4:4 JPEGs; every filter.
# - With the Python extension built beside the CLI (<build>/python),
#   sanpath.image's pixel_values equal the reference's bit for bit.
# - forward --image equals forward --pixels of the reference's float32
#   tensor (one image, a folder as a batch); collapse too, end to end.
# - Every refusal: one line naming the file and the key, exit 3 (2 for the
#   command line's mistakes), no output file.
# Usage: bash image.sh <sanpath binary> <shared dir> <tmp dir>
set -u
source "$(dirname "$0")/../support/cli.sh"
cli_checks image "$@"
REF="$(cd "$(dirname "$0")/../reference" && pwd)/vit_image_reference.py"
PY=/usr/bin/python3

$PY -c "import PIL, numpy" || { fail "python3-pil and python3-numpy are needed (scripts/install-deps test)"; exit 1; }
mapfile -t IMAGES < <($PY "$REF" make "$dir/images")
[ "${#IMAGES[@]}" -ge 15 ] || fail "the reference made ${#IMAGES[@]} images"

# A small random ViT (images 16×16, patches 8×8) and its image processor; one copy per filter.
expect 0 "$SANPATH" init --out "$dir/vit" --layout vit --layers 2 --heads 2 --d-model 8 --d-ff 12 --std 0.3 --seed 5 \
  --image-size 16 --patch-size 8 --channels 3 --bias-std 0.1
for r in 1 2 3 4 5; do
  cp -r "$dir/vit" "$dir/vit$r"
  $PY "$REF" config "$dir/vit$r/preprocessor_config.json" $r 16
done

# same_run A B NAME: the JSON of two runs agree except where they name their inputs ("input" keys).
same_run() {
  $PY - "$1" "$2" <<'PY' || fail "$3: --image and --pixels runs differ"
import json, sys
def unnamed(j):
    if isinstance(j, dict):
        return {k: unnamed(v) for k, v in j.items() if k != "input"}
    if isinstance(j, list):
        return [unnamed(v) for v in j]
    return j
def load(p):
    return unnamed(json.load(open(p)))
a, b = load(sys.argv[1]), load(sys.argv[2])
if a != b:
    for k in sorted(set(a) | set(b)):
        if a.get(k) != b.get(k):
            print("differs at", k, str(a.get(k))[:200], "|", str(b.get(k))[:200])
    sys.exit(1)
PY
}

# --- bit for bit, through the Python extension --------------------------------------------
PYDIR=$(dirname "$SANPATH")/python
if compgen -G "$PYDIR/sanpath/_sanpath*.so" >/dev/null; then
  PYTHONPATH="$PYDIR" $PY - "$REF" "$dir" "${IMAGES[@]}" <<'PY' || fail "pixel_values differ from the reference"
import importlib.util, json, os, sys
import numpy as np
import sanpath
spec = importlib.util.spec_from_file_location("ref", sys.argv[1])
ref = importlib.util.module_from_spec(spec)
spec.loader.exec_module(ref)
d, names = sys.argv[2], sys.argv[3:]
bad = 0
for r in (1, 2, 3, 4, 5):
    model = os.path.join(d, "vit%d" % r)
    for size in (16, 23):  # 23: a size of its own, up and down from every image
        config = json.load(open(os.path.join(model, "preprocessor_config.json")))
        config["size"] = {"height": size, "width": size + 4}
        other = os.path.join(d, "proc%d_%d" % (r, size))
        os.makedirs(other, exist_ok=True)
        json.dump(config, open(os.path.join(other, "preprocessor_config.json"), "w"))
        for name in names:
            path = os.path.join(d, "images", name)
            mine = sanpath.image(path, other).pixel_values
            theirs = ref.pixel_values(path, config)
            exact = mine.astype(np.float32).astype(np.float64)
            if mine.shape != theirs.shape or not np.array_equal(exact, mine) or \
                    not np.array_equal(mine.astype(np.float32).view(np.uint32), theirs.view(np.uint32)):
                print("differs: resample", r, "size", size, name)
                bad += 1
# The steps one at a time: no resize, no rescale, no normalize, a size given as one integer.
base = json.load(open(os.path.join(d, "vit3", "preprocessor_config.json")))
for change in ({"do_resize": False}, {"do_rescale": False}, {"do_normalize": False},
               {"do_rescale": False, "do_normalize": False}, {"size": 11}):
    config = dict(base, **change)
    other = os.path.join(d, "proc_" + "_".join(change))
    os.makedirs(other, exist_ok=True)
    json.dump(config, open(os.path.join(other, "preprocessor_config.json"), "w"))
    if "size" in change:
        config["size"] = {"height": 11, "width": 11}
    for name in names:
        path = os.path.join(d, "images", name)
        mine = sanpath.image(path, other).pixel_values
        theirs = ref.pixel_values(path, config)
        if mine.shape != theirs.shape or not np.array_equal(mine, theirs.astype(np.float64)):
            print("differs:", change, name)
            bad += 1
print(len(names), "images,", bad, "differences")
sys.exit(1 if bad else 0)
PY
else
  echo "image.sh: no Python extension in $PYDIR: pixel_values compared through the model's outputs only" >&2
fi

# --- --image equals --pixels of the reference's tensor ------------------------------------
for r in 2 3; do
  for name in rgb-37x23.png rgba-7x5.png palette-trns-10x9.png greyalpha-11x29.png jpeg-prog-23x35.jpeg \
              jpeg-grey-17x19.jpg rgb-16x16.png; do
    $PY "$REF" pixels "$dir/vit$r/preprocessor_config.json" "$dir/ref.safetensors" "$dir/images/$name"
    expect 0 "$SANPATH" forward --model "$dir/vit$r" --image "$dir/images/$name" --format json
    cp "$dir/out" "$dir/image.json"
    grep -q "images/$name (image 3×16×16)" "$dir/image.json" || fail "forward --image: no input line naming $name"
    expect 0 "$SANPATH" forward --model "$dir/vit$r" --pixels "$dir/ref.safetensors" --format json
    same_run "$dir/image.json" "$dir/out" "forward resample $r $name"
  done
done
# A folder is a batch, in name order; so are repeated --image.
mkdir -p "$dir/folder"
cp "$dir/images/rgb-37x23.png" "$dir/images/jpeg-base-45x27.jpg" "$dir/images/palette-25x21.png" "$dir/folder/"
echo "not an image" > "$dir/folder/notes.txt"
$PY "$REF" pixels "$dir/vit3/preprocessor_config.json" "$dir/batch.safetensors" \
  "$dir/folder/jpeg-base-45x27.jpg" "$dir/folder/palette-25x21.png" "$dir/folder/rgb-37x23.png"
expect 0 "$SANPATH" forward --model "$dir/vit3" --image "$dir/folder" --format json
cp "$dir/out" "$dir/image.json"
check "folder batch" 'assert j["batch"] == 3, j.get("batch")'
expect 0 "$SANPATH" forward --model "$dir/vit3" --pixels "$dir/batch.safetensors" --format json
same_run "$dir/image.json" "$dir/out" "forward batch (folder)"
expect 0 "$SANPATH" forward --model "$dir/vit3" --image "$dir/folder/jpeg-base-45x27.jpg" \
  --image "$dir/folder/palette-25x21.png" --image "$dir/folder/rgb-37x23.png" --format json
same_run "$dir/out" "$dir/image.json" "forward batch (repeated --image)"

# collapse end to end, one image and the batch.
$PY "$REF" pixels "$dir/vit2/preprocessor_config.json" "$dir/ref.safetensors" "$dir/images/rgb-37x23.png"
expect 0 "$SANPATH" collapse --model "$dir/vit2" --image "$dir/images/rgb-37x23.png" --format json
cp "$dir/out" "$dir/image.json"
check "collapse --image" 'assert len(j["variants"]) == 4, [v["name"] for v in j["variants"]]'
expect 0 "$SANPATH" collapse --model "$dir/vit2" --pixels "$dir/ref.safetensors" --format json
same_run "$dir/image.json" "$dir/out" "collapse"
expect 0 "$SANPATH" collapse --model "$dir/vit3" --image "$dir/folder" --format json
cp "$dir/out" "$dir/image.json"
expect 0 "$SANPATH" collapse --model "$dir/vit3" --pixels "$dir/batch.safetensors" --format json
same_run "$dir/image.json" "$dir/out" "collapse batch"
# The other commands that take --pixels.
expect 0 "$SANPATH" report --model "$dir/vit2" --image "$dir/images/rgb-37x23.png" --out "$dir/report.html"
grep -q "rgb-37x23.png (image 3×16×16)" "$dir/report.html" || fail "report --image: the input is not named"
for cmd in "bounds" "paths --sums --skip off --mlp none --layernorm none"; do
  # shellcheck disable=SC2086
  expect 0 "$SANPATH" $cmd --model "$dir/vit2" --image "$dir/images/rgb-37x23.png" --format json
  cp "$dir/out" "$dir/image.json"
  # shellcheck disable=SC2086
  expect 0 "$SANPATH" $cmd --model "$dir/vit2" --pixels "$dir/ref.safetensors" --format json
  same_run "$dir/image.json" "$dir/out" "$cmd"
done

# --- refusals: one line naming the file and the key, no output ----------------------------
# refuse CODE PATTERN ARGS...: forward ARGS -o FILE exits CODE with one line matching PATTERN, writes no FILE.
refuse() {
  local code=$1 pattern=$2
  shift 2
  rm -f "$dir/result.json"
  expect "$code" "$SANPATH" forward "$@" --format json -o "$dir/result.json"
  [ "$(wc -l <"$dir/err")" -eq 1 ] || fail "not one line: $* -- $(cat "$dir/err")"
  grep -q -- "$pattern" "$dir/err" || fail "message: $* -- want '$pattern', got: $(cat "$dir/err")"
  [ ! -e "$dir/result.json" ] || fail "an output file was written: $*"
}
V=(--model "$dir/vit2")
refuse 3 "missing.png: image: does not exist" "${V[@]}" --image "$dir/missing.png"
refuse 3 "image.gif: image: not a PNG or JPEG file" "${V[@]}" --image "$dir/refused/image.gif"
refuse 3 "image.bmp: image: not a PNG or JPEG file" "${V[@]}" --image "$dir/refused/image.bmp"
refuse 3 "cmyk.jpg: image: CMYK JPEG: not supported" "${V[@]}" --image "$dir/refused/cmyk.jpg"
refuse 3 "grey16.png: image: 16-bit grey PNG" "${V[@]}" --image "$dir/refused/grey16.png"
refuse 3 "truncated.png: image: cannot be decoded" "${V[@]}" --image "$dir/refused/truncated.png"
refuse 3 "notes.txt: image: not a PNG or JPEG file" "${V[@]}" --image "$dir/folder/notes.txt"
mkdir -p "$dir/empty"
refuse 3 "empty: image: no PNG or JPEG file" "${V[@]}" --image "$dir/empty"
# A later file of a batch that fails: nothing is written for the others either.
refuse 3 "truncated.png: image: cannot be decoded" "${V[@]}" --image "$dir/images/rgb-37x23.png" \
  --image "$dir/refused/truncated.png"
if [ "$(id -u)" -ne 0 ]; then
  cp "$dir/images/rgb-37x23.png" "$dir/locked.png" && chmod 000 "$dir/locked.png"
  refuse 3 "locked.png: image: cannot be opened for reading" "${V[@]}" --image "$dir/locked.png"
fi

# preprocessor_config.json: missing, or lacking what the steps need, or asking for what is not computed.
IMG=(--image "$dir/images/rgb-37x23.png")
refuse 3 "vit/preprocessor_config.json: file: does not exist" --model "$dir/vit" "${IMG[@]}"
# without KEY [VALUE]: a copy of vit2 whose config lacks KEY (or sets it to VALUE, JSON).
without() {
  rm -rf "$dir/bad" && cp -r "$dir/vit2" "$dir/bad"
  $PY - "$dir/bad/preprocessor_config.json" "$@" <<'PY'
import json, sys
path, key = sys.argv[1], sys.argv[2]
c = json.load(open(path))
if len(sys.argv) > 3:
    c[key] = json.loads(sys.argv[3])
elif "." in key:
    outer, inner = key.split(".")
    del c[outer][inner]
else:
    del c[key]
json.dump(c, open(path, "w"))
PY
}
for key in do_resize size size.height size.width resample do_rescale rescale_factor do_normalize image_mean image_std; do
  without $key
  refuse 3 "bad/preprocessor_config.json: $key: missing" --model "$dir/bad" "${IMG[@]}"
done
without resample 0
refuse 3 "preprocessor_config.json: resample: 0 is not a PIL filter computed here" --model "$dir/bad" "${IMG[@]}"
without resample 6
refuse 3 "preprocessor_config.json: resample: 6 is not a PIL filter" --model "$dir/bad" "${IMG[@]}"
without image_processor_type '"ViTImageProcessorFast"'
refuse 3 "preprocessor_config.json: image_processor_type: \"ViTImageProcessorFast\": only ViTImageProcessor" \
  --model "$dir/bad" "${IMG[@]}"
without do_center_crop true
refuse 3 "preprocessor_config.json: do_center_crop: a centre crop is not computed" --model "$dir/bad" "${IMG[@]}"
without image_mean '[0.5, 0.5]'
refuse 3 "preprocessor_config.json: image_mean: must be a list of 3 numbers" --model "$dir/bad" "${IMG[@]}"
without size '{"height": 8, "width": 8}'
refuse 3 "pixel_values: image 8×8, the model's image_size is 16" --model "$dir/bad" "${IMG[@]}"
echo "{" > "$dir/bad/preprocessor_config.json"
refuse 3 "bad/preprocessor_config.json: json: not valid JSON" --model "$dir/bad" "${IMG[@]}"

# A model that takes no images, and the command line's mistakes.
expect 0 "$SANPATH" init --out "$dir/bert" --layout bert --layers 1 --heads 2 --d-model 8 --vocab 20
cp "$dir/vit2/preprocessor_config.json" "$dir/bert/"
refuse 3 "bert: takes no images" --model "$dir/bert" "${IMG[@]}"
refuse 2 "" "${V[@]}" "${IMG[@]}" --pixels "$dir/ref.safetensors"
refuse 2 "" "${V[@]}" "${IMG[@]}" --tokens 1,2
expect 2 "$SANPATH" collapse "${IMG[@]}"
grep -q -- "--image: needs --model" "$dir/err" || fail "collapse --image without --model: $(cat "$dir/err")"
expect 2 "$SANPATH" paths --enumerate "${V[@]}" --image "$dir/folder"
grep -q -- "--image: a batch of 3 inputs" "$dir/err" || fail "paths --enumerate of a batch: $(cat "$dir/err")"

[ "$fails" -eq 0 ] && echo "image: every check passed"
exit "$fails"
