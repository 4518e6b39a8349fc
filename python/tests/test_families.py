"""The layout families of docs/families.md from Python: random_model(layout=X)
is `sanpath init --layout X` (the same files), sanpath.load reads every
family's folder, the analyses give the CLI's JSON byte for byte, images for
ViT (sanpath.pixels, sanpath.load_pixels = --pixels), and the refusals carry
the CLI's messages. Tiny models: the whole file runs in seconds."""
import dataclasses
import json
import os
import struct

import numpy as np
import pytest

import sanpath
from conftest import cli_message, cli_ok, run_cli, write_safetensors

SIZES = dict(layers=2, heads=2, d_model=16, d_ff=32, seed=5)
SIZE_ARGS = ["--layers", "2", "--heads", "2", "--d-model", "16", "--d-ff", "32", "--seed", "5"]
VOCAB = ["--vocab", "32"]
TOKENS = [1, 5, 9, 3, 7, 30]
TOKEN_ARGS = ["--tokens", ",".join(map(str, TOKENS))]
VIT = dict(image_size=8, patch_size=4)

# (layout, random_model keywords, the same as `sanpath init` options): each family by its defaults, and with
# its family options.
CASES = [
    ("xlnet", dict(vocab=32), VOCAB),
    ("xlnet", dict(vocab=32, causal=True, clamp_len=2), VOCAB + ["--attn-type", "uni", "--clamp-len", "2"]),
    ("t5", dict(vocab=32), VOCAB),
    ("t5", dict(vocab=32, gated=True, rel_buckets=8, rel_max_distance=16),
     VOCAB + ["--gated", "on", "--rel-buckets", "8", "--rel-max-distance", "16"]),
    ("gpt_neox", dict(vocab=32), VOCAB),
    ("gpt_neox", dict(vocab=32, parallel_residual=False, rotary_fraction=0.5),
     VOCAB + ["--parallel-residual", "off", "--rotary-fraction", "0.5"]),
    ("phi", dict(vocab=32, kv_heads=1), VOCAB + ["--kv-heads", "1"]),
    ("opt", dict(vocab=32), VOCAB),
    ("opt", dict(vocab=32, embed_dim=8, pre_norm=False, bias_std=0.01),
     VOCAB + ["--embed-dim", "8", "--pre-norm", "off", "--bias-std", "0.01"]),
    ("gemma", dict(vocab=32, kv_heads=1), VOCAB + ["--kv-heads", "1"]),
    ("gemma2", dict(vocab=32), VOCAB),
    ("gemma2", dict(vocab=32, sliding_window=2, softcap=20.0, query_pre_attn_scalar=16.0),
     VOCAB + ["--sliding-window", "2", "--softcap", "20", "--query-pre-attn-scalar", "16"]),
    ("vit", dict(VIT, bias_std=0.01), ["--image-size", "8", "--patch-size", "4", "--bias-std", "0.01"]),
]
IDS = [f"{layout}-{'options' if i and CASES[i - 1][0] == layout else 'default'}"
       for i, (layout, _, _) in enumerate(CASES)]


def init_both(cli, folder, layout, kwargs, args):
    """`sanpath init --layout X` into folder/cli and random_model(layout=X).save_hf into folder/py: the same
    files, byte for byte. Returns the CLI's folder."""
    a, b = str(folder / "cli"), str(folder / "py")
    cli_ok(cli, "init", "--layout", layout, "--out", a, *SIZE_ARGS, *args)
    sanpath.random_model(**SIZES, **kwargs, layout=layout).save_hf(b, layout, "F64")
    names = sorted(os.listdir(a))
    assert names == sorted(os.listdir(b))
    for name in names:
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            assert fa.read() == fb.read(), name
    return a


@pytest.fixture(scope="module")
def image():
    return np.random.default_rng(11).standard_normal((3, 8, 8))


@pytest.fixture(scope="module")
def vit(cli, tmp_path_factory, image):
    """A ViT checkpoint (S = 8, p = 4: 4 patches + CLS) and a pixels file of one image."""
    d = tmp_path_factory.mktemp("vit")
    folder = init_both(cli, d, "vit", dict(VIT), ["--image-size", "8", "--patch-size", "4"])
    path = str(d / "image.safetensors")
    write_safetensors(path, {"pixel_values": image})
    return folder, path


