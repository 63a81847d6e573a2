#!/usr/bin/env node
// A serving benchmark for any OpenAI-compatible server (wisp serve,
// llama-server, vLLM, ...): C concurrent streaming clients, prompts of P
// tokens, D generated tokens each, and a JSON receipt with aggregate
// throughput and TTFT / TPOT / ITL / end-to-end latency percentiles.
// Node 20, no dependencies: node's http module and a small SSE reader.
// bench/README.md describes the loads and the definitions.
//
//   node bench/serve-bench.mjs --url http://127.0.0.1:8080 -c 8 -P 128 -D 128 -n 64 -o receipt.json
//   node bench/serve-bench.mjs --url ... --multi-turn 8x5 --turn-tokens 64 -D 64 -o mt.json
//
// Progress goes to stderr; the receipt to -o FILE (written whole or not at
// all), a one-line summary to stdout.
import http from "node:http";
import https from "node:https";
import fs from "node:fs";
import path from "node:path";
import { execFileSync } from "node:child_process";
import { fileURLToPath } from "node:url";

const USAGE = `usage: node bench/serve-bench.mjs --url URL [options]

  --url URL              server base URL (default http://127.0.0.1:8080)
  --endpoint E           completions (default) or chat
  --model NAME           model field (default: the first id of GET /v1/models)
  --api-key KEY          sent as "Authorization: Bearer KEY"
  -c, --concurrency C    concurrent streaming clients (default 1)
  -P, --prompt-tokens P  prompt length in tokens (default 128)
  -D, --max-tokens D     tokens generated per request, with ignore_eos (default 128)
  -n, --num-requests N   requests to send (default 4 x C)
  --duration S           send requests for S seconds instead of a count (in-flight ones finish)
  --rate R               Poisson arrivals at R requests/s, at most C in flight (default: none,
                         each client sends its next request when the last ends)
  --warmup N             requests sent (C at a time) before measuring (default 0)
  --prompt-mode M        ids: token-id arrays as "prompt" (completions only, exact length);
                         text: words calibrated against usage.prompt_tokens;
                         auto (default): ids for completions when the server takes them, else text
  --token-range A:B      token ids drawn for id prompts (default 1000:4000)
  --multi-turn KxT       chat load instead: K conversations of T turns each, every turn resends
                         the whole history plus the replies (TTFT per turn in the receipt)
  --turn-tokens U        tokens of each user turn in the multi-turn load (default 64)
  --timeout S            per-request limit in seconds (default 600)
  --seed N               seed of the prompts (default 1)
  --label NAME           the server's name in the receipt (default: the URL)
  -o, --output FILE      receipt path (default: print the receipt to stdout)
  -h, --help             this help
`;

