#!/usr/bin/python3
"""Writes repr_cases.json: Python's own print/repr output for tests/test_python_repr.cpp.

Run with /usr/bin/python3 (torch 1.13.1):  /usr/bin/python3 tests/data/make_repr_cases.py
The output is deterministic (seeded); rerun it only when the cases change.

Each tensor case holds what the C++ test needs to rebuild the tensor bit for bit:
  dtype, shape and either "hex" (raw little-endian bytes of the contiguous base tensor)
  or "arange" ([scale, offset] as float64 bit patterns in hex: arange(numel) in float64,
  times scale, plus offset, cast to dtype; for bases too big to store) or "meta" (an
  uninitialised tensor on the meta device), then "ops" applied in order (views, requires_grad),
  then "lines": print(t).splitlines() under set_printoptions(sci_mode=True, linewidth=120),
  and optionally "stats": repr() of mean/std/min/max of the final tensor.
"""

import json
import math
import os
import random
import struct
import sys
import warnings

import torch

warnings.filterwarnings("ignore", message="Sparse CSR tensor support is in beta state")
warnings.filterwarnings("ignore", message="Named tensors and all their associated APIs")

torch.set_printoptions(sci_mode=True, linewidth=120)
torch.manual_seed(20240607)

DTYPES = {
    "float32": torch.float32,
    "float64": torch.float64,
    "float16": torch.float16,
    "bfloat16": torch.bfloat16,
    "complex64": torch.complex64,
    "complex128": torch.complex128,
    "int64": torch.int64,
    "int32": torch.int32,
    "int16": torch.int16,
    "int8": torch.int8,
    "uint8": torch.uint8,
    "bool": torch.bool,
}
DTYPE_NAMES = {v: k for k, v in DTYPES.items()}
QDTYPES = {"quint8": torch.quint8, "qint8": torch.qint8}

cases = []


def raw_hex(t):
    t = t.detach().contiguous().reshape(-1)
    if t.numel() == 0:
        return ""
    return t.view(torch.uint8).numpy().tobytes().hex()


def apply_ops(t, ops):
    for op in ops:
        name = op[0]
        if name == "t":
            t = t.t()
        elif name == "transpose":
            t = t.transpose(op[1], op[2])
        elif name == "permute":
            t = t.permute(*op[1])
        elif name == "expand":
            t = t.expand(*op[1])
        elif name == "slice":  # dim, start, end, step
            index = [slice(None)] * t.dim()
            index[op[1]] = slice(op[2], op[3], op[4])
            t = t[tuple(index)]
        elif name == "select":  # dim, index
            t = t.select(op[1], op[2])
        elif name == "requires_grad":
            t = t.requires_grad_()
        elif name == "conj":
            t = t.conj()
        elif name == "imag":
            t = t.imag
        elif name == "names":
            t = t.refine_names(*op[1])
        elif name == "to_sparse":
            t = t.to_sparse()
        elif name == "to_sparse_csr":
            t = t.to_sparse_csr()
        elif name == "quantize_per_tensor":  # scale, zero_point, dtype
            t = torch.quantize_per_tensor(t, op[1], op[2], QDTYPES[op[3]])
        elif name == "quantize_per_channel":  # scales, zero_points, axis, dtype
            t = torch.quantize_per_channel(t, torch.tensor(op[1], dtype=torch.float64), torch.tensor(op[2]), op[3],
                                           QDTYPES[op[4]])
        else:
            raise ValueError(name)
    return t


def double_hex(d):
    return f"{struct.unpack('<Q', struct.pack('<d', d))[0]:016x}"


def add(name, base, ops=(), stats=False, arange=None, meta=False):
    """Records `base` (plus ops) with Python's printed lines."""
    ops = [list(op) for op in ops]
    case = {
        "name": name,
        "dtype": DTYPE_NAMES[base.dtype],
        "shape": list(base.shape),
    }
    if meta:
        case["meta"] = True
    elif arange is not None:
        case["arange"] = [double_hex(arange[0]), double_hex(arange[1])]
    else:
        case["hex"] = raw_hex(base)
    if ops:
        case["ops"] = ops
    t = apply_ops(base, ops)
    case["lines"] = str(t).splitlines()
    case["shape_repr"] = str(t.shape)
    case["dtype_repr"] = str(t.dtype)
    if stats:
        with torch.no_grad():
            case["stats"] = {
                "mean": repr(t.mean()),
                "std": repr(t.std()),
                "min": repr(t.min()),
                "max": repr(t.max()),
            }
    cases.append(case)


