// A measurement, not a test (tools/bench-browser.sh with MODEL=qwen2b runs
// it): one greedy `wisp run` in the page (build/wasm, make wasm) in headless
// Chromium on WebGPU, the model opened by URL and its weights streamed with
// range requests into GPU buffers. Writes OUT.json: the page's text and the
// native CLI's (EXPECT, a file), whether they are equal, the time to open
// (plan) and to run, wisp's own summary line, the page's wasm memory peak,
// the GPU buffer peak and the weights' size.
//   node tests/web/run-page.mjs WEBDIR MODELDIR OUT.json PROMPT N EXPECT
import fs from "node:fs";
import path from "node:path";
import { launchBrowser, servePage } from "./page-host.mjs";

const [web, model, out, prompt, n, expectFile] = process.argv.slice(2);
if (!expectFile) throw new Error("usage: run-page.mjs WEBDIR MODELDIR OUT.json PROMPT N EXPECT");
const expect = fs.readFileSync(expectFile, "utf8");
const { server, base } = await servePage(web, model);
const { browser, profile } = await launchBrowser("wisp-run-");
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
