#!/usr/bin/env python3
"""scripts/serve_load.py — a load generator for examples/serve (or any OpenAI-compatible
server), Python standard library only.

N concurrent clients send /v1/completions requests with a mix of prompt and output
lengths (prompts as random token ids, or as text with --text; ignore_eos, so each answer
must have exactly max_tokens tokens), streamed, or a share of them (--nonstream) not
streamed; optionally a share of them cancelled (--cancel: the client closes the
connection, a stream after a random number of its tokens, a non-streamed request after a
random wait of up to --cancel-wait seconds, counted as answered when its answer comes
first) and a share malformed (--bad: each must get its 4xx with an OpenAI error object).
Reports throughput, time to first token and inter-token latency percentiles as the
streaming clients see them, request latency, and every failure by kind: an answer cut
short, a wrong status, a timeout (--timeout, per socket operation), a connection error.
With --pid, the server's resident memory (VmRSS) is sampled every second and reported
every --rss-every seconds, and the run also checks that the server is still alive and
healthy at the end, and that once it is quiet no request runs and no KV block is held
(its /metrics). The report ends with PASS/FAIL lines.

  serve_load.py --url http://127.0.0.1:8080 --clients 16 --duration 60 \\
      --prompt-lengths 16,64,256 --output-lengths 16,64,128 --cancel 0.1 --bad 0.1
Exit status: 0 when every check passed, 1 otherwise.
"""
import argparse
import collections
import http.client
import json
import os
import random
import re
import socket
import sys
import threading
import time
import urllib.parse

