"""sanpath.image (= --image): PNG and JPEG files preprocessed as a ViT checkpoint's preprocessor_config.json
says. Its pixel_values equal the independent PIL + numpy reference (tests/reference/vit_image_reference.py) bit
for bit; the inputs give the CLI's JSON byte for byte, and the same results as sanpath.pixels of those values;
the refusals carry the CLI's messages."""
import importlib.util
import json
import os

import numpy as np
import pytest

import sanpath
from conftest import ROOT, cli_message, cli_ok

PIL = pytest.importorskip("PIL")
_spec = importlib.util.spec_from_file_location(
    "vit_image_reference", os.path.join(ROOT, "tests", "reference", "vit_image_reference.py"))
ref = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(ref)


@pytest.fixture(scope="module")
def images(tmp_path_factory):
    d = tmp_path_factory.mktemp("images")
    names = ref.make_images(str(d / "images"))
    return str(d), names


@pytest.fixture(scope="module")
def vit(cli, tmp_path_factory):
    """A ViT checkpoint (images 16×16, patches 8×8) with a bicubic image processor."""
    folder = str(tmp_path_factory.mktemp("vit") / "vit")
    cli_ok(cli, "init", "--layout", "vit", "--out", folder, "--layers", "2", "--heads", "2", "--d-model", "8",
           "--image-size", "16", "--patch-size", "8", "--seed", "3")
    ref.write_config(os.path.join(folder, "preprocessor_config.json"), 3, 16)
    return folder


@pytest.mark.parametrize("resample", [1, 2, 3, 4, 5])
def test_pixel_values_match_the_reference(images, tmp_path, resample):
    d, names = images
    for size in (16, 29):
        ref.write_config(str(tmp_path / "preprocessor_config.json"), resample, size)
        config = json.load(open(tmp_path / "preprocessor_config.json"))
        for name in names:
            path = os.path.join(d, "images", name)
            inp = sanpath.image(path, str(tmp_path))
            assert inp.kind == "pixels"
            theirs = ref.pixel_values(path, config)
            assert inp.pixel_values.shape == theirs.shape == (3, size, size)
            # float64 holding float32 values, the reference's bits.
            assert np.array_equal(inp.pixel_values.astype(np.float32).view(np.uint32), theirs.view(np.uint32)), name
            assert np.array_equal(inp.pixel_values, theirs.astype(np.float64)), name


def test_image_runs_as_pixels_and_as_the_cli(cli, vit, images):
    d, _ = images
    path = os.path.join(d, "images", "jpeg-prog-23x35.jpeg")
    model = sanpath.load(vit)
    one = sanpath.image(path, model)
    assert one.describe() == f"{path} (image 3×16×16)"
    expected = cli_ok(cli, "forward", "--model", vit, "--image", path, "--format", "json", "--stream-layers", "off")
    assert sanpath.forward(model, one).to_json() == expected
    # The same values through sanpath.pixels give the same numbers.
    same = sanpath.pixels(one.pixel_values.astype(np.float32), name=path)
    assert sanpath.forward(model, same).to_json() == expected
    assert sanpath.collapse(model, one).to_json() == \
        cli_ok(cli, "collapse", "--model", vit, "--image", path, "--format", "json", "--stream-layers", "off")


def test_folder_and_list_are_batches(cli, vit, images):
    d, names = images
    folder = os.path.join(d, "images")
    model = sanpath.load(vit)
    batch = sanpath.image(folder, vit)
    assert isinstance(batch, sanpath.Batch) and len(batch) == len(names)
    listed = sanpath.image([os.path.join(folder, n) for n in sorted(names)[:2]], model)
    assert isinstance(listed, sanpath.Batch) and len(listed) == 2
    assert sanpath.forward(model, batch).to_json() == \
        cli_ok(cli, "forward", "--model", vit, "--image", folder, "--format", "json")


def test_refusals_carry_the_cli_messages(cli, vit, images, tmp_path):
    d, _ = images
    path = os.path.join(d, "images", "rgb-37x23.png")
    for bad in (os.path.join(d, "refused", "image.gif"), os.path.join(d, "refused", "truncated.png"),
                str(tmp_path / "missing.png")):
        with pytest.raises(sanpath.InputError) as e:
            sanpath.image(bad, vit)
        assert str(e.value) == cli_message(cli, "forward", "--model", vit, "--image", bad)
    config = json.load(open(os.path.join(vit, "preprocessor_config.json")))
    del config["image_std"]
    json.dump(config, open(tmp_path / "preprocessor_config.json", "w"))
    with pytest.raises(sanpath.InputError, match="preprocessor_config.json: image_std: missing"):
        sanpath.image(path, str(tmp_path))
    bert = str(tmp_path / "bert")
    cli_ok(cli, "init", "--layout", "bert", "--out", bert, "--layers", "1", "--heads", "2", "--d-model", "8",
           "--vocab", "20")
    with pytest.raises(sanpath.InputError, match="takes no images"):
        sanpath.image(path, sanpath.load(bert))