def from_arange(name, dtype, shape, scale, offset, ops=(), stats=False):
    n = math.prod(shape)
    base = (torch.arange(n, dtype=torch.float64) * scale + offset).to(dtype).reshape(shape)
    add(name, base, ops, stats, arange=(scale, offset))


nan, inf = float("nan"), float("inf")
f32 = torch.float32

# --- float32 random normal at various scales --------------------------------------------
for scale, label in [(1e-6, "1e-6"), (1.0, "1"), (1e3, "1e3"), (1e9, "1e9"), (1e-2, "1e-2"), (1e4, "1e4")]:
    add(f"f32_randn_{label}_5x4", torch.randn(5, 4) * scale, stats=True)
add("f32_randn_mixed", torch.randn(8) * torch.tensor([1e-6, 1, 1e3, 1e9, 1e-3, 1e5, 1e-9, 1e2]), stats=True)
add("f32_randn_mixed_2d", torch.randn(4, 6) * torch.logspace(-8, 8, 6))
add("f32_uniform_0_1", torch.rand(3, 7))
add("f32_near_1e-4", torch.tensor([1e-4, 0.5, 0.25]))
add("f32_near_1e8", torch.tensor([1e8, 1.5]))
add("f32_ratio_1000", torch.tensor([1.5, 1499.0]))
add("f32_rounding", torch.tensor([0.00015, 0.12345, 2.5e-5, 9.99995, 99999.5, 0.5]))

# --- integer-valued floats ------------------------------------------------------------
add("f32_intvals", torch.tensor([1.0, 2.0, -3.0, 100.0]))
add("f32_intvals_2d", torch.tensor([[1.0, -20.0, 300.0], [4.0, 5.0, -6000.0]]))
add("f32_intvals_ratio", torch.tensor([1.0, 10000.0]))
add("f32_intvals_big", torch.tensor([1e9, 2.0, -3.0]))
add("f32_intvals_huge", torch.tensor([1e20, -1e30, 3e38]))
add("f32_intvals_with_nonfinite", torch.tensor([1.0, nan, inf, -inf, 0.0, -2.0]))
add("f32_intvals_0d", torch.tensor(7.0))
add("f32_intvals_neg_zero", torch.tensor([-0.0, 1.0, 2.0]))

# --- zeros, non-finite ------------------------------------------------------------------
add("f32_zeros_1d", torch.zeros(5))
add("f32_zeros_2d", torch.zeros(2, 3))
add("f32_zero_0d", torch.tensor(0.0))
add("f32_neg_zero_0d", torch.tensor(-0.0))
add("f32_neg_zero_1d", torch.tensor([-0.0, 0.0]))
add("f32_neg_zero_mixed", torch.tensor([-0.0, 1.5, -2.25]))
add("f32_all_nan", torch.tensor([nan, nan, nan]))
add("f32_nan_0d", torch.tensor(nan))
add("f32_neg_nan", torch.tensor([nan, 1.5]).neg())
add("f32_neg_nan_only", torch.tensor([nan]).neg())
add("f32_all_inf", torch.tensor([inf, -inf, inf]))
add("f32_neg_inf_0d", torch.tensor(-inf))
add("f32_zero_nan_inf", torch.tensor([0.0, nan, -inf, -0.0]))
add("f32_mixed_nonfinite", torch.tensor([1.5, nan, inf, -inf, 0.0, -2.25, 1e-7]))
add("f32_mixed_nonfinite_2d", torch.tensor([[1.5, nan], [inf, -3e10]]))
add("f32_subnormal", torch.tensor([1e-45, 1e-40, -3e-39]))
add("f32_max", torch.tensor([3.4028234663852886e38, -1.1754943508222875e-38]))

