"""random_model and `sanpath init`: one library call validates and builds both
(include/sanpath/io/random_checkpoint.hpp), so the same options give the same
model and the same refusals, each naming the option as its side spells it."""
import dataclasses
import os
import re

import pytest

import sanpath
from sanpath import _sanpath
from conftest import cli_message, cli_ok

SIZES = dict(layers=2, heads=2, d_model=8)


def test_family_options_are_the_library_s():
    fields = {f.name for f in dataclasses.fields(sanpath.FamilyOptions)}
    library = {n for n in dir(_sanpath.FamilyOptions()) if not n.startswith("_")}
    registry = {o for f in sanpath.FAMILIES for o in f["options"]}
    assert fields == library == registry


def test_family_options_object_and_keywords(tmp_path):
    typed = sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox",
                                 family_options=sanpath.FamilyOptions(rotary_fraction=0.5, parallel_residual=False))
    loose = sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox", rotary_fraction=0.5, parallel_residual=False)
    a, b = str(tmp_path / "a"), str(tmp_path / "b")
    typed.save_hf(a, "gpt_neox", "F64")
    loose.save_hf(b, "gpt_neox", "F64")
    for name in ("config.json", "model.safetensors"):
        with open(os.path.join(a, name), "rb") as fa, open(os.path.join(b, name), "rb") as fb:
            assert fa.read() == fb.read(), name
    # A keyword adds to the object; an unknown keyword is a TypeError, as for any function.
    both = sanpath.random_model(**SIZES, vocab=8, layout="gpt_neox",
                                family_options=sanpath.FamilyOptions(rotary_fraction=0.5), parallel_residual=False)
    assert both.native_config() == typed.native_config()
    with pytest.raises(TypeError, match="unexpected keyword argument 'rotary'"):
        sanpath.random_model(**SIZES, rotary=0.5)


# (CLI arguments, Python keywords) of one refusal each.
REFUSALS = [
    (["--heads", "0"], dict(layers=2, heads=0, d_model=8)),
    (["--layers", "2", "--heads", "3", "--d-model", "8"], dict(layers=2, heads=3, d_model=8)),
    (["--d-ff", "0"], dict(SIZES, d_ff=0)),
    (["--init", "uniform"], dict(SIZES, init="uniform")),
    (["--activation", "tanh"], dict(SIZES, activation="tanh")),
    (["--layout", "gpt_neox", "--vocab", "8", "--skip", "off"], dict(SIZES, vocab=8, layout="gpt_neox", skip="off")),
    (["--layout", "gpt_neox", "--vocab", "8", "--softcap", "30"],
     dict(SIZES, vocab=8, layout="gpt_neox", softcap=30.0)),
    (["--layout", "vit", "--vocab", "8", "--image-size", "16", "--patch-size", "8"],
     dict(SIZES, vocab=8, layout="vit", image_size=16, patch_size=8)),
    (["--layout", "albert"], dict(SIZES, layout="albert")),
    (["--family", "gpt2"], dict(SIZES, family="gpt2")),
    (["--head-dim", "4", "--d-qk", "4"], dict(SIZES, head_dim=4, d_qk=4)),
    (["--head-dim", "0"], dict(SIZES, head_dim=0)),
    (["--layout", "bert", "--layer-pattern", "2"], dict(SIZES, layout="bert", layer_pattern=2)),
    (["--layout", "bert", "--rope-linear-factor", "2"], dict(SIZES, layout="bert", rope_linear_factor=2.0)),
]


def spelled_as_python(cli_text):
    """The CLI's message with its options spelled as Python's keywords ("--kv-heads" -> "kv_heads")."""
    text = re.sub(r"--([a-z][a-z-]*)", lambda m: m.group(1).replace("-", "_"), cli_text)
    return text.replace("needs shared_layers", "needs shared_layers=True").replace("needs mlp none", "needs mlp='none'")


@pytest.mark.parametrize("args,kwargs", REFUSALS)
def test_the_same_refusals_as_init(cli, tmp_path, args, kwargs):
    base = {"--layers": "2", "--heads": "2", "--d-model": "8"}
    for i in range(0, len(args), 2):
        base.pop(args[i], None)
    flat = [x for kv in base.items() for x in kv]
    msg = cli_message(cli, "init", "--out", str(tmp_path / "m"), *flat, *args)
    with pytest.raises(sanpath.InputError) as e:
        sanpath.random_model(**kwargs)
    assert str(e.value) == spelled_as_python(msg).replace("skip/mlp/layernorm/mask", "skip=/mlp=/layernorm=/mask="), msg


def test_family_llama_native(cli, tmp_path):
    # `init --family llama` (a native file of the Llama family's structure) and random_model(family="llama").
    path = str(tmp_path / "llama.safetensors")
    cli_ok(cli, "init", "--out", path, "--family", "llama", "--layers", "2", "--heads", "4", "--kv-heads", "2",
           "--d-model", "16", "--d-ff", "24", "--vocab", "40", "--seed", "9")
    mine = str(tmp_path / "llama-py.safetensors")
    sanpath.random_model(2, 4, 16, family="llama", kv_heads=2, d_ff=24, vocab=40, seed=9).save(mine)
    with open(path, "rb") as a, open(mine, "rb") as b:
        assert a.read() == b.read()
