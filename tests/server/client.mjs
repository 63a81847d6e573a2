// wisp serve against the official OpenAI client (npm `openai`, pinned in
// package.json): chat and completions, streaming and not, stop strings,
// max_tokens, usage, include_usage, 8 concurrent greedy streams against the
// same requests alone, and bad requests (each answered with the right error,
// and followed by a normal request that must still work). Prints one line a
// check; exits 1 at the first failure. Run by tests/test_server.c:
//   node tests/server/client.mjs --wisp build/wisp --model models/default --backend cpu
import { execFileSync } from "node:child_process";
import fs from "node:fs";
import net from "node:net";
import os from "node:os";
import path from "node:path";
import OpenAI from "openai";
import { args, startServer } from "./serve.mjs";

const a = args();
a.apiKey = "test-key-" + process.pid;
const srv = await startServer(a, ["--parallel", "8", "-c", "2048", "--grace", "1"]);
const client = new OpenAI({ baseURL: srv.url + "/v1", apiKey: a.apiKey, maxRetries: 0 });
let checks = 0;

function check(cond, what) {
  if (!cond) throw new Error("check failed: " + what);
  checks++;
}

async function step(name, fn) {
  const t0 = Date.now();
  try {
    await fn();
    console.log(`ok   ${name} (${Date.now() - t0} ms)`);
  } catch (e) {
    console.log("FAIL " + name + ": " + (e.stack || e));
    console.log("server log:\n" + srv.log());
    srv.proc.kill("SIGKILL");
    process.exit(1);
  }
}

const auth = { Authorization: "Bearer " + a.apiKey };
async function raw(path, body, headers = {}) {
  const r = await fetch(srv.url + path, {
    method: "POST",
    headers: { "Content-Type": "application/json", ...auth, ...headers },
    body,
  });
  const text = await r.text();
  let json = null;
  try { json = JSON.parse(text); } catch { /* not JSON */ }
  return { status: r.status, json, text };
}

// The error body must be OpenAI's shape.
function isError(res, status, param) {
  check(res.status === status, `status ${res.status}, expected ${status}: ${res.text.slice(0, 300)}`);
  const e = res.json && res.json.error;
  check(e && typeof e.message === "string" && e.message.length > 0 && typeof e.type === "string", "error body: " + res.text);
  check("param" in e && "code" in e, "error body has param and code: " + res.text);
  if (param !== undefined) check(e.param === param, `param ${e.param}, expected ${param}`);
}

// After each bad request: a normal one still works.
async function normal() {
  const r = await client.completions.create({ prompt: "The cat", max_tokens: 2, temperature: 0 });
  check(r.choices.length === 1 && r.choices[0].text.length > 0, "a normal request still works");
}

async function metric(name) {
  const r = await fetch(srv.url + "/metrics", { headers: auth });
  const text = await r.text();
  const m = text.match(new RegExp("^" + name + " (\\S+)$", "m"));
  if (!m) throw new Error(`no ${name} in /metrics`);
  return Number(m[1]);
}

const greedy = { temperature: 0 };
const chatMsgs = [{ role: "user", content: "Tell me a story about a king." }];

await step("health", async () => {
  await srv.ready();
  const r = await fetch(srv.url + "/health");
  check(r.status === 200, "health 200");
});

// The server listens before the model loads. The load is held open, not
// raced: the artifact's manifest.json is a FIFO that this test writes only
// after checking the answers of a loading server.
await step("503 while the model loads, 200 after", async () => {
  const dir = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-loading-"));
  for (const f of fs.readdirSync(a.model))
    if (f !== "manifest.json") fs.symlinkSync(path.resolve(a.model, f), path.join(dir, f));
  execFileSync("mkfifo", [path.join(dir, "manifest.json")]);
  const s2 = await startServer({ ...a, model: dir });
  try {
    const h = await fetch(s2.url + "/health");
    check(h.status === 503 && (await h.json()).status === "loading", "health 503 while loading");
    const r = await fetch(s2.url + "/v1/completions", { method: "POST", headers: auth, body: '{"prompt":"x"}' });
    check(r.status === 503 && (await r.json()).error.code === "model_loading", "completions 503 while loading");
    const page = await fetch(s2.url + "/");
    check(page.status === 200 && (await page.text()).includes("<title>wisp chat</title>"), "the page is served meanwhile");
    fs.writeFileSync(path.join(dir, "manifest.json"), fs.readFileSync(path.join(a.model, "manifest.json")));
    await s2.ready();
    const c = new OpenAI({ baseURL: s2.url + "/v1", apiKey: a.apiKey, maxRetries: 0 });
    const out = await c.completions.create({ prompt: "The cat", max_tokens: 2, temperature: 0 });
    check(out.choices[0].text.length > 0 && out.model === path.basename(dir), "serves once loaded");
  } finally {
    const code = await s2.stop();
    fs.rmSync(dir, { recursive: true, force: true });
    check(code === 0, "second server exit " + code);
  }
});

