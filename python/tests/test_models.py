"""Models from files, from arrays and from torch modules."""
import json
import os

import numpy as np
import pytest

import sanpath
from conftest import read_safetensors


@pytest.mark.parametrize("name", ["gpt2-capp", "bert-ticket-classifier"])
def test_arrays_equal_file_bit_for_bit(models, name):
    folder = os.path.join(models, name)
    from_file = sanpath.load(folder)
    with open(os.path.join(folder, "config.json")) as f:
        config = json.load(f)
    state = read_safetensors(os.path.join(folder, "model.safetensors"))  # numpy, not sanpath's reader
    from_arrays = sanpath.from_arrays(state, config, name=folder)
    for precision in ("double", 128):
        a = sanpath.forward(from_file, [1, 5, 9, 13], precision=precision, skip="off", mlp="none", layernorm="none")
        b = sanpath.forward(from_arrays, [1, 5, 9, 13], precision=precision, skip="off", mlp="none",
                            layernorm="none")
        assert a.to_json() == b.to_json()
    # The weights read back are the file's, exactly (float32 values are exact in double).
    w1, w2 = from_file.native_tensors(), from_arrays.native_tensors()
    assert w1.keys() == w2.keys()
    for k in w1:
        assert np.array_equal(w1[k], w2[k]), k


def test_native_round_trip_and_sizes(tmp_path):
    m = sanpath.random_model(3, 2, 8, skip=False, mlp="none", layernorm="none", seed=4)
    assert (m.layers, m.heads, m.d_model, m.d_qk, m.d_v, m.d_ff) == (3, 2, 8, 4, 4, 32)
    assert m.variant == {"skip": False, "mlp": "none", "layernorm": "none", "mask": "none"}
    path = str(tmp_path / "m.safetensors")
    m.save(path)
    again = sanpath.from_arrays(m.native_tensors(), m.native_config(), name=path)
    assert sanpath.forward(sanpath.load(path), sanpath.random_input(5, seed=2)).to_json() == \
        sanpath.forward(again, sanpath.random_input(5, seed=2)).to_json()
    assert m.native_tensors()["layers.0.heads.1.W_Q"].shape == (8, 4)


def test_repr_states_the_sizes(models):
    """repr(Model) is the reports' model line: the sizes given, and a grouped-query model's H_kv (the Llama
    folder's config.json: 8 query heads on 4 key/value heads of size 8, SwiGLU 172)."""
    m = sanpath.random_model(3, 2, 8, skip=False, mlp="none", layernorm="none", seed=4)
    assert repr(m).startswith("<sanpath.Model ") and "(L=3, H=2, d=8, d_qk=4, d_ff=32" in repr(m), repr(m)
    folder = os.path.join(models, "llama-stories260k")
    r = sanpath.forward(m, sanpath.random_input(4, seed=1))
    assert repr(r) == r.to_table() and repr(r).startswith("model: ")  # a result at a prompt: its table
    assert repr(sanpath.load(folder)).startswith(f"<sanpath.Model {folder} (L=5, H=8, H_kv=4, d=64, d_qk=8, d_ff=172")


def composite(M):
    """sqrt(‖M‖_1 ‖M‖_∞): max column abs-sum times max row abs-sum."""
    return np.sqrt(np.abs(M).sum(axis=0).max() * np.abs(M).sum(axis=1).max())


