#!/usr/bin/env python3
"""A random Llama checkpoint (BF16 model.safetensors and config.json), by default of the 1B
shape (hidden 2048, 16 layers, 32 query and 8 kv heads, FFN 5632, vocabulary 32000,
context 2048, untied; 1.71 GB), with the standard library only: weights of magnitude in
[2^-7, 2^-6) with random signs (random bytes with the exponent fixed), norm weights 1. For
timing and memory figures only (the tensor-parallel figures of README.md; the 1B shape
takes a few minutes). The options give smaller shapes, e.g. one that serves on 2 cores
(docs/bench/serve-soak-*.md) or a long context for tests (tests/serve/serve_test.py).

    python3 scripts/make_random_llama.py /tmp/llama1b
    python3 scripts/make_random_llama.py /tmp/small --hidden 512 --layers 4 --heads 8 \\
        --kv-heads 4 --ffn 1408 --vocab 4096 --context 2048 --seed 1
"""
import argparse, json, os, random, struct


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0],
                                formatter_class=argparse.RawDescriptionHelpFormatter, epilog=__doc__.split("\n\n", 1)[1])
    p.add_argument("out", metavar="OUT_DIR")
    p.add_argument("--hidden", type=int, default=2048, help="hidden size (default 2048)")
    p.add_argument("--layers", type=int, default=16, help="decoder layers (default 16)")
    p.add_argument("--heads", type=int, default=32, help="query heads (default 32; head dim = hidden / heads)")
    p.add_argument("--kv-heads", type=int, default=8, help="key/value heads (default 8)")
    p.add_argument("--ffn", type=int, default=5632, help="MLP intermediate size (default 5632)")
    p.add_argument("--vocab", type=int, default=32000, help="vocabulary size (default 32000)")
    p.add_argument("--context", type=int, default=2048, help="max_position_embeddings (default 2048)")
    p.add_argument("--seed", type=int, help="draw the weights from random.Random(seed) (default: os.urandom)")
    a = p.parse_args()
    H, L, Hq, Hkv, I, V = a.hidden, a.layers, a.heads, a.kv_heads, a.ffn, a.vocab
    if H % Hq or Hq % Hkv:
        p.error("--hidden must be a multiple of --heads, and --heads of --kv-heads")
    D = H // Hq
    rand = random.Random(a.seed).randbytes if a.seed is not None else os.urandom
    out = a.out
    os.makedirs(out, exist_ok=True)
    cfg = dict(architectures=["LlamaForCausalLM"], model_type="llama", hidden_size=H, intermediate_size=I,
               num_hidden_layers=L, num_attention_heads=Hq, num_key_value_heads=Hkv, vocab_size=V,
               max_position_embeddings=a.context, rms_norm_eps=1e-5, rope_theta=10000.0, tie_word_embeddings=False,
               hidden_act="silu", torch_dtype="bfloat16")
    json.dump(cfg, open(os.path.join(out, "config.json"), "w"), indent=1)
    tensors = [("model.embed_tokens.weight", [V, H])]
    for l in range(L):
        q = f"model.layers.{l}."
        tensors += [(q + "input_layernorm.weight", [H]), (q + "self_attn.q_proj.weight", [Hq * D, H]),
                    (q + "self_attn.k_proj.weight", [Hkv * D, H]), (q + "self_attn.v_proj.weight", [Hkv * D, H]),
                    (q + "self_attn.o_proj.weight", [H, Hq * D]), (q + "post_attention_layernorm.weight", [H]),
                    (q + "mlp.gate_proj.weight", [I, H]), (q + "mlp.up_proj.weight", [I, H]),
                    (q + "mlp.down_proj.weight", [H, I])]
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
                x = int.from_bytes(rand(c), "little")
                m = int.from_bytes(bytes.fromhex("7f80") * (c // 2), "little")  # sign | mantissa: 0x807f
                o = int.from_bytes(bytes.fromhex("003c") * (c // 2), "little")  # exponent 120: 0x3c00
                f.write(((x & m) | o).to_bytes(c, "little"))
                nb -= c


main()
