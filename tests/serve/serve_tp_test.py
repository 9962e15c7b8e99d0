#!/usr/bin/env python3
"""tests/serve/serve_tp_test.py — examples/serve tensor-parallel under mpirun, on loopback.

`mpirun -np 2 serve MODEL --tp 2`: rank 0 listens and runs the engine, rank 1 follows its
steps (kiln/serving/tensor_parallel.hpp). With the tiny Llama fixture (tests/models/data/
tiny_llama), checks:
  - concurrent greedy completions (prompts of several lengths, more requests than
    --max-batch, so sequences end, wait, join and reuse the ended ones' places), streamed and
    not, with "return_token_ids": the same ids as the single-process server gives for the
    same prompts (and the fixture's reference ids: 1,15,42,7,88,3,61 -> 53,34,72,71,...);
  - an idle server longer than the ranks' timeout (KILN_DIST_TIMEOUT, set low here): rank 0's
    heartbeats keep rank 1 waiting, and requests after the pause get the same ids;
  - SIGTERM to rank 0: it drains, tells rank 1 to stop, and mpirun (so every rank) exits 0
    within a bounded time, each rank saying it stopped;
  - rank 0 failing (it cannot listen): rank 1 is told and the job exits non-zero, saying so;
  - rank 1 killed (with --bitnet, on the BitNet fixture, after its greedy ids): the job
    exits non-zero within a bounded time, naming it.
"""
import argparse
import http.client
import json
import os
import re
import signal
import subprocess
import sys
import threading
import time

FIXTURE_PROMPT = [1, 15, 42, 7, 88, 3, 61]
FIXTURE_IDS = [53, 34, 72, 71, 16, 49, 20, 15, 92, 83]
BITNET_PROMPT, BITNET_IDS = [5, 17, 60, 2], [5, 5, 24, 24, 24]  # tests/models/data/tiny_bitnet
# (prompt, max_tokens): lengths 1 to 40 (a prefill chunk's worth and more than one block),
# outputs of different lengths, so sequences end at different steps
CASES = [
    (FIXTURE_PROMPT, 10),
    ([5], 12),
    ([2, 9, 31, 77, 4, 60, 18, 22, 90, 11, 3, 45, 67, 8, 29, 51, 14, 36], 6),
    ([40, 41, 42], 15),
    ([(7 * i + 3) % 97 for i in range(40)], 9),
    ([88, 12, 6, 54, 33], 3),
    ([19, 19, 19, 19], 11),
    ([61, 3, 88, 7, 42, 15, 1], 8),
]

failures = []


def check(cond, what):
    if not cond:
        failures.append(what)
        print("FAIL:", what, flush=True)
    return cond


class Server:
    """A server process (serve, or mpirun running it) whose stdout names its address."""

    def __init__(self, cmd, env, wait_listen=True):
        self.cmd = cmd
        self.proc = subprocess.Popen(cmd, stdin=subprocess.DEVNULL, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True,
                                     env=env)
        self.out, self.err = [], []
        self.host = self.port = self.pid0 = None
        t = threading.Thread(target=self._drain, args=(self.proc.stderr, self.err), daemon=True)
        t.start()
        self._threads = [t]
        if not wait_listen:
            return
        deadline = time.time() + 60
        while time.time() < deadline:
            line = self.proc.stdout.readline()
            if not line and self.proc.poll() is not None:
                break
            self.out.append(line)
            m = re.search(r"listening on http://([^:]+):(\d+)(?: \(rank 0 of \d+, pid (\d+)\))?", line)
            if m:
                self.host, self.port = m.group(1), int(m.group(2))
                self.pid0 = int(m.group(3)) if m.group(3) else self.proc.pid
                break
        t = threading.Thread(target=self._drain, args=(self.proc.stdout, self.out), daemon=True)
        t.start()
        self._threads.append(t)
        if self.port is None:
            self.kill()
            raise RuntimeError("the server did not start: %s\n%s\n%s" % (cmd, "".join(self.out), self.stderr()))

    @staticmethod
    def _drain(stream, into):
        for line in stream:
            into.append(line)

    def stderr(self):
        return "".join(self.err)

    def wait(self, timeout):
        try:
            rc = self.proc.wait(timeout=timeout)
        except subprocess.TimeoutExpired:
            rc = "timeout"
            self.kill()
        for t in self._threads:
            t.join(timeout=5)
        return rc

    def kill(self):
        if self.proc.poll() is None:
            self.proc.kill()
            self.proc.wait()

    def request(self, method, path, body=None, timeout=60):
        c = http.client.HTTPConnection(self.host, self.port, timeout=timeout)
        data = json.dumps(body).encode() if body is not None else None
        c.request(method, path, body=data, headers={"Content-Type": "application/json"} if data else {})
        r = c.getresponse()
        out = r.read()
        c.close()
        return r.status, out


