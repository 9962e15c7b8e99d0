// examples/serve_page.hpp — the chat page examples/serve answers GET / with: one HTML file
// (no build step, no outside scripts) that keeps a conversation and streams each reply from
// /v1/chat/completions (server-sent events read with fetch's body reader).
// ?ask=TEXT sends TEXT at load and ?max_tokens=N bounds each reply (the browser test's use).
#pragma once

namespace kiln_examples {

inline constexpr const char* chat_page = R"html(<!doctype html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>kiln chat</title>
<style>
  body { font: 15px/1.45 system-ui, sans-serif; margin: 0; display: flex; flex-direction: column; height: 100vh; }
  header { padding: 8px 14px; background: #20242a; color: #eee; font-size: 13px; }
  #log { flex: 1; overflow-y: auto; padding: 12px 14px; }
  .msg { white-space: pre-wrap; margin: 6px 0; padding: 8px 10px; border-radius: 8px; max-width: 80%; }
  .user { background: #dbeafe; margin-left: auto; }
  .assistant { background: #f1f1f1; }
  .error { background: #fde2e2; color: #8a1c1c; }
  form { display: flex; gap: 8px; padding: 10px 14px; border-top: 1px solid #ddd; }
  textarea { flex: 1; resize: none; height: 3em; font: inherit; }
</style>
</head>
<body>
<header>kiln · <span id="model">…</span> · <span id="status">ready</span></header>
<div id="log"></div>
<form id="form">
  <textarea id="input" placeholder="Say something (Enter sends, Shift+Enter is a new line)"></textarea>
  <button id="send" type="submit">Send</button>
</form>
<script>
"use strict";
const log = document.getElementById("log"), input = document.getElementById("input");
const status = document.getElementById("status"), send = document.getElementById("send");
const params = new URLSearchParams(location.search);
const maxTokens = params.has("max_tokens") ? Number(params.get("max_tokens")) : undefined;
const history = [];

function bubble(role, text) {
  const d = document.createElement("div");
  d.className = "msg " + role;
  d.textContent = text;
  log.appendChild(d);
  log.scrollTop = log.scrollHeight;
  return d;
}

async function ask(text) {
  history.push({role: "user", content: text});
  bubble("user", text);
  const out = bubble("assistant", "");
  send.disabled = true;
  status.textContent = "streaming";
  const body = {messages: history, stream: true};
  if (maxTokens) body.max_tokens = maxTokens;
  let reply = "", finish = null;
  try {
    const r = await fetch("/v1/chat/completions", {method: "POST", headers: {"Content-Type": "application/json"},
                                                   body: JSON.stringify(body)});
    if (!r.ok) {
      const e = await r.json().catch(() => ({}));
      throw new Error((e.error && e.error.message) || ("HTTP " + r.status));
    }
    const reader = r.body.getReader(), dec = new TextDecoder();
    let buf = "";
    for (;;) {
      const {value, done} = await reader.read();
      if (done) break;
      buf += dec.decode(value, {stream: true});
      let at;
      while ((at = buf.indexOf("\n\n")) >= 0) {
        const ev = buf.slice(0, at);
        buf = buf.slice(at + 2);
        if (!ev.startsWith("data: ")) continue;
        const data = ev.slice(6);
        if (data === "[DONE]") continue;
        const j = JSON.parse(data);
        if (j.error) throw new Error(j.error.message);
        for (const c of j.choices || []) {
          if (c.delta && c.delta.content) { reply += c.delta.content; out.textContent = reply; }
          if (c.finish_reason) finish = c.finish_reason;
        }
        log.scrollTop = log.scrollHeight;
      }
    }
    history.push({role: "assistant", content: reply});
    out.dataset.finish = finish || "";
    status.textContent = "done";
  } catch (e) {
    out.className = "msg error";
    out.textContent = String(e.message || e);
    history.pop();
    status.textContent = "error";
  } finally {
    send.disabled = false;
    input.focus();
  }
}

document.getElementById("form").addEventListener("submit", ev => {
  ev.preventDefault();
  const t = input.value.trim();
  if (!t || send.disabled) return;
  input.value = "";
  ask(t);
});
input.addEventListener("keydown", ev => {
  if (ev.key === "Enter" && !ev.shiftKey) { ev.preventDefault(); document.getElementById("form").requestSubmit(); }
});
fetch("/v1/models").then(r => r.json()).then(j => { document.getElementById("model").textContent = j.data[0].id; })
                   .catch(() => {});
if (params.has("ask")) ask(params.get("ask"));
</script>
</body>
</html>
)html";

}  // namespace kiln_examples
