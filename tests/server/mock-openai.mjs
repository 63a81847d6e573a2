// A tiny OpenAI-compatible server for testing bench/serve-bench.mjs without a
// model: GET /v1/models, POST /v1/completions and /v1/chat/completions,
// streamed (SSE) or not. Its "tokenizer" counts a token-id prompt's ids and a
// text's words; a chat request adds 3 template tokens per message. A reply
// is max_tokens pieces " w0", " w1", ..., one SSE chunk each, then a usage
// chunk when stream_options.include_usage is set.
//
// It records what a test checks: the most streams in flight at once, every
// streamed request's body, and whether each chat history's assistant turns
// are replies this server wrote. Options:
//   gateAt: hold every stream until that many are in flight once (so a test
//           sees the client's concurrency without depending on timing;
//           a client that never gets there is let through after 15 s);
//   failEvery: answer every Nth streamed request 429 (error counting).
import http from "node:http";

export function startMock({ gateAt = 0, failEvery = 0, gapMs = 1, port = 0 } = {}) {
  const rec = { peak: 0, inflight: 0, streamed: 0, bodies: [], badHistory: 0, replies: new Set() };
  let gateOpen = gateAt <= 1;
  const waiters = [];
  const openGate = () => { gateOpen = true; while (waiters.length) waiters.shift()(); };
  // A client that never reaches gateAt streams is a bug the test reports
  // through `peak`; the gate then opens after a while instead of hanging.
  const fallback = gateOpen ? null : setTimeout(openGate, 15000);
  const models = { object: "list", data: [{ id: "mock-model", object: "model", created: 0, owned_by: "test" }] };

  const countTokens = (b, chat) => {
    if (chat) {
      let n = 0;
      for (const m of b.messages) n += 3 + String(m.content).split(/\s+/).filter(Boolean).length;
      return n;
    }
    if (Array.isArray(b.prompt)) return b.prompt.length;
    return String(b.prompt).split(/\s+/).filter(Boolean).length;
  };
  const sendError = (res, status, message) => {
    res.writeHead(status, { "content-type": "application/json" });
    res.end(JSON.stringify({ error: { message, type: "invalid_request_error", param: null, code: null } }));
  };

  const server = http.createServer((req, res) => {
    if (req.method === "GET" && req.url === "/health") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end('{"status":"ok"}');
      return;
    }
    if (req.method === "GET" && req.url === "/v1/models") {
      res.writeHead(200, { "content-type": "application/json" });
      res.end(JSON.stringify(models));
      return;
    }
    const chat = req.url === "/v1/chat/completions";
    if (req.method !== "POST" || (!chat && req.url !== "/v1/completions")) return sendError(res, 404, "not found");
    const parts = [];
    req.on("data", (b) => parts.push(b));
    req.on("end", async () => {
      let b;
      try { b = JSON.parse(Buffer.concat(parts).toString("utf8")); } catch { return sendError(res, 400, "malformed JSON"); }
      if (chat ? !Array.isArray(b.messages) : b.prompt === undefined) return sendError(res, 400, "missing prompt or messages");
      const n = Number.isInteger(b.max_tokens) && b.max_tokens > 0 ? b.max_tokens : 16;
      const promptTokens = countTokens(b, chat);
      const pieces = Array.from({ length: n }, (_, i) => ` w${i}`);
      const id = `mock-${Math.random().toString(36).slice(2)}`;
      if (chat) for (const m of b.messages) if (m.role === "assistant" && !rec.replies.has(m.content)) rec.badHistory++;
      const usage = { prompt_tokens: promptTokens, completion_tokens: n, total_tokens: promptTokens + n };
      if (!b.stream) {
        if (chat) rec.replies.add(pieces.join(""));
        res.writeHead(200, { "content-type": "application/json" });
        const choice = chat ? { index: 0, message: { role: "assistant", content: pieces.join("") }, finish_reason: "length" }
          : { index: 0, text: pieces.join(""), finish_reason: "length" };
        res.end(JSON.stringify({ id, object: chat ? "chat.completion" : "text_completion", created: 0, model: b.model, choices: [choice], usage }));
        return;
      }
      rec.streamed++;
      rec.bodies.push(b);
      if (failEvery && rec.streamed % failEvery === 0) return sendError(res, 429, "queue full");
      rec.inflight++;
      rec.peak = Math.max(rec.peak, rec.inflight);
      if (!gateOpen) {
        if (rec.inflight >= gateAt) openGate();
        else await new Promise((r) => waiters.push(r));
      }
      res.writeHead(200, { "content-type": "text/event-stream", "cache-control": "no-cache" });
      const send = (o) => res.write(`data: ${JSON.stringify(o)}\n\n`);
      const chunk = (extra) => ({ id, object: chat ? "chat.completion.chunk" : "text_completion", created: 0, model: b.model, ...extra });
      const wantUsage = b.stream_options && b.stream_options.include_usage;
      if (chat) send(chunk({ choices: [{ index: 0, delta: { role: "assistant", content: "" }, finish_reason: null }], usage: null }));
      for (let i = 0; i < n; i++) {
        await new Promise((r) => setTimeout(r, gapMs));
        const last = i === n - 1;
        send(chunk({
          choices: [chat ? { index: 0, delta: { content: pieces[i] }, finish_reason: last ? "length" : null }
            : { index: 0, text: pieces[i], finish_reason: last ? "length" : null }],
          ...(wantUsage ? { usage: null } : {}),
        }));
      }
      if (chat) rec.replies.add(pieces.join(""));
      if (wantUsage) send(chunk({ choices: [], usage }));
      res.write("data: [DONE]\n\n");
      res.end();
      rec.inflight--;
    });
  });
  server.on("close", () => clearTimeout(fallback));
  return new Promise((resolve) => server.listen(port, "127.0.0.1", () => resolve({ server, rec, port: server.address().port })));
}

// Run directly, it serves until killed: node tests/server/mock-openai.mjs [PORT [GAP_MS]]
if (process.argv[1] && import.meta.url === new URL(`file://${process.argv[1]}`).href) {
  const { port } = await startMock({ port: Number(process.argv[2] || 8080), gapMs: Number(process.argv[3] || 1) });
  process.stderr.write(`mock-openai: listening on 127.0.0.1:${port}\n`);
}
