#!/usr/bin/python3
"""Writes one random-weight checkpoint twice, for scripts/peer_llama_cpp.sh: as a Hugging Face
directory that kiln's examples/transformer loads, and as a GGUF file that llama.cpp loads,
written with llama.cpp's own gguf-py (PYTHONPATH=LLAMA_CPP/gguf-py). The GGUF tensors are
read back from the safetensors file, so both programs run the same values.

  peer_gguf.py llama  OUT_DIR [--layers N]   Llama, hidden 2048, 16 layers, GQA 32/8 heads of
                                             64, FFN 5632, vocabulary 32000, untied LM head
                                             (benchmarks/llama_bench.hpp's shape and weight
                                             distribution: uniform in +-1/sqrt(fan-in), norms
                                             1), float32:
                                               OUT_DIR/kiln/        config.json, model.safetensors
                                               OUT_DIR/llama-f32.gguf
  peer_gguf.py bitnet OUT_DIR [--layers N]   BitNet b1.58 2B-4T shape, hidden 2560, 30 layers,
                                             20/5 heads of 128, FFN 6912, vocabulary 128256,
                                             tied embedding; ternary codes uniform in
                                             {-1, 0, 1}, weight_scale (bf16) in [1, 4), the
                                             embedding normal with std 0.02 in bf16:
                                               OUT_DIR/kiln/        the packed layout of
                                                                    microsoft/bitnet-b1.58-2B-4T
                                               OUT_DIR/bitnet-f16.gguf  projections as f16
                                                                    values code / weight_scale
                                                                    (what llama.cpp's converter
                                                                    makes of that layout),
                                                                    the embedding f16

The GGUF vocabulary is a placeholder (SentencePiece-style: <unk>, <s>, </s>, the 256 byte
tokens, then "▁tN"): llama-bench draws random ids and never tokenizes text. Llama's q and k
rows are permuted from the HF half-split rotary layout to GGML's interleaved one, as
llama.cpp's convert_hf_to_gguf.py does for Llama, so the two programs compute the same
function; for BitNet its converter does not permute, and neither does this script.
Differences that remain (about speed-neutral): llama.cpp's BitNet graph uses SiLU in the gated
FFN where the 2B-4T config says relu2, and it quantizes the activations to int8 per block of
256 (Q8_K) where kiln does per token (W1.58A8), as the model card's formula does.
"""
import argparse
import json
import struct
import sys
from pathlib import Path

import numpy as np

try:
    import gguf
except ImportError:
    sys.exit("peer_gguf.py: gguf-py not found: run with PYTHONPATH=LLAMA_CPP_SOURCE/gguf-py")

SEED = 20261127


def llama_config(layers):
    return {
        "architectures": ["LlamaForCausalLM"], "model_type": "llama",
        "hidden_size": 2048, "intermediate_size": 5632, "num_hidden_layers": layers,
        "num_attention_heads": 32, "num_key_value_heads": 8, "head_dim": 64,
        "rms_norm_eps": 1e-5, "rope_theta": 10000.0, "vocab_size": 32000,
        "tie_word_embeddings": False, "max_position_embeddings": 2048,
        "hidden_act": "silu", "torch_dtype": "float32",
    }


def bitnet_config(layers):
    return {
        "architectures": ["BitNetForCausalLM"], "model_type": "bitnet",
        "hidden_size": 2560, "intermediate_size": 6912, "num_hidden_layers": layers,
        "num_attention_heads": 20, "num_key_value_heads": 5,
        "rms_norm_eps": 1e-5, "rope_theta": 500000.0, "vocab_size": 128256,
        "tie_word_embeddings": True, "max_position_embeddings": 4096,
        "hidden_act": "relu2", "attention_bias": False, "torch_dtype": "bfloat16",
        "quantization_config": {"quant_method": "bitnet", "linear_class": "autobitlinear",
                                "quantization_mode": "offline"},
    }


# ---- safetensors ------------------------------------------------------------------------

ST_DTYPES = {"F32": 4, "BF16": 2, "U8": 1}


