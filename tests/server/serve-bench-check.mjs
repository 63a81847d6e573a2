// Runs bench/serve-bench.mjs and its Python twin bench/serve_bench.py (for
// machines without node) against tests/server/mock-openai.mjs and checks
// their receipts: request and token counts, the measured prompt length, the
// client's concurrency as the server saw it, the request fields, error
// counting, the multi-turn history, and that every percentile row is ordered.
// No timing value is checked. Prints "serve-bench-check: ok" and exits 0 when
// every check holds; else one line per failed check and exit 1.
//   node tests/server/serve-bench-check.mjs SCRATCH_DIR
import { execFile } from "node:child_process";
import fs from "node:fs";
import path from "node:path";
import { fileURLToPath } from "node:url";
import { startMock } from "./mock-openai.mjs";

const here = path.dirname(fileURLToPath(import.meta.url));
const benchDir = path.join(here, "..", "..", "bench");
const CLIENTS = [
  { name: "node", argv: [process.execPath, path.join(benchDir, "serve-bench.mjs")] },
  { name: "python", argv: ["python3", path.join(benchDir, "serve_bench.py")] },
];
let client = CLIENTS[0];
const scratch = process.argv[2] || fs.mkdtempSync("/tmp/serve-bench-check-");
fs.mkdirSync(scratch, { recursive: true });
let failures = 0;
const check = (cond, what) => { if (!cond) { failures++; console.log(`FAIL ${client.name}: ${what}`); } };

function runBench(args) {
  return new Promise((resolve) => {
    execFile(client.argv[0], [...client.argv.slice(1), ...args], { timeout: 120000 }, (err, stdout, stderr) =>
      resolve({ code: err ? (err.code ?? -1) : 0, stdout, stderr }));
  });
}

function ordered(s, what) {
  const row = [s.min, s.p50, s.p90, s.p95, s.p99, s.max];
  check(s.n > 0 && row.every(Number.isFinite), `${what}: a full row (${JSON.stringify(s)})`);
  for (let i = 1; i < row.length; i++) check(row[i - 1] <= row[i], `${what}: percentiles ordered (${JSON.stringify(s)})`);
}

async function load(endpoint) {
  const C = 4, N = 12, P = 16, D = 8;
  const { server, rec, port } = await startMock({ gateAt: C });
  const out = path.join(scratch, `${client.name}-${endpoint}.json`);
  const r = await runBench(["--url", `http://127.0.0.1:${port}`, "--endpoint", endpoint, "-c", C, "-n", N, "-P", P, "-D", D, "-o", out].map(String));
  server.close();
  check(r.code === 0, `${endpoint}: exit 0 (${r.code}: ${r.stderr.slice(-300)})`);
  if (r.code !== 0) return;
  const j = JSON.parse(fs.readFileSync(out, "utf8"));
  const x = j.results;
  check(x.requests.sent === N && x.requests.completed === N && x.requests.failed === 0, `${endpoint}: ${N} requests, all completed`);
  check(x.generated_tokens === N * D, `${endpoint}: ${N * D} generated tokens (${x.generated_tokens})`);
  check(j.prompt.measured_tokens === P, `${endpoint}: measured prompt ${P} tokens (${j.prompt.measured_tokens})`);
  check(j.prompt.mode === (endpoint === "chat" ? "text" : "ids"), `${endpoint}: prompt mode (${j.prompt.mode})`);
  check(x.prompt_tokens_measured.min === P && x.prompt_tokens_measured.max === P, `${endpoint}: every request's usage.prompt_tokens is ${P}`);
  check(rec.peak === C, `${endpoint}: the server saw ${C} streams at once (${rec.peak})`);
  check(rec.bodies.length === N && rec.bodies.every((b) => b.ignore_eos === true && b.max_tokens === D && b.stream === true &&
    b.stream_options && b.stream_options.include_usage === true && b.model === "mock-model"), `${endpoint}: request fields`);
  check(x.itl_ms.n === N * (D - 1) && x.ttft_ms.n === N && x.tpot_ms.n === N, `${endpoint}: sample counts (itl ${x.itl_ms.n})`);
  for (const k of ["ttft_ms", "tpot_ms", "itl_ms", "e2el_ms"]) ordered(x[k], `${endpoint} ${k}`);
  check(x.aggregate_output_tok_s > 0, `${endpoint}: aggregate tok/s > 0`);
  check(j.server_models.data[0].id === "mock-model" && j.model === "mock-model", `${endpoint}: /v1/models answer kept`);
  check(typeof j.command === "string" && j.command.includes("-c 4") && "git_commit" in j, `${endpoint}: command line and commit`);
}

async function errors() {
  const { server, rec, port } = await startMock({ failEvery: 4 });
  const out = path.join(scratch, `${client.name}-errors.json`);
  const r = await runBench(["--url", `http://127.0.0.1:${port}`, "-c", "2", "-n", "12", "-P", "8", "-D", "4", "-o", out]);
  server.close();
  check(r.code === 0, `errors: exit 0 (${r.stderr.slice(-300)})`);
  if (r.code !== 0) return;
  const x = JSON.parse(fs.readFileSync(out, "utf8")).results;
  check(rec.streamed === 12 && x.requests.sent === 12 && x.requests.failed === 3 && x.requests.completed === 9, `errors: 3 of 12 failed (${JSON.stringify(x.requests)})`);
  check(x.errors.length === 1 && x.errors[0].count === 3 && x.errors[0].message.includes("HTTP 429"), `errors: summary (${JSON.stringify(x.errors)})`);
  check(x.generated_tokens === 9 * 4, `errors: failed requests add no tokens (${x.generated_tokens})`);
}

async function multiTurn() {
  const K = 2, T = 3, D = 6;
  const { server, rec, port } = await startMock({});
  const out = path.join(scratch, `${client.name}-multi-turn.json`);
  const r = await runBench(["--url", `http://127.0.0.1:${port}`, "--multi-turn", `${K}x${T}`, "--turn-tokens", "10", "-D", String(D), "-o", out]);
  server.close();
  check(r.code === 0, `multi-turn: exit 0 (${r.stderr.slice(-300)})`);
  if (r.code !== 0) return;
  const x = JSON.parse(fs.readFileSync(out, "utf8")).results;
  check(x.requests.sent === K * T && x.requests.failed === 0, `multi-turn: ${K * T} requests`);
  check(x.by_turn.length === T && x.by_turn.every((t) => t.requests === K), "multi-turn: every turn of every conversation");
  check(rec.badHistory === 0, `multi-turn: histories resend the server's replies (${rec.badHistory} foreign)`);
  check(rec.bodies.filter((b) => b.messages.length === 2 * T - 1).length === K, "multi-turn: the last turn carries the whole history");
  for (let t = 1; t < T; t++) {
    const a = x.by_turn[t - 1].prompt_tokens_measured, b = x.by_turn[t].prompt_tokens_measured;
    check(b.min > a.max, `multi-turn: turn ${t + 1}'s prompt is longer than turn ${t}'s`);
    ordered(x.by_turn[t].ttft_ms, `multi-turn turn ${t + 1} ttft`);
  }
}

for (client of CLIENTS) {
  await load("completions");
  await load("chat");
  await errors();
  await multiTurn();
}
console.log(failures ? `serve-bench-check: ${failures} failed` : "serve-bench-check: ok");
process.exit(failures ? 1 : 0);