@pytest.fixture(scope="module")
def neox(cli, tmp_path_factory):
    d = tmp_path_factory.mktemp("neox")
    return init_both(cli, d, "gpt_neox", dict(vocab=32), VOCAB)


@pytest.mark.parametrize("layout, kwargs, args", CASES, ids=IDS)
def test_family_matches_cli(cli, tmp_path, image, layout, kwargs, args):
    folder = init_both(cli, tmp_path, layout, kwargs, args)
    model = sanpath.load(folder)
    assert (model.layers, model.heads, model.d_model) == (2, 2, 16)
    if layout == "vit":
        path = str(tmp_path / "image.safetensors")
        write_safetensors(path, {"pixel_values": image})
        inp, cli_input = sanpath.pixels(image, name=path), ["--pixels", path]
    else:
        inp, cli_input = TOKENS, TOKEN_ARGS
    common = ["--model", folder, *cli_input, "--format", "json"]
    # sanpath.load holds the model whole, as --stream-layers off (test_options.py).
    assert sanpath.forward(model, inp).to_json() == cli_ok(cli, "forward", *common, "--stream-layers", "off")
    assert sanpath.collapse(model, inp).to_json() == cli_ok(cli, "collapse", *common, "--stream-layers", "off")
    san = dict(skip="off", mlp="none", layernorm="none")
    r = sanpath.length_sums(model, inp, **san)
    assert r.to_json() == cli_ok(cli, "paths", *common, "--sums", "--skip", "off", "--mlp", "none",
                                 "--layernorm", "none")
    assert r.decomposition_holds


def test_defaults_without_layout_are_unchanged():
    m = sanpath.random_model(2, 2, 8, seed=1)
    assert (m.activation, m.ln_eps) == ("gelu", 1e-12)
    assert m.variant == {"skip": True, "mlp": "residual", "layernorm": "post", "mask": "none"}


def test_family_defaults():
    # The family's activation and norm epsilon when not given (its config.json's defaults), else as given.
    assert (sanpath.random_model(**SIZES, vocab=8, layout="opt").activation,
            sanpath.random_model(**SIZES, vocab=8, layout="opt").ln_eps) == ("relu", 1e-5)
    m = sanpath.random_model(**SIZES, vocab=8, layout="gemma")
    assert (m.activation, m.ln_eps) == ("gelu_tanh", 1e-6)
    m = sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", activation="relu", ln_eps=1e-7)
    assert (m.activation, m.ln_eps) == ("relu", 1e-7)


def test_vit_images(cli, vit, image, tmp_path):
    folder, path = vit
    model = sanpath.load(folder)
    one = sanpath.pixels(image, name=path)
    assert isinstance(one, sanpath.Input) and one.kind == "pixels" and one.rows is None
    assert one.describe() == sanpath.load_pixels(path).describe() == f"{path} (image 3×8×8)"
    san = ["--skip", "off", "--mlp", "none", "--layernorm", "none"]
    common = ["--model", folder, "--pixels", path, "--format", "json"]
    expected = cli_ok(cli, "forward", *common, "--stream-layers", "off")
    assert sanpath.forward(model, one).to_json() == expected
    assert sanpath.forward(model, sanpath.load_pixels(path)).to_json() == expected
    # ViT's SAN is math.md §1's: the bounds apply.
    b = sanpath.bounds(model, one, skip="off", mlp="none", layernorm="none")
    assert b.to_json() == cli_ok(cli, "bounds", *common, *san)
    assert b.applicable
    # Float32 pixels, as a processor writes them: exact in double, the same numbers.
    f32 = str(tmp_path / "image32.safetensors")
    write_f32(f32, "pixel_values", image.astype(np.float32))
    assert sanpath.forward(model, sanpath.pixels(image.astype(np.float32), name=f32)).to_json() == \
        sanpath.forward(model, sanpath.load_pixels(f32)).to_json() == \
        cli_ok(cli, "forward", "--model", folder, "--pixels", f32, "--format", "json", "--stream-layers", "off")