// ---- options -----------------------------------------------------------------
function parseArgs(argv) {
  const o = {
    url: "http://127.0.0.1:8080", endpoint: "completions", model: null, apiKey: null,
    concurrency: 1, promptTokens: 128, maxTokens: 128, numRequests: null, duration: null,
    rate: null, warmup: 0, promptMode: "auto", tokenLo: 1000, tokenHi: 4000,
    multiTurn: null, turnTokens: 64, timeout: 600, seed: 1, label: null, output: null,
  };
  const num = (name, v, min) => {
    const x = Number(v);
    if (v === undefined || !Number.isFinite(x) || x < min) die(`${name} needs a number >= ${min}, got '${v ?? ""}'`);
    return x;
  };
  const int = (name, v, min) => {
    const x = num(name, v, min);
    if (!Number.isInteger(x)) die(`${name} needs an integer, got '${v}'`);
    return x;
  };
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i], v = argv[i + 1];
    const take = () => { i++; if (v === undefined) die(`${a} needs a value`); return v; };
    switch (a) {
      case "--url": o.url = take().replace(/\/+$/, ""); break;
      case "--endpoint": o.endpoint = take(); if (!["completions", "chat"].includes(o.endpoint)) die("--endpoint is completions or chat"); break;
      case "--model": o.model = take(); break;
      case "--api-key": o.apiKey = take(); break;
      case "-c": case "--concurrency": o.concurrency = int(a, take(), 1); break;
      case "-P": case "--prompt-tokens": o.promptTokens = int(a, take(), 1); break;
      case "-D": case "--max-tokens": o.maxTokens = int(a, take(), 1); break;
      case "-n": case "--num-requests": o.numRequests = int(a, take(), 1); break;
      case "--duration": o.duration = num(a, take(), 0.001); break;
      case "--rate": o.rate = num(a, take(), 1e-9); break;
      case "--warmup": o.warmup = int(a, take(), 0); break;
      case "--prompt-mode": o.promptMode = take(); if (!["ids", "text", "auto"].includes(o.promptMode)) die("--prompt-mode is ids, text or auto"); break;
      case "--token-range": {
        const m = /^(\d+):(\d+)$/.exec(take());
        if (!m || Number(m[1]) >= Number(m[2])) die("--token-range is A:B with A < B");
        o.tokenLo = Number(m[1]); o.tokenHi = Number(m[2]); break;
      }
      case "--multi-turn": {
        const m = /^(\d+)x(\d+)$/.exec(take());
        if (!m || Number(m[1]) < 1 || Number(m[2]) < 1) die("--multi-turn is KxT, e.g. 8x5");
        o.multiTurn = { conversations: Number(m[1]), turns: Number(m[2]) }; break;
      }
      case "--turn-tokens": o.turnTokens = int(a, take(), 1); break;
      case "--timeout": o.timeout = num(a, take(), 0.001); break;
      case "--seed": o.seed = int(a, take(), 0); break;
      case "--label": o.label = take(); break;
      case "-o": case "--output": o.output = take(); break;
      case "-h": case "--help": process.stdout.write(USAGE); process.exit(0); break;
      default: die(`unknown option '${a}' (--help lists them)`);
    }
  }
  if (o.multiTurn && o.endpoint === "completions" && argv.includes("--endpoint")) die("--multi-turn runs on the chat endpoint");
  if (o.multiTurn) o.endpoint = "chat";
  if (o.endpoint === "chat" && o.promptMode === "ids") die("--prompt-mode ids needs --endpoint completions");
  if (o.numRequests === null && o.duration === null) o.numRequests = 4 * o.concurrency;
  try { new URL(o.url); } catch { die(`--url '${o.url}' is not a URL`); }
  return o;
}

function die(msg) {
  process.stderr.write(`serve-bench: ${msg}\n`);
  process.exit(2);
}
const log = (msg) => process.stderr.write(`serve-bench: ${msg}\n`);
const now = () => performance.now(); // milliseconds, monotonic

// ---- seeded random numbers (prompts are the same from run to run) -----------
function rng(seed) {
  let s = (seed >>> 0) || 0x9e3779b9;
  return () => { // xorshift32
    s ^= s << 13; s >>>= 0; s ^= s >>> 17; s ^= s << 5; s >>>= 0;
    return s / 4294967296;
  };
}

// Words for text prompts: common short English words, most of them one token
// in any BPE vocabulary, so the calibration below converges in a few steps.
const WORDS = ("the of and to in is was for on that with as by at from his her he she it they we you " +
  "one two three time day year way man world life hand part child eye place work week case point " +
  "house water room mother area money story fact month lot right study book word business issue " +
  "side kind head far black long both little great old big high small large next early young few " +
  "public bad same able last late hard major better best ready light dark green blue red white").split(" ");

function textOfWords(rand, n) {
  const w = [];
  for (let i = 0; i < n; i++) w.push(WORDS[Math.floor(rand() * WORDS.length)]);
  return w.join(" ");
}

// A fresh prompt of the calibrated length: the calibration's words with all
// but the first shuffled. Tokenizers that split text at spaces before merging
// (the BPE of GPT-2, Llama 3, Qwen, LFM2) count the same words the same in
// any order, so every prompt keeps the measured length, while no two share
// more than a short prefix a server could reuse.
function shuffledText(text, rand) {
  const w = text.split(" ");
  for (let i = w.length - 1; i > 1; i--) {
    const j = 1 + Math.floor(rand() * i);
    [w[i], w[j]] = [w[j], w[i]];
  }
  return w.join(" ");
}

