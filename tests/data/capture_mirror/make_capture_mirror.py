#!/usr/bin/env python3
"""Writes tests/data/capture_mirror/{capture_mirror.safetensors, capture_mirror.json}: the weights,
inputs and captured outputs of small models under transformers' output-capturing rules, computed
in Python, for tests/test_capture_mirror.cpp and tests/test_capture_mirror_rules.cpp to compare
with tracetorch's capture_outputs.

    python3 tests/data/capture_mirror/make_capture_mirror.py      # plain torch; no transformers

The models are the C++ test toys, rebuilt here module for module with the same parameter names:
MoeModel (tests/router_toys.hpp: Qwen2-MoE's top-k router, router_logits recorded through a
declared key), ToyModel, SelfCrossToy and VisionToy (tests/capture_toys.hpp), NestedToy,
PatchToy and LayerNameToy (tests/test_capture_mirror_rules.cpp). upstream_capture.py restates
upstream's rules (capture, hooks, patch registry); its docstring lists them.

JSON: {"cases": {name: {"items": [[field, count or null], ...]}}}, items in to_tuple() order, a
count for a tuple field, null for a tensor. Tensors: "<case>.<field>" or "<case>.<field>.<i>";
weights "<model>.<parameter name>"; inputs "<model>.input".
"""
import copy
import json
import pathlib
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

import upstream_capture
from upstream_capture import CapturingModel, Config, Recorder, capture, patch_output_recorders

HERE = pathlib.Path(__file__).resolve().parent


# ---- the models (tests/router_toys.hpp, tests/capture_toys.hpp) ---------------------------------

class TopKRouter(nn.Module):
    def __init__(self, hidden, experts, top_k, norm_topk_prob=True):
        super().__init__()
        self.top_k, self.norm_topk_prob, self.hidden = top_k, norm_topk_prob, hidden
        self.weight = nn.Parameter(torch.zeros(experts, hidden))

    def forward(self, hidden_states):
        logits = F.linear(hidden_states.reshape(-1, self.hidden), self.weight)
        probabilities = torch.softmax(logits, dim=-1, dtype=torch.float)
        top_values, top_indices = torch.topk(probabilities, self.top_k, dim=-1)
        if self.norm_topk_prob:
            top_values = top_values / top_values.sum(dim=-1, keepdim=True)
        return probabilities, top_values, top_indices


class SparseMoeBlock(nn.Module):
    def __init__(self, hidden, experts, top_k):
        super().__init__()
        self.gate = TopKRouter(hidden, experts, top_k)
        self.experts = nn.ModuleList(nn.Linear(hidden, hidden, bias=False) for _ in range(experts))

    def forward(self, hidden_states):
        flat = hidden_states.reshape(-1, hidden_states.shape[-1])
        _, top_values, top_indices = self.gate(flat)
        out = torch.zeros_like(flat)
        for e, expert in enumerate(self.experts):
            weight = (top_values * (top_indices == e)).sum(dim=-1, keepdim=True)
            out = out + expert(flat) * weight
        return out.reshape(hidden_states.shape)


class MoeAttention(nn.Module):
    def __init__(self, hidden):
        super().__init__()
        self.o_proj = nn.Linear(hidden, hidden, bias=False)

    def forward(self, hidden_states):
        weights = torch.softmax(torch.matmul(hidden_states, hidden_states.transpose(-1, -2)) / 2.0, dim=-1)
        return self.o_proj(torch.matmul(weights, hidden_states)), weights


class MoeDecoderLayer(nn.Module):
    def __init__(self, hidden, experts, top_k):
        super().__init__()
        self.self_attn = MoeAttention(hidden)
        self.mlp = SparseMoeBlock(hidden, experts, top_k)

    def forward(self, hidden_states):
        h = hidden_states + self.self_attn(hidden_states)[0]
        return h + self.mlp(h)


class MoeModel(CapturingModel):
    # Qwen2MoePreTrainedModel._can_record_outputs, in its order
    can_record = {"router_logits": Recorder(TopKRouter, index=0), "hidden_states": MoeDecoderLayer,
                  "attentions": MoeAttention}

    def __init__(self, hidden=4, experts=4, top_k=2, layers=2):
        super().__init__()
        self.config = Config(output_router_logits=False, output_attentions=False)
        self.layers = nn.ModuleList(MoeDecoderLayer(hidden, experts, top_k) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(hidden))

    def forward(self, inputs_embeds, **kwargs):
        def body():
            h = inputs_embeds
            for layer in self.layers:
                h = layer(h)
            return {"last_hidden_state": h * self.norm}
        return capture(self, body, kwargs)


