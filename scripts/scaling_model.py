#!/usr/bin/env python3
"""scripts/scaling_model.py — decode tokens/s of kiln's tensor-parallel decoder against the
number of ranks, from a model of one decode step (docs/scaling.md explains it):

    t(N) = bytes_streamed / N / bw_rank                      the weights, split over N ranks
         + (2 L + 1) * allreduce(hidden * 4 bytes, N)        two a layer, one of the embedded row
         + allgather(ceil(vocab / N) * 4 bytes, N)           the logits

    allreduce(m, N) = min(ring: 2 (N - 1) alpha + 2 (N - 1) / N * m / beta,
                          recursive doubling: ceil(log2 N) * (alpha + m / beta))
    allgather(m, N) = (N - 1) * (alpha + m / beta)                       (ring)

bytes_streamed is every weight a token reads once (every projection and the LM head; the
embedding contributes one row); bw_rank the memory bandwidth one rank reaches streaming
them; alpha the latency of one message and beta the bandwidth of one link. One rank per
node, batch 1, BitNet's extra small collectives left out.

    python3 scripts/scaling_model.py                       # the table of docs/scaling.md
    python3 scripts/scaling_model.py --check T1 T2 --bw-rank GB/s --alpha-us A --beta GB/s
        # the 1B shape on this machine: predicted 1 rank and 2 ranks against measured T1, T2

Standard library only.
"""
import argparse
import math

# name: (hidden, layers, heads, kv_heads, ffn, vocab)
SHAPES = {
    "1B (Llama 3.2 1B-like: 2048, 16 layers, GQA 32/8, FFN 5632, vocab 32000)": (2048, 16, 32, 8, 5632, 32000),
    "8B (Llama 3 8B: 4096, 32 layers, GQA 32/8, FFN 14336, vocab 128256)": (4096, 32, 32, 8, 14336, 128256),
    "70B (Llama 3 70B: 8192, 80 layers, GQA 64/8, FFN 28672, vocab 128256)": (8192, 80, 64, 8, 28672, 128256),
}

# name: (alpha seconds, beta bytes/s)
NETWORKS = {
    "InfiniBand HDR 200 Gb/s (alpha 2 us, beta 24 GB/s)": (2e-6, 24e9),
    "Ethernet 100 Gb/s, RoCE (alpha 5 us, beta 12 GB/s)": (5e-6, 12e9),
    "Ethernet 10 Gb/s, TCP (alpha 30 us, beta 1.2 GB/s)": (30e-6, 1.2e9),
}


def streamed_params(hidden, layers, heads, kv_heads, ffn, vocab):
    head_dim = hidden // heads
    kv = kv_heads * head_dim
    per_layer = hidden * (hidden + 2 * kv + hidden) + 3 * hidden * ffn
    return layers * per_layer + vocab * hidden  # + the LM head (untied or tied: read once)


def allreduce(m, n, alpha, beta):
    if n == 1:
        return 0.0
    ring = 2 * (n - 1) * alpha + 2 * (n - 1) / n * m / beta
    doubling = math.ceil(math.log2(n)) * (alpha + m / beta)
    return min(ring, doubling)


def allgather(m, n, alpha, beta):
    return 0.0 if n == 1 else (n - 1) * (alpha + m / beta)


def step_seconds(shape, n, bytes_per_weight, bw_rank, alpha, beta):
    hidden, layers, heads, kv_heads, ffn, vocab = shape
    weights = streamed_params(*shape) * bytes_per_weight / n / bw_rank
    comm = (2 * layers + 1) * allreduce(hidden * 4, n, alpha, beta)
    comm += allgather(math.ceil(vocab / n) * 4, n, alpha, beta)
    return weights, comm


def table(bytes_per_weight, bw_rank, ranks):
    out = []
    for net, (alpha, beta) in NETWORKS.items():
        out.append("\n%s; %.0f GB/s a rank, %g bytes a weight\n" % (net, bw_rank / 1e9, bytes_per_weight))
        out.append("| shape | " + " | ".join("N = %d" % n for n in ranks) + " |")
        out.append("|---|" + "---|" * len(ranks))
        for name, shape in SHAPES.items():
            cells = []
            for n in ranks:
                w, c = step_seconds(shape, n, bytes_per_weight, bw_rank, alpha, beta)
                cells.append("%.1f tok/s (comm %.0f%%)" % (1.0 / (w + c), 100.0 * c / (w + c)))
            out.append("| %s | %s |" % (name.split(" (")[0], " | ".join(cells)))
    return "\n".join(out)


def main():
    p = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--bytes-per-weight", type=float, default=2.0, help="2: bf16/f16 weights, 1: int8")
    p.add_argument("--bw-rank", type=float, default=100.0, help="GB/s one rank streams its weights at")
    p.add_argument("--ranks", default="1,2,4,8,16")
    p.add_argument("--check", nargs=2, type=float, metavar=("T1", "T2"),
                   help="measured tok/s of the 1B shape at 1 rank and 2 ranks on one machine")
    p.add_argument("--bw-rank-2", type=float, default=None,
                   help="with --check: GB/s one of the 2 ranks streams at (default: half of --bw-rank, one machine)")
    p.add_argument("--alpha-us", type=float, default=2.6, help="with --check: latency of one collective's message")
    p.add_argument("--beta", type=float, default=1.9, help="with --check: GB/s of one transfer")
    a = p.parse_args()
    if a.check:
        shape = list(SHAPES.values())[0]
        alpha, beta = a.alpha_us * 1e-6, a.beta * 1e9
        w1, c1 = step_seconds(shape, 1, a.bytes_per_weight, a.bw_rank * 1e9, alpha, beta)
        bw2 = (a.bw_rank_2 if a.bw_rank_2 else a.bw_rank / 2) * 1e9
        w2, c2 = step_seconds(shape, 2, a.bytes_per_weight, bw2, alpha, beta)
        print("1B shape, %g bytes a weight, %.1f GB/s for 1 rank, %.1f GB/s a rank for 2:" % (a.bytes_per_weight, a.bw_rank, bw2 / 1e9))
        print("  1 rank : predicted %.2f tok/s (weights %.1f ms), measured %.2f (%.0f%%)" % (1 / (w1 + c1), w1 * 1e3, a.check[0], 100 * a.check[0] * (w1 + c1)))
        print("  2 ranks: predicted %.2f tok/s (weights %.1f ms, collectives %.2f ms), measured %.2f (%.0f%%)" %
              (1 / (w2 + c2), w2 * 1e3, c2 * 1e3, a.check[1], 100 * a.check[1] * (w2 + c2)))
        return
    ranks = [int(x) for x in a.ranks.split(",")]
    print(table(a.bytes_per_weight, a.bw_rank * 1e9, ranks))


if __name__ == "__main__":
    main()