await step("models", async () => {
  const list = await client.models.list();
  check(list.data.length === 1 && list.data[0].id === "default", "models: " + JSON.stringify(list.data));
});

let chatText;
await step("chat, not streaming", async () => {
  const r = await client.chat.completions.create({ model: "default", messages: chatMsgs, max_tokens: 12, ...greedy });
  check(r.object === "chat.completion" && r.id && r.created > 0 && r.model === "default" && r.system_fingerprint, "head");
  const c = r.choices[0];
  check(c.message.role === "assistant" && typeof c.message.content === "string", "message");
  check(c.finish_reason === "stop" || c.finish_reason === "length", "finish_reason " + c.finish_reason);
  const u = r.usage;
  check(u.prompt_tokens > 5 && u.completion_tokens >= 1 && u.completion_tokens <= 12, "usage " + JSON.stringify(u));
  check(u.total_tokens === u.prompt_tokens + u.completion_tokens, "total");
  if (c.finish_reason === "length") check(u.completion_tokens === 12, "length means max_tokens tokens");
  chatText = c.message.content;
});

await step("chat, streaming = not streaming", async () => {
  const stream = await client.chat.completions.create({ messages: chatMsgs, max_tokens: 12, stream: true, ...greedy });
  let text = "", finish = null, first = true;
  for await (const ch of stream) {
    check(ch.object === "chat.completion.chunk", "chunk object");
    if (first) check(ch.choices[0].delta.role === "assistant", "first delta has the role");
    first = false;
    text += ch.choices[0].delta.content || "";
    if (ch.choices[0].finish_reason) finish = ch.choices[0].finish_reason;
    check(!("usage" in ch) || ch.usage === null, "no usage without include_usage");
  }
  check(text === chatText, `streamed ${JSON.stringify(text)} vs ${JSON.stringify(chatText)}`);
  check(finish === "stop" || finish === "length", "finish");
});

let compText, compUsage;
await step("completions, max_tokens and usage", async () => {
  const r = await client.completions.create({ prompt: "Once upon a time", max_tokens: 20, ignore_eos: true, ...greedy });
  check(r.object === "text_completion", "object");
  check(r.choices[0].finish_reason === "length", "finish length");
  check(r.usage.completion_tokens === 20, "20 tokens: " + JSON.stringify(r.usage));
  const one = await client.completions.create({ prompt: "Once upon a time", max_tokens: 1, ...greedy });
  check(one.usage.completion_tokens === 1 && one.usage.prompt_tokens === r.usage.prompt_tokens, "max_tokens 1");
  check(compText === undefined && r.choices[0].text.startsWith(one.choices[0].text), "greedy prefix");
  compText = r.choices[0].text;
  compUsage = r.usage;
  const n2 = await client.completions.create({ prompt: "Once upon a time", max_tokens: 20, n: 2, ignore_eos: true, ...greedy });
  check(n2.choices.length === 2 && n2.choices[0].text === compText && n2.choices[1].text === compText, "n=2 greedy");
  check(n2.usage.prompt_tokens === compUsage.prompt_tokens && n2.usage.completion_tokens === 40, "n=2 usage");
});