def test_torch_bert_agrees_with_torch_float64():
    torch = pytest.importorskip("torch")
    torch.manual_seed(0)
    L, H, d, dff, n = 3, 4, 16, 32, 6
    layers = []
    for _ in range(L):
        layers.append(torch.nn.ModuleDict({
            "attn": torch.nn.MultiheadAttention(d, H, bias=True, batch_first=True),
            "ln1": torch.nn.LayerNorm(d, eps=1e-12),
            "fc1": torch.nn.Linear(d, dff),
            "fc2": torch.nn.Linear(dff, d),
            "ln2": torch.nn.LayerNorm(d, eps=1e-12),
        }).double())
    with torch.no_grad():
        for l in layers:  # non-trivial biases and LayerNorm parameters
            for p in l.parameters():
                p.add_(0.1 * torch.randn_like(p))
    # The same weights in BERT naming (torch Linear layout [out, in]).
    state = {}
    for i, l in enumerate(layers):
        p = f"bert.encoder.layer.{i}."
        W, b = l["attn"].in_proj_weight.detach(), l["attn"].in_proj_bias.detach()
        for j, nm in enumerate(["query", "key", "value"]):
            state[p + f"attention.self.{nm}.weight"] = W[j * d:(j + 1) * d]
            state[p + f"attention.self.{nm}.bias"] = b[j * d:(j + 1) * d]
        state[p + "attention.output.dense.weight"] = l["attn"].out_proj.weight.detach()
        state[p + "attention.output.dense.bias"] = l["attn"].out_proj.bias.detach()
        state[p + "attention.output.LayerNorm.weight"] = l["ln1"].weight.detach()
        state[p + "attention.output.LayerNorm.bias"] = l["ln1"].bias.detach()
        state[p + "intermediate.dense.weight"] = l["fc1"].weight.detach()
        state[p + "intermediate.dense.bias"] = l["fc1"].bias.detach()
        state[p + "output.dense.weight"] = l["fc2"].weight.detach()
        state[p + "output.dense.bias"] = l["fc2"].bias.detach()
        state[p + "output.LayerNorm.weight"] = l["ln2"].weight.detach()
        state[p + "output.LayerNorm.bias"] = l["ln2"].bias.detach()
    config = {"model_type": "bert", "hidden_size": d, "num_attention_heads": H, "num_hidden_layers": L,
              "intermediate_size": dff, "hidden_act": "gelu", "layer_norm_eps": 1e-12, "vocab_size": 1,
              "max_position_embeddings": 1, "type_vocab_size": 1}
    # Only the encoder: sanpath reads the layers; embeddings are optional for matrix inputs.
    model = sanpath.from_arrays({k: v.numpy() for k, v in state.items()}, config, name="torch")
    X = torch.randn(n, d, dtype=torch.float64)
    # torch's own float64 forward (BERT: post-LN, GELU with erf).
    xs = [X]
    with torch.no_grad():
        x = X.unsqueeze(0)
        for l in layers:
            a, _ = l["attn"](x, x, x, need_weights=False)
            x = l["ln1"](x + a)
            x = l["ln2"](x + l["fc2"](torch.nn.functional.gelu(l["fc1"](x))))
            xs.append(x[0])
    r = sanpath.forward(model, X.numpy(), precision=128)
    assert len(r.layers) == L + 1
    for l, x in enumerate(xs):
        M = x.numpy()
        expected = composite(M - M.mean(axis=0)) / composite(M)
        got = float(r.layers[l].relative_residual)
        assert abs(got - expected) <= 1e-12 * expected, (l, got, expected)


def test_first_layers_loads_a_prefix(models, tmp_path):
    folder = os.path.join(models, "llama-stories260k")
    full = sanpath.load(folder)
    part = sanpath.load(folder, first_layers=2)
    assert part.layers == 2 and full.layers == 5
    assert part.source == folder + " (first 2 of 5 layers)"
    w_full, w_part = full.native_tensors(), part.native_tensors()
    for k in w_part:
        if k.startswith("layers."):
            assert np.array_equal(w_part[k], w_full[k]), k
    assert not any(k.startswith("layers.2.") for k in w_part)
    r = sanpath.forward(part, [1, 5, 9], precision="double")
    assert "(first 2 of 5 layers)" in r.to_table().splitlines()[0]
    for bad in (0, -1, 1.5, True):
        with pytest.raises(sanpath.InputError, match="first_layers: .* is not a number of layers"):
            sanpath.load(folder, first_layers=bad)
    with pytest.raises(sanpath.InputError, match="5 layers, fewer than the first 6 asked for"):
        sanpath.load(folder, first_layers=6)
    budget_error = None
    sanpath.set_memory_budget("1K")
    try:
        sanpath.load(folder)
    except sanpath.ResourceError as e:
        budget_error = str(e)
    finally:
        sanpath.set_memory_budget(None)
    assert budget_error and "model.safetensors: weights: needs an estimated" in budget_error


def test_stream_layers_gives_the_whole_models_passes(models):
    folder = os.path.join(models, "llama-stories260k")
    whole, streamed = sanpath.load(folder), sanpath.load(folder, stream_layers="on")
    for precision in ("double", "auto"):
        a = json.loads(sanpath.forward(whole, [1, 5, 9, 2], precision=precision).to_json())
        b = json.loads(sanpath.forward(streamed, [1, 5, 9, 2], precision=precision).to_json())
        assert a["model"].pop("layers_streamed") is False and b["model"].pop("layers_streamed") is True
        assert a == b
    # Analyses that need every layer at once say so, naming the model.
    with pytest.raises(sanpath.InputError, match=r"llama-stories260k: layers: streamed from the checkpoint one at a "
                                                 r"time \(forward passes only\)"):
        sanpath.bounds(streamed, [1, 5, 9])
    with pytest.raises(sanpath.InputError, match="layers: streamed"):
        streamed.native_tensors()
    # auto holds a model that fits the budget whole.
    assert sanpath.load(folder, stream_layers="auto").native_tensors().keys() == whole.native_tensors().keys()
    for bad in ("yes", True, None):
        with pytest.raises(sanpath.InputError, match="stream_layers: .* is not one of 'off', 'on', 'auto'"):
            sanpath.load(folder, stream_layers=bad)
