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
//   4. a screenshot of the page is kept (--out DIR/wasm-page.png).
//   node tests/web/page.mjs --web build/wasm --model models/default --prompt P -n N
//        --expect FILE --expect-sampled FILE --expect-chat FILE --bad-dir DIR --expect-error FILE --out build/test-logs
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

function args() {
  const a = {};
  const v = process.argv.slice(2);
  for (let i = 0; i < v.length; i += 2) a[v[i].replace(/^-+/, "")] = v[i + 1];
  for (const k of ["web", "model", "prompt", "n", "expect", "expect-sampled", "expect-chat", "bad-dir", "expect-error", "out"])
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
    res.writeHead(200, { "content-type": TYPES[path.extname(file)] || "application/octet-stream" });
    fs.createReadStream(file).pipe(res);
  });
  return new Promise((ok) => server.listen(0, "127.0.0.1", () => ok(server)));
}

const a = args();
const expect = fs.readFileSync(a.expect, "utf8");
const expectSampled = fs.readFileSync(a["expect-sampled"], "utf8");
const expectChat = fs.readFileSync(a["expect-chat"], "utf8");
const expectError = fs.readFileSync(a["expect-error"], "utf8").trim().split("\n").pop()
  .replaceAll(a["bad-dir"], "/model");
const server = await serve([["/good/", a.model], ["/bad/", a["bad-dir"]], ["/", a.web]]);
const base = `http://127.0.0.1:${server.address().port}`;
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-chromium-"));
let browser = null, failed = null;
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
  const page = browser.pages()[0] || (await browser.newPage());
  const console_ = [];
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
  console.log(`ok page greedy text equals native (${got.length} characters in ${updates} updates) on ${device}`);
  console.log(`   ${await page.textContent("#status")}`);
  fs.mkdirSync(a.out, { recursive: true });
  const shot = path.join(a.out, "wasm-page.png");
  await page.screenshot({ path: shot, fullPage: true });
  console.log(`ok screenshot ${shot}`);

  // 2. sampled, on the page's CPU backend (choosing it plans again)
  await command(() => page.selectOption("#backend", "cpu"));
  if (!(await page.textContent("#plan")).includes("\nbackend cpu")) throw new Error("no cpu plan shown");
  await page.fill("#temp", "0.8");
  await page.fill("#seed", "7");
  await command(() => page.click("#run"));
  const sampled = await page.textContent("#output");
  if ((await page.textContent("#error")) || sampled !== expectSampled)
    throw new Error(`the page's sampled text (cpu, seed 7) differs from the native CLI's:\n page:   ${JSON.stringify(sampled)}\n native: ${JSON.stringify(expectSampled)}\n error: ${await page.textContent("#error")}`);
  console.log(`ok page sampled text (cpu backend, temperature 0.8, seed 7) equals native`);

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
  console.log("ok page chat (two lines) equals native");

  // 3. the damaged artifact: the CLI's one line (wisp plan checks the
  // weights' digests when the page opens it)
  await page.fill("#url", `${base}/bad/`);
  await command(() => page.click("#load-url"));
  const bad = await page.textContent("#error");
  if (!(await page.isDisabled("#run"))) throw new Error("a damaged artifact can be run");
  if (bad !== expectError)
    throw new Error(`the damaged artifact's error differs from the CLI's:\n page: ${JSON.stringify(bad)}\n cli:  ${JSON.stringify(expectError)}`);
  console.log(`ok damaged artifact: ${bad}`);
} catch (e) {
  failed = e;
} finally {
  if (browser) await browser.close().catch(() => {});
  fs.rmSync(profile, { recursive: true, force: true });
  server.close();
}
if (failed) {
  console.log("FAIL wasm page: " + (failed.stack || failed));
  process.exit(1);
}
