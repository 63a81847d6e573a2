import { Tokenizer } from "@huggingface/tokenizers";
import fs from "fs";
// Encodes a corpus (make_corpus.py escapes) with tokenizers.js into DIR/expected.jsonl.
const [dir, corpus, special] = process.argv.slice(2);
const tj = JSON.parse(fs.readFileSync(dir + "/tokenizer.json", "utf8"));
const tc = JSON.parse(fs.readFileSync(dir + "/tokenizer_config.json", "utf8"));
const tok = new Tokenizer(tj, tc);
const data = fs.readFileSync(corpus, "utf8");
let lines = data.split("\n"); if (lines[lines.length - 1] === "") lines.pop();
const un = (s) => s.replace(/\\(\\|n|r)/g, (m, c) => c === "n" ? "\n" : c === "r" ? "\r" : "\\");
const out = [];
for (const l of lines) {
  const e = tok.encode(un(l), { add_special_tokens: special === "1" });
  out.push(JSON.stringify(e.ids));
}
fs.writeFileSync(dir + "/expected.jsonl", out.join("\n") + "\n");
