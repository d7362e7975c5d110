#!/usr/bin/env python3
"""Writes a Llama-architecture GGUF of `yoco bench`'s Transformer shape with random weights.

llama.cpp's decode speed does not depend on the weights' values, so the comparison in
compare.sh only needs a file of the right shape and tensor types: 12 layers, dim 768, 12
attention heads over 4 K/V heads, FFN 2048, vocabulary 32000 (tools/bench/engine_bench.cc).
Standard library only: no numpy, no gguf package. The values come from a small random pool
repeated over each tensor, which keeps writing the 200 MB file to a few seconds.
"""

import argparse
import random
import struct

DIM, LAYERS, HEADS, KV_HEADS, FFN, VOCAB = 768, 12, 12, 4, 2048, 32000
HEAD_DIM = DIM // HEADS

GGML_F32, GGML_F16, GGML_Q8_0 = 0, 1, 8
FILE_TYPE = {"f16": 1, "q8_0": 7}  # general.file_type: MOSTLY_F16, MOSTLY_Q8_0
ALIGNMENT = 32

# GGUF metadata value types.
T_UINT32, T_INT32, T_FLOAT32, T_STRING, T_ARRAY = 4, 5, 6, 8, 9


def gguf_string(s):
    b = s.encode()
    return struct.pack("<Q", len(b)) + b


def kv(key, vtype, value):
    out = gguf_string(key) + struct.pack("<I", vtype)
    if vtype == T_UINT32:
        return out + struct.pack("<I", value)
    if vtype == T_FLOAT32:
        return out + struct.pack("<f", value)
    if vtype == T_STRING:
        return out + gguf_string(value)
    raise ValueError(vtype)


def kv_array(key, elem_type, values):
    out = gguf_string(key) + struct.pack("<IIQ", T_ARRAY, elem_type, len(values))
    if elem_type == T_STRING:
        return out + b"".join(gguf_string(v) for v in values)
    fmt = {T_FLOAT32: "f", T_INT32: "i"}[elem_type]
    return out + struct.pack("<%d%s" % (len(values), fmt), *values)


def vocabulary():
    """SentencePiece-style: <unk>, <s>, </s>, the 256 byte tokens llama.cpp looks up, words."""
    tokens = ["<unk>", "<s>", "</s>"] + ["<0x%02X>" % b for b in range(256)]
    types = [2, 3, 3] + [6] * 256  # unknown, control, control, byte
    while len(tokens) < VOCAB:
        tokens.append("\u2581w%d" % len(tokens))
        types.append(1)  # normal
    scores = [-float(i) for i in range(VOCAB)]
    return tokens, scores, types


def tensors(weight_type):
    """(name, dims with the contiguous one first, ggml type) in llama.cpp's names."""
    out = [("token_embd.weight", (DIM, VOCAB), weight_type)]
    for i in range(LAYERS):
        p = "blk.%d." % i
        out += [
            (p + "attn_norm.weight", (DIM,), GGML_F32),
            (p + "attn_q.weight", (DIM, DIM), weight_type),
            (p + "attn_k.weight", (DIM, KV_HEADS * HEAD_DIM), weight_type),
            (p + "attn_v.weight", (DIM, KV_HEADS * HEAD_DIM), weight_type),
            (p + "attn_output.weight", (DIM, DIM), weight_type),
            (p + "ffn_norm.weight", (DIM,), GGML_F32),
            (p + "ffn_gate.weight", (DIM, FFN), weight_type),
            (p + "ffn_up.weight", (DIM, FFN), weight_type),
            (p + "ffn_down.weight", (FFN, DIM), weight_type),
        ]
    out += [("output_norm.weight", (DIM,), GGML_F32), ("output.weight", (DIM, VOCAB), weight_type)]
    return out


def tensor_bytes(dims, ggml_type):
    n = 1
    for d in dims:
        n *= d
    if ggml_type == GGML_F32:
        return 4 * n
    if ggml_type == GGML_F16:
        return 2 * n
    return n // 32 * 34  # Q8_0: an fp16 scale and 32 int8 values per block


def pool(ggml_type, rng):
    """About 256 KB of valid encoded values, a whole number of blocks."""
    if ggml_type == GGML_F32:
        return struct.pack("<65536f", *([1.0] * 65536))  # the norms' weights
    if ggml_type == GGML_F16:
        return struct.pack("<131072e", *(rng.gauss(0.0, 0.03) for _ in range(131072)))
    blocks = []
    for _ in range(7710):  # 7710 * 34 bytes
        blocks.append(struct.pack("<e", 0.03 / 127) +
                      bytes(rng.randrange(256) for _ in range(32)))
    return b"".join(blocks)


def align(n):
    return (n + ALIGNMENT - 1) // ALIGNMENT * ALIGNMENT


def main():
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--type", choices=sorted(FILE_TYPE), required=True)
    parser.add_argument("--out", required=True)
    args = parser.parse_args()
    weight_type = GGML_F16 if args.type == "f16" else GGML_Q8_0
    rng = random.Random(1)

    tokens, scores, types = vocabulary()
    meta = [
        kv("general.architecture", T_STRING, "llama"),
        kv("general.name", T_STRING, "yoco-bench-transformer-shape"),
        kv("general.file_type", T_UINT32, FILE_TYPE[args.type]),
        kv("llama.context_length", T_UINT32, 32768),
        kv("llama.embedding_length", T_UINT32, DIM),
        kv("llama.block_count", T_UINT32, LAYERS),
        kv("llama.feed_forward_length", T_UINT32, FFN),
        kv("llama.rope.dimension_count", T_UINT32, HEAD_DIM),
        kv("llama.attention.head_count", T_UINT32, HEADS),
        kv("llama.attention.head_count_kv", T_UINT32, KV_HEADS),
        kv("llama.attention.layer_norm_rms_epsilon", T_FLOAT32, 1e-5),
        kv("tokenizer.ggml.model", T_STRING, "llama"),
        kv_array("tokenizer.ggml.tokens", T_STRING, tokens),
        kv_array("tokenizer.ggml.scores", T_FLOAT32, scores),
        kv_array("tokenizer.ggml.token_type", T_INT32, types),
        kv("tokenizer.ggml.unknown_token_id", T_UINT32, 0),
        kv("tokenizer.ggml.bos_token_id", T_UINT32, 1),
        kv("tokenizer.ggml.eos_token_id", T_UINT32, 2),
    ]
    infos, offset, layout = [], 0, []
    for name, dims, ggml_type in tensors(weight_type):
        infos.append(gguf_string(name) + struct.pack("<I", len(dims)) +
                     struct.pack("<%dQ" % len(dims), *dims) + struct.pack("<IQ", ggml_type, offset))
        size = tensor_bytes(dims, ggml_type)
        layout.append((ggml_type, size))
        offset = align(offset + size)

    pools = {}
    with open(args.out, "wb") as f:
        f.write(b"GGUF" + struct.pack("<IQQ", 3, len(infos), len(meta)))
        f.write(b"".join(meta) + b"".join(infos))
        f.write(b"\0" * (align(f.tell()) - f.tell()))
        for ggml_type, size in layout:
            if ggml_type not in pools:
                pools[ggml_type] = pool(ggml_type, rng)
            p = pools[ggml_type]
            f.write(p * (size // len(p)) + p[:size % len(p)])
            f.write(b"\0" * (align(size) - size))


if __name__ == "__main__":
    main()