def test_vit_image_batch(cli, vit, tmp_path):
    folder, _ = vit
    model = sanpath.load(folder)
    images = np.random.default_rng(12).standard_normal((3, 3, 8, 8))
    path = str(tmp_path / "images.safetensors")
    write_safetensors(path, {"pixel_values": images})
    b = sanpath.pixels(images, name=path)
    assert isinstance(b, sanpath.Batch) and len(b) == 3
    assert [x.describe() for x in b.inputs] == [f"{path}[{i}] (image 3×8×8)" for i in range(3)]
    assert b.describe() == sanpath.load_pixels(path).describe()
    common = ["--model", folder, "--pixels", path, "--format", "json"]
    fb = sanpath.forward(model, b)
    assert fb.to_json() == cli_ok(cli, "forward", *common)
    assert sanpath.forward(model, sanpath.load_pixels(path)).to_json() == fb.to_json()
    # Each image of the batch is the image alone (its own run, its own name).
    alone = sanpath.forward(model, sanpath.pixels(images[1], name=f"{path}[1]"))
    assert fb.runs[1].to_json() == alone.to_json()
    assert sanpath.collapse(model, b).to_json() == cli_ok(cli, "collapse", *common)
    # A batch goes only where batches go.
    with pytest.raises(sanpath.InputError, match="a batch of 3 inputs"):
        sanpath.length_sums(model, b)


def test_vit_report_and_effectiveness(cli, vit, tmp_path):
    folder, path = vit
    model = sanpath.load(folder)
    one = sanpath.load_pixels(path)
    e = sanpath.effectiveness(model, one, skip="on", mlp="none", layernorm="none")
    assert e.to_json() == cli_ok(cli, "paths", "--model", folder, "--pixels", path, "--effectiveness", "--skip", "on",
                                 "--mlp", "none", "--layernorm", "none", "--format", "json")
    out = str(tmp_path / "vit.html")
    cli_ok(cli, "report", "--model", folder, "--pixels", path, "--out", out, "--rerun", "2", "--repeats", "1")
    with open(out, encoding="utf-8") as f:
        assert sanpath.report(model, one, rerun=2, repeats=1) == f.read()


def write_f32(path, name, a):
    """One F32 tensor as safetensors (conftest's writer is F64 only)."""
    b = np.ascontiguousarray(a, dtype="<f4").tobytes()
    h = json.dumps({name: {"dtype": "F32", "shape": list(a.shape), "data_offsets": [0, len(b)]}}).encode()
    h += b" " * (-len(h) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h + b)


@pytest.mark.parametrize("what, values", [
    ("channels", np.zeros((2, 8, 8))),
    ("size", np.zeros((3, 12, 12))),
    ("rank 2", np.zeros((8, 8))),
    ("rank 5", np.zeros((1, 1, 3, 8, 8))),
    ("empty batch", np.zeros((0, 3, 8, 8))),
    ("empty axis", np.zeros((3, 0, 8))),
    ("nan", np.where(np.arange(192).reshape(3, 8, 8) == 77, np.nan, 0.5)),
    ("inf", np.where(np.arange(384).reshape(2, 3, 8, 8) == 200, -np.inf, 0.5)),
])
def test_pixel_errors_match_cli(cli, vit, tmp_path, what, values):
    folder, _ = vit
    path = str(tmp_path / "bad.safetensors")
    write_safetensors(path, {"pixel_values": values})
    code, out, err = run_cli(cli, "forward", "--model", folder, "--pixels", path)
    assert code == 3 and out == "" and err.startswith("sanpath: error: "), (code, out, err)
    message = err[len("sanpath: error: "):].rstrip("\n")
    assert "pixel_values" in message
    model = sanpath.load(folder)
    for make in (lambda: sanpath.pixels(values, name=path), lambda: sanpath.load_pixels(path)):
        with pytest.raises(sanpath.InputError) as e:
            sanpath.forward(model, make())
        assert str(e.value) == message


def test_pixels_file_without_pixel_values(cli, tmp_path, vit):
    folder, _ = vit
    path = str(tmp_path / "x.safetensors")
    write_safetensors(path, {"X": np.ones((3, 16))})
    message = cli_message(cli, "forward", "--model", folder, "--pixels", path)
    with pytest.raises(sanpath.InputError) as e:
        sanpath.load_pixels(path)
    assert str(e.value) == message and "pixel_values" in message


def test_tokens_to_vit_and_pixels_to_tokens_models(cli, vit, neox, image):
    folder, path = vit
    message = cli_message(cli, "forward", "--model", folder, "--tokens", "1,2,3")
    with pytest.raises(sanpath.InputError) as e:
        sanpath.forward(sanpath.load(folder), [1, 2, 3])
    assert str(e.value) == message
    message = cli_message(cli, "forward", "--model", neox, "--pixels", path)
    with pytest.raises(sanpath.InputError, match="pixel_values: .* takes no pixels") as e:
        sanpath.forward(sanpath.load(neox), sanpath.pixels(image, name=path))
    assert str(e.value) == message


