#!/usr/bin/env python3
"""tests/serve/serve_test.py — examples/serve on loopback, with the Python standard library.

Starts the server on an ephemeral port with the tiny Llama fixture (tests/models/data/
tiny_llama: vocabulary 97, context 64) and the tokenizer written for it
(tests/transformer/data/tiny_tokenizer), then checks:
  - /health, /v1/models;
  - completions with token ids: the greedy ids the transformer CLI gives (its ctest,
    example.transformer.*: 1,15,42,7,88,3,61 -> 53,34,72,71,16,49,20,15,92,83), the usage
    block, token_ids; 16 concurrent greedy requests each get the ids they get alone;
  - a text prompt; a chat request whose ids are those of the template's prompt
    (example.transformer.chat_ids: 1,95,79,96,93,23,77,3,37,12,96,94) given as ids;
  - streaming: SSE chunks that add up to the non-streamed answer, the finish chunk, the
    usage chunk, data: [DONE]; chat chunks (role, then content);
  - stop strings (text cut before the match, finish_reason "stop"), seeds repeating;
  - every bad input: its status and an OpenAI error object; the server still answers after;
  - a client that disconnects mid-stream is cancelled; the load generator
    (scripts/serve_load.py) with valid, cancelled and malformed requests; /metrics' contents;
  - a model directory without tokenizer.json: ids served, a text prompt 400 naming the file;
  - a full queue: 503 with Retry-After; SIGTERM with a request in flight: it finishes, exit 0;
  - clients that go away before their answer (a random Llama with a 4096 context from
    scripts/make_random_llama.py, so that a request takes seconds): a non-streaming one
    running, a non-streaming one and a streaming one waiting in the queue: each cancelled
    within a bound, the KV blocks back to 0, the server still answering;
  - with --bitnet, the BitNet b1.58 fixture's greedy ids (example.transformer.bitnet_*'s).
"""
import argparse
import http.client
import json
import os
import re
import shutil
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time

FIXTURE_PROMPT = [1, 15, 42, 7, 88, 3, 61]
FIXTURE_IDS = [53, 34, 72, 71, 16, 49, 20, 15, 92, 83]
CHAT_PROMPT_IDS = [1, 95, 79, 96, 93, 23, 77, 3, 37, 12, 96, 94]
CONTEXT = 64

failures = []
checks = [0]


