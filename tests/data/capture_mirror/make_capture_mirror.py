#!/usr/bin/env python3
"""Writes tests/data/capture_mirror/{capture_mirror.safetensors, capture_mirror.json}: the weights,
inputs and captured outputs of small models under transformers' output-capturing rules, computed
in Python, for tests/test_capture_mirror.cpp to compare with tracetorch's capture_outputs.

    python3 tests/data/capture_mirror/make_capture_mirror.py      # plain torch; no transformers

The models are the C++ test toys, rebuilt here module for module with the same parameter names:
MoeModel (tests/router_toys.hpp: Qwen2-MoE's top-k router, router_logits recorded through a
declared key), ToyModel, SelfCrossToy and VisionToy (tests/capture_toys.hpp).

`capture` below restates the semantics of transformers' utils/output_capturing.py (v5:
`capture_outputs`, `OutputRecorder`, `recursively_install_hooks`) as read from its source:
- each key of the record map is asked for by `output_<key>` from the call's keywords, else the
  config's attribute of that name, else False; cross_attentions follows output_attentions;
- a recorder given as a bare class records element 0 for a key containing "hidden_states", else 1;
- hooks go on every module that is an instance of the target class (isinstance) and, when the
  recorder has a layer_name, whose dotted path (".a.b", with a leading dot) contains it;
- a hook appends element `index` of a tuple output (skipped when None), a non-tuple output whole;
  for "hidden_states" the first hooked call also appends its first positional argument first;
- hidden_states drops its last value and ends with the output's vision_hidden_states, else its
  last_hidden_state (unless tie_last_hidden_states=False);
- two recorders under "attentions" are split by position: even values attentions, odd ones
  cross_attentions;
- captured fields are set on the output after the forward's own ones, in record-map order, and
  to_tuple() lists the set fields in the order they were set.

JSON: {"cases": {name: {"items": [[field, count or null], ...]}}}, items in to_tuple() order, a
count for a tuple field, null for a tensor. Tensors: "<case>.<field>" or "<case>.<field>.<i>";
weights "<model>.<parameter name>"; inputs "<model>.input".
"""
import json
import pathlib
import struct

import torch
import torch.nn as nn
import torch.nn.functional as F

HERE = pathlib.Path(__file__).resolve().parent


# ---- upstream's capture rules, restated --------------------------------------------------------

class Recorder:
    def __init__(self, target, index=0, layer_name=None):
        self.target, self.index, self.layer_name = target, index, layer_name


def recorders_of(record_map):
    tasks = []
    for key, specs in record_map.items():
        for spec in specs if isinstance(specs, list) else [specs]:
            if not isinstance(spec, Recorder):
                spec = Recorder(spec, 0 if "hidden_states" in key else 1)
            tasks.append((key, spec))
    return tasks


def requested_keys(record_map, kwargs, config):
    def flag(name):
        return kwargs.get(name, getattr(config, name, False))
    wanted = {key: flag("output_" + key) for key in record_map}
    if "cross_attentions" in record_map:
        wanted["cross_attentions"] = flag("output_attentions")
    return [key for key in record_map if wanted[key]]


def hook_modules(module, path, tasks, collected, handles):
    for name, child in module.named_children():
        hook_modules(child, f"{path}.{name}", tasks, collected, handles)
    for key, spec in tasks:
        if not isinstance(module, spec.target):
            continue
        if spec.layer_name is not None and spec.layer_name not in path:
            continue

        def hook(_, args, output, key=key, index=spec.index):
            if key not in collected:
                return
            if key == "hidden_states" and not collected[key]:
                collected[key].append(args[0])
            if not isinstance(output, tuple):
                collected[key].append(output)
            elif output[index] is not None:
                collected[key].append(output[index])
        handles.append(module.register_forward_hook(hook))