def test_pixels_are_never_guessed_from_arrays(vit, image):
    # A 3-D float array is a batch of matrices [b, n, d], not an image: it goes through pixels() only.
    folder, _ = vit
    with pytest.raises(sanpath.InputError):
        sanpath.forward(sanpath.load(folder), image)


def test_random_models_of_the_table_layouts_are_their_files_models():
    # A GPT-2 checkpoint is read pre-LN and causal, a BERT one post-LN without a mask (families.md): the
    # random model is the model its files hold, and a variant its config.json cannot say is refused.
    pre_causal = {"skip": True, "mlp": "residual", "layernorm": "pre", "mask": "causal"}
    assert sanpath.random_model(**SIZES, layout="gpt2").variant == pre_causal
    assert sanpath.random_model(**SIZES, layout="llama").variant == pre_causal
    assert sanpath.random_model(**SIZES, layout="bert").variant["layernorm"] == "post"
    for layout in ("gpt2", "bert", "llama"):
        with pytest.raises(sanpath.InputError, match=rf"^layout {layout}: the family's structure is fixed"):
            sanpath.random_model(**SIZES, layout=layout, skip="off")


# A model written in a layout whose files would hold another model is refused, naming the field, and
# nothing is written: (model's layout, layout written, the field). What each layout's files can say is
# families.md's; the variant is not among it (the files carry the layout's own, save_hf).
OTHER_LAYOUT = [
    ("llama", "bert", "rope_theta"),        # BERT's files have learned positions, no rotary embeddings
    ("bert", "llama", "norm"),              # Llama's norms are RMSNorms
    ("xlnet", "bert", "xlnet_relative"),    # BERT's files have no relative attention terms
    ("gemma2", "llama", "norm"),            # Gemma 2's RMSNorm gains are 1 + w; Llama stores w
    ("gemma2", "gemma", "sandwich_norms"),  # Gemma's layers have two norms
    ("gemma", "qwen3", "norm"),             # Gemma's RMSNorm gains are 1 + w; Qwen3 stores w
    ("phi", "opt", "rope_theta"),           # OPT has learned positions, no rotary embeddings
    ("t5", "vit", "score_scale_base"),      # T5's logits are unscaled
]


@pytest.mark.parametrize("source,layout,field", OTHER_LAYOUT, ids=[f"{s}-as-{d}" for s, d, _ in OTHER_LAYOUT])
def test_a_layout_that_cannot_hold_the_model_refuses_it(tmp_path, source, layout, field):
    folder = str(tmp_path / "out")
    with pytest.raises(sanpath.InputError, match=rf"^{folder}: {field}: the {layout} layout needs "):
        sanpath.random_model(**SIZES, layout=source).save_hf(folder, layout, "F64")
    assert not os.path.exists(folder)


def test_the_bert_layouts_refuse_silu(tmp_path):
    # Their config.json's activation has no silu (families.md): refused before anything is written.
    folder = str(tmp_path / "out")
    for layout in ("bert", "gpt2"):
        with pytest.raises(sanpath.InputError, match=rf"^{folder}: activation: the {layout} layout needs "):
            sanpath.random_model(**SIZES, activation="silu").save_hf(folder, layout, "F64")
        assert not os.path.exists(folder)


