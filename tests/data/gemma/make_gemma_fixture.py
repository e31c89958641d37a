#!/usr/bin/env python3
"""Writes the tiny Gemma fixture of tests/test_gemma_trace.cpp into this folder:
  config.json                         transformers' GemmaConfig keys ("torch_dtype": "bfloat16")
  model.safetensors.index.json        a sharded bfloat16 checkpoint as save_pretrained writes it:
  model-0000{1,2}-of-00002.safetensors  the index's weight_map, metadata.total_size, two shards
  input_ids.safetensors               {"input_ids": int64 [batch, seq]}
  trace_repr/                         GemmaModel_debug_tree_{SUMMARY,FULL_TENSORS}.json (use_repr=True)
  trace_st/                           the same with use_repr=False (one safetensors file per tensor)
  trace_use_cache/                    model(input_ids=ids), use_cache from the config (True): the era's
                                      DynamicCache, recorded as <transformers.cache_utils.DynamicCache
                                      object at 0xXXXXXXXX> (use_repr=True)
  capture.safetensors                 hidden_states.<i> and attentions.<i> of a call that asks for them

    python3 tests/data/gemma/make_gemma_fixture.py [--shared ../shared/reference]

torch 1.13 has no transformers, so the model below restates transformers' GemmaModel with eager
attention (src/transformers/models/gemma/modeling_gemma.py at commit c4cdd1a0, the v4.49 era) in
plain torch, with its module names and call conventions, which decide how the debugger names each
input: the model called as model(input_ids=ids, use_cache=False); each decoder layer as
layer(hidden_states, attention_mask=, position_ids=, past_key_value=, output_attentions=,
use_cache=, cache_position=, position_embeddings=), returning a tuple; each attention with the same
keywords (hidden_states= too), returning (attn_output, attn_weights); rotary_emb(hidden_states,
position_ids) positional. The eager causal mask of that era is [batch, 1, seq, seq + 1] when no
attention_mask is given (target_length = past + seq + 1). The checkpoint is bfloat16 and the model
runs in float32 on its values widened, as from_pretrained(torch_dtype=torch.float32) would. The
debugger is the seed's (hf_debugger_seed.py in the shared reference folder).
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

# head_dim is not hidden_size / num_attention_heads (8), as in the released Gemma configs, so a
# port that derives it shows; num_key_value_heads < num_attention_heads exercises repeat_kv.
CONFIG = {"model_type": "gemma", "architectures": ["GemmaForCausalLM"], "torch_dtype": "bfloat16",
          "vocab_size": 32, "hidden_size": 16, "intermediate_size": 24, "num_hidden_layers": 2,
          "num_attention_heads": 2, "num_key_value_heads": 1, "head_dim": 12, "hidden_act": "gelu_pytorch_tanh",
          "hidden_activation": None, "max_position_embeddings": 16, "initializer_range": 0.02,
          "rms_norm_eps": 1e-6, "use_cache": True, "pad_token_id": 0, "eos_token_id": 1, "bos_token_id": 2,
          "tie_word_embeddings": True, "rope_theta": 10000.0, "rope_scaling": None, "attention_bias": False,
          "attention_dropout": 0.0}


class BaseModelOutputWithPast(OrderedDict):
    """transformers' ModelOutput as the debugger sees it: an ordered dict of the fields that are not None."""

    def __init__(self, **fields):
        super().__init__((name, value) for name, value in fields.items() if value is not None)


class DynamicCache:
    """The v4.49-era cache_utils.DynamicCache, as far as GemmaModel uses it. It has no __repr__ of its
    own, so the debugger records object.__repr__ with the address masked:
    <transformers.cache_utils.DynamicCache object at 0xXXXXXXXX>."""

    __module__ = "transformers.cache_utils"

    def __init__(self):
        self.key_cache, self.value_cache = [], []

    def update(self, key_states, value_states, layer_idx):
        if len(self.key_cache) <= layer_idx:
            self.key_cache.append(key_states)
            self.value_cache.append(value_states)
        else:
            self.key_cache[layer_idx] = torch.cat([self.key_cache[layer_idx], key_states], dim=-2)
            self.value_cache[layer_idx] = torch.cat([self.value_cache[layer_idx], value_states], dim=-2)
        return self.key_cache[layer_idx], self.value_cache[layer_idx]

    def get_seq_length(self, layer_idx=0):
        return self.key_cache[layer_idx].shape[-2] if len(self.key_cache) > layer_idx else 0


