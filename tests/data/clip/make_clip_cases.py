"""Writes clip_weights.safetensors (a CLIPVisionModel's state dict) and clip_cases.safetensors (inputs
and the Python reference's outputs of each CLIP part), read by tests/test_models_clip.cpp.

  /usr/bin/python3 tests/data/clip/make_clip_cases.py [REFERENCE_DIR]

REFERENCE_DIR (default /work/shared/reference) holds llava_ref.py, whose CLIP classes restate
transformers' 5.x modeling_clip.py (the flattened CLIPVisionModel). The tiny config: 8x8 images in
4x4 patches, hidden 16 over 4 heads, 3 layers, quick_gelu. Deterministic (torch 1.13, CPU)."""
import os
import sys

import torch
from torch import nn

here = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference")
from llava_ref import CLIPVisionConfig, CLIPVisionModel  # noqa: E402
from safetensors_min import save_file  # noqa: E402

torch.set_num_threads(1)
torch.manual_seed(39)
config = CLIPVisionConfig(hidden_size=16, intermediate_size=24, projection_dim=16, num_hidden_layers=3,
                          num_attention_heads=4, num_channels=3, image_size=8, patch_size=4, hidden_act="quick_gelu")
model = CLIPVisionModel(config).eval()
with torch.no_grad():  # weights as the Llava fixture draws them: norms near 1, the rest N(0, 0.1)
    for _, mod in model.named_modules():
        for pname, prm in mod.named_parameters(recurse=False):
            if isinstance(mod, nn.LayerNorm) and pname == "weight":
                prm.copy_(1.0 + 0.1 * torch.randn_like(prm))
            else:
                prm.copy_(0.1 * torch.randn_like(prm))
save_file(dict(model.state_dict()), os.path.join(here, "clip_weights.safetensors"))

cases = {}
pixel_values = torch.randn(2, 3, 8, 8)
hidden = torch.randn(2, 5, 16)
cases["pixel_values"] = pixel_values
cases["hidden"] = hidden
with torch.no_grad():
    cases["embeddings.output"] = model.embeddings(pixel_values)
    layer = model.encoder.layers[1]
    cases["attention.output"], cases["attention.weights"] = layer.self_attn(hidden_states=hidden, attention_mask=None)
    mask = torch.zeros(2, 1, 5, 5)
    mask[1, :, :, 0] = torch.finfo(torch.float32).min  # the second sample's first key masked
    cases["attention.mask"] = mask
    cases["attention_masked.output"], cases["attention_masked.weights"] = layer.self_attn(hidden_states=hidden,
                                                                                         attention_mask=mask)
    cases["mlp.output"] = layer.mlp(hidden)
    cases["layer.output"] = layer(hidden, None)
    out = model(pixel_values, output_hidden_states=True, output_attentions=True)
    cases["model.last_hidden_state"] = out.last_hidden_state
    cases["model.pooler_output"] = out.pooler_output
    for i, t in enumerate(out.hidden_states):
        cases[f"model.hidden_states_{i}"] = t
    for i, t in enumerate(out.attentions):
        cases[f"model.attentions_{i}"] = t
save_file({k: v.contiguous() for k, v in cases.items()}, os.path.join(here, "clip_cases.safetensors"))
print(sorted(cases), len(out.hidden_states), len(out.attentions))
