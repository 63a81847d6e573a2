// Starts `wisp serve` on a free port for a test and stops it: the helper of
// client.mjs and chat_page.mjs. Options come from the command line:
//   --wisp BIN --model DIR --backend cpu|webgpu [--api-key KEY]
import { spawn } from "node:child_process";

export function args() {
  const a = { wisp: "build/wisp", model: "models/default", backend: "cpu", apiKey: null, out: "build/test-logs" };
  const argv = process.argv.slice(2);
  for (let i = 0; i < argv.length; i += 2) {
    const k = argv[i].replace(/^--/, "").replace(/-([a-z])/g, (_, c) => c.toUpperCase());
    if (!(k in a)) throw new Error(`unknown option ${argv[i]}`);
    a[k] = argv[i + 1];
  }
  return a;
}

// Resolves to { url, port, proc, log(), stop() } once the server listens;
// ready() then waits for GET /health to say 200 (503 while the model loads).
export function startServer(a, extra = []) {
  const argv = ["serve", "--port", "0", "-m", a.model, "--backend", a.backend, "--profile", "exact", ...extra];
  if (a.apiKey) argv.push("--api-key", a.apiKey);
  const proc = spawn(a.wisp, argv, { stdio: ["ignore", "inherit", "pipe"] });
  // a test that dies (an exception, a closed pipe) leaves no server behind
  process.on("exit", () => { if (proc.exitCode === null && proc.signalCode === null) proc.kill("SIGKILL"); });
  let log = "";
  return new Promise((resolve, reject) => {
    proc.on("exit", (code, sig) => reject(new Error(`wisp serve exited early (${code ?? sig}): ${log}`)));
    proc.stderr.on("data", (d) => {
      log += d.toString();
      const m = log.match(/listening on http:\/\/([0-9.]+):(\d+)\//);
      if (m && !proc.url) {
        proc.url = `http://${m[1]}:${m[2]}`;
        resolve({
          url: proc.url,
          port: Number(m[2]),
          proc,
          log: () => log,
          async ready() {
            // a polling loop bounded by the model's load, not by a clock
            for (;;) {
              const r = await fetch(proc.url + "/health");
              if (r.status === 200) return;
              if (r.status !== 503) throw new Error(`/health: ${r.status}`);
              await new Promise((res) => setTimeout(res, 100));
            }
          },
          // SIGTERM; resolves to the exit code (0: a clean shutdown, which
          // under ASan also means no leak was found)
          stop() {
            return new Promise((res) => {
              proc.removeAllListeners("exit");
              proc.on("exit", (code, sig) => res(code ?? sig));
              proc.kill("SIGTERM");
            });
          },
        });
      }
    });
  });
}