class ToyLayer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.linear(x))


class ToyAttn(nn.Module):
    def forward(self, x):
        return x * 2, torch.softmax(x, dim=-1)


class ToyModel(CapturingModel):
    can_record = {"hidden_states": ToyLayer, "attentions": ToyAttn}

    def __init__(self, layers, width):
        super().__init__()
        self.config = Config()
        self.attn = nn.ModuleList(ToyAttn() for _ in range(layers))
        self.block = nn.ModuleList(ToyLayer(width) for _ in range(layers))

    def forward(self, x, tie=True, **kwargs):
        def body():
            h = x
            for attn, block in zip(self.attn, self.block):
                h = block(attn(h)[0])
            return {"last_hidden_state": h * 10}
        return capture(self, body, kwargs, tie_last_hidden_states=tie)


class SelfCrossToy(CapturingModel):
    can_record = {"attentions": [Recorder(ToyAttn, 1, ".self_attn"), Recorder(ToyAttn, 1, ".cross_attn")]}

    def __init__(self):
        super().__init__()
        self.config = Config()
        for i in range(2):
            self.add_module(f"self_attn{i}", ToyAttn())
            self.add_module(f"cross_attn{i}", ToyAttn())

    def forward(self, x, **kwargs):
        def body():
            h = x
            for i in range(2):
                a = getattr(self, f"self_attn{i}")(h)[0]
                h = getattr(self, f"cross_attn{i}")(a + 1)[0]
            return {"last_hidden_state": h}
        return capture(self, body, kwargs)


class VisionToy(CapturingModel):
    can_record = {"hidden_states": ToyLayer}

    def __init__(self):
        super().__init__()
        self.config = Config()
        self.first, self.second = ToyLayer(4), ToyLayer(4)

    def forward(self, x, **kwargs):
        def body():
            h = self.second(self.first(x))
            return {"last_hidden_state": h * 10, "vision_hidden_states": h * 3}
        return capture(self, body, kwargs, fields=("last_hidden_state", "vision_hidden_states"))


# ---- tests/test_capture_mirror_rules.cpp: nested models, patch mapping, layer_name ---------------

class NestedToy(CapturingModel):
    """A ToyModel inside: the outer record map stops there, the inner one records its own layers."""
    can_record = {"hidden_states": ToyLayer, "attentions": ToyAttn}

    def __init__(self):
        super().__init__()
        self.config = Config()
        self.inner, self.own, self.layer = ToyModel(2, 4), ToyAttn(), ToyLayer(4)

    def forward(self, x, **kwargs):
        def body():
            self.inner_output = self.inner(x, **kwargs)
            return {"last_hidden_state": self.layer(self.own(self.inner_output["last_hidden_state"])[0])}
        return capture(self, body, kwargs)


class FusedToyAttn(ToyAttn):
    pass


class SubFusedToyAttn(FusedToyAttn):
    pass


class FastToyLayer(ToyLayer):
    pass


class OtherAttn(nn.Module):
    def forward(self, x):
        return x * 2, torch.softmax(x, dim=-1)


class PatchToy(CapturingModel):
    """Originals and replacements side by side, to see which ones patching leaves recorded."""
    can_record = {"hidden_states": Recorder(ToyLayer, 0), "attentions": ToyAttn}

    def __init__(self):
        super().__init__()
        self.config = Config()
        self.attn, self.layer, self.fused = ToyAttn(), ToyLayer(4), FusedToyAttn()
        self.fast_layer, self.fused_sub = FastToyLayer(4), SubFusedToyAttn()

    def forward(self, x, **kwargs):
        def body():
            h = self.layer(self.attn(x)[0])
            h = self.fast_layer(self.fused(h)[0])
            return {"last_hidden_state": self.fused_sub(h)[0]}
        return capture(self, body, kwargs)


class LayerNameToy(CapturingModel):
    """layer_name "attn.1" is in .attn.1 and in .cross_attn.1; ".cross" in both .cross_attn.i."""
    can_record = {"attentions": Recorder(ToyAttn, 1, "attn.1"), "cross_attentions": Recorder(ToyAttn, 0, ".cross")}

    def __init__(self):
        super().__init__()
        self.config = Config()
        self.attn = nn.ModuleList(ToyAttn() for _ in range(2))
        self.cross_attn = nn.ModuleList(ToyAttn() for _ in range(2))

    def forward(self, x, **kwargs):
        def body():
            h = x
            for attn, cross in zip(self.attn, self.cross_attn):
                h = cross(attn(h)[0] + 1)[0]
            return {"last_hidden_state": h}
        return capture(self, body, kwargs)