await step("completions streaming with include_usage", async () => {
  const stream = await client.completions.create({
    prompt: "Once upon a time", max_tokens: 20, ignore_eos: true, stream: true,
    stream_options: { include_usage: true }, ...greedy,
  });
  let text = "", usage = null, chunks = 0;
  for await (const ch of stream) {
    chunks++;
    if (ch.choices.length === 0) {
      check(usage === null, "one usage chunk");
      usage = ch.usage;
    } else {
      check(ch.usage === null, "usage: null on the other chunks");
      text += ch.choices[0].text;
    }
  }
  check(text === compText, "streamed text = not streamed");
  check(usage && usage.prompt_tokens === compUsage.prompt_tokens && usage.completion_tokens === 20 &&
        usage.total_tokens === compUsage.total_tokens, "usage chunk " + JSON.stringify(usage));
  check(chunks >= 3, "several chunks");
});

await step("stop strings (not streaming and streaming)", async () => {
  // a stop string from the middle of the greedy text, possibly across tokens
  const from = Math.floor(compText.length / 2);
  const stop = compText.slice(from, from + 4);
  check(stop.length === 4, "text long enough: " + JSON.stringify(compText));
  const want = compText.slice(0, compText.indexOf(stop));
  const r = await client.completions.create({ prompt: "Once upon a time", max_tokens: 20, ignore_eos: true, stop: [stop, "\u0001never"], ...greedy });
  check(r.choices[0].text === want, `stop ${JSON.stringify(stop)}: ${JSON.stringify(r.choices[0].text)} vs ${JSON.stringify(want)}`);
  check(r.choices[0].finish_reason === "stop", "finish stop");
  const s = await client.completions.create({ prompt: "Once upon a time", max_tokens: 20, ignore_eos: true, stop, stream: true, ...greedy });
  let text = "", finish = null;
  for await (const ch of s) { text += ch.choices[0].text; finish = ch.choices[0].finish_reason || finish; }
  check(text === want && finish === "stop", "streamed stop: " + JSON.stringify(text));
});

await step("logprobs (chat and completions)", async () => {
  const r = await client.chat.completions.create({ messages: chatMsgs, max_tokens: 3, logprobs: true, top_logprobs: 3, ...greedy });
  const lp = r.choices[0].logprobs.content;
  check(lp.length === r.usage.completion_tokens, "one entry a token");
  for (const e of lp) {
    check(e.logprob <= 0 && e.top_logprobs.length === 3 && Array.isArray(e.bytes), "entry " + JSON.stringify(e));
    check(e.top_logprobs[0].logprob >= e.top_logprobs[2].logprob, "sorted");
    check(Math.abs(e.top_logprobs[0].logprob - e.logprob) < 1e-4, "greedy picks the top");
  }
  const c = await client.completions.create({ prompt: "Once upon a time", max_tokens: 3, logprobs: 2, ignore_eos: true, ...greedy });
  const l = c.choices[0].logprobs;
  check(l.tokens.length === 3 && l.token_logprobs.length === 3 && l.top_logprobs.length === 3 && l.text_offset[0] === 0, "completions logprobs");
  check(l.tokens.join("") === c.choices[0].text, "tokens join to the text");
});

await step("8 concurrent greedy streams = each alone", async () => {
  const prompts = ["Once upon a time", "The king said", "In the beginning", "And the people",
                   "There was a man", "The children of", "Behold, the", "It came to pass"];
  const run = async (p) => {
    const s = await client.completions.create({ prompt: p, max_tokens: 24, ignore_eos: true, stream: true, ...greedy });
    let t = "";
    for await (const ch of s) t += ch.choices[0].text;
    return t;
  };
  const alone = [];
  for (const p of prompts) alone.push(await run(p));
  const together = await Promise.all(prompts.map(run));
  for (let i = 0; i < prompts.length; i++)
    check(together[i] === alone[i], `stream ${i}: ${JSON.stringify(together[i])} vs ${JSON.stringify(alone[i])}`);
  check(new Set(alone).size > 1, "different prompts give different text");
});

await step("malformed JSON -> 400", async () => {
  isError(await raw("/v1/chat/completions", '{"messages": [{"role": "user", "content": "hi"}'), 400);
  await normal();
});

await step("wrong types -> 400 naming the field", async () => {
  isError(await raw("/v1/chat/completions", JSON.stringify({ messages: chatMsgs, temperature: "hot" })), 400, "temperature");
  isError(await raw("/v1/chat/completions", JSON.stringify({ messages: "hello" })), 400, "messages");
  isError(await raw("/v1/completions", JSON.stringify({ prompt: "x", stream: "yes" })), 400, "stream");
  isError(await raw("/v1/completions", JSON.stringify({ prompt: "x", stop: ["a", "b", "c", "d", "e"] })), 400, "stop");
  await normal();
});