def capture(model, record_map, forward, kwargs, tie_last_hidden_states=True, fields=("last_hidden_state",)):
    """Runs forward() (which returns an ordered dict of the forward's own non-None fields) with
    `record_map`'s hooks, and returns the output with the captured fields set after them. `fields`
    are the output class's declared fields other than the captured ones (upstream's hasattr)."""
    collected = {key: [] for key in requested_keys(record_map, kwargs, model.config)}
    handles = []
    hook_modules(model, "", recorders_of(record_map), collected, handles)
    try:
        outputs = forward()
    finally:
        for handle in handles:
            handle.remove()
    for key, values in collected.items():
        if key == "hidden_states" and tie_last_hidden_states:
            tie_field = next((f for f in ("vision_hidden_states", "last_hidden_state") if f in fields), None)
            if tie_field is not None:
                values = values[:-1] + [outputs.get(tie_field)]
        if key == "attentions" and isinstance(record_map[key], list) and len(record_map[key]) == 2:
            outputs["attentions"] = tuple(values[0::2])
            outputs["cross_attentions"] = tuple(values[1::2])
        else:
            outputs[key] = tuple(values)
    return outputs


class Config:
    def __init__(self, **flags):
        self.__dict__.update(flags)


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


class MoeModel(nn.Module):
    def __init__(self, hidden=4, experts=4, top_k=2, layers=2):
        super().__init__()
        self.config = Config(output_router_logits=False, output_attentions=False)
        self.layers = nn.ModuleList(MoeDecoderLayer(hidden, experts, top_k) for _ in range(layers))
        self.norm = nn.Parameter(torch.ones(hidden))
        # Qwen2MoePreTrainedModel._can_record_outputs, in its order
        self.record_map = {"router_logits": Recorder(TopKRouter, index=0), "hidden_states": MoeDecoderLayer,
                           "attentions": MoeAttention}

    def forward(self, inputs_embeds, **kwargs):
        def body():
            h = inputs_embeds
            for layer in self.layers:
                h = layer(h)
            return {"last_hidden_state": h * self.norm}
        return capture(self, self.record_map, body, kwargs)


class ToyLayer(nn.Module):
    def __init__(self, width):
        super().__init__()
        self.linear = nn.Linear(width, width)

    def forward(self, x):
        return torch.tanh(self.linear(x))


class ToyAttn(nn.Module):
    def forward(self, x):
        return x * 2, torch.softmax(x, dim=-1)


class ToyModel(nn.Module):
    def __init__(self, layers, width):
        super().__init__()
        self.config = Config()
        self.attn = nn.ModuleList(ToyAttn() for _ in range(layers))
        self.block = nn.ModuleList(ToyLayer(width) for _ in range(layers))
        self.record_map = {"hidden_states": ToyLayer, "attentions": ToyAttn}

    def forward(self, x, tie=True, **kwargs):
        def body():
            h = x
            for attn, block in zip(self.attn, self.block):
                h = block(attn(h)[0])
            return {"last_hidden_state": h * 10}
        return capture(self, self.record_map, body, kwargs, tie_last_hidden_states=tie)


class SelfCrossToy(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        for i in range(2):
            self.add_module(f"self_attn{i}", ToyAttn())
            self.add_module(f"cross_attn{i}", ToyAttn())
        self.record_map = {"attentions": [Recorder(ToyAttn, 1, ".self_attn"), Recorder(ToyAttn, 1, ".cross_attn")]}

    def forward(self, x, **kwargs):
        def body():
            h = x
            for i in range(2):
                a = getattr(self, f"self_attn{i}")(h)[0]
                h = getattr(self, f"cross_attn{i}")(a + 1)[0]
            return {"last_hidden_state": h}
        return capture(self, self.record_map, body, kwargs)


class VisionToy(nn.Module):
    def __init__(self):
        super().__init__()
        self.config = Config()
        self.first, self.second = ToyLayer(4), ToyLayer(4)
        self.record_map = {"hidden_states": ToyLayer}

    def forward(self, x, **kwargs):
        def body():
            h = self.second(self.first(x))
            return {"last_hidden_state": h * 10, "vision_hidden_states": h * 3}
        return capture(self, self.record_map, body, kwargs, fields=("last_hidden_state", "vision_hidden_states"))


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

    save_safetensors(HERE / "capture_mirror.safetensors", tensors)
    lines = [f' "{name}": {json.dumps(case)}' for name, case in cases.items()]
    (HERE / "capture_mirror.json").write_text('{"cases": {\n' + ",\n".join(lines) + "\n}}\n")
    print(f"wrote {len(tensors)} tensors, {len(cases)} cases")


if __name__ == "__main__":
    main()