// ---- HTTP --------------------------------------------------------------------
// A keep-alive agent sized for the load, so C clients keep C connections.
let agent = null;
function request(o, method, urlPath, body, onChunk, timeoutMs) {
  const u = new URL(o.url + urlPath);
  const mod = u.protocol === "https:" ? https : http;
  if (!agent) agent = new mod.Agent({ keepAlive: true, maxSockets: Math.max(8, o.concurrency + 4) });
  const headers = { accept: body && body.stream ? "text/event-stream" : "application/json" };
  let data = null;
  if (body) { data = Buffer.from(JSON.stringify(body)); headers["content-type"] = "application/json"; headers["content-length"] = data.length; }
  if (o.apiKey) headers.authorization = `Bearer ${o.apiKey}`;
  return new Promise((resolve) => {
    let done = false;
    const finish = (r) => { if (!done) { done = true; clearTimeout(timer); resolve(r); } };
    const req = mod.request(u, { method, headers, agent }, (res) => {
      const parts = [];
      res.on("data", (b) => { if (onChunk && res.statusCode === 200) onChunk(b); else parts.push(b); });
      res.on("end", () => finish({ status: res.statusCode, body: Buffer.concat(parts).toString("utf8") }));
      res.on("error", (e) => finish({ status: 0, error: `response: ${e.message}` }));
      res.on("aborted", () => finish({ status: 0, error: "response aborted" }));
    });
    const timer = setTimeout(() => { req.destroy(); finish({ status: 0, error: `timed out after ${timeoutMs / 1000} s` }); }, timeoutMs);
    req.on("error", (e) => finish({ status: 0, error: e.message }));
    if (data) req.write(data);
    req.end();
  });
}

// Splits a byte stream into SSE events and hands each event's data to onData.
function sseReader(onData) {
  let buf = "";
  const dec = new TextDecoder();
  return (bytes) => {
    buf += dec.decode(bytes, { stream: true });
    for (;;) {
      const m = /\r?\n\r?\n/.exec(buf);
      if (!m) break;
      const event = buf.slice(0, m.index);
      buf = buf.slice(m.index + m[0].length);
      const data = event.split(/\r?\n/).filter((l) => l.startsWith("data:")).map((l) => l.slice(5).replace(/^ /, "")).join("\n");
      if (data) onData(data);
    }
  };
}

function errorText(r) {
  if (r.error) return r.error;
  let msg = r.body ? r.body.slice(0, 200) : "";
  try { msg = JSON.parse(r.body).error.message || msg; } catch { /* not an OpenAI error body */ }
  return `HTTP ${r.status}: ${msg}`.trim();
}

// ---- one streamed request ----------------------------------------------------
// The request body for a prompt (token ids or text) or a chat history.
function requestBody(o, model, prompt, maxTokens, stream) {
  const b = { model, max_tokens: maxTokens, temperature: 0, ignore_eos: true, stream };
  if (stream) b.stream_options = { include_usage: true };
  if (o.endpoint === "chat") b.messages = Array.isArray(prompt) && typeof prompt[0] === "object" ? prompt : [{ role: "user", content: prompt }];
  else b.prompt = prompt;
  return b;
}

const endpointPath = (o) => (o.endpoint === "chat" ? "/v1/chat/completions" : "/v1/completions");

// A chunk is a token arrival when it carries text: a completions chunk's
// `text` or a chat chunk's `delta.content`, even an empty string (a model
// without a vocabulary streams empty pieces), but not the role-only first
// chat chunk nor an empty closing chunk that only carries finish_reason.
function chunkPiece(choice) {
  if (!choice) return null;
  const delta = choice.delta;
  const text = delta ? delta.content : choice.text;
  if (typeof text !== "string") return null;
  if (text === "" && (choice.finish_reason != null || (delta && delta.role))) return null;
  return text;
}