await step("20 MB body -> 413", async () => {
  const big = JSON.stringify({ prompt: "x".repeat(20 << 20) });
  isError(await raw("/v1/completions", big), 413);
  await normal();
});

await step("unknown model -> 404", async () => {
  let err = null;
  try { await client.chat.completions.create({ model: "no-such-model", messages: chatMsgs, max_tokens: 2 }); }
  catch (e) { err = e; }
  check(err instanceof OpenAI.NotFoundError && err.status === 404 && err.code === "model_not_found", "404: " + err);
  await normal();
});

await step("token-id prompts: as the text's ids; an id outside the vocabulary -> 400", async () => {
  const text = await client.completions.create({ prompt: "Once upon a time", max_tokens: 8, ignore_eos: true, ...greedy });
  /* the ids of the prompt as the server frames it, from `wisp tokenize` */
  const ids = JSON.parse(execFileSync(a.wisp, ["tokenize", "-m", a.model, "-p", "Once upon a time"], { encoding: "utf8" }));
  const byIds = await client.completions.create({ prompt: ids, max_tokens: 8, ignore_eos: true, ...greedy });
  check(byIds.usage.prompt_tokens === ids.length, "prompt_tokens " + byIds.usage.prompt_tokens + " vs " + ids.length);
  check(byIds.choices[0].text === text.choices[0].text, `ids gave ${JSON.stringify(byIds.choices[0].text)}, text ${JSON.stringify(text.choices[0].text)}`);
  isError(await raw("/v1/completions", JSON.stringify({ prompt: [1, 99999999], max_tokens: 2 })), 400);
  await normal();
});

await step("negative max_tokens -> 400", async () => {
  let err = null;
  try { await client.chat.completions.create({ messages: chatMsgs, max_tokens: -3 }); }
  catch (e) { err = e; }
  check(err instanceof OpenAI.BadRequestError && err.param === "max_tokens", "400: " + err);
  await normal();
});

await step("missing messages -> 400", async () => {
  isError(await raw("/v1/chat/completions", JSON.stringify({ model: "default", max_tokens: 2 })), 400, "messages");
  await normal();
});

await step("invalid UTF-8 -> 400", async () => {
  const body = Buffer.concat([Buffer.from('{"prompt":"bad '), Buffer.from([0xc3, 0x28, 0xff]), Buffer.from('"}')]);
  isError(await raw("/v1/completions", body), 400);
  await normal();
});

await step("wrong or missing API key -> 401", async () => {
  isError(await raw("/v1/chat/completions", JSON.stringify({ messages: chatMsgs }), { Authorization: "Bearer wrong" }), 401);
  const r = await fetch(srv.url + "/v1/models");
  check(r.status === 401, "no key: " + r.status);
  const bad = new OpenAI({ baseURL: srv.url + "/v1", apiKey: "wrong", maxRetries: 0 });
  let err = null;
  try { await bad.models.list(); } catch (e) { err = e; }
  check(err instanceof OpenAI.AuthenticationError, "AuthenticationError: " + err);
  await normal();
});

await step("a client that disconnects mid-stream stops its generation", async () => {
  const before = await metric("wisp_generated_tokens_total");
  const s = await client.completions.create({ prompt: "Once upon a time", max_tokens: 2000, ignore_eos: true, stream: true, ...greedy });
  let n = 0;
  for await (const ch of s) { if (ch.choices.length && ++n === 3) break; } // leaving the loop aborts the request
  // the scheduler frees the slot: wait for it (bounded by the scheduler, not a clock)
  while ((await metric("wisp_sequences_running")) > 0) await new Promise((r) => setTimeout(r, 50));
  const made = (await metric("wisp_generated_tokens_total")) - before;
  check(made >= 3 && made < 2000, `generation stopped early: ${made} tokens`);
  console.log(`     (${made} tokens made before the cancel took hold)`);
  await normal();
});

