#!/usr/bin/env python3
"""tests/serve/chat_page_test.py — examples/serve's chat page (GET /) in a real headless
browser: Debian's chromium loads the page with ?ask=Hi&max_tokens=8, the page sends the
message to /v1/chat/completions with stream: true and writes the streamed reply into the
conversation. The test drives chromium over the DevTools protocol (a small WebSocket
client on the standard library) and reads the page until its status is "done": the
reply must be exactly what the same request gets without streaming (greedy), with its
finish reason, after the user's message.
"""
import argparse
import base64
import json
import os
import re
import signal
import socket
import struct
import subprocess
import sys
import tempfile
import threading
import time
import urllib.parse
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from serve_test import Server  # noqa: E402  (the same server start-up as the API test)


class WebSocket:
    """A WebSocket client (RFC 6455) just big enough for the DevTools protocol."""

    def __init__(self, url):
        u = urllib.parse.urlparse(url)
        self.sock = socket.create_connection((u.hostname, u.port), timeout=30)
        key = base64.b64encode(os.urandom(16)).decode()
        self.sock.sendall(("GET %s HTTP/1.1\r\nHost: %s:%d\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
                           "Sec-WebSocket-Key: %s\r\nSec-WebSocket-Version: 13\r\n\r\n" % (u.path, u.hostname, u.port, key)).encode())
        head = b""
        while b"\r\n\r\n" not in head:
            chunk = self.sock.recv(1)
            if not chunk:
                raise RuntimeError("devtools: the handshake was cut short")
            head += chunk
        if not head.startswith(b"HTTP/1.1 101"):
            raise RuntimeError("devtools: handshake %r" % head)
        self.next_id = 0

    def _exact(self, n):
        b = b""
        while len(b) < n:
            chunk = self.sock.recv(n - len(b))
            if not chunk:
                raise RuntimeError("devtools: the connection closed")
            b += chunk
        return b

    def send(self, text):
        data = text.encode()
        mask = os.urandom(4)
        n = len(data)
        head = bytes([0x81]) + (bytes([0x80 | n]) if n < 126 else
                                bytes([0x80 | 126]) + struct.pack(">H", n) if n < 65536 else
                                bytes([0x80 | 127]) + struct.pack(">Q", n))
        self.sock.sendall(head + mask + bytes(b ^ mask[i % 4] for i, b in enumerate(data)))

    def recv(self):
        message = b""
        while True:
            b0, b1 = self._exact(2)
            n = b1 & 0x7F
            if n == 126:
                n = struct.unpack(">H", self._exact(2))[0]
            elif n == 127:
                n = struct.unpack(">Q", self._exact(8))[0]
            payload = self._exact(n)
            if b0 & 0x0F in (0x0, 0x1):
                message += payload
                if b0 & 0x80:
                    return message.decode()

    def call(self, method, **params):
        self.next_id += 1
        self.send(json.dumps({"id": self.next_id, "method": method, "params": params}))
        while True:
            m = json.loads(self.recv())
            if m.get("id") == self.next_id:
                if "error" in m:
                    raise RuntimeError("devtools %s: %s" % (method, m["error"]))
                return m["result"]

    def evaluate(self, expression):
        r = self.call("Runtime.evaluate", expression=expression, returnByValue=True)
        return r["result"].get("value")

    def close(self):
        self.sock.close()


def devtools_page(browser):
    """The page target of a chromium started with --remote-debugging-port=0."""
    deadline = time.time() + 60
    port = None
    while time.time() < deadline and port is None:
        line = browser.stderr.readline()
        if not line and browser.poll() is not None:
            raise RuntimeError("chromium exited (%s) before DevTools listened" % browser.returncode)
        m = re.search(r"DevTools listening on ws://[^:]+:(\d+)/", line)
        if m:
            port = int(m.group(1))
    threading.Thread(target=browser.stderr.read, daemon=True).start()  # keep its pipe drained
    while time.time() < deadline:
        with urllib.request.urlopen("http://127.0.0.1:%d/json/list" % port, timeout=10) as r:
            pages = [t for t in json.load(r) if t.get("type") == "page"]
        if pages:
            return WebSocket(pages[0]["webSocketDebuggerUrl"])
        time.sleep(0.1)
    raise RuntimeError("chromium has no page target")


def main():
    p = argparse.ArgumentParser()
    p.add_argument("--server", required=True)
    p.add_argument("--model", required=True)
    p.add_argument("--tokenizer", required=True)
    p.add_argument("--chromium", required=True)
    a = p.parse_args()
    srv = Server(a.server, a.model, "cpu", "--tokenizer", a.tokenizer)
    failures = []
    try:
        status, _, page = srv.request("GET", "/")
        if status != 200 or b"/v1/chat/completions" not in page:
            failures.append("GET /: %d %r" % (status, page[:200]))
        status, _, want = srv.post("/v1/chat/completions", {"messages": [{"role": "user", "content": "Hi"}], "max_tokens": 8})
        want = want["choices"][0]["message"]["content"]
        url = "http://%s:%d/?ask=Hi&max_tokens=8" % (srv.host, srv.port)
        with tempfile.TemporaryDirectory(prefix="kiln-serve-chromium-", ignore_cleanup_errors=True) as profile:
            # its own process group: the browser's helpers end with it
            browser = subprocess.Popen([a.chromium, "--headless", "--no-sandbox", "--disable-gpu", "--no-first-run",
                                        "--user-data-dir=" + profile, "--remote-debugging-port=0", url],
                                       stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True, start_new_session=True)
            try:
                page = devtools_page(browser)
                deadline = time.time() + 60
                state = None
                while time.time() < deadline:
                    state = page.evaluate("document.getElementById('status').textContent")
                    if state in ("done", "error"):
                        break
                    time.sleep(0.05)
                msgs = page.evaluate("[...document.querySelectorAll('#log .msg')].map(d => [d.className, d.textContent, d.dataset.finish || ''])")
                if state != "done":
                    failures.append("the page's status is %r after 60 s; messages %s" % (state, msgs))
                elif msgs != [["msg user", "Hi", ""], ["msg assistant", want, "length"]]:
                    failures.append("the page shows %s; the API answers %r" % (msgs, want))
                page.close()
            finally:
                browser.terminate()  # chromium ends and reaps its helpers; a group kill is the fallback
                try:
                    browser.wait(timeout=20)
                except subprocess.TimeoutExpired:
                    pass
                try:
                    os.killpg(browser.pid, signal.SIGKILL)
                except ProcessLookupError:
                    pass
                browser.wait()
        rc, err = srv.terminate()
        if rc != 0:
            failures.append("server exit %s: %s" % (rc, err))
    finally:
        srv.kill()
    for f in failures:
        print("FAIL:", f)
    print("%d failures" % len(failures))
    return 1 if failures else 0


if __name__ == "__main__":
    sys.exit(main())
