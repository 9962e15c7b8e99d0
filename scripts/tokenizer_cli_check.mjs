#!/usr/bin/env node
// scripts/tokenizer_cli_check.mjs — examples/tokenize against the npm reference, process
// to process: for a sample of tests/text/data/texts.json (the empty text, newlines, special
// tokens, non-ASCII text) and both tokenizers, `tokenize DIR` and `tokenize DIR --no-special`
// must print the reference's ids, and `tokenize DIR --decode` (and with --no-special) its
// decoded text, byte for byte. Exit status 1 on any difference.
//
//   node scripts/tokenizer_cli_check.mjs TOKENIZE_BINARY NPM_DIR TEXTS_JSON
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { createRequire } from "node:module";

const [binary, npmDir, textsFile] = process.argv.slice(2);
if (!textsFile) {
  console.error("usage: tokenizer_cli_check.mjs TOKENIZE_BINARY NPM_DIR TEXTS_JSON");
  process.exit(2);
}
const require = createRequire(path.resolve(npmDir) + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");
const all = JSON.parse(fs.readFileSync(textsFile, "utf8"));
// the CLI's plumbing (stdin whole, newlines, special tokens, the empty text): a few texts,
// each run a process that loads the tokenizer again; the library itself is checked on all
// of texts.json in-process (tests/text)
const pick = (f) => all.find(f);
const texts = [...new Set([pick((t) => t === ""), pick((t) => t.includes("<s>") || t.includes("<|")), pick((t) => t.includes("\r\n")),
                            pick((t) => /[^\x00-\x7f]/.test(t) && t.length > 40), all[25]].filter((t) => t !== undefined))];

const run = (args, input) => execFileSync(binary, args, { input: Buffer.from(input, "utf8"), maxBuffer: 1 << 26, stdio: ["pipe", "pipe", "pipe"] }).toString("utf8");
let checks = 0, failures = 0;
function expect(what, got, want) {
  ++checks;
  if (got !== want) {
    ++failures;
    if (failures <= 10) console.log(`DIFFERS ${what}\n  tokenize:  ${JSON.stringify(got)}\n  reference: ${JSON.stringify(want)}`);
  }
}
for (const name of ["llama3", "llama2"]) {
  const dir = path.resolve(npmDir, "node_modules", "@lenml", `tokenizer-${name}`, "models");
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
  for (const text of texts) {
    const label = `${name} ${JSON.stringify(text).slice(0, 60)}`;
    const ids = tok.encode(text);
    const plain = tok.encode(text, { add_special_tokens: false });
    expect(`${label} ids`, run([dir], text), ids.join(" ") + "\n");
    expect(`${label} ids --no-special`, run([dir, "--no-special"], text), plain.join(" ") + "\n");
    const dec = (i, o) => (i.length === 0 ? "" : tok.decode(i, o));
    expect(`${label} --decode`, run([dir, "--decode"], ids.join(", ")), dec(ids, {}));
    expect(`${label} --decode --no-special`, run([dir, "--decode", "--no-special"], ids.join(" ")), dec(ids, { skip_special_tokens: true }));
  }
}
// errors: a clear message and a non-zero status
for (const [args, input, want] of [
  [[path.resolve(npmDir, "no-such-model")], "x", "cannot open"],
  [[path.resolve(npmDir, "node_modules", "@lenml", "tokenizer-llama2", "models"), "--decode"], "1 99999", "outside the vocabulary"],
  [[path.resolve(npmDir, "node_modules", "@lenml", "tokenizer-llama2", "models"), "--decode"], "1 x", "not part of an id"],
  [[path.resolve(npmDir, "node_modules", "@lenml", "tokenizer-llama2", "models"), "--bogus"], "", "unknown option"],
]) {
  ++checks;
  try {
    run(args, input);
    ++failures;
    console.log(`DIFFERS: tokenize ${args.join(" ")} succeeded; expected an error with "${want}"`);
  } catch (e) {
    const err = e.stderr.toString("utf8");
    if (e.status === 0 || !err.includes(want)) {
      ++failures;
      console.log(`DIFFERS: tokenize ${args.join(" ")}: status ${e.status}, stderr ${JSON.stringify(err)}; expected "${want}"`);
    }
  }
}
console.log(`tokenize CLI: ${checks - failures} passed, ${failures} failed`);
process.exit(failures ? 1 : 0);
