#!/usr/bin/env python3
"""A random Llama checkpoint of the 1B shape (hidden 2048, 16 layers, 32 query and 8 kv
heads, FFN 5632, vocabulary 32000, untied; BF16 model.safetensors, 1.71 GB, and
config.json), with the standard library only: weights of magnitude in [2^-7, 2^-6) with
random signs (random bytes with the exponent fixed), norm weights 1. For timing and memory
figures only (the tensor-parallel figures of README.md). Takes a few minutes.

    python3 scripts/make_random_llama.py /tmp/llama1b
"""
import json, os, struct, sys

def main():
    if len(sys.argv) != 2:
        sys.exit("usage: make_random_llama.py OUT_DIR")
    out = sys.argv[1]
    H, L, Hq, Hkv, I, V = 2048, 16, 32, 8, 5632, 32000
    D = H // Hq
    os.makedirs(out, exist_ok=True)
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, intermediate_size=I,
               num_hidden_layers=L, num_attention_heads=Hq, num_key_value_heads=Hkv, vocab_size=V,
               max_position_embeddings=2048, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
               hidden_act="silu", torch_dtype="bfloat16")
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    tensors = [("model.embed_tokens.weight", [V, H])]
    for l in range(L):
        p = f"model.layers.{l}."
        tensors += [(p + "input_layernorm.weight", [H]), (p + "self_attn.q_proj.weight", [Hq * D, H]),
                    (p + "self_attn.k_proj.weight", [Hkv * D, H]), (p + "self_attn.v_proj.weight", [Hkv * D, H]),
                    (p + "self_attn.o_proj.weight", [H, Hq * D]), (p + "post_attention_layernorm.weight", [H]),
                    (p + "mlp.gate_proj.weight", [I, H]), (p + "mlp.up_proj.weight", [I, H]),
                    (p + "mlp.down_proj.weight", [H, I])]
    tensors += [("model.norm.weight", [H]), ("lm_head.weight", [V, H])]
    header, off = {}, 0
    for n, s in tensors:
        nb = 2
        for d in s: nb *= d
        header[n] = dict(dtype="BF16", shape=s, data_offsets=[off, off + nb])
        off += nb
    h = json.dumps(header).encode()
    h += b" " * ((8 - len(h) % 8) % 8)
    chunk = 1 << 24  # bytes
    mask = int.from_bytes(bytes.fromhex("7f80") * (chunk // 2), "little")   # sign | mantissa: 0x807f
    fixed = int.from_bytes(bytes.fromhex("003c") * (chunk // 2), "little")  # exponent 120: 0x3c00
    with open(os.path.join(out, "model.safetensors"), "wb") as f:
        f.write(struct.pack("<Q", len(h)) + h)
        for n, s in tensors:
            nb = 2
            for d in s: nb *= d
            if len(s) == 1:
                f.write(struct.pack("<H", 0x3F80) * (nb // 2))
                continue
            while nb > 0:
                c = min(chunk, nb)
                x = int.from_bytes(os.urandom(c), "little")
                if c == chunk:
                    x = (x & mask) | fixed
                    f.write(x.to_bytes(c, "little"))
                else:
                    m = int.from_bytes(bytes.fromhex("7f80") * (c // 2), "little")
                    o = int.from_bytes(bytes.fromhex("003c") * (c // 2), "little")
                    f.write(((x & m) | o).to_bytes(c, "little"))
                nb -= c

main()
