"""Writes models_cases.safetensors: inputs and the Python references' outputs for the shared
decoder parts (<tracetorch/models.hpp>), read by tests/test_models_parts.cpp.

  /usr/bin/python3 tests/data/models/make_models_cases.py [REFERENCE_DIR]

REFERENCE_DIR (default /work/shared/reference) holds the plain-torch references: the causal mask,
the rotary embedding, eager attention and RMSNorm come from qwen3_ref.py and llama_upstream.py, the
(1 + weight) RMSNorm from tests/data/gemma/make_gemma_fixture.py. The references have no sliding
window and no Llama 3 rope: those two are computed here from upstream's definitions
(masking_utils.sliding_window_overlay: a key is kept when kv_idx > q_idx - sliding_window;
modeling_rope_utils._compute_llama3_parameters), each written as the upstream expression."""
import math
import os
import sys

import torch

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference")
sys.path.insert(0, os.path.join(here, "..", "gemma"))
import llama_upstream  # noqa: E402
import qwen3_ref  # noqa: E402
from make_gemma_fixture import GemmaRMSNorm  # noqa: E402
from safetensors_min import save_file  # noqa: E402

torch.manual_seed(39)
cases = {}

# Masks: a left-padded batch, the same with a window of 2, and a second step over a cache of 5.
padding = torch.tensor([[1, 1, 1, 1, 1], [0, 0, 1, 1, 1], [0, 1, 1, 1, 1]])
embeds = torch.zeros(3, 5, 8)
cases["mask_padding.attention_mask"] = padding
cases["mask_padding.expected"] = qwen3_ref.create_causal_mask(None, embeds, padding, torch.arange(5), None)
cases["mask_causal.expected"] = qwen3_ref.create_causal_mask(None, embeds, None, torch.arange(5), None)
window = 2
allowed = cases["mask_padding.expected"] == 0
kv, q = torch.arange(5)[None, :], torch.arange(5)[:, None]
allowed = allowed & (kv > q - window)[None, None]  # sliding_window_overlay
cases["mask_sliding.expected"] = torch.where(allowed, torch.tensor(0.0), torch.finfo(torch.float32).min)
cache = qwen3_ref.DynamicCache(qwen3_ref.Qwen3Config(num_hidden_layers=1))
cache.update(torch.zeros(3, 2, 5, 4), torch.zeros(3, 2, 5, 4), 0)  # 5 tokens seen
step_mask = torch.cat([padding, torch.ones(3, 2, dtype=torch.int64)], -1)  # two new tokens, not padding
cases["mask_cached.attention_mask"] = step_mask
cases["mask_cached.expected"] = qwen3_ref.create_causal_mask(None, torch.zeros(3, 2, 8), step_mask, torch.arange(5, 7), cache)
cases["mask_bf16.expected"] = qwen3_ref.create_causal_mask(None, embeds.to(torch.bfloat16), padding, torch.arange(5), None)

# The rotary embedding: default (theta 10000, head_dim 16) at positions [2, 6], then Llama 3's.
config = llama_upstream.LlamaConfig(hidden_size=64, num_attention_heads=4, rope_theta=10000.0)
rotary = llama_upstream.LlamaRotaryEmbedding(config)
positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])
x = torch.randn(2, 6, 64)
cases["rotary.position_ids"] = positions
cases["rotary_default.inv_freq"] = rotary.inv_freq
cases["rotary_default.cos"], cases["rotary_default.sin"] = rotary(x, positions)
cases["rotary_default_bf16.cos"], cases["rotary_default_bf16.sin"] = rotary(x.to(torch.bfloat16), positions)
factor, low, high, original = 8.0, 1.0, 8.0, 64.0  # a short original context, so all three bands occur
inv_freq = rotary.inv_freq
low_wavelen, high_wavelen = original / low, original / high
wavelen = 2 * math.pi / inv_freq
scaled = torch.where(wavelen > low_wavelen, inv_freq / factor, inv_freq)
smooth = (original / wavelen - low) / (high - low)
smoothed = (1 - smooth) * scaled / factor + smooth * scaled
medium = ~(wavelen < high_wavelen) * ~(wavelen > low_wavelen)
llama3_inv_freq = torch.where(medium, smoothed, scaled)
assert bool(medium.any()) and bool((wavelen > low_wavelen).any()) and bool((wavelen < high_wavelen).any())
rotary.inv_freq = llama3_inv_freq
cases["rotary_llama3.inv_freq"] = llama3_inv_freq
cases["rotary_llama3.cos"], cases["rotary_llama3.sin"] = rotary(x, positions)

# Eager attention with GQA (4 query heads over 2 key/value heads) under the padding mask.
query, key, value = torch.randn(3, 4, 5, 8), torch.randn(3, 2, 5, 8), torch.randn(3, 2, 5, 8)
module = torch.nn.Module().eval()
module.num_key_value_groups = 2
cases["attention.query"], cases["attention.key"], cases["attention.value"] = query, key, value
cases["attention.output"], cases["attention.weights"] = llama_upstream.eager_attention_forward(
    module, query, key, value, cases["mask_padding.expected"], scaling=8 ** -0.5)
q_rot, k_rot = llama_upstream.apply_rotary_pos_emb(query[:2, :, :, :], key[:2], cases["rotary_default.cos"][:, :5, :8],
                                                   cases["rotary_default.sin"][:, :5, :8])
cases["apply_rotary.q"], cases["apply_rotary.k"] = q_rot, k_rot

# RMSNorm: weight * normed (Llama, Qwen3) and (1 + weight) (Gemma), float32 and bfloat16 inputs.
hidden = torch.randn(2, 3, 16) * 3
weight = 1.0 + 0.1 * torch.randn(16)
cases["rms.hidden"], cases["rms.weight"] = hidden, weight
llama_norm = qwen3_ref.Qwen3RMSNorm(16, eps=1e-5)
gemma_norm = GemmaRMSNorm(16, eps=1e-5)
with torch.no_grad():
    llama_norm.weight.copy_(weight)
    gemma_norm.weight.copy_(weight)
    cases["rms_weight.expected"] = llama_norm(hidden)
    cases["rms_weight_bf16.expected"] = llama_norm(hidden.to(torch.bfloat16))
    cases["rms_one_plus.expected"] = gemma_norm(hidden)
    cases["rms_one_plus_bf16.expected"] = gemma_norm(hidden.to(torch.bfloat16))

save_file({k: v.detach().contiguous() for k, v in cases.items()}, os.path.join(here, "models_cases.safetensors"))
print(len(cases), "tensors")