def write_safetensors(path, plan, make):
    """plan: [(name, dtype, shape)]; make(name) -> ndarray of that many bytes, in plan order."""
    header, off = {}, 0
    for name, dtype, shape in plan:
        n = int(np.prod(shape)) * ST_DTYPES[dtype]
        header[name] = {"dtype": dtype, "shape": list(shape), "data_offsets": [off, off + n]}
        off += n
    header["__metadata__"] = {"format": "pt", "writer": "scripts/peer_gguf.py"}
    text = json.dumps(header, separators=(",", ":")).encode()
    text += b" " * (-len(text) % 8)
    with open(path, "wb") as f:
        f.write(struct.pack("<Q", len(text)))
        f.write(text)
        for name, dtype, shape in plan:
            a = np.ascontiguousarray(make(name))
            assert a.nbytes == header[name]["data_offsets"][1] - header[name]["data_offsets"][0], name
            a.tofile(f)


def read_safetensors(path):
    """name -> (dtype, shape, np.memmap of the raw bytes)."""
    with open(path, "rb") as f:
        n = struct.unpack("<Q", f.read(8))[0]
        header = json.loads(f.read(n))
    header.pop("__metadata__", None)
    raw = np.memmap(path, dtype=np.uint8, mode="r", offset=8 + n)
    return {k: (v["dtype"], tuple(v["shape"]), raw[v["data_offsets"][0]:v["data_offsets"][1]])
            for k, v in header.items()}


def bf16_bits(x):
    """float32 array -> bf16 bits (round to nearest even)."""
    b = np.ascontiguousarray(x, dtype=np.float32).view(np.uint32)
    return ((b + 0x7FFF + ((b >> 16) & 1)) >> 16).astype(np.uint16)


def bf16_to_f32(bits):
    return (bits.astype(np.uint32) << 16).view(np.float32)


# ---- GGUF -------------------------------------------------------------------------------

def add_vocab(w, n):
    tokens = ["<unk>", "<s>", "</s>"] + [f"<0x{b:02X}>" for b in range(256)]
    tokens += [f"\u2581t{i}" for i in range(len(tokens), n)]
    types = [gguf.TokenType.UNKNOWN, gguf.TokenType.CONTROL, gguf.TokenType.CONTROL]
    types += [gguf.TokenType.BYTE] * 256 + [gguf.TokenType.NORMAL] * (n - 259)
    w.add_tokenizer_model("llama")
    w.add_tokenizer_pre("default")
    w.add_token_list(tokens)
    w.add_token_scores([0.0] * 3 + [0.0] * 256 + [-float(i) for i in range(n - 259)])
    w.add_token_types(types)
    w.add_unk_token_id(0)
    w.add_bos_token_id(1)
    w.add_eos_token_id(2)


def write_gguf(path, arch, c, tensors, head_dim):
    """tensors: [(gguf name, shape, dtype, make)], written one at a time."""
    w = gguf.GGUFWriter(str(path), arch)
    w.add_name(f"kiln peer random {arch}")
    w.add_context_length(c["max_position_embeddings"])
    w.add_embedding_length(c["hidden_size"])
    w.add_block_count(c["num_hidden_layers"])
    w.add_feed_forward_length(c["intermediate_size"])
    w.add_head_count(c["num_attention_heads"])
    w.add_head_count_kv(c["num_key_value_heads"])
    w.add_rope_dimension_count(head_dim)
    w.add_rope_freq_base(c["rope_theta"])
    w.add_layer_norm_rms_eps(c["rms_norm_eps"])
    w.add_vocab_size(c["vocab_size"])
    w.add_file_type(gguf.LlamaFileType.ALL_F32 if all(t[2] == np.float32 for t in tensors if len(t[1]) == 2)
                    else gguf.LlamaFileType.MOSTLY_F16)
    add_vocab(w, c["vocab_size"])
    for name, shape, dtype, _ in tensors:
        w.add_tensor_info(name, shape, np.dtype(dtype), int(np.prod(shape)) * np.dtype(dtype).itemsize)
    w.write_header_to_file()
    w.write_kv_data_to_file()
    w.write_ti_data_to_file()
    for name, shape, dtype, make in tensors:
        a = np.ascontiguousarray(make(), dtype=dtype).reshape(shape)
        w.write_tensor_data(a)
    w.close()