def check(cond, what):
    checks[0] += 1
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Server:
    def __init__(self, exe, model, backend, *extra):
        self.cmd = [exe, model, "--port", "0", "--backend", backend, "--threads", "2", *extra]
        self.proc = subprocess.Popen(self.cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
        line = ""
        deadline = time.time() + 120
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
            m = re.search(r"listening on http://([^:]+):(\d+)", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                return
        self.proc.kill()
        raise RuntimeError("the server did not start: %r\n%s" % (line, self.proc.stderr.read()))

    def request(self, method, path, body=None, raw=None, timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = raw if raw is not None else (json.dumps(body).encode() if body is not None else None)
        headers = {"Content-Type": "application/json"} if data is not None else {}
        c.request(method, path, body=data, headers=headers)
        r = c.getresponse()
        out = r.read()
        c.close()
        return r.status, dict(r.getheaders()), out

    def post(self, path, body=None, raw=None):
        status, headers, out = self.request("POST", path, body, raw)
        try:
            parsed = json.loads(out) if out and not out.startswith(b"data:") else out
        except ValueError:
            parsed = out
        return status, headers, parsed

    def stream(self, path, body):
        """The SSE events of a streamed request: a list of parsed JSON objects, then '[DONE]'."""
        status, headers, out = self.request("POST", path, dict(body, stream=True))
        check(status == 200, "stream %s: status %d %s" % (path, status, out[:300]))
        check(headers.get("Content-Type", "").startswith("text/event-stream"), "stream: content type %s" % headers)
        events = []
        for block in out.decode().split("\n\n"):
            if not block:
                continue
            check(block.startswith("data: "), "stream: an event that is not 'data: ': %r" % block)
            payload = block[len("data: "):]
            events.append(payload if payload == "[DONE]" else json.loads(payload))
        return events

    def metrics(self):
        status, _, out = self.request("GET", "/metrics")
        check(status == 200, "/metrics status %d" % status)
        return out.decode()

    def terminate(self, timeout=60):
        self.proc.send_signal(signal.SIGTERM)
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()
            rc = "timeout"
        err = self.proc.stderr.read()
        return rc, err

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()


def metric(text, name):
    m = re.search(r"^" + re.escape(name) + r" ([0-9.e+-]+)$", text, re.M)
    return float(m.group(1)) if m else None


def quiet(srv):
    """/metrics once no request runs (a client has its answer a moment before the engine
    counts the request ended; the running count drops after that)."""
    deadline = time.time() + 10
    while True:
        m = srv.metrics()
        if metric(m, "kiln_requests_running") == 0 and metric(m, "kiln_queue_length") == 0 or time.time() > deadline:
            return m
        time.sleep(0.01)


def completion(srv, **body):
    status, _, out = srv.post("/v1/completions", body)
    check(status == 200, "completion %s: status %d %s" % (body, status, out))
    return out


def is_error(srv, path, status_want, body=None, raw=None, param=None, code=None, words=None, method="POST"):
    if method == "POST":
        status, headers, out = srv.post(path, body, raw)
    else:
        status, headers, raw_out = srv.request(method, path)
        out = json.loads(raw_out) if raw_out else raw_out
    what = "%s %s -> %d %s" % (path, (raw[:60] if raw else json.dumps(body))[:100] if (raw or body) else "", status, out)
    ok = check(status == status_want, "want %d: %s" % (status_want, what))
    ok = ok and check(isinstance(out, dict) and isinstance(out.get("error"), dict), "no error object: " + what)
    if ok:
        e = out["error"]
        check(isinstance(e.get("message"), str) and e["message"], "error without a message: " + what)
        check(isinstance(e.get("type"), str), "error without a type: " + what)
        check("param" in e and "code" in e, "error without param/code: " + what)
        if param is not None:
            check(e.get("param") == param, "param %r, want %r: %s" % (e.get("param"), param, what))
        if code is not None:
            check(e.get("code") == code, "code %r, want %r: %s" % (e.get("code"), code, what))
        for w in words or []:
            check(w in e["message"], "message lacks %r: %s" % (w, what))
    return status, headers, out


def main_server_checks(srv):
    # health and models
    status, _, out = srv.request("GET", "/health")
    check(status == 200 and json.loads(out) == {"status": "ok"}, "/health: %d %s" % (status, out))
    status, _, out = srv.request("GET", "/v1/models")
    models = json.loads(out)
    check(status == 200 and models["object"] == "list" and models["data"][0]["id"] == "tiny_llama"
          and models["data"][0]["max_model_len"] == CONTEXT, "/v1/models: %s" % models)

    # ids in, the CLI's greedy ids out
    r = completion(srv, model="tiny_llama", prompt=FIXTURE_PROMPT, max_tokens=10, temperature=0, return_token_ids=True)
    c = r["choices"][0]
    check(c["token_ids"] == FIXTURE_IDS, "greedy ids %s, want %s" % (c["token_ids"], FIXTURE_IDS))
    check(c["finish_reason"] == "length", "finish_reason %s" % c["finish_reason"])
    check(r["object"] == "text_completion" and r["model"] == "tiny_llama" and r["id"].startswith("cmpl-"), "envelope: %s" % r)
    check(r["usage"] == {"prompt_tokens": 7, "completion_tokens": 10, "total_tokens": 17}, "usage %s" % r["usage"])
    check(isinstance(c["text"], str), "text: %s" % c)
    text = c["text"]
    r = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=10)
    check("token_ids" not in r["choices"][0] and r["choices"][0]["text"] == text, "without return_token_ids: %s" % r)
    # the default max_tokens: the rest of the context
    r = completion(srv, prompt=FIXTURE_PROMPT, return_token_ids=True, ignore_eos=True)
    check(r["usage"]["completion_tokens"] == CONTEXT - 7 + 1 and r["choices"][0]["token_ids"][:10] == FIXTURE_IDS,
          "default max_tokens: %s" % r["usage"])

    # 16 concurrent greedy requests: each the ids it gets alone
    import random
    rng = random.Random(5)
    prompts = [[rng.randrange(97) for _ in range(rng.randrange(1, 20))] for _ in range(16)]
    lengths = [rng.randrange(1, 25) for _ in range(16)]
    alone = [completion(srv, prompt=p, max_tokens=n, return_token_ids=True, ignore_eos=True)["choices"][0]["token_ids"]
             for p, n in zip(prompts, lengths)]
    together = [None] * 16

    def one(i):
        together[i] = completion(srv, prompt=prompts[i], max_tokens=lengths[i], return_token_ids=True,
                                 ignore_eos=True)["choices"][0]["token_ids"]
    threads = [threading.Thread(target=one, args=(i,)) for i in range(16)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i in range(16):
        check(together[i] == alone[i] and len(alone[i]) == lengths[i],
              "concurrent request %d: %s, alone %s" % (i, together[i], alone[i]))

    # text prompt
    r = completion(srv, prompt=" the Hi", max_tokens=6, return_token_ids=True, ignore_eos=True)
    check(r["usage"]["prompt_tokens"] > 1 and len(r["choices"][0]["token_ids"]) == 6, "text prompt: %s" % r)

    # chat: the template's ids, then what those ids give
    msgs = [{"role": "system", "content": "in"}, {"role": "user", "content": " the Hi "}]
    status, _, chat = srv.post("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "return_token_ids": True,
                                                        "ignore_eos": True})
    check(status == 200, "chat: %d %s" % (status, chat))
    same = completion(srv, prompt=CHAT_PROMPT_IDS, max_tokens=8, return_token_ids=True, ignore_eos=True)
    cc = chat["choices"][0]
    check(chat["object"] == "chat.completion" and chat["id"].startswith("chatcmpl-"), "chat envelope: %s" % chat)
    check(chat["usage"]["prompt_tokens"] == len(CHAT_PROMPT_IDS), "chat prompt tokens: %s" % chat["usage"])
    check(cc["message"]["role"] == "assistant" and cc["message"]["content"] == same["choices"][0]["text"],
          "chat content %r, ids' text %r" % (cc["message"], same["choices"][0]["text"]))
    check(cc["token_ids"] == same["choices"][0]["token_ids"], "chat ids %s, prompt ids' %s" % (cc["token_ids"],
                                                                                             same["choices"][0]["token_ids"]))
    # content as text parts
    status, _, parts = srv.post("/v1/chat/completions", {"messages": [{"role": "system", "content": [{"type": "text", "text": "in"}]},
                                                                      msgs[1]], "max_tokens": 8, "ignore_eos": True})
    check(status == 200 and parts["choices"][0]["message"]["content"] == cc["message"]["content"], "text parts: %s" % parts)

    # streaming: the chunks add up to the answer
    body = {"prompt": FIXTURE_PROMPT, "max_tokens": 10, "return_token_ids": True, "stream_options": {"include_usage": True}}
    ev = srv.stream("/v1/completions", body)
    check(ev and ev[-1] == "[DONE]", "stream does not end with [DONE]: %s" % ev[-2:])
    chunks = [e for e in ev[:-1] if e["choices"]]
    check(all(e["object"] == "text_completion" for e in chunks), "stream objects")
    check(len(chunks) >= 2, "stream: %d chunks" % len(chunks))
    check("".join(e["choices"][0]["text"] for e in chunks) == text, "streamed text != text")
    check(sum((e["choices"][0].get("token_ids", []) for e in chunks), []) == FIXTURE_IDS, "streamed ids")
    check(chunks[-1]["choices"][0]["finish_reason"] == "length"
          and all(e["choices"][0]["finish_reason"] is None for e in chunks[:-1]), "stream finish reasons")
    check(ev[-2]["choices"] == [] and ev[-2]["usage"]["completion_tokens"] == 10, "stream usage chunk: %s" % ev[-2])
    ev = srv.stream("/v1/chat/completions", {"messages": msgs, "max_tokens": 8, "ignore_eos": True})
    check(ev[-1] == "[DONE]" and ev[0]["object"] == "chat.completion.chunk" and ev[0]["choices"][0]["delta"].get("role") == "assistant",
          "chat stream start: %s" % ev[:1])
    check("".join(e["choices"][0]["delta"].get("content", "") for e in ev[:-1]) == cc["message"]["content"],
          "chat streamed content")
    check(ev[-2]["choices"][0]["finish_reason"] == "length", "chat stream finish: %s" % ev[-2])

    # stop strings: the text ends before the first match
    full = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=30, ignore_eos=True)["choices"][0]["text"]
    cut = None
    for k in range(1, len(full) - 1):
        s = full[k:k + 2]
        if full.find(s) == k and s.strip():
            cut = k
            break
    if check(cut is not None, "no stop string to cut %r at" % full):
        s = full[cut:cut + 2]
        r = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=30, stop=[s, "zzzzzz"], ignore_eos=True)
        check(r["choices"][0]["text"] == full[:cut] and r["choices"][0]["finish_reason"] == "stop",
              "stop %r: %r, want %r" % (s, r["choices"][0], full[:cut]))
        ev = srv.stream("/v1/completions", {"prompt": FIXTURE_PROMPT, "max_tokens": 30, "stop": s, "ignore_eos": True})
        check("".join(e["choices"][0]["text"] for e in ev[:-1]) == full[:cut] and ev[-2]["choices"][0]["finish_reason"] == "stop",
              "streamed stop: %s" % ev)

    # sampling with a seed repeats
    a = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=12, temperature=0.9, top_p=0.95, top_k=40, min_p=0.01, seed=7,
                   return_token_ids=True, ignore_eos=True)
    b = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=12, temperature=0.9, top_p=0.95, top_k=40, min_p=0.01, seed=7,
                   return_token_ids=True, ignore_eos=True)
    check(a["choices"][0]["token_ids"] == b["choices"][0]["token_ids"], "seeded sampling differs")

    # bad input: each a 4xx with an error object
    P = "/v1/completions"
    is_error(srv, P, 400, raw=b'{"prompt": [1, 2', code="invalid_json")
    is_error(srv, P, 400, raw=b'[1, 2]')
    is_error(srv, P, 400, body={"max_tokens": 3}, param="prompt")
    is_error(srv, P, 400, body={"prompt": 5}, param="prompt")
    is_error(srv, P, 400, body={"prompt": [1, "a"]}, param="prompt")
    is_error(srv, P, 400, body={"prompt": [1.5]}, param="prompt")
    is_error(srv, P, 400, body={"prompt": []}, param="prompt")
    is_error(srv, P, 400, body={"prompt": [1], "max_tokens": "3"}, param="max_tokens")
    is_error(srv, P, 400, body={"prompt": [1], "max_tokens": 0}, param="max_tokens")
    is_error(srv, P, 400, body={"prompt": [1], "temperature": "hot"}, param="temperature")
    is_error(srv, P, 400, body={"prompt": [1], "temperature": -1}, param="temperature")
    is_error(srv, P, 400, body={"prompt": [1], "top_p": 0}, param="top_p")
    is_error(srv, P, 400, body={"prompt": [1], "top_k": 1.5}, param="top_k")
    is_error(srv, P, 400, body={"prompt": [1], "seed": "x"}, param="seed")
    is_error(srv, P, 400, body={"prompt": [1], "stream": "yes"}, param="stream")
    is_error(srv, P, 400, body={"prompt": [1], "stop": 3}, param="stop")
    is_error(srv, P, 400, body={"prompt": [1], "stop": [""]}, param="stop")
    is_error(srv, P, 400, body={"prompt": [1], "n": 2}, param="n")
    is_error(srv, P, 400, body={"prompt": [1], "model": 3}, param="model")
    is_error(srv, P, 404, body={"prompt": [1], "model": "gpt-4"}, param="model", code="model_not_found", words=["gpt-4"])
    is_error(srv, P, 400, body={"prompt": [1] * (CONTEXT + 1)}, param="prompt", code="context_length_exceeded",
             words=["65", "64"])
    is_error(srv, P, 400, body={"prompt": FIXTURE_PROMPT, "max_tokens": 60}, param="max_tokens",
             code="context_length_exceeded", words=["60", "64"])
    is_error(srv, P, 400, body={"prompt": [1, 97]}, param="prompt", code="invalid_token_id", words=["97"])
    is_error(srv, P, 400, body={"prompt": [-1]}, param="prompt", code="invalid_token_id")
    is_error(srv, P, 413, raw=json.dumps({"prompt": "x" * (80 * 1024)}).encode(), code="request_too_large")
    C = "/v1/chat/completions"
    is_error(srv, C, 400, body={"prompt": "hi"}, param="messages")
    is_error(srv, C, 400, body={"messages": "hi"}, param="messages")
    is_error(srv, C, 400, body={"messages": [{"content": "hi"}]}, param="messages[0]")
    is_error(srv, C, 400, body={"messages": [{"role": "user", "content": 5}]}, param="messages[0].content")
    is_error(srv, C, 400, body={"messages": [{"role": "user", "content": [{"type": 5, "text": "x"}]}]})
    is_error(srv, C, 400, body={"messages": [{"role": "user", "content": "hi"}], "stream_options": {"include_usage": 1}},
             param="include_usage")
    is_error(srv, "/v1/nothing", 404, body={"prompt": [1]})
    is_error(srv, "/nothing", 404, method="GET")
    # and the server still answers
    r = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=10, return_token_ids=True)
    check(r["choices"][0]["token_ids"] == FIXTURE_IDS, "after the errors: %s" % r)

    # a client that goes away mid-stream is cancelled: it resets the connection (SO_LINGER 0)
    # as soon as the headers come, so the server's next write fails at once. The fixture
    # generates its 64 tokens in milliseconds: on a busy machine the request may end before
    # the server writes again, so the scenario is tried up to 5 times, and each try must
    # end the request one way or the other
    cancelled_once = False
    for attempt in range(5):
        m0 = quiet(srv)
        s = socket.create_connection((srv.host, srv.port), timeout=30)
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        body = json.dumps({"prompt": [1], "max_tokens": CONTEXT, "stream": True, "ignore_eos": True}).encode()
        s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
                  % (len(body), body))
        got = s.recv(64)
        check(got.startswith(b"HTTP/1.1 200"), "disconnect: %r" % got[:100])
        s.close()
        deadline = time.time() + 10
        while True:
            m1 = srv.metrics()
            cancelled = metric(m1, "kiln_engine_requests_cancelled_total") - metric(m0, "kiln_engine_requests_cancelled_total")
            completed = metric(m1, "kiln_engine_requests_completed_total") - metric(m0, "kiln_engine_requests_completed_total")
            if cancelled + completed >= 1 or time.time() > deadline:
                break
            time.sleep(0.01)
        check(cancelled + completed == 1, "a disconnected stream: cancelled %s, completed %s" % (cancelled, completed))
        if cancelled == 1:
            cancelled_once = True
            break
    check(cancelled_once, "a disconnected stream was never cancelled in 5 tries")
    r = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=10, return_token_ids=True)
    check(r["choices"][0]["token_ids"] == FIXTURE_IDS, "after the disconnect: %s" % r)

    # the load generator (scripts/serve_load.py): valid, cancelled and malformed requests
    # from 4 clients at once, each answered as it should be
    load = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "serve_load.py")
    r = subprocess.run([sys.executable, load, "--url", "http://%s:%d" % (srv.host, srv.port), "--clients", "4",
                        "--requests", "40", "--prompt-lengths", "3,20", "--output-lengths", "5,30", "--cancel", "0.2",
                        "--bad", "0.2", "--json"], capture_output=True, text=True, timeout=120)
    rep = json.loads(r.stdout) if r.stdout.strip().startswith("{") else {}
    check(r.returncode == 0 and rep.get("failures") == 0 and rep.get("requests") == 40
          and rep["completed"] + rep["cancelled"] + rep["malformed_answered"] == 40 and rep["malformed_answered"] > 0
          and rep["completed"] > 0 and rep["ttft_ms"]["p50"] is not None,
          "serve_load.py: rc %d %s %s" % (r.returncode, r.stdout, r.stderr[-2000:]))

    # metrics
    m = srv.metrics()
    for name in ["kiln_batch_size", "kiln_queue_length", "kiln_kv_blocks_used", "kiln_kv_blocks_total",
                 "kiln_generation_tokens_total", "kiln_time_to_first_token_seconds_count",
                 "kiln_inter_token_latency_seconds_count", "kiln_requests_running"]:
        check(metric(m, name) is not None, "/metrics lacks %s" % name)
    check((metric(m, "kiln_generation_tokens_total") or 0) >= 16 * 1 + 10, "generation tokens %s" % metric(m, "kiln_generation_tokens_total"))
    check((metric(m, "kiln_kv_blocks_total") or 0) > 0, "kv blocks total")
    check((metric(m, "kiln_time_to_first_token_seconds_count") or 0) >= 20, "TTFT count")
    check((metric(m, "kiln_inter_token_latency_seconds_count") or 0) >= 100, "ITL count")
    check(re.search(r'^kiln_requests_total\{endpoint="/v1/completions",status="200"\} [1-9]', m, re.M) is not None,
          "requests_total 200")
    check(re.search(r'^kiln_requests_total\{endpoint="/v1/completions",status="400"\} [1-9]', m, re.M) is not None,
          "requests_total 400")
    check(re.search(r'^kiln_time_to_first_token_seconds_bucket\{le="\+Inf"\} [1-9]', m, re.M) is not None, "TTFT buckets")