def test_random_model_refusals():
    with pytest.raises(sanpath.InputError, match=r"^layout gpt_neox: the family's structure is fixed by its "
                                                 r"config\.json"):
        sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", skip="off")
    with pytest.raises(sanpath.InputError, match=r"^layout gpt_neox: softcap: not an option of the gpt_neox layout$"):
        sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", softcap=30.0)
    with pytest.raises(sanpath.InputError, match=r"^layout t5: image_size: not an option of the t5 layout$"):
        sanpath.random_model(**SIZES, vocab=8, layout="t5", image_size=8)
    for layout in (None, "bert", "llama"):
        with pytest.raises(sanpath.InputError, match=rf"^layout {layout}: the family options \(rotary_fraction, …\) "
                                                     "belong to the layouts xlnet, t5, gpt_neox"):
            sanpath.random_model(**SIZES, layout=layout, rotary_fraction=0.5)
    with pytest.raises(sanpath.InputError, match=r"^layout: 'gpt-neox' is not one of bert, gpt2, .*gpt_neox"):
        sanpath.random_model(**SIZES, layout="gpt-neox")
    with pytest.raises(sanpath.InputError, match=r"^kv_heads: only for the layouts llama, mistral, qwen2, phi, gemma, gemma2, qwen3, gemma3$"):
        sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", kv_heads=1)
    with pytest.raises(sanpath.InputError, match=r"^kv_heads: only for"):
        sanpath.random_model(**SIZES, kv_heads=1)
    with pytest.raises(sanpath.InputError, match=r"^vocab: a vit model takes images, not tokens$"):
        sanpath.random_model(**SIZES, vocab=8, layout="vit", **VIT)
    # A family's own refusal of a value, named as in Python (an odd rotary dimension).
    with pytest.raises(sanpath.InputError, match=r"^layout gpt_neox: rotary_fraction: "):
        sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", rotary_fraction=0.125)


def test_layouts():
    assert set(sanpath.LAYOUTS) >= {"bert", "gpt2", "llama", "xlnet", "t5", "gpt_neox", "phi", "opt", "gemma",
                                    "gemma2", "vit"}
    # LAYOUTS and FAMILIES are the library's registry: one entry per layout, the names init --layout takes.
    assert sanpath.LAYOUTS == tuple(f["name"] for f in sanpath.FAMILIES)
    assert len(set(sanpath.LAYOUTS)) == len(sanpath.LAYOUTS) == 18
    by_name = {f["name"]: f for f in sanpath.FAMILIES}
    assert by_name["vit"]["input"] == "pixels" and by_name["bert"]["input"] == "tokens"
    assert by_name["gemma2"]["display"] == "Gemma 2" and by_name["gpt_neox"]["model_types"] == ("gpt_neox",)
    # random_model's family options (sanpath.FamilyOptions) are the registry's, every one of them.
    assert {f.name for f in dataclasses.fields(sanpath.FamilyOptions)} == {o for f in sanpath.FAMILIES
                                                                          for o in f["options"]}


# Qwen3 and Gemma 3: written alike by init and random_model, and run alike by the CLI and Python.
QK_CASES = [
    ("qwen3", dict(vocab=32, kv_heads=1, head_dim=4), VOCAB + ["--kv-heads", "1", "--head-dim", "4"]),
    ("gemma3", dict(vocab=32, head_dim=4, sliding_window=2, layer_pattern=2, rope_local_base=500.0,
                    rope_linear_factor=4.0, query_pre_attn_scalar=16.0, rope_theta=20000.0),
     VOCAB + ["--head-dim", "4", "--sliding-window", "2", "--layer-pattern", "2", "--rope-local-base", "500",
              "--rope-linear-factor", "4", "--query-pre-attn-scalar", "16", "--rope-theta", "20000"]),
]


@pytest.mark.parametrize("layout, kwargs, args", QK_CASES, ids=[c[0] for c in QK_CASES])
def test_query_key_norm_families_match_cli(cli, tmp_path, layout, kwargs, args):
    folder = init_both(cli, tmp_path, layout, kwargs, args)
    config = json.load(open(os.path.join(folder, "config.json")))
    assert config["head_dim"] == 4
    if layout == "gemma3":
        assert config["model_type"] == "gemma3_text"
        assert config["layer_types"] == ["sliding_attention", "full_attention"]
        assert (config["rope_local_base_freq"], config["rope_theta"]) == (500.0, 20000.0)
        assert config["rope_scaling"] == {"rope_type": "linear", "factor": 4.0}
    model = sanpath.load(folder)
    assert (model.layers, model.heads, model.d_model, model.d_qk) == (2, 2, 16, 4)
    common = ["--model", folder, *TOKEN_ARGS, "--format", "json"]
    assert sanpath.forward(model, TOKENS).to_json() == cli_ok(cli, "forward", *common, "--stream-layers", "off")
    assert sanpath.collapse(model, TOKENS).to_json() == cli_ok(cli, "collapse", *common, "--stream-layers", "off")
    r = sanpath.length_sums(model, TOKENS, skip="off", mlp="none", layernorm="none")
    assert r.to_json() == cli_ok(cli, "paths", *common, "--sums", "--skip", "off", "--mlp", "none",
                                 "--layernorm", "none")
    assert r.decomposition_holds
