// wisp.wasm in its page (build/wasm/index.html, `make wasm`) in headless
// Chromium (Debian's `chromium`, driven by npm `playwright-core`) on WebGPU
// (Chromium's SwiftShader adapter):
//   1. the default model, opened by URL, gives the native CLI's greedy text
//      (--expect: the output of `wisp run --backend cpu -p P -n N --temp 0`),
//      streamed into the page in several updates, with the plan and device shown;
//   2. a sampled run (temperature 0.8, seed 7) on the page's CPU backend (the
//      wasm CPU path) gives the native CLI's text (--expect-sampled);
//   2b. a chat of two lines (wisp run --chat, the page feeding its standard
//      input) gives the native CLI's replies (--expect-chat);
//   3. a damaged artifact gives the CLI's one-line error (--expect-error, with
//      the native path of the damaged copy given by --bad-dir);
//   4. a screenshot of the page is kept (--out DIR/wasm-page.png);
//   5. the benchmark's receipt downloads, a JSON receipt of the page's run;
//   6. a larger model (--big DIR: a seed-shaped synthetic model), opened by
//      URL and read with range requests, runs on WebGPU with its weights
//      streamed from the URL into GPU buffers: the native CLI's greedy tokens
//      (--expect-big) with the page's wasm memory peak under half the weights;
//   7. a page without WebGPU (navigator.gpu removed) falls back to its cpu
//      backend (wasm SIMD) and runs a GGUF file by URL (--gguf: the default
//      model exported) with the native CLI's greedy text for it (--expect-gguf).
//   node tests/web/page.mjs --web build/wasm --model models/default --prompt P -n N
//        --expect FILE --expect-sampled FILE --expect-chat FILE --bad-dir DIR --expect-error FILE
//        --big DIR --big-prompt P --expect-big FILE --gguf FILE --expect-gguf FILE --out build/test-logs
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^-+/, "")] = v[i + 1];
  for (const k of ["web", "model", "prompt", "n", "expect", "expect-sampled", "expect-chat", "bad-dir", "expect-error", "big", "big-prompt", "expect-big", "gguf", "expect-gguf", "out"])
    if (a[k] === undefined) throw new Error(`missing --${k}`);
  return a;
}

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm", ".json": "application/json" };

