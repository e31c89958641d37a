#!/usr/bin/python3
"""Writes call_order.json: transformers' debugger on a call whose output flags come in the
caller's order, and whose `**kwargs` are handed down to every layer and its self_attn.

Run with /usr/bin/python3 (torch 1.13.1), giving the directory of the reference debugger:

    /usr/bin/python3 tests/data/call_order/make_call_order.py /work/shared/reference

`Toy` has two `Layer`s, each with a `self_attn`; its forward takes the output flags and
`**kwargs`, which it hands on to each layer, which hands them on to self_attn, as upstream's
Qwen2-MoE passes `output_router_logits`. The input is arange(6).reshape(2, 3) in float32, so no
tensor data is stored. Per case: the SUMMARY file (use_repr=True) as text. The C++ test
(tests/test_kwargs_call_order.cpp) builds the same model and compares its trace, byte for byte.
"""

import json
import pathlib
import sys
import tempfile

import torch

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference")
from hf_debugger_seed import model_addition_debugger_context  # noqa: E402


class Attention(torch.nn.Module):
    def forward(self, hidden_states=None, attention_mask=None, **kwargs):
        return hidden_states * 2.0


class Layer(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.self_attn = Attention()

    def forward(self, hidden_states, attention_mask=None, **kwargs):
        return self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask, **kwargs) + 1.0


class Toy(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.layers = torch.nn.ModuleList([Layer(), Layer()])

    def forward(self, x, output_attentions=None, output_hidden_states=None, use_cache=None, **kwargs):
        h = x
        for layer in self.layers:
            h = layer(h, attention_mask=None, **kwargs)
        return h


CASES = {
    "attentions_first": dict(output_attentions=True, output_hidden_states=True, output_router_logits=True),
    "hidden_states_first": dict(output_hidden_states=True, use_cache=False, output_attentions=True),
}


def main():
    model = Toy().eval()
    x = torch.arange(6, dtype=torch.float32).reshape(2, 3)
    out = {}
    for name, kwargs in CASES.items():
        with tempfile.TemporaryDirectory() as tmp:
            with model_addition_debugger_context(model, debug_path=tmp, do_prune_layers=False, use_repr=True):
                model(x, **kwargs)
            out[name] = (pathlib.Path(tmp) / "Toy_debug_tree_SUMMARY.json").read_text()
    target = pathlib.Path(__file__).resolve().parent / "call_order.json"
    target.write_text(json.dumps(out, indent=1, sort_keys=True) + "\n")


if __name__ == "__main__":
    main()