def ids_of(srv, prompt, max_tokens, stream):
    body = {"prompt": prompt, "max_tokens": max_tokens, "temperature": 0, "return_token_ids": True, "stream": stream}
    status, out = srv.request("POST", "/v1/completions", body)
    if not check(status == 200, "completion %s: status %d %r" % (prompt, status, out[:300])):
        return None
    if not stream:
        return json.loads(out)["choices"][0]["token_ids"]
    ids = []
    for block in out.decode().split("\n\n"):
        if block.startswith("data: ") and block != "data: [DONE]":
            for c in json.loads(block[len("data: "):]).get("choices", []):
                ids += c.get("token_ids") or []
    check(out.decode().endswith("data: [DONE]\n\n"), "stream %s: no [DONE] at the end" % prompt)
    return ids


def all_ids(srv, stream_some):
    """Every case at once, from its own thread; the odd ones streamed when stream_some."""
    got = [None] * len(CASES)

    def one(i):
        p, n = CASES[i]
        got[i] = ids_of(srv, p, n, stream_some and i % 2 == 1)

    threads = [threading.Thread(target=one, args=(i,)) for i in range(len(CASES))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    return got


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--server", required=True)
    ap.add_argument("--model", required=True)
    ap.add_argument("--bitnet", help="the BitNet b1.58 fixture (tests/models/data/tiny_bitnet)")
    ap.add_argument("--mpiexec", required=True)
    ap.add_argument("--np-flag", default="-n")
    ap.add_argument("--np", type=int, default=2)
    ap.add_argument("--timeout", type=float, default=5.0, help="KILN_DIST_TIMEOUT for the ranks (seconds)")
    args = ap.parse_args()
    t_start = time.time()
    env = dict(os.environ, KILN_DIST_TIMEOUT=str(args.timeout))
    common = ["--port", "0", "--threads", "1", "--max-batch", "4", "--kv-memory", "4", "--grace", "5"]
    mpi = [args.mpiexec, args.np_flag, str(args.np)]

    # the single-process server's ids: the reference
    single = Server([args.server, args.model, *common], env)
    try:
        want = all_ids(single, False)
        check(want[0] == FIXTURE_IDS, "single process: the fixture's ids %s, want %s" % (want[0], FIXTURE_IDS))
        # rank 0 failing: it cannot listen (an address of TEST-NET-3, not this machine's);
        # rank 1 is told (status 1) and the job ends non-zero, naming what happened
        taken = Server(mpi + [args.server, args.model, "--tp", str(args.np), *common, "--host", "203.0.113.1"], env,
                       wait_listen=False)
        rc = taken.wait(30)
        err = taken.stderr()
        check(rc not in (0, "timeout"), "rank 0 cannot listen: mpirun exit %s, want non-zero in time\n%s" % (rc, err))
        check("cannot listen" in err and "rank 1 of %d: rank 0 stopped with status 1" % args.np in err,
              "rank 0 cannot listen: the messages\n%s" % err)
    finally:
        single.proc.send_signal(signal.SIGTERM)
        check(single.wait(20) == 0, "single process: SIGTERM exit\n%s" % single.stderr())
    t_single = time.time()

    srv = Server(mpi + [args.server, args.model, "--tp", str(args.np), *common], env)
    try:
        t_up = time.time()
        status, out = srv.request("GET", "/health")
        check(status == 200, "tp: /health %d %r" % (status, out))
        status, out = srv.request("GET", "/v1/models")
        check(status == 200 and json.loads(out)["data"][0]["max_model_len"] > 0, "tp: /v1/models %d %r" % (status, out))
        got = all_ids(srv, True)
        for (p, n), g, w in zip(CASES, got, want):
            check(g == w, "tp %d ranks: prompt %s (max_tokens %d): ids %s, one process %s" % (args.np, p, n, g, w))
        # idle past the ranks' timeout: the heartbeats keep rank 1 in step
        time.sleep(args.timeout + 1)
        check(srv.proc.poll() is None, "tp: the job ended while idle (rc %s)\n%s" % (srv.proc.poll(), srv.stderr()))
        again = [ids_of(srv, p, n, False) for p, n in CASES[:2]]
        check(again == want[:2], "tp after a pause: %s, want %s" % (again, want[:2]))
        t_sigterm = time.time()
        os.kill(srv.pid0, signal.SIGTERM)  # rank 0 only: it stops the others
        rc = srv.wait(20)
        err = srv.stderr()
        check(rc == 0, "tp: SIGTERM to rank 0: mpirun exit %s, want 0 (every rank 0)\n%s" % (rc, err))
        check("serve: stopped" in err, "tp: rank 0 did not say it stopped\n%s" % err)
        for r in range(1, args.np):
            check("serve: rank %d of %d: stopped" % (r, args.np) in err, "tp: rank %d did not say it stopped\n%s" % (r, err))
        t_stopped = time.time()
    finally:
        srv.kill()

    # a follower killed: the job ends non-zero within a bounded time, naming rank 1 (on the
    # BitNet fixture where given: its greedy ids first, example.transformer.bitnet_*'s)
    if args.bitnet:
        srv = Server(mpi + [args.server, args.bitnet, "--tp", str(args.np), *common], env)
    else:
        srv = Server(mpi + [args.server, args.model, "--tp", str(args.np), *common], env)
    try:
        if args.bitnet:
            got = ids_of(srv, BITNET_PROMPT, 5, False)
            check(got == BITNET_IDS, "tp: the BitNet fixture's ids %s, want %s" % (got, BITNET_IDS))
        else:
            check(ids_of(srv, FIXTURE_PROMPT, 10, False) == FIXTURE_IDS, "tp: the fixture's ids before the kill")
        pid1, deadline = None, time.time() + 10
        while pid1 is None and time.time() < deadline:
            m = re.search(r"rank 1 of \d+ \(pid (\d+)\)", srv.stderr())
            pid1 = int(m.group(1)) if m else time.sleep(0.05)
        if check(pid1 is not None, "tp: rank 1's pid not printed\n%s" % srv.stderr()):
            t_kill = time.time()
            os.kill(pid1, signal.SIGKILL)
            rc = srv.wait(30)
            check(rc not in (0, "timeout"), "tp: rank 1 killed: mpirun exit %s, want non-zero within 30 s" % rc)
            check(re.search(r"rank 1", srv.stderr()), "tp: rank 1 killed: no message naming it\n%s" % srv.stderr())
            print("tp: rank 1 killed: the job ended in %.1f s (exit %s)" % (time.time() - t_kill, rc))
    finally:
        srv.kill()
    print("tp: %d requests matched; SIGTERM to exit %.1f s; single-process part %.1f s, tp start %.1f s, all %.1f s"
          % (len(CASES) + 2, t_stopped - t_sigterm, t_single - t_start, t_up - t_single, time.time() - t_start))

    if failures:
        print("%d failures" % len(failures))
        return 1
    print("all tensor-parallel serve checks passed")
    return 0


if __name__ == "__main__":
    sys.exit(main())
