#!/usr/bin/env python3
"""scripts/serve_load.py — a load generator for examples/serve (or any OpenAI-compatible
server), Python standard library only.

N concurrent clients send streamed /v1/completions requests with a mix of prompt and
output lengths (prompts as random token ids, or as text with --text; ignore_eos, so each
answer must have exactly max_tokens tokens), optionally a share of them cancelled
mid-stream (the client closes the connection) and a share malformed (each must get its
4xx with an OpenAI error object). Reports throughput, time to first token and
inter-token latency percentiles as the clients see them, and every failure: an answer
cut short, a wrong status, a connection error. With --pid, the server's resident memory
is sampled too (warm-up, then the rest).

  serve_load.py --url http://127.0.0.1:8080 --clients 16 --duration 60 \\
      --prompt-lengths 16,64,256 --output-lengths 16,64,128 --cancel 0.1 --bad 0.1
Exit status: 0 when nothing failed, 1 otherwise.
"""
import argparse
import http.client
import json
import random
import socket
import sys
import threading
import time
import urllib.parse

MALFORMED = [  # (body, the status it must get)
    (b'{"prompt": [1, 2', 400),
    (b'[1, 2, 3]', 400),
    (b'{"prompt": 5}', 400),
    (b'{"prompt": [1], "max_tokens": "many"}', 400),
    (b'{"prompt": [1], "temperature": "hot"}', 400),
    (b'{"prompt": [1], "model": "no-such-model"}', 404),
    (b'{"prompt": [-1]}', 400),
]


def percentile(xs, p):
    if not xs:
        return None
    xs = sorted(xs)
    k = (len(xs) - 1) * p / 100.0
    lo = int(k)
    hi = min(lo + 1, len(xs) - 1)
    return xs[lo] + (xs[hi] - xs[lo]) * (k - lo)


def rss_kib(pid):
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("VmRSS:"):
                    return int(line.split()[1])
    except OSError:
        return None
    return None


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.cancelled = self.malformed_ok = self.refused = 0
        self.tokens = 0
        self.ttft, self.itl, self.latency = [], [], []
        self.failures = []

    def fail(self, what):
        with self.lock:
            self.failures.append(what)


def one_valid(a, host, port, ctx, rng, st, cancel):
    plen = min(rng.choice(a.prompt_lengths), ctx)
    olen = max(1, min(rng.choice(a.output_lengths), ctx - plen + 1))
    if a.text:
        prompt = " ".join(rng.choice(["the", "a", "cat", "sat", "on", "mat", "and", "then"]) for _ in range(plen))
    else:
        prompt = [rng.randrange(a.vocab) for _ in range(plen)]
    body = {"prompt": prompt, "max_tokens": olen, "stream": True, "ignore_eos": True, "return_token_ids": True,
            "temperature": a.temperature, "seed": rng.randrange(1 << 30)}
    if a.model:
        body["model"] = a.model
    t0 = time.time()
    c = http.client.HTTPConnection(host, port, timeout=a.timeout)
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        r = c.getresponse()
        if r.status == 503:
            r.read()
            with st.lock:
                st.refused += 1
            return
        if r.status != 200:
            st.fail("valid request: status %d %s" % (r.status, r.read()[:200]))
            return
        stop_after = rng.randrange(1, max(2, olen)) if cancel else None
        got, first, last, chunks, done = 0, None, None, 0, False
        times = []
        buf = b""
        while True:
            line = r.readline()
            if not line:
                break
            buf = line.strip()
            if not buf.startswith(b"data: "):
                continue
            payload = buf[len(b"data: "):]
            if payload == b"[DONE]":
                done = True
                break
            ev = json.loads(payload)
            if "error" in ev:
                st.fail("valid request: error event %s" % ev)
                return
            n = sum(len(ch.get("token_ids", [])) for ch in ev.get("choices", []))
            if n:
                now = time.time()
                if first is None:
                    first = now
                    if n > 1:
                        times += [0.0] * (n - 1)
                else:
                    times += [(now - last) / n] * n
                last = now
                got += n
                chunks += 1
            if stop_after is not None and got >= stop_after:
                c.sock.shutdown(socket.SHUT_RDWR)
                with st.lock:
                    st.cancelled += 1
                return
        if not done or got != olen:
            st.fail("valid request: %d of %d tokens, [DONE] %s" % (got, olen, done))
            return
        with st.lock:
            st.ok += 1
            st.tokens += got
            st.ttft.append(first - t0)
            st.itl += times
            st.latency.append(time.time() - t0)
    except (OSError, http.client.HTTPException, ValueError) as e:
        st.fail("valid request: %s: %s" % (type(e).__name__, e))
    finally:
        c.close()