# Random magnitudes and signs: the widths come from the longest element text.
wrng = random.Random(99)
for i in range(24):
    n = wrng.randint(2, 9)
    hi = wrng.choice([3, 10, 40, 150, 300])
    vals = [wrng.choice([-1, 1]) * 10 ** wrng.uniform(-hi, hi) for _ in range(n)]
    add(f"width_f64_{i}", torch.tensor(vals, dtype=torch.float64))
    vals = [wrng.choice([-1, 1]) * 10 ** wrng.uniform(-min(hi, 37), min(hi, 37)) for _ in range(n)]
    add(f"width_f32_{i}", torch.tensor(vals, dtype=torch.float32))
    vals = [float(wrng.choice([-1, 1]) * round(10 ** wrng.uniform(0, min(hi, 12)))) for _ in range(n)]
    add(f"width_f32_int_{i}", torch.tensor(vals, dtype=torch.float32))
    vals = [wrng.choice([-1, 1]) * wrng.uniform(1e-4, 10 ** wrng.uniform(0, 3)) for _ in range(n)]
    add(f"width_f32_fixed_{i}", torch.tensor(vals, dtype=torch.float32))

# --- 0-d ------------------------------------------------------------------------------
add("f32_0d_pi", torch.tensor(math.pi))
add("f32_0d_small", torch.tensor(-1.25e-8))
add("f32_0d_int", torch.tensor(12345.0))
add("f32_0d_big", torch.tensor(6.02e23))

# --- 1-d .. 4-d ------------------------------------------------------------------------
add("f32_1d_3", torch.randn(3))
add("f32_1d_12", torch.randn(12))
add("f32_1d_13", torch.randn(13))
add("f32_1d_50", torch.randn(50))
add("f32_1d_200", torch.randn(200), stats=True)
add("f32_1d_1000", torch.randn(1000))
add("f32_2d_4x5", torch.randn(4, 5))
add("f32_2d_3x30", torch.randn(3, 30))
add("f32_3d_2x3x4", torch.randn(2, 3, 4))
add("f32_4d_2x2x3x3", torch.randn(2, 2, 3, 3))
add("f32_5d", torch.randn(2, 1, 2, 1, 3))
add("f32_2x7x64", torch.randn(2, 7, 64), stats=True)
add("f32_2x4x7x7", torch.randn(2, 4, 7, 7), stats=True)
add("f32_2x4x7x7_softmax", torch.randn(2, 4, 7, 7).softmax(-1))

# --- summarised (numel > 1000) ---------------------------------------------------------
add("f32_sum_1d_1001", torch.randn(1001))
add("f32_sum_1d_2000", torch.randn(2000) * 100)
add("f32_sum_10x200", torch.randn(10, 200))
add("f32_sum_200x10", torch.randn(200, 10))
add("f32_sum_3x500", torch.randn(3, 500))
add("f32_sum_500x3", torch.randn(500, 3))
add("f32_sum_2x3x400", torch.randn(2, 3, 400))
add("f32_sum_8x8x8x8", torch.randn(8, 8, 8, 8), stats=True)
add("f32_sum_7x7x7x7", torch.randn(7, 7, 7, 7))
add("f32_sum_6x6x6x6", torch.randn(6, 6, 6, 6))
add("f32_sum_2x2x2x2x2x2x2x2x2x2", torch.randn(*([2] * 10)))
add("f32_sum_wide_values", torch.randn(40, 40) * torch.logspace(-5, 5, 40))
add("f32_sum_zeros", torch.zeros(50, 50))
add("f32_sum_intvals", torch.arange(3000, dtype=torch.float32).reshape(30, 100))
t = torch.randn(30, 40)
t[0, 0] = nan
t[-1, -1] = inf
t[10, 10] = 1e10  # hidden by summarisation: must not influence the widths
add("f32_sum_nonfinite_hidden_outlier", t)
from_arange("f32_big_1000x1000_arange", f32, [1000, 1000], 1 / 7, -5.0, stats=True)
from_arange("f32_big_4x30x2048_arange", f32, [4, 30, 2048], 1e-3, 0.0)