def permute_rope(w, heads):
    """HF half-split rotary rows -> GGML interleaved (convert_hf_to_gguf.py's LlamaModel.permute)."""
    return w.reshape(heads, 2, w.shape[0] // heads // 2, *w.shape[1:]).swapaxes(1, 2).reshape(w.shape)


# ---- Llama ------------------------------------------------------------------------------

def llama(out, layers):
    c = llama_config(layers)
    H, I, V, D = c["hidden_size"], c["intermediate_size"], c["vocab_size"], c["head_dim"]
    nq, nk = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    proj = {"self_attn.q_proj": (nq, H), "self_attn.k_proj": (nk, H), "self_attn.v_proj": (nk, H),
            "self_attn.o_proj": (H, nq), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H),
            "mlp.down_proj": (H, I)}
    plan = [("model.embed_tokens.weight", "F32", (V, H))]
    for l in range(layers):
        p = f"model.layers.{l}."
        plan.append((p + "input_layernorm.weight", "F32", (H,)))
        plan += [(p + n + ".weight", "F32", s) for n, s in proj.items()]
        plan.append((p + "post_attention_layernorm.weight", "F32", (H,)))
    plan += [("model.norm.weight", "F32", (H,)), ("lm_head.weight", "F32", (V, H))]
    shapes = {n: s for n, _, s in plan}
    rng = np.random.default_rng(SEED)

    def make(name):
        s = shapes[name]
        if len(s) == 1:
            return np.ones(s, np.float32)
        a = 1.0 / np.sqrt(s[1])
        return rng.uniform(-a, a, size=s).astype(np.float32)

    kdir = out / "kiln"
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "config.json").write_text(json.dumps(c, indent=2) + "\n")
    write_safetensors(kdir / "model.safetensors", plan, make)
    print(f"wrote {kdir}/model.safetensors", flush=True)

    st = read_safetensors(kdir / "model.safetensors")

    def f32(name, heads=0):
        dtype, shape, raw = st[name]
        x = raw.view(np.float32).reshape(shape)
        return (lambda: permute_rope(np.array(x), heads)) if heads else (lambda: x)

    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    tensors = [("token_embd.weight", (V, H), np.float32, f32("model.embed_tokens.weight"))]
    for l in range(layers):
        p = f"model.layers.{l}."
        tensors.append((f"blk.{l}.attn_norm.weight", (H,), np.float32, f32(p + "input_layernorm.weight")))
        tensors.append((f"blk.{l}.ffn_norm.weight", (H,), np.float32, f32(p + "post_attention_layernorm.weight")))
        for n, s in proj.items():
            heads = {"self_attn.q_proj": c["num_attention_heads"], "self_attn.k_proj": c["num_key_value_heads"]}.get(n, 0)
            tensors.append((f"blk.{l}.{names[n]}.weight", s, np.float32, f32(p + n + ".weight", heads)))
    tensors += [("output_norm.weight", (H,), np.float32, f32("model.norm.weight")),
                ("output.weight", (V, H), np.float32, f32("lm_head.weight"))]
    write_gguf(out / "llama-f32.gguf", "llama", c, tensors, D)
    print(f"wrote {out}/llama-f32.gguf", flush=True)


# ---- BitNet -----------------------------------------------------------------------------

def pack(codes):
    """int8 codes [out, in] -> uint8 [out/4, in]: row i*R + r in bits 2i..2i+1 of row r, code + 1."""
    R = codes.shape[0] // 4
    u = (codes + 1).astype(np.uint8).reshape(4, R, codes.shape[1])
    return u[0] | (u[1] << 2) | (u[2] << 4) | (u[3] << 6)


def unpack(packed):
    R = packed.shape[0]
    return np.concatenate([((packed >> (2 * i)) & 3).astype(np.int8) - 1 for i in range(4)]).reshape(4 * R, -1)


