#!/usr/bin/env python3
"""Writes the tiny GPT-2 fixture of tests/test_gpt2_trace.cpp into this folder:
  config.json            transformers' GPT2Config keys
  model.safetensors      random weights under GPT2Model's state-dict names (a few KB)
  input_ids.safetensors  {"input_ids": int64 [batch, seq]}
  trace_repr/            GPT2Model_debug_tree_{SUMMARY,FULL_TENSORS}.json (use_repr=True)
  trace_st/              the same with use_repr=False (one safetensors file per tensor)
  capture.safetensors    hidden_states and attentions of calls that ask for them (tests/test_gpt2_capture.cpp)

    python3 tests/data/gpt2/make_gpt2_fixture.py [--shared ../shared/reference]

torch 1.13 has no transformers, so the model below restates transformers' GPT2Model with eager
attention (modeling_gpt2.py at commit c44b2d99, tuple caches) in plain torch, with its module names
and call conventions, which decide how the debugger names each input: model(input_ids=ids); each
block called with layer_past=, attention_mask=, head_mask=, encoder_hidden_states=,
encoder_attention_mask=, use_cache=, output_attentions= as keywords; each attention with
layer_past=, attention_mask=, head_mask=, use_cache=, output_attentions=. The debugger is the
seed's (hf_debugger_seed.py in the shared reference folder).
"""
import argparse
import json
import math
import pathlib
import shutil
import sys
from collections import OrderedDict

import torch
from torch import nn

HERE = pathlib.Path(__file__).resolve().parent
DEFAULT_SHARED = HERE.parents[3] / "shared" / "reference"  # <worktree>/../shared/reference

CONFIG = {"model_type": "gpt2", "architectures": ["GPT2LMHeadModel"], "vocab_size": 32, "n_positions": 16,
          "n_embd": 8, "n_layer": 2, "n_head": 2, "n_inner": None, "activation_function": "gelu_new",
          "resid_pdrop": 0.1, "embd_pdrop": 0.1, "attn_pdrop": 0.1, "layer_norm_epsilon": 1e-5,
          "scale_attn_weights": True, "scale_attn_by_inverse_layer_idx": False, "use_cache": True}


class BaseModelOutputWithPastAndCrossAttentions(OrderedDict):
    """transformers' ModelOutput as the debugger sees it: an ordered dict of the fields that are not None."""

    def __init__(self, **fields):
        super().__init__((name, value) for name, value in fields.items() if value is not None)


class NewGELUActivation(nn.Module):  # ACT2FN["gelu_new"]
    def forward(self, x):
        return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


class Conv1D(nn.Module):  # pytorch_utils.Conv1D: weight [in, out]
    def __init__(self, nf, nx):
        super().__init__()
        self.nf = nf
        self.weight = nn.Parameter(torch.empty(nx, nf))
        self.bias = nn.Parameter(torch.zeros(nf))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, x):
        out_shape = x.size()[:-1] + (self.nf,)
        return torch.addmm(self.bias, x.view(-1, x.size(-1)), self.weight).view(out_shape)