# --- other float dtypes -------------------------------------------------------------------
add("f16_randn", torch.randn(3, 4).half(), stats=True)
add("f16_range", torch.tensor([65504.0, -6.1e-5, 6e-8, 1.0, nan, inf], dtype=torch.float16))
add("f16_intvals", torch.tensor([1.0, 2.0, 2048.0], dtype=torch.float16))
add("f16_sum", torch.randn(40, 40).half())
add("bf16_randn", torch.randn(3, 4).bfloat16(), stats=True)
add("bf16_range", torch.tensor([1e30, -1e-30, 3.0, 0.0], dtype=torch.bfloat16))
add("bf16_sum", torch.randn(2, 30, 30).bfloat16())
add("f64_randn", torch.randn(3, 3, dtype=torch.float64))
add("f64_third", torch.tensor([1 / 3, 2 / 3, -1 / 3], dtype=torch.float64))
add("f64_intvals", torch.tensor([1.0, 2.0, 3.0], dtype=torch.float64))
add("f64_0d", torch.tensor(0.1, dtype=torch.float64))
add("f64_tiny", torch.tensor([5e-324, 1e-300, 1e300], dtype=torch.float64))
add("f64_sum", torch.randn(1500, dtype=torch.float64))

# --- integer and bool dtypes ------------------------------------------------------------
add("i64_small", torch.tensor([1, -2, 3]))
add("i64_wide", torch.tensor([-9223372036854775808, 0, 123456789012, 9223372036854775807]))
add("i64_2d", torch.tensor([[195, 91, 927], [759, -5, 4]]))
add("i64_0d", torch.tensor(-42))
add("i64_long_1d", torch.arange(100))
add("i64_sum_1d", torch.arange(3000) - 1500)
add("i64_sum_2d", torch.randint(-10**6, 10**6, (50, 50)))
add("i64_3d", torch.randint(0, 1000, (2, 3, 25)))
add("i32", torch.tensor([[1, -2147483648], [2147483647, 0]], dtype=torch.int32))
add("i32_0d", torch.tensor(5, dtype=torch.int32))
add("i16", torch.tensor([-32768, 7], dtype=torch.int16))
add("i8", torch.tensor([-128, 127, 0], dtype=torch.int8))
add("u8", torch.tensor([0, 255, 17], dtype=torch.uint8))
add("u8_long", torch.randint(0, 256, (3, 64), dtype=torch.uint8))
add("bool_1d", torch.tensor([True, False, True]))
add("bool_all_true", torch.tensor([True, True]))
add("bool_0d", torch.tensor(False))
add("bool_2d", torch.rand(4, 30) > 0.5)
add("bool_sum", torch.rand(2000) > 0.5)

# --- complex ----------------------------------------------------------------------------------
add("c64_randn", torch.randn(3, 3, dtype=torch.complex64))
add("c64_0d", torch.tensor(1.5 - 2.25j, dtype=torch.complex64))
add("c64_intvals", torch.tensor([1 + 2j, -3 - 4j, 0j], dtype=torch.complex64))
add("c64_signed_zeros", torch.complex(torch.tensor([0.0, -0.0, 1.0, -1.0]), torch.tensor([-0.0, 0.0, -0.0, 0.0])))
add("c64_nonfinite", torch.complex(torch.tensor([nan, 1.0, inf]), torch.tensor([1.0, -inf, nan])))
add("c64_mixed_scales", torch.complex(torch.randn(5) * 1e-6, torch.randn(5) * 1e4))
add("c64_sum", torch.randn(40, 40, dtype=torch.complex64))
add("c128", torch.randn(2, 2, dtype=torch.complex128))
add("c64_conj_view", torch.randn(2, 3, dtype=torch.complex64), ops=[["conj"]])
add("c64_conj_imag_neg_view", torch.randn(2, 3, dtype=torch.complex64), ops=[["conj"], ["imag"]])

