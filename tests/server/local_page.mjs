// wisp serve's /local page (server/local_page.c, docs/browser.md) over HTTP:
// /local redirects to /local/, which is the browser build's index.html;
// wisp.wasm and the JS glue come with their types and the bytes of
// build/wasm (make wasm); other names under /local/ are 404, and the server
// shuts down cleanly.
//   node tests/server/local_page.mjs --wisp BIN --model DIR --backend cpu
import fs from "node:fs";
import { args, startServer } from "./serve.mjs";

const a = args();
const srv = await startServer(a);
let failed = null;
try {
  const get = (p) => fetch(srv.url + p, { redirect: "manual" });
  let r = await get("/local");
  if (r.status !== 301 || r.headers.get("location") !== "/local/") throw new Error(`/local: ${r.status} ${r.headers.get("location")}`);
  r = await get("/local/");
  const html = await r.text();
  if (r.status !== 200 || !r.headers.get("content-type").startsWith("text/html") || !html.includes("wisp in the browser"))
    throw new Error(`/local/: ${r.status} ${r.headers.get("content-type")}`);
  for (const [name, type] of [["wisp.wasm", "application/wasm"], ["wisp.js", "text/javascript"], ["wgpu.js", "text/javascript"]]) {
    r = await get("/local/" + name);
    const body = Buffer.from(await r.arrayBuffer());
    if (r.status !== 200 || !r.headers.get("content-type").startsWith(type) || !body.equals(fs.readFileSync("build/wasm/" + name)))
      throw new Error(`/local/${name}: ${r.status} ${r.headers.get("content-type")}, ${body.length} bytes`);
  }
  console.log("ok /local redirects, /local/ is the page, its wasm and JS are build/wasm's");
  for (const p of ["/local/deps/lib/libmd.a", "/local/..%2Fmanifest.json", "/local/obj", "/local/index.html/"]) {
    r = await get(p);
    if (r.status !== 404) throw new Error(`${p}: ${r.status}, not 404`);
  }
  console.log("ok other names under /local/ are 404");
} catch (e) {
  failed = e;
}
const code = await srv.stop();
if (failed) {
  console.log(`FAIL ${failed.message}\n${srv.log()}`);
  process.exit(1);
}
if (code !== 0) {
  console.log(`FAIL wisp serve exited ${code}\n${srv.log()}`);
  process.exit(1);
}