class GPT2Attention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        n = c["n_positions"]
        causal = torch.tril(torch.ones((n, n), dtype=torch.bool)).view(1, 1, n, n)
        self.register_buffer("bias", causal, persistent=False)
        self.register_buffer("masked_bias", torch.tensor(-1e4), persistent=False)
        self.embed_dim, self.num_heads = c["n_embd"], c["n_head"]
        self.head_dim = self.embed_dim // self.num_heads
        self.split_size = self.embed_dim
        self.scale_attn_weights = c["scale_attn_weights"]
        self.scale_attn_by_inverse_layer_idx = c["scale_attn_by_inverse_layer_idx"]
        self.layer_idx = layer_idx
        self.c_attn = Conv1D(3 * self.embed_dim, self.embed_dim)
        self.c_proj = Conv1D(self.embed_dim, self.embed_dim)
        self.attn_dropout = nn.Dropout(c["attn_pdrop"])
        self.resid_dropout = nn.Dropout(c["resid_pdrop"])

    def heads_apart(self, t):
        return t.view(t.size()[:-1] + (self.num_heads, self.head_dim)).permute(0, 2, 1, 3)

    def heads_together(self, t):
        t = t.permute(0, 2, 1, 3).contiguous()
        return t.view(t.size()[:-2] + (self.num_heads * self.head_dim,))

    def eager(self, q, k, v, attention_mask, head_mask):
        w = torch.matmul(q, k.transpose(-1, -2))
        if self.scale_attn_weights:
            w = w / torch.full([], v.size(-1) ** 0.5, dtype=w.dtype, device=w.device)
        if self.scale_attn_by_inverse_layer_idx:
            w = w / float(self.layer_idx + 1)
        q_len, k_len = q.size(-2), k.size(-2)
        allowed = self.bias[:, :, k_len - q_len: k_len, :k_len]
        lowest = torch.full([], torch.finfo(w.dtype).min, dtype=w.dtype, device=w.device)
        w = torch.where(allowed, w.to(w.dtype), lowest)
        if attention_mask is not None:
            w = w + attention_mask
        w = nn.functional.softmax(w, dim=-1).type(v.dtype)
        w = self.attn_dropout(w)
        if head_mask is not None:
            w = w * head_mask
        return torch.matmul(w, v), w

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None,
                encoder_hidden_states=None, encoder_attention_mask=None, use_cache=False, output_attentions=False):
        assert encoder_hidden_states is None, "cross-attention is not part of this reference"
        q, k, v = self.c_attn(hidden_states).split(self.split_size, dim=2)
        q, k, v = self.heads_apart(q), self.heads_apart(k), self.heads_apart(v)
        if layer_past is not None:
            k = torch.cat((layer_past[0], k), dim=-2)
            v = torch.cat((layer_past[1], v), dim=-2)
        present = (k, v) if use_cache is True else None
        out, w = self.eager(q, k, v, attention_mask, head_mask)
        out = self.resid_dropout(self.c_proj(self.heads_together(out)))
        return (out, present, w) if output_attentions else (out, present)


class GPT2MLP(nn.Module):
    def __init__(self, inner, c):
        super().__init__()
        self.c_fc = Conv1D(inner, c["n_embd"])
        self.c_proj = Conv1D(c["n_embd"], inner)
        assert c["activation_function"] == "gelu_new"
        self.act = NewGELUActivation()
        self.dropout = nn.Dropout(c["resid_pdrop"])

    def forward(self, hidden_states):
        return self.dropout(self.c_proj(self.act(self.c_fc(hidden_states))))


class GPT2Block(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        inner = c["n_inner"] if c["n_inner"] is not None else 4 * c["n_embd"]
        self.ln_1 = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        self.attn = GPT2Attention(c, layer_idx)
        self.ln_2 = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])
        self.mlp = GPT2MLP(inner, c)

    def forward(self, hidden_states, layer_past=None, attention_mask=None, head_mask=None,
                encoder_hidden_states=None, encoder_attention_mask=None, use_cache=False, output_attentions=False):
        residual = hidden_states
        attn_outputs = self.attn(self.ln_1(hidden_states), layer_past=layer_past, attention_mask=attention_mask,
                                 head_mask=head_mask, use_cache=use_cache, output_attentions=output_attentions)
        hidden_states = attn_outputs[0] + residual
        residual = hidden_states
        hidden_states = residual + self.mlp(self.ln_2(hidden_states))
        return (hidden_states,) + attn_outputs[1:] if use_cache else (hidden_states,) + attn_outputs[2:]