# --- empty --------------------------------------------------------------------------------------
add("empty_f32", torch.tensor([]))
add("empty_f32_0x3", torch.zeros(0, 3))
add("empty_f32_2x0x4", torch.zeros(2, 0, 4))
add("empty_i64", torch.zeros(0, dtype=torch.int64))
add("empty_i64_3x0", torch.zeros(3, 0, dtype=torch.int64))
add("empty_bool", torch.zeros(0, dtype=torch.bool))
add("empty_f64", torch.zeros(0, dtype=torch.float64))
add("empty_f16_0x0", torch.zeros(0, 0, dtype=torch.float16))
add("empty_c64", torch.zeros(0, dtype=torch.complex64))
add("empty_requires_grad", torch.zeros(0, 2), ops=[["requires_grad"]])

# --- one element --------------------------------------------------------------------------------
add("one_f32", torch.tensor([5.0]))
add("one_f32_frac", torch.tensor([0.1]))
add("one_f32_2d", torch.tensor([[1e-10]]))
add("one_i64_2d", torch.tensor([[7]]))
add("one_bool", torch.tensor([[[False]]]))

# --- views ----------------------------------------------------------------------------------------
add("view_transpose", torch.randn(4, 5), ops=[["t"]])
add("view_transpose_3d", torch.randn(2, 3, 4), ops=[["transpose", 0, 2]])
add("view_permute", torch.randn(2, 3, 4), ops=[["permute", [1, 2, 0]]])
add("view_expand", torch.randn(1, 5), ops=[["expand", [4, 5]]])
add("view_expand_big", torch.randn(1, 3000), ops=[["expand", [500, 3000]]], stats=True)
add("view_slice_step", torch.randn(6, 10), ops=[["slice", 1, 1, 9, 3]])
add("view_select", torch.randn(3, 4, 5), ops=[["select", 1, 2]])
add("view_expand_100M", torch.randn(1, 5000), ops=[["expand", [20000, 5000]]])
add("view_transpose_sum", torch.randn(300, 20), ops=[["t"]])
add("view_i64_transpose", torch.arange(12).reshape(3, 4), ops=[["t"]])

# --- other layouts, quantized, meta ---------------------------------------------------------------
sparse_src = torch.tensor([[0.0, 1.5, 0.0], [2.0, 0.0, -3.0]])
add("sparse_coo", sparse_src, ops=[["to_sparse"]])
add("sparse_coo_empty", torch.zeros(2, 3), ops=[["to_sparse"]])
add("sparse_coo_f64", sparse_src.double(), ops=[["to_sparse"]])
add("sparse_csr", sparse_src, ops=[["to_sparse_csr"]])
add("quantized_per_tensor", sparse_src, ops=[["quantize_per_tensor", 0.125, 3, "quint8"]])
add("quantized_per_channel", sparse_src, ops=[["quantize_per_channel", [0.125, 0.25], [0, 1], 0, "qint8"]])
add("named", torch.randn(2, 3), ops=[["names", ["N", None]]])
add("named_1d_grad", torch.randn(3), ops=[["requires_grad"], ["names", ["C"]]])
add("meta_f32", torch.empty(2, 3, device="meta"), meta=True)
add("meta_i64", torch.empty(4, dtype=torch.int64, device="meta"), meta=True)

# --- autograd suffixes ----------------------------------------------------------------------
add("grad_leaf", torch.randn(3), ops=[["requires_grad"]])
add("grad_leaf_0d", torch.tensor(2.5), ops=[["requires_grad"]])
add("grad_fn_t", torch.randn(2, 3), ops=[["requires_grad"], ["t"]])
add("grad_fn_expand", torch.randn(1, 3), ops=[["requires_grad"], ["expand", [2, 3]]])
add("grad_fn_select", torch.randn(4, 3), ops=[["requires_grad"], ["select", 0, 1]])
add("grad_f64_leaf", torch.randn(2, 2, dtype=torch.float64), ops=[["requires_grad"]])
# Vectors whose last line ends near the line width: exercise _add_suffixes' line breaking.
for n in range(5, 12):
    add(f"suffix_wrap_f64_{n}", torch.randn(n, dtype=torch.float64) * 10, ops=[["requires_grad"]])
