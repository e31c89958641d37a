#!/usr/bin/python3
"""Writes trace_kinds.json: what transformers' debugger writes for tensors of every kind.

Run with /usr/bin/python3 (torch 1.13.1), giving the directory of the reference debugger
(hf_debugger_seed.py and safetensors_min.py):

    /usr/bin/python3 tests/data/make_trace_kinds.py /work/shared/reference

Each case traces a two-module model, `Kinds(echo=Echo())`, whose root passes its one input to
`echo`, which returns it: one tensor, as input of the root and as input and output of a leaf.
The C++ test (tests/test_reliability_tensors.cpp) builds the same tensor from the same recipe and
compares its trace file with Python's, byte for byte.

Recipe: "values" = arange(n) in float64, times scale, plus offset, cast to dtype ("ramp"),
or the listed float64 values cast to dtype ("list"); then reshape and the listed views.
Deterministic (no random numbers), so no tensor data is stored.

Per case: "repr" = {"full", "summary"}: the two JSON files with use_repr=True, as text;
"safetensors" = {"full", "files": {name: hex bytes, or {"size"} above 512 bytes}} with use_repr=False, where Python's
safetensors writer supports the dtype. A case Python's debugger cannot trace (an empty float
tensor: min() raises) has "python_error" instead.
"""

import json
import math
import os
import sys
import tempfile

import torch

sys.path.insert(0, sys.argv[1] if len(sys.argv) > 1 else "/work/shared/reference")
from hf_debugger_seed import model_addition_debugger_context  # noqa: E402

DTYPES = {
    "float32": torch.float32, "float64": torch.float64, "float16": torch.float16, "bfloat16": torch.bfloat16,
    "complex64": torch.complex64, "complex128": torch.complex128, "int64": torch.int64, "int32": torch.int32,
    "int16": torch.int16, "int8": torch.int8, "uint8": torch.uint8, "bool": torch.bool,
}


class Echo(torch.nn.Module):
    def forward(self, x):
        return x


class Kinds(torch.nn.Module):
    def __init__(self):
        super().__init__()
        self.echo = Echo()

    def forward(self, x):
        return self.echo(x)


def build(recipe):
    """The tensor a recipe describes; the C++ test has the same function (make_tensor)."""
    if recipe is None:
        return None
    dtype = DTYPES[recipe["dtype"]]
    if "ramp" in recipe:
        n, scale, offset = recipe["ramp"]
        values = torch.arange(n, dtype=torch.float64) * scale + offset
    else:
        values = torch.tensor([float(v) for v in recipe["list"]], dtype=torch.float64)
    if dtype.is_complex:
        # real part: the values; imaginary part: the values reversed, times -0.5.
        t = torch.complex(values, values.flip(0) * -0.5).to(dtype)
    elif dtype == torch.bool:
        t = values != 0
    else:
        t = values.to(dtype)
    t = t.reshape(recipe["shape"])
    for op in recipe.get("ops", []):
        if op[0] == "t":
            t = t.t()
        elif op[0] == "slice":  # dim, step
            index = [slice(None)] * t.dim()
            index[op[1]] = slice(None, None, op[2])
            t = t[tuple(index)]
        elif op[0] == "expand":
            t = t.expand(*op[1])
        elif op[0] == "conj":
            t = t.conj()
        elif op[0] == "requires_grad":
            t = t.requires_grad_()
        else:
            raise ValueError(op)
    return t


def ramp(dtype, shape, scale, offset, ops=()):
    return {"dtype": dtype, "shape": shape, "ramp": [math.prod(shape) if shape else 1, scale, offset], "ops": list(ops)}


def values(dtype, shape, listed, ops=()):
    return {"dtype": dtype, "shape": shape, "list": listed, "ops": list(ops)}