// Sends one streaming request; resolves to its record (times in ms since
// `t0` of the whole run).
async function streamOne(o, model, prompt, maxTokens, t0) {
  const rec = { send_ms: now() - t0, first_ms: null, end_ms: null, chunk_ms: [], tokens: 0, usage: null, text: "", error: null, finish_reason: null };
  let malformed = null;
  const onData = (data) => {
    if (data === "[DONE]") return;
    let j;
    try { j = JSON.parse(data); } catch { malformed = `malformed SSE data: ${data.slice(0, 80)}`; return; }
    if (j.error) { rec.error = `stream error: ${j.error.message || JSON.stringify(j.error)}`; return; }
    const t = now() - t0;
    if (j.usage) rec.usage = j.usage;
    const choice = Array.isArray(j.choices) ? j.choices[0] : null;
    if (choice && choice.finish_reason) rec.finish_reason = choice.finish_reason;
    const piece = chunkPiece(choice);
    if (piece === null) return;
    if (rec.first_ms === null) rec.first_ms = t;
    rec.chunk_ms.push(t);
    rec.text += piece;
  };
  const r = await request(o, "POST", endpointPath(o), requestBody(o, model, prompt, maxTokens, true), sseReader(onData), o.timeout * 1000);
  rec.end_ms = now() - t0;
  if (!rec.error && (r.error || r.status !== 200)) rec.error = errorText(r);
  if (!rec.error && malformed) rec.error = malformed;
  if (!rec.error && rec.first_ms === null) rec.error = "no content chunk in the stream";
  // Generated tokens: the server's count when it sends usage, else one a chunk.
  rec.tokens = rec.usage && Number.isInteger(rec.usage.completion_tokens) ? rec.usage.completion_tokens : rec.chunk_ms.length;
  return rec;
}

// ---- prompts -----------------------------------------------------------------
function idPrompt(o, rand, n) {
  const ids = [];
  for (let i = 0; i < n; i++) ids.push(o.tokenLo + Math.floor(rand() * (o.tokenHi - o.tokenLo)));
  return ids;
}

// prompt_tokens the server counts for `prompt` (one non-streamed request of
// one token), or throws with the server's error.
async function promptTokensOf(o, model, prompt) {
  const r = await request(o, "POST", endpointPath(o), requestBody(o, model, prompt, 1, false), null, o.timeout * 1000);
  if (r.status !== 200) throw new Error(errorText(r));
  let j;
  try { j = JSON.parse(r.body); } catch { throw new Error("response is not JSON"); }
  const n = j.usage && j.usage.prompt_tokens;
  if (!Number.isInteger(n)) throw new Error("response has no usage.prompt_tokens");
  return n;
}

// Finds a number of words whose text the server counts as `target` prompt
// tokens (chat: including the template's own tokens): a secant step on the
// words-to-tokens ratio, then single words. Returns {words, tokens, tries}.
async function calibrateWords(o, model, target, seed) {
  let words = Math.max(1, Math.round(target * 0.75)), best = null, tries = 0;
  const seen = new Map();
  for (; tries < 12; tries++) {
    if (seen.has(words)) break;
    const text = textOfWords(rng(seed), words);
    const prompt = o.endpoint === "chat" ? [{ role: "user", content: text }] : text;
    const tokens = await promptTokensOf(o, model, prompt);
    seen.set(words, tokens);
    if (!best || Math.abs(tokens - target) < Math.abs(best.tokens - target)) best = { words, tokens };
    if (tokens === target) break;
    const ratio = tokens / words;
    let next = words + Math.round((target - tokens) / Math.max(ratio, 0.1));
    if (next === words) next += tokens < target ? 1 : -1;
    words = Math.max(1, next);
  }
  return { ...best, tries };
}

// ---- statistics --------------------------------------------------------------
// Percentile with linear interpolation between closest ranks (numpy's default).
function percentile(sorted, p) {
  if (!sorted.length) return null;
  const x = (p / 100) * (sorted.length - 1), lo = Math.floor(x), hi = Math.ceil(x);
  return sorted[lo] + (sorted[hi] - sorted[lo]) * (x - lo);
}
function stats(values) {
  const s = values.filter((v) => Number.isFinite(v)).sort((a, b) => a - b);
  if (!s.length) return { n: 0, mean: null, min: null, p50: null, p90: null, p95: null, p99: null, max: null };
  const r = (v) => Math.round(v * 1000) / 1000;
  return {
    n: s.length, mean: r(s.reduce((a, b) => a + b, 0) / s.length), min: r(s[0]),
    p50: r(percentile(s, 50)), p90: r(percentile(s, 90)), p95: r(percentile(s, 95)), p99: r(percentile(s, 99)), max: r(s[s.length - 1]),
  };
}