await step("a client that gives up on a non-streaming request stops its generation", async () => {
  const before = await metric("wisp_generated_tokens_total");
  const ac = new AbortController();
  const req = fetch(srv.url + "/v1/completions", {
    method: "POST", headers: { "Content-Type": "application/json", ...auth }, signal: ac.signal,
    body: JSON.stringify({ prompt: "Once upon a time", max_tokens: 2000, ignore_eos: true, temperature: 0 }),
  }).catch((e) => e);
  // abort once it is generating (a condition, not a delay)
  while ((await metric("wisp_generated_tokens_total")) === before) await new Promise((r) => setTimeout(r, 20));
  ac.abort();
  check((await req).name === "AbortError", "aborted");
  while ((await metric("wisp_sequences_running")) > 0) await new Promise((r) => setTimeout(r, 50));
  const made = (await metric("wisp_generated_tokens_total")) - before;
  check(made >= 1 && made < 2000, `generation stopped early: ${made} tokens`);
  console.log(`     (${made} tokens made before the cancel took hold)`);
  await normal();
});

await step("200 idle connections", async () => {
  const socks = await Promise.all(Array.from({ length: 200 }, () => new Promise((res, rej) => {
    const s = net.connect(srv.port, "127.0.0.1", () => res(s));
    s.on("error", rej);
  })));
  await normal();
  const r = await fetch(srv.url + "/health");
  check(r.status === 200, "health with 200 idle connections");
  for (const s of socks) s.destroy();
});

await step("a slow client that reads nothing", async () => {
  const body = JSON.stringify({ prompt: "Once upon a time", max_tokens: 300, ignore_eos: true, stream: true, temperature: 0 });
  const s = net.connect(srv.port, "127.0.0.1");
  await new Promise((res) => s.on("connect", res));
  s.pause(); // never read
  s.write(`POST /v1/completions HTTP/1.1\r\nHost: x\r\nAuthorization: Bearer ${a.apiKey}\r\n` +
          `Content-Type: application/json\r\nContent-Length: ${Buffer.byteLength(body)}\r\n\r\n${body}`);
  await normal();
  await normal();
  s.destroy();
  await normal();
});

await step("keep-alive: several requests on one connection", async () => {
  const http = await import("node:http");
  const agent = new http.Agent({ keepAlive: true, maxSockets: 1 });
  const ports = new Set();
  for (let i = 0; i < 3; i++) {
    const port = await new Promise((res, rej) => {
      const req = http.request(srv.url + "/health", { agent }, (r) => { r.resume(); r.on("end", () => res(req.socket.localPort)); });
      req.on("error", rej);
      req.end();
    });
    ports.add(port);
  }
  agent.destroy();
  check(ports.size === 1, "one connection reused: " + [...ports]);
});

await step("metrics", async () => {
  const r = await fetch(srv.url + "/metrics", { headers: auth });
  const text = await r.text();
  check(r.status === 200 && r.headers.get("content-type").startsWith("text/plain"), "metrics 200");
  for (const name of ["wisp_http_requests_total{code=\"200\"}", "wisp_time_to_first_token_seconds_count",
                      "wisp_inter_token_latency_seconds_bucket", "wisp_prompt_tokens_total", "wisp_generated_tokens_total",
                      "wisp_sequences_running", "wisp_sequences_queued", "wisp_slots_used"])
    check(text.includes(name), "metrics has " + name);
  check(/wisp_http_requests_total\{code="413"\} [1-9]/.test(text) && /wisp_http_requests_total\{code="401"\} [1-9]/.test(text), "error counts");
});

await step("SIGTERM: clean shutdown", async () => {
  // a stream in flight when the signal comes ends with a last event, not a cut connection
  const s = await client.completions.create({ prompt: "Once upon a time", max_tokens: 400, ignore_eos: true, stream: true, ...greedy });
  const it = s[Symbol.asyncIterator]();
  await it.next();
  const exit = srv.stop();
  let err = null;
  try { for (let r = await it.next(); !r.done; r = await it.next()); } catch (e) { err = e; }
  check(err === null || err instanceof OpenAI.APIError, "the stream ended with an event: " + err);
  const code = await exit;
  check(code === 0, "exit code " + code + "\n" + srv.log());
  check(/shutting down/.test(srv.log()), "said so");
});

console.log(`server client tests (${a.backend}): ${checks} checks passed`);
