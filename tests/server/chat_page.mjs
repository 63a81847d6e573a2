// The chat page of wisp serve (GET /) in headless Chromium (Debian's
// `chromium`, driven by npm `playwright-core`): types a message, sees the
// reply stream in (the assistant bubble's text grows over several updates
// before the request ends), and keeps a screenshot.
//   node tests/server/chat_page.mjs --wisp build/wisp --model models/default --out build/test-logs
import fs from "node:fs";
import os from "node:os";
import path from "node:path";
import { chromium } from "playwright-core";
import { args, startServer } from "./serve.mjs";

const a = args();
const srv = await startServer(a, ["--parallel", "2", "-c", "256"]);
const profile = fs.mkdtempSync(path.join(os.tmpdir(), "wisp-chromium-"));
let browser = null, failed = null;
try {
  await srv.ready();
  // a fresh profile directory (--user-data-dir) each run
  browser = await chromium.launchPersistentContext(profile, {
    executablePath: process.env.CHROMIUM || "/usr/bin/chromium",
    headless: true,
    viewport: { width: 900, height: 600 },
    args: ["--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
           "--disable-component-update", "--disable-sync", "--no-first-run"],
  });
  const page = browser.pages()[0] || (await browser.newPage());
  await page.goto(srv.url + "/");
  await page.waitForFunction(() => document.getElementById("model").textContent === "default");
  // Record every text the reply bubble is given, from inside the page: each
  // mutation record keeps the text node it added, however the callbacks are
  // batched, so a stream shows several growing prefixes and a single answer one.
  await page.evaluate(() => {
    window.seen = [];
    new MutationObserver((records) => {
      for (const r of records) {
        if (!r.target.classList || !r.target.classList.contains("assistant")) continue;
        for (const n of r.addedNodes) if (n.nodeType === 3 && n.textContent) window.seen.push(n.textContent);
      }
    }).observe(document.getElementById("messages"), { subtree: true, childList: true });
  });
  const reply = page.waitForResponse((r) => r.url().endsWith("/v1/chat/completions"));
  await page.fill("#input", "Tell me about the king.");
  await page.press("#input", "Enter");
  const resp = await reply;
  if (resp.status() !== 200 || !resp.headers()["content-type"].startsWith("text/event-stream"))
    throw new Error("the page's request: " + resp.status());
  await page.waitForSelector(".msg.user");
  // done when the send button is enabled again (the page re-enables it at the end of the stream)
  await page.waitForFunction(() => window.seen.length > 0 && !document.getElementById("send").disabled);
  const seen = await page.evaluate(() => window.seen);
  const final = await page.textContent(".msg.assistant");
  if (await page.$(".msg.error")) throw new Error("the page shows an error: " + (await page.textContent(".msg.error")));
  if (seen.length < 2) throw new Error("the reply did not stream: " + JSON.stringify(seen));
  for (let i = 1; i < seen.length; i++)
    if (!seen[i].startsWith(seen[i - 1])) throw new Error("the reply did not grow: " + JSON.stringify(seen));
  if (final !== seen[seen.length - 1] || !final.length) throw new Error("final text: " + JSON.stringify(final));
  fs.mkdirSync(a.out, { recursive: true });
  const shot = path.join(a.out, "chat-page.png");
  await page.screenshot({ path: shot });
  console.log(`chat page: the reply streamed in ${seen.length} updates (${final.length} characters); screenshot ${shot}`);
} catch (e) {
  failed = e;
} finally {
  if (browser) await browser.close();
  fs.rmSync(profile, { recursive: true, force: true });
  const code = await srv.stop();
  if (!failed && code !== 0) failed = new Error(`wisp serve exited with ${code}: ${srv.log()}`);
}
if (failed) {
  console.log("FAIL chat page: " + (failed.stack || failed) + "\nserver log:\n" + srv.log());
  process.exit(1);
}
