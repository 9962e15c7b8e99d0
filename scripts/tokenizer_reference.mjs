#!/usr/bin/env node
// scripts/tokenizer_reference.mjs — the expectations kiln's tokenizers are tested against,
// from an independent implementation of tokenizer.json (@lenml/tokenizers, the tokenizer
// code of transformers.js) on the Llama 3 and Llama 2 tokenizers its packages ship.
//
//   node scripts/tokenizer_reference.mjs NPM_DIR TEXTS_JSON OUT_JSON
//
// NPM_DIR is where scripts/setup.sh installed the packages (third_party/npm). The texts
// are TEXTS_JSON's and 200 random ones (see below). Beside the
// two shipped tokenizers, two variants of them are written next to OUT_JSON, so that more
// component types meet the reference: "bytelevel" (Llama 3's model behind an NFKC
// normalizer, the GPT-2 ByteLevel pre-tokenizer with add_prefix_space, and a Sequence of
// ByteLevel and TemplateProcessing post-processors) and "metaspace" (Llama 2's model behind
// NFC + Lowercase and a Metaspace pre-tokenizer, prepend_scheme "first"). For each
// tokenizer and each text: ids with and without the post-processor's special tokens, the
// decode of the former (tokenizer_config.json's clean-up setting), of the latter without
// clean-up, and of the former skipping special tokens.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [npmDir, textsFile, outFile] = process.argv.slice(2);
if (!outFile) {
  console.error("usage: tokenizer_reference.mjs NPM_DIR TEXTS_JSON OUT_JSON");
  process.exit(2);
}
const require = createRequire(path.resolve(npmDir) + "/");
const { TokenizerLoader } = require("@lenml/tokenizers");
const texts = JSON.parse(fs.readFileSync(textsFile, "utf8"));

// Then 200 random texts (a fixed seed): characters from many scripts, emoji, combining
// marks, whitespace and special tokens (not U+0085 or U+FEFF: see make_tokenizer_texts.py).
let state = 33n;
const next = () => Number((state = (state * 6364136223846793005n + 1442695040888963407n) & 0xffffffffffffffffn) >> 33n);
const ranges = [[0x20, 0x7e], [0x09, 0x0d], [0xa0, 0x24f], [0x370, 0x3ff], [0x400, 0x4ff], [0x590, 0x6ff],
                [0x900, 0x97f], [0xe00, 0xe7f], [0x1100, 0x11ff], [0x2000, 0x206f], [0x3040, 0x30ff], [0x4e00, 0x4fff],
                [0xac00, 0xad00], [0x1f300, 0x1f6ff], [0x1f900, 0x1f9ff], [0x300, 0x36f], [0x30, 0x39]];
const specials = ["<|begin_of_text|>", "<|eot_id|>", "<s>", "</s>", "<unk>"];
for (let k = 0; k < 200; ++k) {
  let t = "";
  const n = next() % 40;
  for (let i = 0; i < n; ++i) {
    const r = next() % 25;
    if (r === 0) t += specials[next() % specials.length];
    else if (r < 5) t += " ".repeat(1 + (next() % 3));
    else {
      const [lo, hi] = ranges[next() % ranges.length];
      t += String.fromCodePoint(lo + (next() % (hi - lo + 1)));
    }
  }
  texts.push(t);
}

// the reference throws on an empty id list; the text of no ids is ""
const decode = (tok, ids, opts) => (ids.length === 0 ? "" : tok.decode(ids, opts));

const shipped = (name) => path.resolve(npmDir, "node_modules", "@lenml", `tokenizer-${name}`, "models");
const read = (dir, file) => JSON.parse(fs.readFileSync(path.join(dir, file), "utf8"));

// a variant: the base's files with some components replaced, written to their own folder
function variant(name, base, change) {
  const dir = path.join(path.dirname(path.resolve(outFile)), "tokenizer_variants", name);
  fs.mkdirSync(dir, { recursive: true });
  const json = read(shipped(base), "tokenizer.json");
  change(json);
  fs.writeFileSync(path.join(dir, "tokenizer.json"), JSON.stringify(json));
  fs.copyFileSync(path.join(shipped(base), "tokenizer_config.json"), path.join(dir, "tokenizer_config.json"));
  return dir;
}
const dirs = {
  llama3: shipped("llama3"),
  llama2: shipped("llama2"),
  bytelevel: variant("bytelevel", "llama3", (j) => {
    j.normalizer = { type: "NFKC" };
    j.pre_tokenizer = { type: "ByteLevel", add_prefix_space: true, trim_offsets: true, use_regex: true };
    j.post_processor = {
      type: "Sequence",
      processors: [
        { type: "ByteLevel", add_prefix_space: true, trim_offsets: false, use_regex: true },
        {
          type: "TemplateProcessing",
          single: [{ SpecialToken: { id: "<|begin_of_text|>", type_id: 0 } }, { Sequence: { id: "A", type_id: 0 } },
                   { SpecialToken: { id: "<|end_of_text|>", type_id: 0 } }],
          pair: [{ Sequence: { id: "A", type_id: 0 } }, { Sequence: { id: "B", type_id: 1 } }],
          special_tokens: {
            "<|begin_of_text|>": { id: "<|begin_of_text|>", ids: [128000], tokens: ["<|begin_of_text|>"] },
            "<|end_of_text|>": { id: "<|end_of_text|>", ids: [128001], tokens: ["<|end_of_text|>"] },
          },
        },
      ],
    };
  }),
  metaspace: variant("metaspace", "llama2", (j) => {
    j.normalizer = { type: "Sequence", normalizers: [{ type: "NFC" }, { type: "Lowercase" }] };
    // add_prefix_space as well: the reference prepends only where it is set
    j.pre_tokenizer = { type: "Metaspace", replacement: "\u2581", prepend_scheme: "first", add_prefix_space: true, split: false };
  }),
};

const out = {};
for (const [name, dir] of Object.entries(dirs)) {
  const tok = TokenizerLoader.fromPreTrained({ tokenizerJSON: read(dir, "tokenizer.json"), tokenizerConfig: read(dir, "tokenizer_config.json") });
  const cases = texts.map((text) => {
    const ids = tok.encode(text);
    const ids_plain = tok.encode(text, { add_special_tokens: false });
    return {
      text,
      ids,
      ids_plain,
      decoded: decode(tok, ids, {}),
      decoded_raw: decode(tok, ids_plain, { clean_up_tokenization_spaces: false }),
      decoded_skip: decode(tok, ids, { skip_special_tokens: true }),
    };
  });
  out[name] = { dir, cases };
}
fs.writeFileSync(outFile, JSON.stringify(out));
console.log(`${outFile}: ${texts.length} texts x ${Object.keys(out).length} tokenizers`);
