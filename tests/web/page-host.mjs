// What tools/bench-browser.sh's two page drivers (run-page.mjs,
// bench-page.mjs) share: a static server of the page (build/wasm) and of a
// model folder under /model/, with HTTP range requests as the page streams
// weights with them, and headless Chromium with WebGPU in a throwaway profile.
import fs from "node:fs";
import http from "node:http";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";

const TYPES = { ".html": "text/html", ".js": "text/javascript", ".wasm": "application/wasm" };

// Serves WEBDIR at / and MODELDIR at /model/ on a free local port: { server, base }.
export async function servePage(web, model) {
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
  return { server, base: `http://127.0.0.1:${server.address().port}` };
}

// Headless Chromium (CHROMIUM, default /usr/bin/chromium) with WebGPU on, in
// a new profile under the temporary folder named from PREFIX: { browser, profile }.
export async function launchBrowser(prefix) {
  const profile = fs.mkdtempSync(path.join(os.tmpdir(), prefix));
  const browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    args: ["--headless=new", "--no-sandbox", "--enable-unsafe-webgpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  return { browser, profile };
}
