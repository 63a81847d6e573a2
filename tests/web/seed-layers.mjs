// Writes to standard output a manifest of the first K layers of a seed
// manifest (its layer types and sections; the embedding, head and tables
// kept), the sections packed in their original order at 256-byte
// boundaries, for `wisp gen-synthetic --like`: the page test's model with
// weights big enough to show streaming (tens of MiB) but fewer layers for
// SwiftShader to run.
//   node tests/web/seed-layers.mjs MANIFEST K > like.json
import fs from "node:fs";

const [file, k] = process.argv.slice(2);
const K = Number(k);
const m = JSON.parse(fs.readFileSync(file, "utf8"));
const rt = m.runtime;
if (!(K >= 1 && K <= rt.shape.layerTypes.length)) throw new Error(`K must be 1..${rt.shape.layerTypes.length}`);
rt.shape.layerTypes = rt.shape.layerTypes.slice(0, K);
const layer = (name) => { const x = /^L(\d+)\./.exec(name); return x ? Number(x[1]) : -1; };
rt.sections = rt.sections.filter((s) => layer(s.name) < K);
// a tied pair (embed.X and head.X: the same range) keeps one range
const at = new Map();
let end = 0;
for (const s of [...rt.sections].sort((a, b) => a.offset - b.offset || a.bytes - b.bytes)) {
  const key = `${s.offset}:${s.bytes}`;
  if (!at.has(key)) {
    at.set(key, end);
    end = Math.ceil((end + s.bytes) / 256) * 256;
  }
}
for (const s of rt.sections) s.offset = at.get(`${s.offset}:${s.bytes}`);
rt.weightBytes = end;
process.stdout.write(JSON.stringify(m));