// vLLM's definitions, per request: TTFT = first content chunk - send;
// TPOT = (end - send - TTFT) / (tokens - 1); ITL = gaps between chunks;
// E2EL = end - send.
function latencyStats(recs) {
  const ok = recs.filter((r) => !r.error);
  const ttft = ok.map((r) => r.first_ms - r.send_ms);
  const tpot = ok.filter((r) => r.tokens > 1).map((r) => (r.end_ms - r.first_ms) / (r.tokens - 1));
  const itl = [];
  for (const r of ok) for (let i = 1; i < r.chunk_ms.length; i++) itl.push(r.chunk_ms[i] - r.chunk_ms[i - 1]);
  return { ttft_ms: stats(ttft), tpot_ms: stats(tpot), itl_ms: stats(itl), e2el_ms: stats(ok.map((r) => r.end_ms - r.send_ms)) };
}

function errorSummary(recs) {
  const counts = {};
  for (const r of recs) if (r.error) counts[r.error] = (counts[r.error] || 0) + 1;
  return Object.entries(counts).sort((a, b) => b[1] - a[1]).slice(0, 10).map(([message, count]) => ({ message, count }));
}

// ---- the loads -----------------------------------------------------------------
function progress(label, state, t0) {
  let last = 0;
  return (force) => {
    const t = now();
    if (!force && t - last < 2000) return;
    last = t;
    const s = (t - t0) / 1000;
    log(`${label}: ${state.done} done (${state.failed} failed), ${state.inflight} in flight, ${state.tokens} tokens, ` +
      `${(state.tokens / Math.max(s, 1e-9)).toFixed(1)} tok/s, ${s.toFixed(1)} s`);
  };
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

// C clients; each takes the next request until the count or the duration is
// spent. With a rate, requests arrive at exponential gaps, and one waits for
// a free client when C are in flight.
async function runLoad(o, model, makePrompt) {
  const recs = [];
  const state = { done: 0, failed: 0, inflight: 0, tokens: 0 };
  const t0 = now();
  const tick = progress(`C=${o.concurrency}`, state, t0);
  const ticker = setInterval(() => tick(false), 2000);
  const rand = rng(o.seed * 7919 + 17);
  let issued = 0, nextArrival = 0;
  const more = () => (o.numRequests !== null ? issued < o.numRequests : (now() - t0) / 1000 < o.duration);
  const client = async () => {
    while (more()) {
      const index = issued++;
      if (o.rate) {
        nextArrival += (-Math.log(1 - rand()) / o.rate) * 1000;
        const wait = nextArrival - (now() - t0);
        if (wait > 0) await sleep(wait);
      }
      state.inflight++;
      const rec = await streamOne(o, model, makePrompt(index), o.maxTokens, t0);
      state.inflight--;
      rec.index = index;
      recs.push(rec);
      state.done++;
      if (rec.error) state.failed++;
      else state.tokens += rec.tokens;
    }
  };
  await Promise.all(Array.from({ length: o.concurrency }, client));
  clearInterval(ticker);
  tick(true);
  return { recs, t0 };
}

function loadReceipt(o, recs) {
  const ok = recs.filter((r) => !r.error);
  const start = recs.length ? Math.min(...recs.map((r) => r.send_ms)) : 0;
  const end = recs.length ? Math.max(...recs.map((r) => r.end_ms)) : 0;
  const seconds = (end - start) / 1000;
  const tokens = ok.reduce((a, r) => a + r.tokens, 0);
  const promptCounts = ok.map((r) => r.usage && r.usage.prompt_tokens).filter(Number.isInteger);
  return {
    requests: { sent: recs.length, completed: ok.length, failed: recs.length - ok.length },
    errors: errorSummary(recs),
    duration_s: Math.round(seconds * 1e4) / 1e4,
    generated_tokens: tokens,
    generated_tokens_per_request: stats(ok.map((r) => r.tokens)),
    finish_reasons: ok.reduce((m, r) => { const k = r.finish_reason || "none"; m[k] = (m[k] || 0) + 1; return m; }, {}),
    prompt_tokens_measured: stats(promptCounts),
    aggregate_output_tok_s: seconds > 0 ? Math.round((tokens / seconds) * 100) / 100 : null,
    request_throughput_per_s: seconds > 0 ? Math.round((ok.length / seconds) * 1000) / 1000 : null,
    ...latencyStats(recs),
  };
}

// K conversations at once, each T turns in sequence; a turn sends the whole
// history (user turns and the replies as the server wrote them).
async function runMultiTurn(o, model, userWords) {
  const { conversations: K, turns: T } = o.multiTurn;
  const recs = [];
  const state = { done: 0, failed: 0, inflight: 0, tokens: 0 };
  const t0 = now();
  const tick = progress(`multi-turn ${K}x${T}`, state, t0);
  const ticker = setInterval(() => tick(false), 2000);
  const conversation = async (k) => {
    const rand = rng(o.seed * 104729 + k + 1);
    const history = [];
    for (let turn = 1; turn <= T; turn++) {
      history.push({ role: "user", content: textOfWords(rand, userWords) });
      state.inflight++;
      const rec = await streamOne(o, model, history.slice(), o.maxTokens, t0);
      state.inflight--;
      rec.conversation = k;
      rec.turn = turn;
      recs.push(rec);
      state.done++;
      if (rec.error) { state.failed++; break; } // a conversation stops at its first failed turn
      state.tokens += rec.tokens;
      history.push({ role: "assistant", content: rec.text });
    }
  };
  await Promise.all(Array.from({ length: K }, (_, k) => conversation(k)));
  clearInterval(ticker);
  tick(true);
  const byTurn = [];
  for (let turn = 1; turn <= T; turn++) {
    const r = recs.filter((x) => x.turn === turn);
    const ok = r.filter((x) => !x.error);
    byTurn.push({
      turn, requests: r.length, failed: r.length - ok.length,
      prompt_tokens_measured: stats(ok.map((x) => x.usage && x.usage.prompt_tokens).filter(Number.isInteger)),
      ttft_ms: stats(ok.map((x) => x.first_ms - x.send_ms)),
      tpot_ms: stats(ok.filter((x) => x.tokens > 1).map((x) => (x.end_ms - x.first_ms) / (x.tokens - 1))),
    });
  }
  const first = byTurn[0].ttft_ms.p50, last = byTurn[T - 1].ttft_ms.p50;
  return {
    ...loadReceipt(o, recs),
    by_turn: byTurn,
    last_over_first_turn_ttft_p50: first && last !== null ? Math.round((last / first) * 1000) / 1000 : null,
  };
}

// ---- main ----------------------------------------------------------------------
function gitCommit() {
  const here = path.dirname(fileURLToPath(import.meta.url));
  try {
    const c = execFileSync("git", ["-C", here, "rev-parse", "HEAD"], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim();
    const dirty = execFileSync("git", ["-C", here, "status", "--porcelain", "--untracked-files=no"], { stdio: ["ignore", "pipe", "ignore"] }).toString().trim() !== "";
    return dirty ? `${c}+dirty` : c;
  } catch {
    try { return fs.readFileSync(path.join(here, "..", ".dev", "COMMIT"), "utf8").trim() || null; } catch { return null; }
  }
}

function writeReceipt(file, receipt) {
  const text = JSON.stringify(receipt, null, 1) + "\n";
  if (!file) { process.stdout.write(text); return; }
  const tmp = `${file}.tmp-${process.pid}`;
  fs.writeFileSync(tmp, text);
  fs.renameSync(tmp, file);
}

async function main() {
  const o = parseArgs(process.argv.slice(2));
  const started = new Date().toISOString();
  const models = await request(o, "GET", "/v1/models", null, null, 30000);
  if (models.status !== 200) die(`GET /v1/models: ${errorText(models)}`);
  let modelsAnswer;
  try { modelsAnswer = JSON.parse(models.body); } catch { die("GET /v1/models: the answer is not JSON"); }
  const model = o.model ?? (modelsAnswer.data && modelsAnswer.data[0] && modelsAnswer.data[0].id);
  if (!model) die("GET /v1/models lists no model; name one with --model");

  const receipt = {
    tool: "bench/serve-bench.mjs",
    command: [path.basename(process.argv0), ...process.argv.slice(1).map((a, i) => (i === 0 ? path.relative(process.cwd(), a) : a))].join(" "),
    git_commit: gitCommit(),
    label: o.label ?? o.url,
    url: o.url,
    endpoint: endpointPath(o),
    model,
    server_models: modelsAnswer,
    started,
    config: {
      concurrency: o.concurrency, prompt_tokens: o.promptTokens, max_tokens: o.maxTokens, ignore_eos: true,
      num_requests: o.numRequests, duration_s: o.duration, request_rate: o.rate, warmup: o.warmup, seed: o.seed,
      multi_turn: o.multiTurn ? { ...o.multiTurn, turn_tokens: o.turnTokens } : null,
    },
    definitions: "TTFT = first content chunk - send; TPOT = (end - first chunk) / (tokens - 1); ITL = gaps between content chunks; " +
      "E2EL = end - send; aggregate tok/s = generated tokens of completed requests / (last end - first send). Times in ms.",
  };

  if (o.multiTurn) {
    const cal = await calibrateWords({ ...o }, model, o.turnTokens, o.seed).catch((e) => die(`calibrating a chat turn: ${e.message}`));
    // the first turn's prompt holds the chat template's tokens too: take the user turn's words from the ratio
    const words = Math.max(1, Math.round((cal.words * o.turnTokens) / Math.max(cal.tokens, 1)));
    receipt.prompt = { mode: "text", user_turn_words: words, calibration: cal };
    log(`multi-turn: ${o.multiTurn.conversations} conversations x ${o.multiTurn.turns} turns, ${words} words a user turn`);
    receipt.results = await runMultiTurn(o, model, words);
  } else {
    let mode = o.promptMode;
    let measured = null;
    if (mode !== "text" && o.endpoint === "completions") {
      try {
        measured = await promptTokensOf(o, model, idPrompt(o, rng(o.seed), o.promptTokens));
        mode = "ids";
        if (measured !== o.promptTokens) log(`warning: a ${o.promptTokens}-id prompt counts as ${measured} prompt tokens (a BOS token?)`);
      } catch (e) {
        if (mode === "ids") die(`the server does not take token-id prompts: ${e.message}`);
        log(`token-id prompts refused (${e.message}); calibrating text`);
        mode = "text";
      }
    } else mode = "text";
    let words = null, cal = null;
    if (mode === "text") {
      cal = await calibrateWords(o, model, o.promptTokens, o.seed).catch((e) => die(`calibrating the prompt: ${e.message}`));
      words = cal.words;
      measured = cal.tokens;
      if (cal.tokens !== o.promptTokens) log(`warning: closest text prompt is ${cal.tokens} tokens, not ${o.promptTokens}`);
    }
    receipt.prompt = { mode, requested_tokens: o.promptTokens, measured_tokens: measured, words, calibration: cal };
    const prand = rng(o.seed * 31 + 5);
    const base = mode === "ids" ? null : textOfWords(rng(o.seed), words);
    const makePrompt = () => (mode === "ids" ? idPrompt(o, prand, o.promptTokens) : shuffledText(base, prand));
    if (o.warmup > 0) {
      log(`warmup: ${o.warmup} requests`);
      await runLoad({ ...o, numRequests: o.warmup, duration: null, rate: null }, model, makePrompt);
    }
    log(`load: C=${o.concurrency}, P=${o.promptTokens}, D=${o.maxTokens}, ${o.numRequests ?? `${o.duration} s of`} requests${o.rate ? ` at ${o.rate}/s` : ""}`);
    const { recs } = await runLoad(o, model, makePrompt);
    receipt.results = loadReceipt(o, recs);
  }
  receipt.ended = new Date().toISOString();
  writeReceipt(o.output, receipt);
  const r = receipt.results;
  process.stderr.write(`serve-bench: ${receipt.label} C=${o.concurrency}: ${r.requests.completed}/${r.requests.sent} ok, ` +
    `${r.aggregate_output_tok_s} tok/s, TTFT p50 ${r.ttft_ms.p50} p95 ${r.ttft_ms.p95} ms, TPOT p50 ${r.tpot_ms.p50} ms\n`);
  if (agent) agent.destroy();
  process.exitCode = r.requests.completed > 0 ? 0 : 1;
}

main().catch((e) => die(e.stack || String(e)));
