#!/usr/bin/env node
// scripts/tokenizer_bench.mjs — the npm reference's encode speed on the text that
// benchmarks/tokenizer_bench.cpp encodes (Debian's /usr/share/common-licenses, in name
// order, symbolic links left out), to quote beside kiln's figures.
//
//   node scripts/tokenizer_bench.mjs [NPM_DIR] [SECONDS]
//
// "cold": the first encode of a freshly loaded tokenizer (its BPE cache empty);
// "warm": the median of repeated encodes afterwards.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const npmDir = path.resolve(process.argv[2] ?? "third_party/npm");
const seconds = Number(process.argv[3] ?? 3);
const require = createRequire(npmDir + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");

const licenses = "/usr/share/common-licenses";
const text = fs
  .readdirSync(licenses)
  .sort()
  .map((f) => path.join(licenses, f))
  .filter((p) => fs.lstatSync(p).isFile())
  .map((p) => fs.readFileSync(p, "utf8"))
  .join("");
const bytes = Buffer.byteLength(text, "utf8");

function load(name) {
  const dir = path.join(npmDir, "node_modules", "@lenml", `tokenizer-${name}`, "models");
  return TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
}

const mbps = (ms) => (bytes / 1e6 / (ms / 1e3)).toFixed(2);
console.log(`text: ${bytes} bytes of English (${licenses}), node ${process.version}`);
for (const name of ["llama3", "llama2"]) {
  const tok = load(name);
  let t0 = performance.now();
  const ids = tok.encode(text, { add_special_tokens: false });
  const cold = performance.now() - t0;
  const times = [];
  const end = performance.now() + seconds * 1e3;
  while (performance.now() < end || times.length < 3) {
    t0 = performance.now();
    tok.encode(text, { add_special_tokens: false });
    times.push(performance.now() - t0);
  }
  times.sort((a, b) => a - b);
  const warm = times[Math.floor(times.length / 2)];
  console.log(`${name}: ${ids.length} ids; cold ${cold.toFixed(1)} ms = ${mbps(cold)} MB/s; warm (median of ${times.length}) ${warm.toFixed(1)} ms = ${mbps(warm)} MB/s`);
}