def bare_server_checks(srv):
    """A server over a model directory without tokenizer.json, max-batch 1, no queue."""
    r = completion(srv, prompt=FIXTURE_PROMPT, max_tokens=10)
    check(r["choices"][0].get("token_ids") == FIXTURE_IDS and r["choices"][0]["text"] == "", "ids without a tokenizer: %s" % r)
    is_error(srv, "/v1/completions", 400, body={"prompt": "Hello"}, param="prompt", code="tokenizer_missing",
             words=["tokenizer.json"])
    is_error(srv, "/v1/chat/completions", 400, body={"messages": [{"role": "user", "content": "Hi"}]},
             code="tokenizer_missing", words=["tokenizer.json"])
    # a full queue: 503 with Retry-After, the others answered in full
    for attempt in range(5):
        results = [None] * 8

        def one(i):
            results[i] = srv.post("/v1/completions", {"prompt": [1, 2], "max_tokens": CONTEXT - 1, "ignore_eos": True})
        threads = [threading.Thread(target=one, args=(i,)) for i in range(8)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        busy = [x for x in results if x[0] == 503]
        done = [x for x in results if x[0] == 200]
        check(len(busy) + len(done) == 8, "full queue: statuses %s" % [x[0] for x in results])
        check(all(len(x[2]["choices"][0]["token_ids"]) == CONTEXT - 1 for x in done), "full queue: short answers")
        if busy:
            st, headers, out = busy[0]
            check(headers.get("Retry-After") == "1", "503 without Retry-After: %s" % headers)
            check(out["error"]["code"] == "queue_full" and "busy" in out["error"]["message"], "503 error: %s" % out)
            break
    check(attempt < 4 or busy, "8 concurrent requests on max-batch 1 and queue 0 never got a 503")

    # SIGTERM with a request in flight (its headers have come): it finishes, then exit 0.
    # First the last request's place must be free (a client has its answer a moment before
    # the engine counts the request ended)
    quiet(srv)
    c = http.client.HTTPConnection(srv.host, srv.port, timeout=60)
    c.request("POST", "/v1/completions", body=json.dumps({"prompt": [3], "max_tokens": CONTEXT, "stream": True,
                                                          "ignore_eos": True}), headers={"Content-Type": "application/json"})
    r = c.getresponse()
    srv.proc.send_signal(signal.SIGTERM)
    out = r.read().decode()
    c.close()
    rc, err = srv.terminate()
    events = [json.loads(b[len("data: "):]) for b in out.split("\n\n") if b.startswith("data: {")]
    check(r.status == 200 and out.endswith("data: [DONE]\n\n"), "the request in flight at SIGTERM: %d %r" % (r.status, out[-200:]))
    check(events and events[-1]["choices"][0]["finish_reason"] == "length"
          and sum(len(e["choices"][0].get("token_ids", [])) for e in events) == CONTEXT,
          "the request in flight at SIGTERM: %s" % events[-1:])
    check(rc == 0 and "SIGTERM" in err, "SIGTERM: exit %s\n%s" % (rc, err))


def wait_metrics(srv, cond, seconds):
    """/metrics once cond(metrics text) holds (then True), or the last one after `seconds`."""
    deadline = time.time() + seconds
    while True:
        m = srv.metrics()
        if cond(m):
            return m, True
        if time.time() > deadline:
            return m, False
        time.sleep(0.01)


def open_completion(srv, body, reset=False):
    """A socket that has sent a completion request and reads nothing; with reset, closing
    it resets the connection (SO_LINGER 0) instead of ending it (FIN)."""
    s = socket.create_connection((srv.host, srv.port), timeout=30)
    if reset:
        s.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
    data = json.dumps(body).encode()
    s.sendall(b"POST /v1/completions HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\nContent-Length: %d\r\n\r\n%s"
              % (len(data), data))
    return s


def disconnect_checks(exe, backend, tmp):
    """Clients that go away before their answer is whole, on a random Llama with a 4096
    context at --max-batch 1: a non-streaming request running (4000 tokens: seconds on the
    model below, milliseconds on the fixture), then a non-streaming and a streaming one
    waiting behind it. Each closes its socket; each must be cancelled within 5 s (the server
    looks every 100 ms), its KV blocks back to the pool, and the server must go on."""
    script = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "scripts", "make_random_llama.py")
    model = os.path.join(tmp, "long_llama")
    subprocess.run([sys.executable, script, model, "--hidden", "256", "--layers", "2", "--heads", "4", "--kv-heads", "2",
                    "--ffn", "512", "--vocab", "512", "--context", "4096", "--seed", "1"], check=True, timeout=120)
    srv = Server(exe, model, backend, "--max-batch", "1")
    try:
        long = {"prompt": [1, 2, 3], "max_tokens": 4000, "ignore_eos": True}
        m0 = quiet(srv)
        c0 = metric(m0, "kiln_engine_requests_cancelled_total")
        g0 = metric(m0, "kiln_generation_tokens_total")
        cancelled = lambda m, n: metric(m, "kiln_engine_requests_cancelled_total") - c0 >= n

        running = open_completion(srv, long)  # FIN when closed
        m, ok = wait_metrics(srv, lambda m: metric(m, "kiln_requests_running") == 1 and metric(m, "kiln_kv_blocks_used") > 0, 10)
        check(ok, "disconnect: the long request never ran: %s" % m)
        waiting = open_completion(srv, long, reset=True)
        streaming = open_completion(srv, dict(long, stream=True))
        m, ok = wait_metrics(srv, lambda m: metric(m, "kiln_queue_length") == 2, 10)
        check(ok, "disconnect: two requests never waited: queue %s" % metric(m, "kiln_queue_length"))
        got = streaming.recv(64)
        check(got.startswith(b"HTTP/1.1 200"), "disconnect: a waiting stream's headers: %r" % got[:100])

        # the waiting ones leave the queue
        waiting.close()
        streaming.close()
        t = time.time()
        m, ok = wait_metrics(srv, lambda m: cancelled(m, 2) and metric(m, "kiln_queue_length") == 0, 5)
        check(ok, "disconnect: the waiting requests were not cancelled in %.1f s: cancelled %s, queue %s"
              % (time.time() - t, metric(m, "kiln_engine_requests_cancelled_total") - c0, metric(m, "kiln_queue_length")))
        check(metric(m, "kiln_requests_running") == 1, "disconnect: the running request ended with the waiting ones")

        # the running one ends, its blocks back
        running.close()
        t = time.time()
        m, ok = wait_metrics(srv, lambda m: cancelled(m, 3) and metric(m, "kiln_requests_running") == 0
                             and metric(m, "kiln_kv_blocks_used") == 0, 5)
        check(ok, "disconnect: the running non-streaming request was not cancelled in %.1f s: cancelled %s, running %s, "
              "KV blocks %s" % (time.time() - t, metric(m, "kiln_engine_requests_cancelled_total") - c0,
                                metric(m, "kiln_requests_running"), metric(m, "kiln_kv_blocks_used")))
        check(metric(m, "kiln_generation_tokens_total") - g0 < 4000,
              "disconnect: the running request generated to its end: %s tokens" % (metric(m, "kiln_generation_tokens_total") - g0))
        check(re.search(r'^kiln_requests_total\{endpoint="/v1/completions",status="499"\} 2$', m, re.M) is not None,
              "disconnect: the two non-streaming requests not counted as 499: %s" % re.findall(r"^kiln_requests_total.*$", m, re.M))
        check(metric(m, "kiln_engine_requests_completed_total") == metric(m0, "kiln_engine_requests_completed_total"),
              "disconnect: a request completed instead of being cancelled")

        # and the server answers the next ones, streamed or not
        r = completion(srv, prompt=[1, 2, 3], max_tokens=5, ignore_eos=True, return_token_ids=True)
        check(len(r["choices"][0]["token_ids"]) == 5 and r["choices"][0]["finish_reason"] == "length",
              "disconnect: the next request: %s" % r)
        ev = srv.stream("/v1/completions", {"prompt": [1, 2, 3], "max_tokens": 5, "ignore_eos": True, "return_token_ids": True})
        check(ev and ev[-1] == "[DONE]" and sum(len(e["choices"][0]["token_ids"]) for e in ev[:-1]) == 5,
              "disconnect: the next stream: %s" % ev[-2:])
        rc, err = srv.terminate()
        check(rc == 0, "disconnect: exit %s %s" % (rc, err))
    finally:
        srv.kill()


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--bitnet", help="the BitNet b1.58 fixture (tests/models/data/tiny_bitnet)")
    p.add_argument("--backend", default="cpu")
    a = p.parse_args()
    t0 = time.time()
    srv = Server(a.server, a.model, a.backend, "--tokenizer", a.tokenizer, "--max-body", "64")
    try:
        main_server_checks(srv)
        rc, err = srv.terminate()
        check(rc == 0 and "SIGTERM" in err, "SIGTERM: exit %s, stderr %s" % (rc, err))
    finally:
        srv.kill()
    bare = Server(a.server, a.model, a.backend, "--max-batch", "1", "--queue", "0")
    try:
        bare_server_checks(bare)
    finally:
        bare.kill()
    tmp = tempfile.mkdtemp(prefix="kiln_serve_test_")
    try:
        disconnect_checks(a.server, a.backend, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)
    if a.bitnet:  # the other architecture, and --weights on it refused
        bn = Server(a.server, a.bitnet, a.backend)
        try:
            r = completion(bn, prompt=[5, 17, 60, 2], max_tokens=5)
            check(r["choices"][0].get("token_ids") == [5, 5, 24, 24, 24], "BitNet greedy ids: %s" % r)
            rc, err = bn.terminate()
            check(rc == 0, "BitNet server: exit %s %s" % (rc, err))
        finally:
            bn.kill()
        r = subprocess.run([a.server, a.bitnet, "--weights", "f16"], capture_output=True, text=True, timeout=60)
        check(r.returncode == 2 and "--weights" in r.stderr, "serve BITNET --weights: %d %s" % (r.returncode, r.stderr))
    print("%d checks, %d failures, %.1f s" % (checks[0], len(failures), time.time() - t0))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
