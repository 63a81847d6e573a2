// Runs wisp.wasm (make wasm) in the page: one run of the CLI, e.g.
//   await runWisp(module, ["run", "-m", "/model", "--backend", "webgpu", ...], files, {stdout, stderr})
// with a fresh instance each time (a run's memory is dropped with it).
// The module's imports: WASI (wasi.js) and wisp's webgpu.h (wgpu.js).
// The asynchronous ones are wrapped in
// WebAssembly.Suspending and _start in WebAssembly.promising (JSPI), so the
// C code calls them as ordinary functions and the module sleeps meanwhile.
import { Exit, Wasi } from "./wasi.js";
import { WebGPUGlue } from "./wgpu.js";

export function jspiAvailable() {
  return typeof WebAssembly.Suspending === "function" && typeof WebAssembly.promising === "function";
}

export async function loadWisp(url) {
  const resp = await fetch(url);
  if (!resp.ok) throw new Error(`${url}: HTTP ${resp.status}`);
  return WebAssembly.compileStreaming(resp);
}

// files: {"/model/manifest.json": Blob, ...}. Returns {code, adapter, wasi,
// memoryBytes, gpuBufferPeak}: memoryBytes is the module's wasm memory at the
// end, which only grows, so it is the run's peak; gpuBufferPeak the most bytes
// of GPU buffers alive at once.
// onStart(wasi) is called before the run: wasi.input(text) and
// wasi.closeInput() feed its standard input (a chat).
export async function runWisp(module, args, files, { stdout = () => {}, stderr = () => {}, env = [], onStart = null } = {}) {
  if (!jspiAvailable()) throw new Error("this browser lacks JSPI (WebAssembly.Suspending); see docs/browser.md");
  const suspending = (fn) => new WebAssembly.Suspending(fn);
  const wasi = new Wasi({ args: ["wisp", ...args], env, files, stdout, stderr });
  if (!onStart) wasi.closeInput(); // standard input is empty unless the caller feeds it
  const gpu = new WebGPUGlue();
  const instance = await WebAssembly.instantiate(module, {
    wasi_snapshot_preview1: wasi.imports(suspending),
    wgpu: gpu.imports(suspending),
  });
  const memory = instance.exports.memory;
  wasi.memory = gpu.memory = memory;
  const start = WebAssembly.promising(instance.exports._start);
  if (onStart) onStart(wasi);
  let code = 0;
  try {
    await start();
  } catch (e) {
    if (!(e instanceof Exit)) throw e;
    code = e.code;
  }
  return { code, adapter: gpu.adapter, wasi, memoryBytes: memory.buffer.byteLength, gpuBufferPeak: gpu.bufferPeak };
}