def bitnet(out, layers):
    c = bitnet_config(layers)
    H, I, V = c["hidden_size"], c["intermediate_size"], c["vocab_size"]
    D = H // c["num_attention_heads"]
    nq, nk = c["num_attention_heads"] * D, c["num_key_value_heads"] * D
    proj = {"self_attn.q_proj": (nq, H), "self_attn.k_proj": (nk, H), "self_attn.v_proj": (nk, H),
            "self_attn.o_proj": (H, nq), "mlp.gate_proj": (I, H), "mlp.up_proj": (I, H),
            "mlp.down_proj": (H, I)}
    norms = {"input_layernorm": H, "post_attention_layernorm": H, "self_attn.attn_sub_norm": H,
             "mlp.ffn_sub_norm": I}
    plan = [("model.embed_tokens.weight", "BF16", (V, H))]
    for l in range(layers):
        p = f"model.layers.{l}."
        plan += [(p + n + ".weight", "BF16", (s,)) for n, s in norms.items()]
        for n, (rows, cols) in proj.items():
            plan += [(p + n + ".weight", "U8", (rows // 4, cols)), (p + n + ".weight_scale", "BF16", (1,))]
    plan.append(("model.norm.weight", "BF16", (H,)))
    shapes = {n: s for n, _, s in plan}
    rng = np.random.default_rng(SEED)

    def make(name):
        s = shapes[name]
        if name.endswith("weight_scale"):
            return bf16_bits(rng.uniform(1.0, 4.0, size=s))
        if name == "model.embed_tokens.weight":
            return bf16_bits(rng.normal(0.0, 0.02, size=s).astype(np.float32))
        if len(s) == 1:
            return bf16_bits(np.ones(s, np.float32))
        return pack(rng.integers(-1, 2, size=(4 * s[0], s[1]), dtype=np.int8))

    kdir = out / "kiln"
    kdir.mkdir(parents=True, exist_ok=True)
    (kdir / "config.json").write_text(json.dumps(c, indent=2) + "\n")
    write_safetensors(kdir / "model.safetensors", plan, make)
    print(f"wrote {kdir}/model.safetensors", flush=True)

    st = read_safetensors(kdir / "model.safetensors")

    def bf16_f32(name):
        _, shape, raw = st[name]
        return lambda: bf16_to_f32(raw.view(np.uint16)).reshape(shape)

    def ternary(name):
        _, shape, raw = st[name + ".weight"]
        scale = bf16_to_f32(st[name + ".weight_scale"][2].view(np.uint16))[0]
        return lambda: (unpack(raw.reshape(shape)).astype(np.float32) / scale).astype(np.float16)

    names = {"self_attn.q_proj": "attn_q", "self_attn.k_proj": "attn_k", "self_attn.v_proj": "attn_v",
             "self_attn.o_proj": "attn_output", "mlp.gate_proj": "ffn_gate", "mlp.up_proj": "ffn_up",
             "mlp.down_proj": "ffn_down"}
    gnorms = {"input_layernorm": "attn_norm", "post_attention_layernorm": "ffn_norm",
              "self_attn.attn_sub_norm": "attn_sub_norm", "mlp.ffn_sub_norm": "ffn_sub_norm"}
    tensors = [("token_embd.weight", (V, H), np.float16, bf16_f32("model.embed_tokens.weight"))]
    for l in range(layers):
        p = f"model.layers.{l}."
        tensors += [(f"blk.{l}.{gnorms[n]}.weight", (s,), np.float32, bf16_f32(p + n + ".weight"))
                    for n, s in norms.items()]
        tensors += [(f"blk.{l}.{names[n]}.weight", s, np.float16, ternary(p + n)) for n, s in proj.items()]
    tensors.append(("output_norm.weight", (H,), np.float32, bf16_f32("model.norm.weight")))
    write_gguf(out / "bitnet-f16.gguf", "bitnet", c, tensors, D)
    print(f"wrote {out}/bitnet-f16.gguf", flush=True)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("model", choices=["llama", "bitnet"])
    ap.add_argument("out", type=Path)
    ap.add_argument("--layers", type=int, default=None, help="layer count (default: the full shape's)")
    a = ap.parse_args()
    a.out.mkdir(parents=True, exist_ok=True)
    if a.model == "llama":
        llama(a.out, a.layers or 16)
    else:
        bitnet(a.out, a.layers or 30)


if __name__ == "__main__":
    main()