class GPT2Model(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.wte = nn.Embedding(c["vocab_size"], c["n_embd"])
        self.wpe = nn.Embedding(c["n_positions"], c["n_embd"])
        self.drop = nn.Dropout(c["embd_pdrop"])
        self.h = nn.ModuleList([GPT2Block(c, i) for i in range(c["n_layer"])])
        self.ln_f = nn.LayerNorm(c["n_embd"], eps=c["layer_norm_epsilon"])

    def forward(self, input_ids=None, past_key_values=None, attention_mask=None, position_ids=None, use_cache=None,
                output_attentions=None, output_hidden_states=None):
        use_cache = self.config["use_cache"] if use_cache is None else use_cache
        output_attentions = bool(output_attentions)  # the config's output_attentions is False
        output_hidden_states = bool(output_hidden_states)
        batch, seq = input_ids.shape
        past = tuple([None] * len(self.h)) if past_key_values is None else past_key_values
        past_length = 0 if past_key_values is None else past_key_values[0][0].size(-2)
        if position_ids is None:
            position_ids = torch.arange(past_length, seq + past_length, dtype=torch.long).unsqueeze(0)
        hidden_states = self.wte(input_ids) + self.wpe(position_ids)
        if attention_mask is not None:
            attention_mask = attention_mask.view(batch, -1)[:, None, None, :].to(dtype=hidden_states.dtype)
            attention_mask = (1.0 - attention_mask) * torch.finfo(hidden_states.dtype).min
        head_mask = [None] * len(self.h)  # get_head_mask(None, n_layer)
        hidden_states = self.drop(hidden_states)
        presents = () if use_cache else None
        # Collected by hand, as GPT2Model.forward at c44b2d99 does: each block's input, then ln_f's
        # output; each block's weights, which sit at 2 in its output with a cache and at 1 without.
        all_hidden_states = () if output_hidden_states else None
        all_self_attentions = () if output_attentions else None
        for i, (block, layer_past) in enumerate(zip(self.h, past)):
            if output_hidden_states:
                all_hidden_states = all_hidden_states + (hidden_states,)
            outputs = block(hidden_states, layer_past=layer_past, attention_mask=attention_mask,
                            head_mask=head_mask[i], encoder_hidden_states=None, encoder_attention_mask=None,
                            use_cache=use_cache, output_attentions=output_attentions)
            hidden_states = outputs[0]
            if use_cache:
                presents = presents + (outputs[1],)
            if output_attentions:
                all_self_attentions = all_self_attentions + (outputs[2 if use_cache else 1],)
        hidden_states = self.ln_f(hidden_states)
        if output_hidden_states:
            all_hidden_states = all_hidden_states + (hidden_states,)
        return BaseModelOutputWithPastAndCrossAttentions(last_hidden_state=hidden_states,
                                                         past_key_values=presents, hidden_states=all_hidden_states,
                                                         attentions=all_self_attentions, cross_attentions=None)


def captured_outputs(model, ids):
    """The hidden_states and attentions GPT2Model returns when asked for them, by name
    (tests/test_gpt2_capture.cpp): "<case>.hidden_states.<i>" and "<case>.attentions.<i>" for
    cache (use_cache=True), no_cache (use_cache=False) and step (the last two tokens after a
    use_cache=True call on the first three, past_key_values passed)."""
    asked = dict(output_attentions=True, output_hidden_states=True)
    runs = {"cache": model(input_ids=ids, use_cache=True, **asked),
            "no_cache": model(input_ids=ids, use_cache=False, **asked)}
    first = model(input_ids=ids[:, :3], use_cache=True)
    runs["step"] = model(input_ids=ids[:, 3:], past_key_values=first["past_key_values"], use_cache=True, **asked)
    tensors = {}
    for case, output in runs.items():
        for field in ("hidden_states", "attentions"):
            for i, value in enumerate(output[field]):
                tensors[f"{case}.{field}.{i}"] = value.contiguous()
    return tensors


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(DEFAULT_SHARED), help="the folder of hf_debugger_seed.py")
    parser.add_argument("--seed", type=int, default=2)
    args = parser.parse_args()
    sys.path.insert(0, args.shared)
    from hf_debugger_seed import model_addition_debugger_context
    from safetensors_min import save_file

    torch.manual_seed(args.seed)
    model = GPT2Model(CONFIG).eval()
    with torch.no_grad():  # non-trivial norms and biases, so a wrong weight mapping shows
        for name, parameter in model.named_parameters():
            if name.endswith("bias") or "ln_" in name:
                parameter.copy_((1.0 if name.endswith("weight") else 0.0) + 0.1 * torch.randn_like(parameter))
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 5))
    (HERE / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    save_file(dict(model.state_dict()), str(HERE / "model.safetensors"), metadata={"format": "pt"})
    save_file({"input_ids": ids}, str(HERE / "input_ids.safetensors"))
    for sub, use_repr in (("trace_repr", True), ("trace_st", False)):
        target = HERE / sub
        shutil.rmtree(target, ignore_errors=True)
        with model_addition_debugger_context(model, debug_path=str(target), do_prune_layers=False, use_repr=use_repr):
            output = model(input_ids=ids)
    with torch.no_grad():
        save_file(captured_outputs(model, ids), str(HERE / "capture.safetensors"))
    print("state dict:", list(model.state_dict()))
    print(type(output).__name__, list(output), tuple(output["last_hidden_state"].shape),
          float(output["last_hidden_state"].abs().mean()), "past_key_values", len(output["past_key_values"]))


if __name__ == "__main__":
    main()
