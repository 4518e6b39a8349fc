#!/usr/bin/python3
"""A small transformer built from torch.nn modules, handed to sanpath as a
state dict in HuggingFace BERT naming; prints the collapse of its pure-SAN
variant (skip off, mlp none, layernorm none) in high precision, where
float64 tools print 0.

    /usr/bin/python3 examples/python/torch_san.py
"""
import torch

import sanpath

torch.manual_seed(0)
L, H, d, d_ff, n = 6, 4, 32, 64, 8


class Layer(torch.nn.Module):
    """A BERT layer (post-LayerNorm, GELU MLP) from torch.nn building blocks."""

    def __init__(self):
        super().__init__()
        self.attn = torch.nn.MultiheadAttention(d, H, batch_first=True)
        self.ln1 = torch.nn.LayerNorm(d, eps=1e-12)
        self.fc1 = torch.nn.Linear(d, d_ff)
        self.fc2 = torch.nn.Linear(d_ff, d)
        self.ln2 = torch.nn.LayerNorm(d, eps=1e-12)


layers = torch.nn.ModuleList(Layer() for _ in range(L))


def bert_state_dict(layers):
    """The layers' weights under BERT's names (torch Linear layout [out, in])."""
    state = {}
    for i, l in enumerate(layers):
        p = f"bert.encoder.layer.{i}."
        W, b = l.attn.in_proj_weight, l.attn.in_proj_bias
        for j, name in enumerate(["query", "key", "value"]):
            state[p + f"attention.self.{name}.weight"] = W[j * d:(j + 1) * d]
            state[p + f"attention.self.{name}.bias"] = b[j * d:(j + 1) * d]
        state[p + "attention.output.dense.weight"] = l.attn.out_proj.weight
        state[p + "attention.output.dense.bias"] = l.attn.out_proj.bias
        state[p + "attention.output.LayerNorm.weight"] = l.ln1.weight
        state[p + "attention.output.LayerNorm.bias"] = l.ln1.bias
        state[p + "intermediate.dense.weight"] = l.fc1.weight
        state[p + "intermediate.dense.bias"] = l.fc1.bias
        state[p + "output.dense.weight"] = l.fc2.weight
        state[p + "output.dense.bias"] = l.fc2.bias
        state[p + "output.LayerNorm.weight"] = l.ln2.weight
        state[p + "output.LayerNorm.bias"] = l.ln2.bias
    return {k: v.detach().double().numpy() for k, v in state.items()}


config = {"model_type": "bert", "hidden_size": d, "num_attention_heads": H, "num_hidden_layers": L,
          "intermediate_size": d_ff, "hidden_act": "gelu", "layer_norm_eps": 1e-12}
model = sanpath.from_arrays(bert_state_dict(layers), config, name="torch.nn transformer")
X = torch.randn(n, d, dtype=torch.float64)

r = sanpath.forward(model, X.numpy(), skip="off", mlp="none", layernorm="none")
print(f"torch.nn transformer as a pure SAN: L={model.layers}, H={model.heads}, d={model.d_model}; "
      f"precision {r.precision}, checked at {r.check}")
for layer in r.layers:
    x = layer.relative_residual
    print(f"layer {layer.layer}: relative residual {x}  (log10 {x.log10:.2f}, {x.digits} digits confirmed)")