CASES = {
    "undefined": None,
    "empty_float32": ramp("float32", [0], 1.0, 0.0),
    "empty_float32_2x0": ramp("float32", [2, 0], 1.0, 0.0),
    "empty_int64_0x3": ramp("int64", [0, 3], 1.0, 0.0),
    "scalar_float32": values("float32", [], [3.25]),
    "scalar_int64": values("int64", [], [-7]),
    "one_element_float32": values("float32", [1], [-1.5]),
    "one_element_float16": values("float16", [1, 1], [0.1]),
    "one_element_bfloat16": values("bfloat16", [1], [2.5]),
    "float32": ramp("float32", [2, 3], 0.37, -1.1),
    "float16": ramp("float16", [2, 3], 0.37, -1.1),
    "bfloat16": ramp("bfloat16", [2, 3], 0.37, -1.1),
    "float64": ramp("float64", [2, 3], 0.37, -1.1),
    "int64": ramp("int64", [2, 3], 53.0, -100.0),
    "int32": ramp("int32", [2, 3], 53.0, -100.0),
    "int16": ramp("int16", [2, 3], 1000.0, -3000.0),
    "int8": ramp("int8", [2, 3], 41.0, -128.0),
    "uint8": ramp("uint8", [2, 3], 41.0, 0.0),
    "bool": values("bool", [2, 3], [1, 0, 0, 1, 1, 0]),
    "complex64": ramp("complex64", [2, 2], 0.5, -1.0),
    "complex128": ramp("complex128", [3], 0.25, 1.0),
    "nan_inf_float32": values("float32", [5], ["nan", "inf", "-inf", 1.0, -0.0]),
    "inf_float32": values("float32", [3], ["inf", 1.0, 2.0]),
    "nan_float16": values("float16", [3], ["nan", 1.0, 2.0]),
    "nan_bfloat16": values("bfloat16", [2], ["-inf", 0.5]),
    "nan_float64": values("float64", [3], ["nan", "inf", 1.0]),
    "transposed": ramp("float32", [3, 4], 0.5, -2.0, [["t"]]),
    "strided_slice": ramp("float32", [4, 5], 0.25, 0.0, [["slice", 1, 2]]),
    "expanded": ramp("float32", [3], 1.5, -1.0, [["expand", [4, 3]]]),
    "expanded_int64": ramp("int64", [1, 3], 1.0, 0.0, [["expand", [2, 3]]]),
    "conj_view": ramp("complex64", [3], 1.0, 0.5, [["conj"]]),
    "requires_grad": ramp("float32", [2], 0.5, 0.5, [["requires_grad"]]),
    "large_float32": ramp("float32", [40, 50], 0.001, -1.0),
    "large_int64": ramp("int64", [1500], 1.0, 0.0),
    "large_float64_3d": ramp("float64", [10, 11, 12], 0.01, -5.0),
}


def trace(tensor, use_repr):
    with tempfile.TemporaryDirectory() as d:
        model = Kinds()
        with model_addition_debugger_context(model, debug_path=d, do_prune_layers=False, use_repr=use_repr):
            model(tensor)
        out = {}
        files = {}
        for name in sorted(os.listdir(d)):
            with open(os.path.join(d, name), "rb") as f:
                data = f.read()
            if name.endswith("_FULL_TENSORS.json"):
                out["full"] = data.decode()
            elif name.endswith("_SUMMARY.json"):
                out["summary"] = data.decode()
            else:
                # Big files: only the size (the C++ test compares their tensors with its own).
                files[name] = data.hex() if len(data) <= 512 else {"size": len(data)}
        if not use_repr:
            out["files"] = files
            del out["summary"]
        return out


def main():
    here = os.path.dirname(os.path.abspath(__file__))
    cases = {}
    for name, recipe in CASES.items():
        case = {"recipe": recipe}
        tensor = build(recipe)
        try:
            case["repr"] = trace(tensor, True)
        except Exception as e:  # noqa: BLE001 - recorded: the C++ test checks what it does instead
            case["python_error"] = f"{type(e).__name__}: {e}"
            cases[name] = case
            continue
        try:
            case["safetensors"] = trace(tensor, False)
        except Exception as e:  # noqa: BLE001 - safetensors_min has no complex dtypes
            case["python_safetensors_error"] = f"{type(e).__name__}: {e}"
        cases[name] = case
    with open(os.path.join(here, "trace_kinds.json"), "w") as f:
        json.dump({"cases": cases}, f, indent=0)
        f.write("\n")


if __name__ == "__main__":
    main()