def one_malformed(a, host, port, rng, st):
    raw, want = rng.choice(MALFORMED)
    c = http.client.HTTPConnection(host, port, timeout=a.timeout)
    try:
        c.request("POST", "/v1/completions", body=raw, headers={"Content-Type": "application/json"})
        r = c.getresponse()
        out = r.read()
        try:
            err = json.loads(out).get("error", {})
        except ValueError:
            err = {}
        if r.status != want or not isinstance(err, dict) or not err.get("message"):
            st.fail("malformed %r: status %d, want %d, body %s" % (raw, r.status, want, out[:200]))
        else:
            with st.lock:
                st.malformed_ok += 1
    except (OSError, http.client.HTTPException) as e:
        st.fail("malformed request: %s: %s" % (type(e).__name__, e))
    finally:
        c.close()


def main():
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0], formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--url", default="http://127.0.0.1:8080")
    p.add_argument("--clients", type=int, default=8)
    p.add_argument("--duration", type=float, default=30.0, help="seconds (ignored with --requests)")
    p.add_argument("--requests", type=int, default=0, help="stop after this many requests in all")
    p.add_argument("--prompt-lengths", default="16,64,256")
    p.add_argument("--output-lengths", default="16,64,128")
    p.add_argument("--vocab", type=int, default=97, help="token ids are drawn from [0, vocab)")
    p.add_argument("--text", action="store_true", help="text prompts (the server needs a tokenizer)")
    p.add_argument("--temperature", type=float, default=0.0)
    p.add_argument("--cancel", type=float, default=0.0, help="share of requests cancelled mid-stream")
    p.add_argument("--bad", type=float, default=0.0, help="share of requests malformed")
    p.add_argument("--model", default="")
    p.add_argument("--pid", type=int, default=0, help="the server's pid: sample its resident memory")
    p.add_argument("--warmup", type=float, default=10.0, help="with --pid: seconds before the memory baseline")
    p.add_argument("--timeout", type=float, default=300.0)
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args()
    a.prompt_lengths = [int(x) for x in a.prompt_lengths.split(",")]
    a.output_lengths = [int(x) for x in a.output_lengths.split(",")]
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port or 80

    c = http.client.HTTPConnection(host, port, timeout=30)
    c.request("GET", "/v1/models")
    models = json.loads(c.getresponse().read())
    c.close()
    ctx = int(models["data"][0].get("max_model_len", 2048))

    st = Stats()
    issued = [0]
    issue_lock = threading.Lock()
    t0 = time.time()
    end = t0 + a.duration

    def take():
        with issue_lock:
            if a.requests:
                if issued[0] >= a.requests:
                    return False
            elif time.time() >= end:
                return False
            issued[0] += 1
            return True

    def client(i):
        rng = random.Random(a.seed * 1000 + i)
        while take():
            x = rng.random()
            if x < a.bad:
                one_malformed(a, host, port, rng, st)
            else:
                one_valid(a, host, port, ctx, rng, st, cancel=x < a.bad + a.cancel)

    rss = []
    sampling = [True]

    def sampler():
        while sampling[0]:
            v = rss_kib(a.pid)
            if v is not None:
                rss.append((time.time() - t0, v))
            time.sleep(1.0)
    threads = [threading.Thread(target=client, args=(i,)) for i in range(a.clients)]
    if a.pid:
        threads.append(threading.Thread(target=sampler))
    for t in threads:
        t.start()
    for t in threads[:a.clients]:
        t.join()
    wall = time.time() - t0
    sampling[0] = False
    for t in threads[a.clients:]:
        t.join()

    def ms(v):
        return None if v is None else round(v * 1000, 2)
    report = {
        "clients": a.clients, "seconds": round(wall, 2), "requests": issued[0],
        "completed": st.ok, "cancelled": st.cancelled, "malformed_answered": st.malformed_ok,
        "refused_503": st.refused, "failures": len(st.failures),
        "tokens": st.tokens, "tokens_per_s": round(st.tokens / wall, 2), "requests_per_s": round(st.ok / wall, 2),
        "ttft_ms": {q: ms(percentile(st.ttft, int(q[1:]))) for q in ("p50", "p90", "p99")},
        "itl_ms": {q: ms(percentile(st.itl, int(q[1:]))) for q in ("p50", "p90", "p99")},
        "latency_ms": {q: ms(percentile(st.latency, int(q[1:]))) for q in ("p50", "p90", "p99")},
    }
    if rss:
        after = [v for t, v in rss if t >= a.warmup] or [rss[-1][1]]
        report["rss_mib"] = {"first": round(rss[0][1] / 1024, 1), "after_warmup_min": round(min(after) / 1024, 1),
                             "after_warmup_max": round(max(after) / 1024, 1), "last": round(rss[-1][1] / 1024, 1)}
    if a.json:
        print(json.dumps(report))
    else:
        for k, v in report.items():
            print("%-20s %s" % (k, v))
    for f in st.failures[:20]:
        print("failure:", f, file=sys.stderr)
    return 1 if st.failures else 0


if __name__ == "__main__":
    sys.exit(main())
