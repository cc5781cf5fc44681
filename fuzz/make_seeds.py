#!/usr/bin/env python3
"""Writes the seed corpus of the fuzz targets (fuzz/corpus/<target>/seed-*).

api: pseudo-random byte strings (each two bytes are one decision of
tests/unit/test_fuzz_api.c, so any bytes are a program); fixed seeds keep the
files reproducible. safetensors: valid files of every dtype weft reads, an
empty one, one with __metadata__, and a few broken on purpose (offsets past
the end, a header length past the file, bad JSON). Inputs that once failed
are kept beside them under names of their own (crash-*), not written here.
"""
import json
import os
import random
import struct

HERE = os.path.dirname(os.path.abspath(__file__))


def write(target, name, data):
    d = os.path.join(HERE, "corpus", target)
    os.makedirs(d, exist_ok=True)
    with open(os.path.join(d, name), "wb") as f:
        f.write(data)


def api_seeds():
    for i, size in enumerate([16, 32, 64, 96, 128, 192, 256, 384, 512, 768, 1024, 2048]):
        rng = random.Random(1000 + i)
        write("api", "seed-%02d" % i, bytes(rng.randrange(256) for _ in range(size)))


def safetensors(tensors, metadata=None):
    header, blobs, offset = {}, [], 0
    if metadata is not None:
        header["__metadata__"] = metadata
    for name, (dtype, shape, raw) in tensors.items():
        header[name] = {"dtype": dtype, "shape": shape, "data_offsets": [offset, offset + len(raw)]}
        blobs.append(raw)
        offset += len(raw)
    text = json.dumps(header).encode()
    text += b" " * (-len(text) % 8)
    return struct.pack("<Q", len(text)) + text + b"".join(blobs)


def safetensors_seeds():
    f32 = struct.pack("<6f", 1, 2, 3, 4, 5, 6)
    write("safetensors", "seed-f32", safetensors({"w": ("F32", [2, 3], f32)}))
    write("safetensors", "seed-mixed", safetensors({
        "a": ("F16", [2], struct.pack("<2e", 1.5, -2)),
        "b": ("BF16", [1], b"\x80\x3f"),
        "c": ("I32", [3], struct.pack("<3i", 7, -8, 9)),
        "d": ("I64", [1], struct.pack("<q", -1)),
        "e": ("U8", [4], b"\x00\x01\x02\xff"),
        "f": ("BOOL", [2], b"\x01\x00"),
        "g": ("F64", [], struct.pack("<d", 3.25)),
    }, metadata={"format": "pt"}))
    write("safetensors", "seed-empty", safetensors({}))
    write("safetensors", "seed-zero-size", safetensors({"z": ("F32", [0, 3], b"")}))
    good = safetensors({"w": ("F32", [2, 3], f32)})
    write("safetensors", "seed-truncated", good[:-4])
    write("safetensors", "seed-header-too-long", struct.pack("<Q", 1 << 40) + good[8:])
    write("safetensors", "seed-bad-json", struct.pack("<Q", 8) + b'{"w": [}')
    bad = json.dumps({"w": {"dtype": "F32", "shape": [2, 3], "data_offsets": [0, 400]}}).encode()
    write("safetensors", "seed-offsets-past-end", struct.pack("<Q", len(bad)) + bad + f32)


if __name__ == "__main__":
    api_seeds()
    safetensors_seeds()
