// A benchmark, not a test (tools/bench-browser.sh runs it): `wisp bench` in
// the page (build/wasm, make wasm) in headless Chromium on each backend,
// the model opened by URL; each run's receipt is written to OUTDIR as
// page-BACKEND.json, with the page's wasm memory peak added (wasm_memory_bytes).
//   node tests/web/bench-page.mjs WEBDIR MODELDIR OUTDIR PROMPT DECODE [BACKEND...]
import fs from "node:fs";
import path from "node:path";
import { launchBrowser, servePage } from "./page-host.mjs";

const [web, model, outDir, prompt, decode, ...backends] = process.argv.slice(2);
if (!decode) throw new Error("usage: bench-page.mjs WEBDIR MODELDIR OUTDIR PROMPT DECODE [BACKEND...]");
const { server, base } = await servePage(web, model);
const { browser, profile } = await launchBrowser("wisp-bench-");
try {
  const page = browser.pages()[0] || (await browser.newPage());
  await page.goto(`${base}/index.html`);
  const command = async (action) => {
    const before = await page.evaluate(() => window.wisp.runs);
    await action();
    await page.waitForFunction((n) => window.wisp.runs > n && window.wisp.done, before, { timeout: 0 });
  };
  fs.mkdirSync(outDir, { recursive: true });
  for (const backend of backends.length ? backends : ["webgpu", "cpu"]) {
    await page.selectOption("#backend", backend);
    await page.fill("#url", `${base}/model/`);
    await command(() => page.click("#load-url"));
    await page.fill("#bench-p", prompt);
    await page.fill("#bench-n", decode);
    await command(() => page.click("#bench"));
    const err = await page.textContent("#error");
    if (err) throw new Error(`${backend}: ${err}`);
    const receipt = await page.evaluate(() => new TextDecoder().decode(window.wisp.wasi.file("/receipt.json")));
    const r = JSON.parse(receipt);
    r.wasm_memory_bytes = await page.evaluate(() => window.wisp.memory);
    r.adapter = await page.textContent("#device");
    fs.writeFileSync(path.join(outDir, `page-${backend}.json`), JSON.stringify(r, null, 1));
    console.log(`page ${backend}: prefill ${r.prefill.tok_per_s.toFixed(1)} tok/s, decode ${r.decode.tok_per_s.toFixed(1)} tok/s, ` +
                `wasm memory ${(r.wasm_memory_bytes / 2 ** 20).toFixed(0)} MiB`);
  }
} finally {
  await browser.close();
  server.close();
  fs.rmSync(profile, { recursive: true, force: true });
}
