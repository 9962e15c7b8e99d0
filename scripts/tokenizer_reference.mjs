#!/usr/bin/env node
// scripts/tokenizer_reference.mjs — the expectations kiln's tokenizers are tested against,
// from an independent implementation of tokenizer.json (@lenml/tokenizers, the tokenizer
// code of transformers.js) on the Llama 3 and Llama 2 tokenizers its packages ship.
//
//   node scripts/tokenizer_reference.mjs NPM_DIR TEXTS_JSON OUT_JSON
//
// NPM_DIR is where scripts/setup.sh installed the packages (third_party/npm). For each
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

// the reference throws on an empty id list; the text of no ids is ""
const decode = (tok, ids, opts) => (ids.length === 0 ? "" : tok.decode(ids, opts));

const out = {};
for (const name of ["llama3", "llama2"]) {
  const dir = path.resolve(npmDir, "node_modules", "@lenml", `tokenizer-${name}`, "models");
  const tok = TokenizerLoader.fromPreTrained({
    tokenizerJSON: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer.json"), "utf8")),
    tokenizerConfig: JSON.parse(fs.readFileSync(path.join(dir, "tokenizer_config.json"), "utf8")),
  });
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