def add_rule_cases(generator, tensors, cases):
    nested = NestedToy()
    fill(nested, "nested", generator, tensors)
    x = tensors["nested.input"] = torch.randn(2, 4, generator=generator)
    add_case("nested.outer", nested(x, output_hidden_states=True, output_attentions=True), tensors, cases)
    add_case("nested.inner", nested.inner_output, tensors, cases)

    x = tensors["layername.input"] = torch.randn(1, 4, generator=generator)
    add_case("layername.substring", LayerNameToy()(x, output_attentions=True), tensors, cases)

    record_maps = {model: copy.deepcopy(model.can_record) for model in (PatchToy, SelfCrossToy)}
    upstream_capture.patch_mapping.update({"(?i)^toylayer$": FastToyLayer, "(?i)^toy": OtherAttn,
                                           "ToyAttn": FusedToyAttn})
    registered = PatchToy()
    fill(registered, "patch", generator, tensors)
    x = tensors["patch.input"] = torch.randn(1, 4, generator=generator)
    add_case("patch.registered", registered(x, output_hidden_states=True, output_attentions=True), tensors, cases)
    # Upstream patches at construction (from_pretrained): a fresh instance, which installs its hooks
    # after the patch. The patch changes the class's record map, so every instance of it.
    patched = PatchToy()
    patched.load_state_dict(registered.state_dict())
    patch_output_recorders(patched)
    add_case("patch.patched", patched(x, output_hidden_states=True, output_attentions=True), tensors, cases)
    listed = SelfCrossToy()
    patch_output_recorders(listed)
    add_case("patch.list_left_alone", listed(tensors["selfcross.input"], output_attentions=True), tensors, cases)
    upstream_capture.patch_mapping.clear()
    for model, record_map in record_maps.items():
        model.can_record = record_map


# ---- the file -----------------------------------------------------------------------------------

def fill(model, prefix, generator, tensors):
    with torch.no_grad():
        for name, parameter in model.named_parameters():
            parameter.copy_(torch.randn(parameter.shape, generator=generator))
            tensors[f"{prefix}.{name}"] = parameter.detach().clone()


def add_case(name, outputs, tensors, cases):
    items = []
    for field, value in outputs.items():
        if isinstance(value, tuple):
            items.append([field, len(value)])
            for i, tensor in enumerate(value):
                tensors[f"{name}.{field}.{i}"] = tensor.detach().clone()
        else:
            items.append([field, None])
            tensors[f"{name}.{field}"] = value.detach().clone()
    cases[name] = {"items": items}


def save_safetensors(path, tensors):
    # The safetensors layout: u64 header length, JSON header (sorted names), raw little-endian data.
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().to(torch.float32).numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    generator = torch.Generator().manual_seed(2024)
    tensors, cases = {}, {}

    moe = MoeModel()
    fill(moe, "moe", generator, tensors)
    x = tensors["moe.input"] = torch.randn(2, 3, 4, generator=generator)
    add_case("moe.call", moe(x, output_router_logits=True, output_hidden_states=True, output_attentions=True),
             tensors, cases)
    add_case("moe.off", moe(x), tensors, cases)
    moe.config.output_router_logits = True
    add_case("moe.config", moe(x), tensors, cases)
    add_case("moe.call_over_config", moe(x, output_router_logits=False), tensors, cases)

    toy = ToyModel(3, 4)
    fill(toy, "toy", generator, tensors)
    x = tensors["toy.input"] = torch.randn(2, 4, generator=generator)
    add_case("toy.tied", toy(x, output_hidden_states=True, output_attentions=True), tensors, cases)
    add_case("toy.untied", toy(x, tie=False, output_hidden_states=True), tensors, cases)
    add_case("toy.no_layers", ToyModel(0, 4)(x, output_hidden_states=True, output_attentions=True), tensors, cases)

    x = tensors["selfcross.input"] = torch.randn(1, 4, generator=generator)
    add_case("selfcross.split", SelfCrossToy()(x, output_attentions=True), tensors, cases)

    vision = VisionToy()
    fill(vision, "vision", generator, tensors)
    x = tensors["vision.input"] = torch.randn(1, 4, generator=generator)
    add_case("vision.tied", vision(x, output_hidden_states=True), tensors, cases)

    add_rule_cases(generator, tensors, cases)

    save_safetensors(HERE / "capture_mirror.safetensors", tensors)
    lines = [f' "{name}": {json.dumps(case)}' for name, case in cases.items()]
    (HERE / "capture_mirror.json").write_text('{"cases": {\n' + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {len(tensors)} tensors, {len(cases)} cases")


if __name__ == "__main__":
    main()
