#!/usr/bin/env python3
"""Writes tests/io/data/fixture.safetensors: a small safetensors file made without kiln,
with the standard library only (json, struct), for tests/io/safetensors_test.cpp.

It differs on purpose from what kiln::safetensors::save writes: the header is not padded
(so the data starts at an odd address), the entries are not 8-byte aligned, the JSON lists
them in another order than their data, and it holds dtypes kiln cannot load (I64, F64,
BOOL). The values are fixed; the test checks each of them.

Usage: scripts/make_safetensors_fixture.py [output path]
"""
import json
import struct
import sys
from pathlib import Path


def bf16(x):
    """Top 16 bits of the float32 x (the values used are exact in bfloat16)."""
    (bits,) = struct.unpack("<I", struct.pack("<f", x))
    assert bits & 0xFFFF == 0, x
    return struct.pack("<H", bits >> 16)


# name -> (dtype, shape, packed little-endian bytes); data in this order.
tensors = [
    ("weight", "F32", [2, 3], struct.pack("<6f", 1.0, -2.5, 0.125, 3.0e38, -0.0, 1.0e-40)),
    ("half", "F16", [4], struct.pack("<4e", 1.0, -0.5, 65504.0, 6.103515625e-05)),
    ("bf", "BF16", [3], bf16(1.0) + bf16(-3.5) + bf16(0.15625)),
    ("i8", "I8", [5], struct.pack("<5b", -128, -1, 0, 1, 127)),
    ("u8", "U8", [2, 2], struct.pack("<4B", 0, 1, 200, 255)),
    ("i32", "I32", [3], struct.pack("<3i", -2147483648, 123456789, 2147483647)),
    ("i64", "I64", [2], struct.pack("<2q", -1, 1 << 40)),
    ("f64", "F64", [1], struct.pack("<d", 3.141592653589793)),
    ("mask", "BOOL", [3], bytes([1, 0, 1])),
    ("scalar", "F32", [], struct.pack("<f", 42.0)),
    ("nothing", "F32", [0, 4], b""),
    ("gewicht.ä/重み", "I32", [1], struct.pack("<i", -7)),
]

header = {}
data = b""
for name, dtype, shape, raw in tensors:
    header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [len(data), len(data) + len(raw)]}
    data += raw
# JSON order differs from data order: metadata last, entries reversed.
ordered = {k: header[k] for k in reversed(list(header))}
ordered["__metadata__"] = {"format": "pt", "writer": "make_safetensors_fixture.py"}
text = json.dumps(ordered, separators=(",", ":"), ensure_ascii=False).encode("utf-8")

out = Path(sys.argv[1]) if len(sys.argv) > 1 else Path(__file__).resolve().parent.parent / "tests/io/data/fixture.safetensors"
out.parent.mkdir(parents=True, exist_ok=True)
out.write_bytes(struct.pack("<Q", len(text)) + text + data)
print(f"{out}: {8 + len(text) + len(data)} bytes (header {len(text)}, data {len(data)})")