for n in range(6, 10):
    add(f"suffix_wrap_f16_{n}", torch.tensor([1.0, -2.5] * 20, dtype=torch.float16)[: n * 1],
        ops=[["requires_grad"]])
add("suffix_wrap_i32", torch.arange(19, dtype=torch.int32) * 1000001)
add("suffix_wrap_i32b", torch.arange(12, dtype=torch.int32) * 100000001)

# --- python_repr(double), repr(str), dtype and shape reprs ---------------------------------------
doubles = [1e-06, 0.0001, 1e16, 1e15, 0.1, 1 / 3, 123456789.0, -0.0, 0.0, 5e-324,
           1.7976931348623157e308, inf, -inf, nan, 1e-05, 9.999999999999999e-05, 1e22,
           123456789012345678.0, 1.5, -2.0, 100.0, 1e-07, 2.5e-05, 0.30000000000000004,
           9007199254740993.0, 1234567890123456.7, 12345678901234567.0, 4.35, 1e100, 2.2250738585072014e-308]
rng = random.Random(1234)
for _ in range(150):
    bits = rng.getrandbits(64)
    doubles.append(struct.unpack("<d", struct.pack("<Q", bits))[0])
for _ in range(100):  # float32 values seen as doubles, as tensor stats produce them
    doubles.append(float(torch.randn(1) * 10 ** rng.uniform(-10, 10)))
double_cases = []
for d in doubles:
    bits = struct.unpack("<Q", struct.pack("<d", d))[0]
    double_cases.append({"bits": f"{bits:016x}", "repr": repr(d)})
# a NaN with its sign bit set: repr is still 'nan'
double_cases.append({"bits": "fff8000000000000", "repr": repr(struct.unpack("<d", struct.pack("<Q", 0xFFF8000000000000))[0])})

strings = [
    "", "text", "it's", 'say "hi"', "both ' and \"", "back\\slash", "new\nline", "tab\there", "cr\r",
    "bell\x07", "nul\x00", "del\x7f", "\x1b[0m", "caf\u00e9", "\u00a0nbsp", "soft\u00adhyphen",
    "\u4e2d\u6587", "emoji \U0001F600", "zwsp\u200b", "line\u2028sep", "bom\ufeff", "\u0378unassigned",
    "private\ue000", "c1\x85\x9f", "'", '"', "'\"", "mixed 'quote' \\ \"x\"\n",
    "\U000e0001 tag", "\U0010ffff", "combining e\u0301", "\u3000ideographic space",
]
string_cases = [{"utf8_hex": s.encode("utf-8").hex(), "repr": repr(s)} for s in strings]
# Invalid UTF-8: the C++ side reads it like Python's surrogateescape decoding.
for raw in [b"\xff", b"ab\xc3", b"\xc3\x28", b"\xed\xa0\x80", b"\xf4\x90\x80\x80", b"\xc0\xaf"]:
    string_cases.append({"utf8_hex": raw.hex(), "repr": repr(raw.decode("utf-8", "surrogateescape"))})

dtype_cases = [{"dtype": name, "repr": str(dt)} for name, dt in DTYPES.items()]
dtype_cases.append({"dtype": "complex32", "repr": str(torch.complex32)})
shape_cases = [{"shape": list(s), "repr": str(torch.Size(s))} for s in [(), (0,), (3,), (2, 7, 64), (2, 4, 7, 7), (1, 0, 5)]]

out = {
    "generator": "tests/data/make_repr_cases.py",
    "torch_version": torch.__version__,
    "python_version": sys.version.split()[0],
    "tensors": cases,
    "doubles": double_cases,
    "strings": string_cases,
    "dtypes": dtype_cases,
    "shapes": shape_cases,
}
path = os.path.join(os.path.dirname(os.path.abspath(__file__)), "repr_cases.json")
with open(path, "w", encoding="ascii") as f:
    json.dump(out, f, indent=1, ensure_ascii=True)
    f.write("\n")
print(f"wrote {path}: {len(cases)} tensor cases, {len(double_cases)} doubles, {len(string_cases)} strings, "
      f"{os.path.getsize(path)} bytes")