MALFORMED = [  # (kind, body, the status it must get)
    ("invalid_json", b'{"prompt": [1, 2', 400),
    ("not_an_object", b'[1, 2, 3]', 400),
    ("prompt_type", b'{"prompt": 5}', 400),
    ("max_tokens_type", b'{"prompt": [1], "max_tokens": "many"}', 400),
    ("temperature_type", b'{"prompt": [1], "temperature": "hot"}', 400),
    ("unknown_model", b'{"prompt": [1], "model": "no-such-model"}', 404),
    ("negative_id", b'{"prompt": [-1]}', 400),
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


def alive(pid):
    """Whether process pid exists and is not a zombie."""
    try:
        with open("/proc/%d/status" % pid) as f:
            for line in f:
                if line.startswith("State:"):
                    return "Z" not in line.split()[1]
    except OSError:
        return False
    return True


class Stats:
    def __init__(self):
        self.lock = threading.Lock()
        self.ok = self.cancelled = self.malformed_ok = self.refused = 0
        self.ok_stream = self.ok_plain = self.cancelled_stream = self.cancelled_plain = self.cancel_too_late = 0
        self.valid = 0  # valid requests sent (answered, cancelled, refused or failed)
        self.tokens = 0
        self.ttft, self.itl, self.latency = [], [], []
        self.malformed = collections.Counter()  # kind -> answered with its status and an error object
        self.failures = []
        self.kinds = collections.Counter()  # failure kind -> count

    def fail(self, kind, what):
        with self.lock:
            self.failures.append(what)
            self.kinds[kind] += 1


def error_kind(e):
    """A failure's kind from the exception a client got."""
    if isinstance(e, (socket.timeout, TimeoutError)):
        return "timeout"
    if isinstance(e, OSError):
        return "connection"
    if isinstance(e, ValueError):
        return "bad_answer"
    return "protocol"


def valid_body(a, ctx, rng, stream):
    """A valid completion request of a random prompt and output length (within the
    context), and the output length it asks for."""
    plen = min(rng.choice(a.prompt_lengths), ctx)
    olen = max(1, min(rng.choice(a.output_lengths), ctx - plen + 1))
    if a.text:
        prompt = " ".join(rng.choice(["the", "a", "cat", "sat", "on", "mat", "and", "then"]) for _ in range(plen))
    else:
        prompt = [rng.randrange(a.vocab) for _ in range(plen)]
    body = {"prompt": prompt, "max_tokens": olen, "stream": stream, "ignore_eos": True, "return_token_ids": True,
            "temperature": a.temperature, "seed": rng.randrange(1 << 30)}
    if a.model:
        body["model"] = a.model
    return body, olen


def one_valid(a, host, port, ctx, rng, st, cancel):
    if rng.random() < a.nonstream:
        return one_plain(a, host, port, ctx, rng, st, cancel)
    body, olen = valid_body(a, ctx, rng, stream=True)
    t0 = time.time()
    with st.lock:
        st.valid += 1
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
            st.fail("status", "valid request: status %d %s" % (r.status, r.read()[:200]))
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
                st.fail("error_event", "valid request: error event %s" % ev)
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
                    st.cancelled_stream += 1
                return
        if not done or got != olen:
            st.fail("short", "valid request: %d of %d tokens, [DONE] %s" % (got, olen, done))
            return
        with st.lock:
            st.ok += 1
            st.ok_stream += 1
            st.tokens += got
            st.ttft.append(first - t0)
            st.itl += times
            st.latency.append(time.time() - t0)
    except (OSError, http.client.HTTPException, ValueError) as e:
        st.fail(error_kind(e), "valid request: %s: %s" % (type(e).__name__, e))
    finally:
        c.close()


def one_plain(a, host, port, ctx, rng, st, cancel):
    """A request with "stream": false: one JSON answer with every token, or (cancel) a
    client that closes the connection after a random wait unless the answer came first."""
    body, olen = valid_body(a, ctx, rng, stream=False)
    wait = rng.uniform(0.0, a.cancel_wait) if cancel else None
    t0 = time.time()
    with st.lock:
        st.valid += 1
    c = http.client.HTTPConnection(host, port, timeout=a.timeout)
    try:
        c.request("POST", "/v1/completions", body=json.dumps(body), headers={"Content-Type": "application/json"})
        if wait is not None:
            c.sock.settimeout(wait)
            try:
                r = c.getresponse()
            except (socket.timeout, TimeoutError):
                c.sock.shutdown(socket.SHUT_RDWR)  # FIN: the server notices at its next look at the socket
                with st.lock:
                    st.cancelled += 1
                    st.cancelled_plain += 1
                return
            c.sock.settimeout(a.timeout)
            with st.lock:
                st.cancel_too_late += 1
        else:
            r = c.getresponse()
        out = r.read()
        if r.status == 503:
            with st.lock:
                st.refused += 1
            return
        if r.status != 200:
            st.fail("status", "valid request (not streamed): status %d %s" % (r.status, out[:200]))
            return
        ans = json.loads(out)
        ch = ans["choices"][0]
        n = len(ch.get("token_ids", []))
        if n != olen or ch.get("finish_reason") != "length" or ans.get("usage", {}).get("completion_tokens") != olen:
            st.fail("short", "valid request (not streamed): %d of %d tokens, finish_reason %s, usage %s"
                    % (n, olen, ch.get("finish_reason"), ans.get("usage")))
            return
        with st.lock:
            st.ok += 1
            st.ok_plain += 1
            st.tokens += n
            st.latency.append(time.time() - t0)
    except (OSError, http.client.HTTPException, ValueError, KeyError, IndexError, TypeError) as e:
        st.fail(error_kind(e), "valid request (not streamed): %s: %s" % (type(e).__name__, e))
    finally:
        c.close()


def one_malformed(a, host, port, rng, st):
    kind, raw, want = rng.choice(MALFORMED)
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
            st.fail("malformed", "malformed %r: status %d, want %d, body %s" % (raw, r.status, want, out[:200]))
        else:
            with st.lock:
                st.malformed_ok += 1
                st.malformed["%s %d" % (kind, want)] += 1
    except (OSError, http.client.HTTPException) as e:
        st.fail(error_kind(e), "malformed request: %s: %s" % (type(e).__name__, e))
    finally:
        c.close()


def get(host, port, path, timeout=30):
    c = http.client.HTTPConnection(host, port, timeout=timeout)
    try:
        c.request("GET", path)
        r = c.getresponse()
        return r.status, r.read().decode(errors="replace")
    finally:
        c.close()


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


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
    p.add_argument("--nonstream", type=float, default=0.0, help="share of valid requests sent with \"stream\": false")
    p.add_argument("--cancel", type=float, default=0.0, help="share of requests cancelled (the client closes the connection)")
    p.add_argument("--cancel-wait", type=float, default=2.0,
                   help="a cancelled non-streamed request closes after a wait drawn from [0, this] seconds")
    p.add_argument("--bad", type=float, default=0.0, help="share of requests malformed")
    p.add_argument("--model", default="")
    p.add_argument("--pid", type=int, default=0,
                   help="the server's pid: sample its resident memory, check that it is alive at the end")
    p.add_argument("--warmup", type=float, default=10.0, help="with --pid: seconds before the memory baseline")
    p.add_argument("--rss-every", type=float, default=30.0, help="with --pid: seconds between the reported memory samples")
    p.add_argument("--rss-tolerance", type=float, default=32.0,
                   help="with --pid: MiB the resident memory may grow from the warm-up baseline to the end")
    p.add_argument("--timeout", type=float, default=300.0, help="client socket timeout, seconds (each connect, read)")
    p.add_argument("--seed", type=int, default=1)
    p.add_argument("--json", action="store_true", help="print the report as JSON")
    a = p.parse_args()
    a.prompt_lengths = [int(x) for x in a.prompt_lengths.split(",")]
    a.output_lengths = [int(x) for x in a.output_lengths.split(",")]
    u = urllib.parse.urlparse(a.url)
    host, port = u.hostname, u.port or 80

    _, out = get(host, port, "/v1/models")
    models = json.loads(out)
    ctx = int(models["data"][0].get("max_model_len", 2048))
    _, m0 = get(host, port, "/metrics")

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

    # the server once quiet: nothing running or waiting, no KV block held (the engine counts
    # a request ended a moment after its client has the answer or has gone)
    server = {}
    try:
        deadline = time.time() + 30
        while True:
            _, m1 = get(host, port, "/metrics")
            quiet = metric(m1, "kiln_requests_running") == 0 and metric(m1, "kiln_queue_length") == 0 \
                and metric(m1, "kiln_kv_blocks_used") == 0
            if quiet or time.time() > deadline:
                break
            time.sleep(0.1)
        diff = lambda n: None if metric(m1, n) is None or metric(m0, n) is None else int(metric(m1, n) - metric(m0, n))
        health, _ = get(host, port, "/health")
        server = {"health": health, "running": metric(m1, "kiln_requests_running"), "queued": metric(m1, "kiln_queue_length"),
                  "kv_blocks_used": metric(m1, "kiln_kv_blocks_used"), "kv_blocks_total": metric(m1, "kiln_kv_blocks_total"),
                  "engine_completed": diff("kiln_engine_requests_completed_total"),
                  "engine_cancelled": diff("kiln_engine_requests_cancelled_total"),
                  "engine_failed": diff("kiln_engine_requests_failed_total"),
                  "engine_refused": diff("kiln_engine_requests_refused_total")}
    except (OSError, http.client.HTTPException, ValueError) as e:
        server = {"error": "%s: %s" % (type(e).__name__, e)}
    if a.pid:
        server["alive"] = alive(a.pid)

    def ms(v):
        return None if v is None else round(v * 1000, 2)
    report = {
        "clients": a.clients, "seconds": round(wall, 2), "requests": issued[0],
        "completed": st.ok, "cancelled": st.cancelled, "malformed_answered": st.malformed_ok,
        "refused_503": st.refused, "failures": len(st.failures),
        "valid": st.valid, "completed_streamed": st.ok_stream, "completed_not_streamed": st.ok_plain,
        "cancelled_streamed": st.cancelled_stream, "cancelled_not_streamed": st.cancelled_plain,
        "cancel_too_late": st.cancel_too_late, "malformed_by_kind": dict(sorted(st.malformed.items())),
        "failures_by_kind": dict(sorted(st.kinds.items())), "timeout_s": a.timeout,
        "tokens": st.tokens, "tokens_per_s": round(st.tokens / wall, 2), "requests_per_s": round(st.ok / wall, 2),
        "ttft_ms": {q: ms(percentile(st.ttft, int(q[1:]))) for q in ("p50", "p90", "p99")},
        "itl_ms": {q: ms(percentile(st.itl, int(q[1:]))) for q in ("p50", "p90", "p99")},
        "latency_ms": {q: ms(percentile(st.latency, int(q[1:]))) for q in ("p50", "p90", "p99")},
        "server": server,
    }
    checks = []  # (passed, what)
    checks.append((st.valid == st.ok + st.cancelled + st.refused,
                   "valid requests answered in full: %d (%d streamed, %d not), %d cancelled by their clients, %d refused "
                   "(503), %d failed, of %d" % (st.ok, st.ok_stream, st.ok_plain, st.cancelled, st.refused,
                                                st.valid - st.ok - st.cancelled - st.refused, st.valid)))
    bad_n = issued[0] - st.valid
    checks.append((st.malformed_ok == bad_n, "malformed requests answered with their 4xx and an error object: %d of %d (%s)"
                   % (st.malformed_ok, bad_n, ", ".join("%s: %d" % kv for kv in sorted(st.malformed.items())))))
    checks.append((st.kinds["timeout"] == 0, "client timeouts (%g s): %d" % (a.timeout, st.kinds["timeout"])))
    checks.append((not st.failures, "failures: %d %s" % (len(st.failures), dict(sorted(st.kinds.items())))))
    if "error" in server:
        checks.append((False, "the server after the run: %s" % server["error"]))
    else:
        checks.append((server["health"] == 200 and server.get("alive", True),
                       "the server after the run: /health %d%s" % (server["health"],
                                                                   ", process alive" if server.get("alive") else
                                                                   (", process gone" if a.pid else ""))))
        checks.append((server["running"] == 0 and server["queued"] == 0 and server["kv_blocks_used"] == 0,
                       "once quiet: %g running, %g waiting, %g KV blocks of %g in use"
                       % (server["running"], server["queued"], server["kv_blocks_used"], server["kv_blocks_total"])))
    if rss:
        after = [(t, v) for t, v in rss if t >= a.warmup] or [rss[-1]]
        base = after[0][1]
        report["rss_mib"] = {"first": round(rss[0][1] / 1024, 1), "at_warmup": round(base / 1024, 1),
                             "after_warmup_min": round(min(v for _, v in after) / 1024, 1),
                             "after_warmup_max": round(max(v for _, v in after) / 1024, 1), "last": round(rss[-1][1] / 1024, 1)}
        series, next_t = [], 0.0
        for t, v in rss:
            if t >= next_t:
                series.append([round(t), round(v / 1024, 1)])
                next_t = t + a.rss_every
        if series[-1][0] != round(rss[-1][0]):
            series.append([round(rss[-1][0]), round(rss[-1][1] / 1024, 1)])
        report["rss_series_mib"] = series
        growth = (rss[-1][1] - base) / 1024
        checks.append((growth <= a.rss_tolerance,
                       "resident memory after warm-up (%g s): %.1f MiB, at the end %.1f MiB (%+.1f; tolerance %g), range %.1f-%.1f"
                       % (a.warmup, base / 1024, rss[-1][1] / 1024, growth, a.rss_tolerance,
                          report["rss_mib"]["after_warmup_min"], report["rss_mib"]["after_warmup_max"])))
    report["checks"] = [("PASS " if ok else "FAIL ") + what for ok, what in checks]
    report["pass"] = all(ok for ok, _ in checks)
    if a.json:
        print(json.dumps(report))
    else:
        for k, v in report.items():
            if k != "checks":
                print("%-24s %s" % (k, v))
        for line in report["checks"]:
            print(line)
    for f in st.failures[:20]:
        print("failure:", f, file=sys.stderr)
    return 0 if report["pass"] else 1


if __name__ == "__main__":
    sys.exit(main())