class PytorchGELUTanh(nn.Module):  # ACT2FN["gelu_pytorch_tanh"] at that commit
    def forward(self, input):
        return nn.functional.gelu(input, approximate="tanh")


class GemmaRMSNorm(nn.Module):
    def __init__(self, dim, eps):
        super().__init__()
        self.eps = eps
        self.weight = nn.Parameter(torch.zeros(dim))

    def forward(self, x):
        widened = x.float()
        output = widened * torch.rsqrt(widened.pow(2).mean(-1, keepdim=True) + self.eps)
        return (output * (1.0 + self.weight.float())).type_as(x)


class GemmaMLP(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.gate_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.up_proj = nn.Linear(c["hidden_size"], c["intermediate_size"], bias=False)
        self.down_proj = nn.Linear(c["intermediate_size"], c["hidden_size"], bias=False)
        self.act_fn = PytorchGELUTanh()

    def forward(self, x):
        gated = self.act_fn(self.gate_proj(x))
        return self.down_proj(gated * self.up_proj(x))


class GemmaRotaryEmbedding(nn.Module):
    """The default rope type: inv_freq over head_dim, attention_scaling 1.0."""

    def __init__(self, c):
        super().__init__()
        dim = c["head_dim"]
        inv_freq = 1.0 / (c["rope_theta"] ** (torch.arange(0, dim, 2, dtype=torch.int64).float() / dim))
        self.register_buffer("inv_freq", inv_freq, persistent=False)
        self.attention_scaling = 1.0

    @torch.no_grad()
    def forward(self, x, position_ids):
        inv = self.inv_freq[None, :, None].float().expand(position_ids.shape[0], -1, 1)
        positions = position_ids[:, None, :].float()
        freqs = (inv.float() @ positions.float()).transpose(1, 2)
        emb = torch.cat((freqs, freqs), dim=-1)
        cos = emb.cos() * self.attention_scaling
        sin = emb.sin() * self.attention_scaling
        return cos.to(dtype=x.dtype), sin.to(dtype=x.dtype)


def rotate_half(x):
    half = x.shape[-1] // 2
    return torch.cat((-x[..., half:], x[..., :half]), dim=-1)


def repeat_kv(states, n_rep):
    batch, kv_heads, length, head_dim = states.shape
    if n_rep == 1:
        return states
    states = states[:, :, None, :, :].expand(batch, kv_heads, n_rep, length, head_dim)
    return states.reshape(batch, kv_heads * n_rep, length, head_dim)


class GemmaAttention(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.layer_idx = layer_idx
        self.head_dim = c["head_dim"]
        self.num_key_value_groups = c["num_attention_heads"] // c["num_key_value_heads"]
        self.scaling = self.head_dim ** -0.5
        bias = c["attention_bias"]
        self.q_proj = nn.Linear(c["hidden_size"], c["num_attention_heads"] * self.head_dim, bias=bias)
        self.k_proj = nn.Linear(c["hidden_size"], c["num_key_value_heads"] * self.head_dim, bias=bias)
        self.v_proj = nn.Linear(c["hidden_size"], c["num_key_value_heads"] * self.head_dim, bias=bias)
        self.o_proj = nn.Linear(c["num_attention_heads"] * self.head_dim, c["hidden_size"], bias=bias)

    def forward(self, hidden_states, position_embeddings, attention_mask, past_key_value=None, cache_position=None,
                **kwargs):
        input_shape = hidden_states.shape[:-1]
        hidden_shape = (*input_shape, -1, self.head_dim)
        query = self.q_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        key = self.k_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        value = self.v_proj(hidden_states).view(hidden_shape).transpose(1, 2)
        cos, sin = position_embeddings
        cos, sin = cos.unsqueeze(1), sin.unsqueeze(1)
        query, key = (query * cos) + (rotate_half(query) * sin), (key * cos) + (rotate_half(key) * sin)
        if past_key_value is not None:
            key, value = past_key_value.update(key, value, self.layer_idx)
        key = repeat_kv(key, self.num_key_value_groups)
        value = repeat_kv(value, self.num_key_value_groups)
        weights = torch.matmul(query, key.transpose(2, 3)) * self.scaling
        if attention_mask is not None:
            weights = weights + attention_mask[:, :, :, : key.shape[-2]]
        weights = nn.functional.softmax(weights, dim=-1, dtype=torch.float32).to(query.dtype)
        weights = nn.functional.dropout(weights, p=0.0, training=self.training)
        output = torch.matmul(weights, value).transpose(1, 2).contiguous()
        output = self.o_proj(output.reshape(*input_shape, -1).contiguous())
        return output, weights


class GemmaDecoderLayer(nn.Module):
    def __init__(self, c, layer_idx):
        super().__init__()
        self.self_attn = GemmaAttention(c, layer_idx)
        self.mlp = GemmaMLP(c)
        self.input_layernorm = GemmaRMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.post_attention_layernorm = GemmaRMSNorm(c["hidden_size"], c["rms_norm_eps"])

    def forward(self, hidden_states, attention_mask=None, position_ids=None, past_key_value=None,
                output_attentions=False, use_cache=False, cache_position=None, position_embeddings=None, **kwargs):
        residual = hidden_states
        hidden_states = self.input_layernorm(hidden_states)
        hidden_states, weights = self.self_attn(hidden_states=hidden_states, attention_mask=attention_mask,
                                                position_ids=position_ids, past_key_value=past_key_value,
                                                output_attentions=output_attentions, use_cache=use_cache,
                                                cache_position=cache_position, position_embeddings=position_embeddings)
        hidden_states = residual + hidden_states
        residual = hidden_states
        hidden_states = residual + self.mlp(self.post_attention_layernorm(hidden_states))
        return (hidden_states, weights) if output_attentions else (hidden_states,)


def causal_mask_of_that_era(batch, sequence_length, target_length, cache_position, dtype):
    """_prepare_4d_causal_attention_mask_with_cache_position with no attention_mask."""
    minimum = torch.finfo(dtype).min
    mask = torch.full((sequence_length, target_length), fill_value=minimum, dtype=dtype)
    if sequence_length != 1:
        mask = torch.triu(mask, diagonal=1)
    mask *= torch.arange(target_length) > cache_position.reshape(-1, 1)
    return mask[None, None, :, :].expand(batch, 1, -1, -1)


class GemmaModel(nn.Module):
    def __init__(self, c):
        super().__init__()
        self.config = c
        self.embed_tokens = nn.Embedding(c["vocab_size"], c["hidden_size"], c["pad_token_id"])
        self.layers = nn.ModuleList([GemmaDecoderLayer(c, i) for i in range(c["num_hidden_layers"])])
        self.norm = GemmaRMSNorm(c["hidden_size"], c["rms_norm_eps"])
        self.rotary_emb = GemmaRotaryEmbedding(c)

    def forward(self, input_ids=None, attention_mask=None, position_ids=None, past_key_values=None, inputs_embeds=None,
                use_cache=None, output_attentions=None, output_hidden_states=None, cache_position=None):
        assert attention_mask is None, "what this fixture restates"
        output_attentions = bool(output_attentions)  # the config's output_attentions is False
        output_hidden_states = bool(output_hidden_states)
        use_cache = self.config["use_cache"] if use_cache is None else use_cache
        if inputs_embeds is None:
            inputs_embeds = self.embed_tokens(input_ids)
        if use_cache and past_key_values is None:
            past_key_values = DynamicCache()
        past_seen = past_key_values.get_seq_length() if past_key_values is not None else 0
        if cache_position is None:
            cache_position = torch.arange(past_seen, past_seen + inputs_embeds.shape[1])
        if position_ids is None:
            position_ids = cache_position.unsqueeze(0)
        batch, sequence_length = inputs_embeds.shape[:2]
        causal_mask = causal_mask_of_that_era(batch, sequence_length, past_seen + sequence_length + 1, cache_position,
                                              inputs_embeds.dtype)
        hidden_states = inputs_embeds
        position_embeddings = self.rotary_emb(hidden_states, position_ids)
        normalizer = torch.tensor(self.config["hidden_size"] ** 0.5, dtype=hidden_states.dtype)
        hidden_states = hidden_states * normalizer
        all_hidden_states = () if output_hidden_states else None
        all_attentions = () if output_attentions else None
        for layer in self.layers:
            if output_hidden_states:
                all_hidden_states += (hidden_states,)
            outputs = layer(hidden_states, attention_mask=causal_mask, position_ids=position_ids,
                            past_key_value=past_key_values, output_attentions=output_attentions, use_cache=use_cache,
                            cache_position=cache_position, position_embeddings=position_embeddings)
            hidden_states = outputs[0]
            if output_attentions:
                all_attentions += (outputs[1],)
        hidden_states = self.norm(hidden_states)
        if output_hidden_states:
            all_hidden_states += (hidden_states,)
        return BaseModelOutputWithPast(last_hidden_state=hidden_states, past_key_values=past_key_values if use_cache else None,
                                       hidden_states=all_hidden_states, attentions=all_attentions)


def save_sharded_bf16(state_dict, save_file):
    """save_pretrained's layout: two shards split between the layers, and the index naming them."""
    names = list(state_dict)
    split = next(i for i, name in enumerate(names) if name.startswith("layers.1."))
    shards = {"model-00001-of-00002.safetensors": names[:split], "model-00002-of-00002.safetensors": names[split:]}
    weight_map, total_size = {}, 0
    for shard, members in shards.items():
        tensors = {name: state_dict[name].to(torch.bfloat16) for name in members}
        save_file(tensors, str(HERE / shard), metadata={"format": "pt"})
        for name, tensor in tensors.items():
            weight_map[name] = shard
            total_size += tensor.numel() * tensor.element_size()
    index = {"metadata": {"total_size": total_size}, "weight_map": dict(sorted(weight_map.items()))}
    (HERE / "model.safetensors.index.json").write_text(json.dumps(index, indent=2, sort_keys=True) + "\n")


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--shared", default=str(DEFAULT_SHARED), help="the folder of hf_debugger_seed.py")
    parser.add_argument("--seed", type=int, default=3)
    args = parser.parse_args()
    sys.path.insert(0, args.shared)
    from hf_debugger_seed import model_addition_debugger_context
    from safetensors_min import save_file

    torch.manual_seed(args.seed)
    model = GemmaModel(CONFIG).eval()
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            # Norm weights around 0 (Gemma scales by 1 + weight), the rest at a scale that keeps
            # activations away from 0; every value a bfloat16, as the checkpoint holds it.
            scale = 0.1 if "norm" in name else 0.3
            parameter.copy_((scale * torch.randn_like(parameter)).to(torch.bfloat16).float())
    ids = torch.randint(0, CONFIG["vocab_size"], (2, 5))
    (HERE / "config.json").write_text(json.dumps(CONFIG, indent=2) + "\n")
    save_sharded_bf16(model.state_dict(), save_file)
    save_file({"input_ids": ids}, str(HERE / "input_ids.safetensors"))
    for sub, use_repr in (("trace_repr", True), ("trace_st", False)):
        target = HERE / sub
        shutil.rmtree(target, ignore_errors=True)
        with model_addition_debugger_context(model, debug_path=str(target), do_prune_layers=False, use_repr=use_repr):
            output = model(input_ids=ids, use_cache=False)
    # The default call, use_cache=True as the config says: the cache goes to every layer and is
    # returned, recorded by its masked address (printed values only: it holds no tensor to save).
    target = HERE / "trace_use_cache"
    shutil.rmtree(target, ignore_errors=True)
    with model_addition_debugger_context(model, debug_path=str(target), do_prune_layers=False, use_repr=True):
        model(input_ids=ids)
    with torch.no_grad():
        asked = model(input_ids=ids, use_cache=False, output_hidden_states=True, output_attentions=True)
        captured = {f"{field}.{i}": value.contiguous()
                    for field in ("hidden_states", "attentions") for i, value in enumerate(asked[field])}
        save_file(captured, str(HERE / "capture.safetensors"))
    print("state dict:", list(model.state_dict()))
    print(type(output).__name__, list(output), tuple(output["last_hidden_state"].shape),
          float(output["last_hidden_state"].abs().mean()))


if __name__ == "__main__":
    main()
