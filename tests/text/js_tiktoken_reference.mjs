// Independent reference for the C++ tokenizer: js-tiktoken (npm). Writes cl100k's ranks in
// tiktoken's file format, its pre-tokenisation pattern, and js-tiktoken's encoding of every
// string of the corpus (all special tokens allowed, YOCO's extra specials added), so the C++
// test can compare token for token.
//   node js_tiktoken_reference.mjs CORPUS.json OUT_DIR
import fs from "node:fs";
import path from "node:path";
import { Tiktoken } from "js-tiktoken/lite";
import cl100k from "js-tiktoken/ranks/cl100k_base";

const [corpusPath, outDir] = process.argv.slice(2);
const corpus = JSON.parse(fs.readFileSync(corpusPath, "utf8"));
const extra = JSON.parse(fs.readFileSync(path.join(path.dirname(corpusPath), "yoco_special_tokens.json"), "utf8"));

const lines = [];
for (const line of cl100k.bpe_ranks.split("\n").filter(Boolean)) {
  const [, offset, ...tokens] = line.split(" ");
  tokens.forEach((token, i) => lines.push(`${token} ${Number.parseInt(offset, 10) + i}`));
}
fs.writeFileSync(path.join(outDir, "cl100k_base.tiktoken"), lines.join("\n") + "\n");
fs.writeFileSync(path.join(outDir, "cl100k_pattern.txt"), cl100k.pat_str);

const enc = new Tiktoken(cl100k, extra);
const expected = corpus.map((text) => ({ text, ids: Array.from(enc.encode(text, "all")) }));
fs.writeFileSync(path.join(outDir, "expected.json"), JSON.stringify(expected));
