// A measurement, not a test (tools/bench-browser.sh with MODEL=qwen2b runs
// it): one greedy `wisp run` in the page (build/wasm, make wasm) in headless
// Chromium on WebGPU, the model opened by URL and its weights streamed with
// range requests into GPU buffers. Writes OUT.json: the page's text and the
// native CLI's (EXPECT, a file), whether they are equal, the time to open
// (plan) and to run, wisp's own summary line, the page's wasm memory peak,
// the GPU buffer peak and the weights' size.
//   node tests/web/run-page.mjs WEBDIR MODELDIR OUT.json PROMPT N EXPECT
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const [web, model, out, prompt, n, expectFile] = process.argv.slice(2);
if (!expectFile) throw new Error("usage: run-page.mjs WEBDIR MODELDIR OUT.json PROMPT N EXPECT");
const expect = fs.readFileSync(expectFile, "utf8");
const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };
const server = http.createServer((req, res) => {
  const url = decodeURIComponent(new URL(req.url, "http://x").pathname);
  const file = url.startsWith("/model/") ? path.join(model, url.slice(7)) : path.join(web, url.slice(1) || "index.html");
  if (file.includes("..") || !fs.existsSync(file) || !fs.statSync(file).isFile()) { res.writeHead(404).end(); return; }
  const size = fs.statSync(file).size, type = TYPES[path.extname(file)] || "application/octet-stream";
  const r = /^bytes=(\d+)-(\d+)$/.exec(req.headers.range || "");
  if (r) {
    const a = Number(r[1]), b = Math.min(Number(r[2]), size - 1);
    res.writeHead(206, { "content-type": type, "content-length": b - a + 1, "content-range": `bytes ${a}-${b}/${size}` });
    fs.createReadStream(file, { start: a, end: b }).pipe(res);
    return;
  }
  res.writeHead(200, { "content-type": type, "content-length": size, "accept-ranges": "bytes" });
  if (req.method === "HEAD") res.end();
  else fs.createReadStream(file).pipe(res);
});
await new Promise((ok) => server.listen(0, "127.0.0.1", ok));
const base = `http://127.0.0.1:${server.address().port}`;
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-run-"));
const browser = await chromium.launchPersistentContext(profile, {
  executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
  headless: true,
  args: ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
         "--disable-component-update", "--disable-sync", "--no-first-run"],
});
let code = 0;
try {
  const page = browser.pages()[0] || (await browser.newPage());
  await page.goto(`${base}/index.html`);
  const command = async (action) => {
    const before = await page.evaluate(() => window.wisp.runs);
    const t0 = Date.now();
    await action();
    await page.waitForFunction((k) => window.wisp.runs > k && window.wisp.done, before, { timeout: 0, polling: 1000 });
    return (Date.now() - t0) / 1000;
  };
  await page.selectOption("#backend", "webgpu");
  await page.fill("#url", `${base}/model/`);
  const openS = await command(() => page.click("#load-url"));
  const openErr = await page.textContent("#error");
  if (openErr) throw new Error(`opening the model: ${openErr}`);
  await page.fill("#prompt", prompt);
  await page.fill("#n", n);
  await page.fill("#temp", "0");
  const runS = await command(() => page.click("#run"));
  const text = await page.textContent("#output");
  const r = {
    model: model,
    weights_bytes: fs.statSync(path.join(model, "weights.bin")).size,
    prompt, tokens: Number(n),
    adapter: await page.textContent("#device"),
    open_s: openS, run_s: runS,
    error: await page.textContent("#error"),
    status: await page.textContent("#status"),
    page_text: text, native_text: expect, equal: text === expect,
    wasm_memory_bytes: await page.evaluate(() => window.wisp.memory),
    gpu_buffer_peak_bytes: await page.evaluate(() => window.wisp.gpuBuffers),
  };
  fs.writeFileSync(out, JSON.stringify(r, null, 1) + "\n");
  console.log(`page webgpu: ${r.equal ? "text equal to native" : "text DIFFERS from native"}; open ${openS.toFixed(1)} s, run ${runS.toFixed(1)} s; ` +
              `wasm memory ${(r.wasm_memory_bytes / 2 ** 20).toFixed(0)} MiB, GPU buffers ${(r.gpu_buffer_peak_bytes / 2 ** 20).toFixed(0)} MiB, ` +
              `weights ${(r.weights_bytes / 2 ** 20).toFixed(0)} MiB; ${r.error || r.status}`);
  if (!r.equal || r.error) code = 1;
} finally {
  await browser.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
process.exit(code);
