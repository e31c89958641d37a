#!/usr/bin/env python3
"""Writes tests/data/nn_cases.safetensors: inputs and PyTorch's outputs for tracetorch::nn's
transformers building blocks (tests/test_nn.cpp compares them bit for bit).

    python3 tests/data/make_nn_cases.py      # torch 1.13; no transformers needed

The formulas restate transformers' activations.py (ACT2CLS) and pytorch_utils.py (Conv1D) as
plain torch expressions, each operation as upstream writes it: the tanh GELUs are one function in
exact arithmetic, but sqrt(2/pi) * (x + 0.044715 * pow(x, 3)), x * 0.7978845608 * (1 + 0.044715 * x * x)
and LibTorch's fused tanh-GELU kernel round differently (up to 2.4e-7 apart in float32).

Keys: "input" (float32 [N]); "act.<config name>" (the activation of "input");
"conv1d.init_weight" (Conv1D(nf=5, nx=4)'s weight after torch.manual_seed(0));
"conv1d.weight", "conv1d.bias", "conv1d.input" [2, 3, 4], "conv1d.output" [2, 3, 5].
"""
import json
import math
import pathlib
import struct

import torch
import torch.nn.functional as F

OUT = pathlib.Path(__file__).resolve().parent / "nn_cases.safetensors"


def erf_gelu_by_hand(x):  # gelu_python
    return x * 0.5 * (1.0 + torch.erf(x / math.sqrt(2.0)))


def openai_gelu(x):  # gelu_new: half first, cube by pow
    return 0.5 * x * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def openai_gelu_x_first(x):  # gelu_python_tanh: the same with x * 0.5 in front
    return x * 0.5 * (1.0 + torch.tanh(math.sqrt(2.0 / math.pi) * (x + 0.044715 * torch.pow(x, 3.0))))


def rounded_constant_gelu(x):  # gelu_fast: 0.7978845608, cube as x * x
    return 0.5 * x * (1.0 + torch.tanh(x * 0.7978845608 * (1.0 + 0.044715 * x * x)))


def mega_gelu(x):  # gelu_accurate: integer 1 and integer exponent 3
    c = math.sqrt(2 / math.pi)
    return 0.5 * x * (1 + torch.tanh(c * (x + 0.044715 * torch.pow(x, 3))))


def laplace(x, mu=0.707107, sigma=0.282095):
    scaled = (x - mu).div(sigma * math.sqrt(2.0))
    return 0.5 * (1.0 + torch.erf(scaled))


CASES = {
    "gelu": F.gelu,
    "gelu_10": lambda x: torch.clip(F.gelu(x), -10, 10),
    "gelu_fast": rounded_constant_gelu,
    "gelu_new": openai_gelu,
    "gelu_python": erf_gelu_by_hand,
    "gelu_pytorch_tanh": lambda x: F.gelu(x, approximate="tanh"),
    "gelu_python_tanh": openai_gelu_x_first,
    "gelu_accurate": mega_gelu,
    "laplace": laplace,
    "leaky_relu": lambda x: F.leaky_relu(x, 0.01),
    "linear": lambda x: x,
    "mish": F.mish,
    "quick_gelu": lambda x: x * torch.sigmoid(1.702 * x),
    "relu": F.relu,
    "relu2": lambda x: torch.square(F.relu(x)),
    "relu6": lambda x: F.hardtanh(x, 0.0, 6.0),
    "sigmoid": torch.sigmoid,
    "silu": F.silu,
    "swish": F.silu,
    "tanh": torch.tanh,
}


def activation_input():
    # A dense sweep over the range where the GELUs differ, random values, and awkward points.
    sweep = torch.linspace(-12.0, 12.0, 1201)
    generator = torch.Generator().manual_seed(7)
    noise = torch.randn(2000, generator=generator) * 3.0
    special = torch.tensor([0.0, -0.0, 1e-30, -1e-30, 1e-7, -1e-7, 0.5, -0.5, 3.0, -3.0, 6.0, 100.0, -100.0,
                            1e4, -1e4, 3.0e12, -3.0e12])
    return torch.cat([sweep, noise, special]).to(torch.float32)


def conv1d_cases():
    nf, nx = 5, 4
    torch.manual_seed(0)
    weight = torch.empty(nx, nf)  # upstream's __init__: weight [nx, nf], bias zeros, then normal_(std=0.02)
    torch.zeros(nf)
    torch.nn.init.normal_(weight, std=0.02)
    init_weight = weight.clone()
    generator = torch.Generator().manual_seed(11)
    weight = torch.randn(nx, nf, generator=generator)
    bias = torch.randn(nf, generator=generator)
    x = torch.randn(2, 3, nx, generator=generator)
    out = torch.addmm(bias, x.view(-1, nx), weight).view(2, 3, nf)
    return {"conv1d.init_weight": init_weight, "conv1d.weight": weight, "conv1d.bias": bias,
            "conv1d.input": x, "conv1d.output": out}


def save_safetensors(path, tensors):
    # The safetensors layout: u64 header length, JSON header (sorted names), raw little-endian data.
    header, blobs, offset = {}, [], 0
    for name in sorted(tensors):
        data = tensors[name].contiguous().numpy().tobytes()
        header[name] = {"dtype": "F32", "shape": list(tensors[name].shape), "data_offsets": [offset, offset + len(data)]}
        blobs.append(data)
        offset += len(data)
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    path.write_bytes(struct.pack("<Q", len(text)) + text + b"".join(blobs))


def main():
    x = activation_input()
    tensors = {"input": x}
    for name, formula in CASES.items():
        tensors["act." + name] = formula(x)
    tensors.update(conv1d_cases())
    save_safetensors(OUT, tensors)
    print(f"wrote {OUT} ({OUT.stat().st_size} bytes, {len(tensors)} tensors)")


if __name__ == "__main__":
    main()
