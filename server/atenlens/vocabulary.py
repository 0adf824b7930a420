"""The words the report's text is written in, for the CLI, the editor and the engine alike: dtype
abbreviations and tensor labels in torch's logging-tensor vocabulary (`f32[8, 32]`), and FLOP
counts (`22.5 kFLOP`). Torch-free: the language server uses it too."""

from __future__ import annotations

from typing import Iterable

# torch.utils._dtype_abbrs.dtype_abbrs, keyed by the dtype's name as the report writes it (torch
# 2.13's table; tests/test_vocabulary.py compares the two).
DTYPE_ABBRS = {
    "uint8": "u8",
    "int8": "i8",
    "int16": "i16",
    "int32": "i32",
    "int64": "i64",
    "float16": "f16",
    "float32": "f32",
    "float64": "f64",
    "complex32": "c32",
    "complex64": "c64",
    "complex128": "c128",
    "bool": "b8",
    "bfloat16": "bf16",
    "bits1x8": "b1x8",
    "bits2x4": "b2x4",
    "bits4x2": "b4x2",
    "bits8": "b8x1",
    "bits16": "b16x1",
    "float8_e5m2": "f8e5m2",
    "float8_e4m3fn": "f8e4m3fn",
    "float8_e5m2fnuz": "f8e5m2fnuz",
    "float8_e4m3fnuz": "f8e4m3fnuz",
    "uint16": "u16",
    "uint32": "u32",
    "uint64": "u64",
    "float8_e8m0fnu": "f8e8m0fnu",
    "float4_e2m1fn_x2": "f4e2m1fnx2",
}


def dtype_abbr(dtype: str) -> str:
    """ "bfloat16" -> "bf16"; a dtype torch's table does not know keeps its name."""
    return DTYPE_ABBRS.get(dtype, dtype)


def tensor_label(dtype: str, shape: Iterable[object]) -> str:
    """("float32", (8, 32)) -> "f32[8, 32]"."""
    return f"{dtype_abbr(dtype)}[{', '.join(str(d) for d in shape)}]"


def format_flops(flops: int) -> str:
    """512 -> "512 FLOP", 22_528 -> "22.5 kFLOP", 3 * 10**12 -> "3 TFLOP": three significant
    digits and SI prefixes, as bytes ("1.5 KiB") and times ("412 ms") are written."""
    value = float(flops)
    for unit in ("", "k", "M", "G", "T", "P"):
        if abs(value) < 999.5:  # 999_999 is "1 MFLOP", not "1e+03 kFLOP"
            return f"{value:.3g} {unit}FLOP"
        if unit == "P":
            return f"{value:.0f} PFLOP"
        value /= 1000
    raise AssertionError("unreachable")