// Serves the page at /, the good model at /good/ and the damaged one at /bad/.
function serve(roots) {
  const server = http.createServer((req, res) => {
    const url = decodeURIComponent(new URL(req.url, "http://x").pathname);
    let file = null;
    for (const [prefix, dir] of roots)
      if (url.startsWith(prefix)) { file = path.join(dir, url.slice(prefix.length) || "index.html"); break; }
    if (!file || file.includes("..") || !fs.existsSync(file) || !fs.statSync(file).isFile()) {
      res.writeHead(404).end("not found");
      return;
    }
    // HEAD, and single ranges (the page reads a model by URL a slice at a time)
    const size = fs.statSync(file).size;
    const type = TYPES[path.extname(file)] || "application/octet-stream";
    const range = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range || "");
    if (range) {
      const a = Number(range[1]), b = Math.min(Number(range[2]), size - 1);
      if (a > b) { res.writeHead(416).end(); return; }
      res.writeHead(206, { "content-type": type, "content-length": b - a + 1, "content-range": `bytes ${a}-${b}/${size}`,
                           "accept-ranges": "bytes" });
      fs.createReadStream(file, { start: a, end: b }).pipe(res);
      return;
    }
    res.writeHead(200, { "content-type": type, "content-length": size, "accept-ranges": "bytes" });
    if (req.method === "HEAD") res.end();
    else fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

const a = args();
const started = Date.now();
// "ok" lines carry the seconds since the start (wall time; the page's steps
// are mostly SwiftShader compiling and running kernels)
const ok = (text) => console.log(`ok ${text} [${((Date.now() - started) / 1000).toFixed(0)} s]`);
const expect = fs.readFileSync(a.expect, "utf8");
const expectSampled = fs.readFileSync(a["expect-sampled"], "utf8");
const expectChat = fs.readFileSync(a["expect-chat"], "utf8");
const expectError = fs.readFileSync(a["expect-error"], "utf8").trim().split("\n").pop()
  .replaceAll(a["bad-dir"], "/model");
const expectBig = fs.readFileSync(a["expect-big"], "utf8");
const bigWeights = fs.statSync(path.join(a.big, "weights.bin")).size;
const expectGguf = fs.readFileSync(a["expect-gguf"], "utf8");
const server = await serve([["/good/", a.model], ["/bad/", a["bad-dir"]], ["/big/", a.big],
                            ["/gguf/", path.dirname(a.gguf)], ["/", a.web]]);
const base = `http://127.0.0.1:${server.address().port}`;
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-chromium-"));
let browser = null, page = null, failed = null, status = "";
const console_ = [];
try {
  // a fresh profile (--user-data-dir) each run; WebGPU on SwiftShader needs
  // --enable-unsafe-webgpu headless (and not --disable-gpu)
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 1000, height: 900 },
    args: ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  page = browser.pages()[0] || (await browser.newPage());
  page.on("console", (m) => console_.push(m.text()));
  page.on("pageerror", (e) => console_.push("page error: " + e.message));
  await page.goto(`${base}/index.html`);
  // Does `action` and waits for the page's command (plan or run) it starts to end.
  const command = async (action) => {
    const before = await page.evaluate(() => window.wisp.runs);
    await action();
    await page.waitForFunction((n) => window.wisp.runs > n && window.wisp.done, before, { timeout: 600000 });
  };

  // 1. the default model by URL: plan, device, then greedy tokens
  await page.fill("#url", `${base}/good/`);
  await command(() => page.click("#load-url"));
  const planErr = await page.textContent("#error");
  if (planErr) throw new Error("opening the model: " + planErr);
  const plan = await page.textContent("#plan");
  if (!/^plan [0-9a-f]{64}\nbackend webgpu/.test(plan)) throw new Error("no webgpu plan shown: " + plan.slice(0, 300));
  const device = await page.textContent("#device");
  if (!device.startsWith("WebGPU adapter:")) throw new Error("no device shown: " + device);
  await page.fill("#prompt", a.prompt);
  await page.fill("#n", a.n);
  await page.fill("#temp", "0");
  await command(() => page.click("#run"));
  const err = await page.textContent("#error");
  if (err) throw new Error("generation failed in the page: " + err);
  const got = await page.textContent("#output");
  const updates = await page.evaluate(() => window.wisp.updates);
  if (got !== expect)
    throw new Error(`the page's greedy text differs from the native CLI's:\n page:   ${JSON.stringify(got)}\n native: ${JSON.stringify(expect)}`);
  if (updates < 2) throw new Error(`the tokens did not stream (${updates} update)`);
  ok(`page greedy text equals native (${got.length} characters in ${updates} updates) on ${device}`);
  console.log(`   ${await page.textContent("#status")}`);
  fs.mkdirSync(a.out, { recursive: true });
  const shot = path.join(a.out, "wasm-page.png");
  await page.screenshot({ path: shot, fullPage: true });
  ok(`screenshot ${shot}`);

  // 2. sampled, on the page's CPU backend (choosing it plans again)
  await command(() => page.selectOption("#backend", "cpu"));
  if (!(await page.textContent("#plan")).includes("\nbackend cpu")) throw new Error("no cpu plan shown");
  await page.fill("#temp", "0.8");
  await page.fill("#seed", "7");
  await command(() => page.click("#run"));
  const sampled = await page.textContent("#output");
  if ((await page.textContent("#error")) || sampled !== expectSampled)
    throw new Error(`the page's sampled text (cpu, seed 7) differs from the native CLI's:\n page:   ${JSON.stringify(sampled)}\n native: ${JSON.stringify(expectSampled)}\n error: ${await page.textContent("#error")}`);
  ok(`page sampled text (cpu backend, temperature 0.8, seed 7) equals native`);

  // 2b. a chat: two lines, greedy, 12 tokens a reply, then the end of input
  await page.fill("#temp", "0");
  await page.fill("#n", "12");
  await command(async () => {
    await page.click("#chat-start");
    for (const line of ["Who was the king?", "And then?"]) {
      await page.fill("#say", line);
      await page.press("#say", "Enter");
    }
    await page.click("#chat-end");
  });
  const replies = (await page.$$eval("#chat .reply", (els) => els.map((e) => e.textContent))).join("");
  if ((await page.textContent("#error")) || replies !== expectChat)
    throw new Error(`the page's chat differs from the native CLI's:\n page:   ${JSON.stringify(replies)}\n native: ${JSON.stringify(expectChat)}`);
  ok("page chat (two lines) equals native");

  // 3. the damaged artifact: the CLI's one line (wisp plan checks the
  // weights' digests when the page opens it)
  await page.fill("#url", `${base}/bad/`);
  await command(() => page.click("#load-url"));
  const bad = await page.textContent("#error");
  if (!(await page.isDisabled("#run"))) throw new Error("a damaged artifact can be run");
  if (bad !== expectError)
    throw new Error(`the damaged artifact's error differs from the CLI's:\n page: ${JSON.stringify(bad)}\n cli:  ${JSON.stringify(expectError)}`);
  ok(`damaged artifact: ${bad}`);

  // 5. the benchmark's receipt, on the default model's cpu backend
  await page.fill("#url", `${base}/good/`);
  await command(() => page.click("#load-url"));
  await page.fill("#bench-p", "8");
  await page.fill("#bench-n", "8");
  await command(() => page.click("#bench"));
  if (await page.textContent("#error")) throw new Error("benchmark: " + (await page.textContent("#error")));
  const [download] = await Promise.all([page.waitForEvent("download"), page.click("#receipt")]);
  const receipt = JSON.parse(fs.readFileSync(await download.path(), "utf8"));
  if (receipt.prompt_tokens !== 8 || receipt.decode_tokens !== 8 || !receipt.decode || !receipt.plan_id)
    throw new Error("the downloaded receipt is not the benchmark's: " + JSON.stringify(receipt).slice(0, 300));
  ok(`receipt downloaded (${download.suggestedFilename()}: plan ${receipt.plan_id.slice(0, 12)}, ` +
              `${receipt.decode_tokens} decode tokens)`);

  // 6. the big model on WebGPU, its weights streamed from the URL
  await command(() => page.selectOption("#backend", "webgpu")); // (plans the open model again)
  await page.fill("#url", `${base}/big/`);
  await command(() => page.click("#load-url"));
  if (await page.textContent("#error")) throw new Error("opening the big model: " + (await page.textContent("#error")));
  // one token from a one-token prompt: SwiftShader takes seconds a token of this model
  await page.fill("#prompt", a["big-prompt"]);
  await page.fill("#n", "1");
  await page.fill("#temp", "0");
  await command(() => page.click("#run"));
  const bigText = await page.textContent("#output");
  const peak = await page.evaluate(() => window.wisp.memory);
  if ((await page.textContent("#error")) || bigText !== expectBig)
    throw new Error(`the big model's greedy text on WebGPU differs from the native CLI's:\n page:   ${JSON.stringify(bigText)}\n native: ${JSON.stringify(expectBig)}\n error: ${await page.textContent("#error")}`);
  if (!(peak > 0 && peak < bigWeights / 2))
    throw new Error(`wasm memory peaked at ${peak} bytes for ${bigWeights} bytes of weights: they were not streamed`);
  ok(`streamed weights: greedy tokens equal native, wasm memory ${(peak / 2 ** 20).toFixed(0)} MiB ` +
              `for ${(bigWeights / 2 ** 20).toFixed(0)} MiB of weights`);

  // 7. no WebGPU: the page's cpu backend
  const plain = await browser.newPage();
  await plain.addInitScript(() => { Object.defineProperty(Navigator.prototype, "gpu", { get: () => undefined }); });
  await plain.goto(`${base}/index.html`);
  const cpuCommand = async (action) => {
    const before = await plain.evaluate(() => window.wisp.runs);
    await action();
    await plain.waitForFunction((n) => window.wisp.runs > n && window.wisp.done, before, { timeout: 600000 });
  };
  if ((await plain.inputValue("#backend")) !== "cpu") throw new Error("without WebGPU the page did not choose cpu");
  await plain.fill("#url", `${base}/gguf/${path.basename(a.gguf)}`);
  await cpuCommand(() => plain.click("#load-url"));
  if (await plain.textContent("#error")) throw new Error("opening the GGUF file: " + (await plain.textContent("#error")));
  await plain.fill("#prompt", a.prompt);
  await plain.fill("#n", a.n);
  await plain.fill("#temp", "0");
  await cpuCommand(() => plain.click("#run"));
  const cpuText = await plain.textContent("#output");
  if ((await plain.textContent("#error")) || cpuText !== expectGguf || !(await plain.textContent("#plan")).includes("\nbackend cpu"))
    throw new Error(`without WebGPU the page's cpu text for the GGUF file differs from the native CLI's:\n page:   ${JSON.stringify(cpuText)}\n native: ${JSON.stringify(expectGguf)}\n error: ${await plain.textContent("#error")}`);
  ok("without WebGPU: the cpu backend's greedy text for a GGUF file by URL equals native");
} catch (e) {
  failed = e;
  if (page) status = await page.textContent("#status").catch(() => "");
} finally {
  if (browser) await browser.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
  server.close();
}
if (failed) {
  console.log("FAIL wasm page: " + (failed.stack || failed));
  console.log(`the page's status: ${status}\nits console, last lines:\n  ${console_.slice(-10).join("\n  ")}`);
  process.exit(1);
}
