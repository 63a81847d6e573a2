// The page's side of wisp's webgpu.h (web/wasm/wgpu_web.c): the "wgpu"
// imports, over navigator.gpu. Objects live in a table and cross into wasm
// as small integer handles (0 is none). The asynchronous calls start a
// promise and return an operation id; `wait` (the one import wrapped in
// WebAssembly.Suspending) sleeps until every started operation settled, and
// the C side then reads each one's state and fires wisp's callback.

// webgpu.h status values the C side passes on as they are.
// (Unavailable is the adapter's, Error the device's, map's and error scope's.)
const ST = { SUCCESS: 1, UNAVAILABLE: 3, ERROR: 3 };
const ERR = { NONE: 1, VALIDATION: 2, OOM: 3, INTERNAL: 4, UNKNOWN: 5 };
const FEATURES = ["timestamp-query", "shader-f16", "subgroups", "indirect-first-instance", "float32-filterable"];
const FILTERS = { 1: "validation", 2: "out-of-memory", 3: "internal" };

function errorType(e) {
  if (e instanceof GPUValidationError) return ERR.VALIDATION;
  if (e instanceof GPUOutOfMemoryError) return ERR.OOM;
  if (typeof GPUInternalError !== "undefined" && e instanceof GPUInternalError) return ERR.INTERNAL;
  return ERR.UNKNOWN;
}

export class WebGPUGlue {
  constructor() {
    this.objects = [null];
    this.free = [];
    this.ops = new Map();
    this.nextOp = 1;
    this.pending = [];
    this.constants = {};
    this.entries = [];
    this.memory = null;
    this.adapter = null; // the last adapter, for the page to show
    // GPU buffer bytes: live now and the run's peak (the page shows it
    // beside the wasm memory, the weights' home when they are streamed)
    this.bufferBytes = 0;
    this.bufferPeak = 0;
    this.bufferSizes = new Map(); // live buffer -> its size
  }

  put(obj) {
    if (obj == null) return 0;
    const h = this.free.length ? this.free.pop() : this.objects.length;
    this.objects[h] = obj;
    return h;
  }
  get(h) { return this.objects[h]; }
  // A buffer destroyed or released stops counting as alive.
  dropBuffer(o) {
    if (this.bufferSizes.has(o)) {
      this.bufferBytes -= this.bufferSizes.get(o);
      this.bufferSizes.delete(o);
    }
  }
  bytes() { return new Uint8Array(this.memory.buffer); }
  str(ptr, len) { return new TextDecoder().decode(this.bytes().slice(ptr, ptr + len)); }
  writeStr(s, ptr, cap) {
    const b = new TextEncoder().encode(s).subarray(0, cap);
    this.bytes().set(b, ptr);
    return b.length;
  }

  // Starts an operation: promise resolves to {state, value, message}.
  op(promise) {
    const id = this.nextOp++;
    const rec = { state: 0, value: 0, message: "" };
    this.ops.set(id, rec);
    this.pending.push(
      promise.then(
        (r) => Object.assign(rec, r),
        (e) => Object.assign(rec, { state: ST.ERROR, message: String(e && e.message ? e.message : e) }),
      ),
    );
    return id;
  }

  imports(suspending) {
    const g = this;
    const obj = (h) => g.get(h);
    const sz = (n) => (n < 0 ? undefined : n);
    return {
      wait: suspending(async () => {
        const p = g.pending;
        g.pending = [];
        await Promise.all(p);
      }),
      op_state: (id) => g.ops.get(id).state,
      op_value: (id) => g.ops.get(id).value,
      op_message: (id, ptr, cap) => g.writeStr(g.ops.get(id).message, ptr, cap),
      op_free: (id) => g.ops.delete(id),
      device_event: (dh, ptr, cap, lenPtr) => {
        const d = obj(dh);
        const e = d && d.wispEvents && d.wispEvents.shift();
        if (!e) return 0;
        new DataView(g.memory.buffer).setUint32(lenPtr, g.writeStr(e.message, ptr, cap), true);
        return e.event;
      },

      request_adapter: (power, fallback) =>
        g.op(
          (async () => {
            if (!navigator.gpu) return { state: ST.UNAVAILABLE, message: "this browser has no WebGPU (navigator.gpu)" };
            const a = await navigator.gpu.requestAdapter({
              powerPreference: power === 1 ? "low-power" : "high-performance",
              forceFallbackAdapter: !!fallback,
            });
            if (!a) return { state: ST.UNAVAILABLE, message: "the browser offers no WebGPU adapter" };
            g.adapter = a;
            return { state: ST.SUCCESS, value: g.put(a) };
          })(),
        ),
      request_device: (ah, mask) =>
        g.op(
          (async () => {
            const a = obj(ah);
            const requiredFeatures = FEATURES.filter((f, i) => mask & (1 << i) && a.features.has(f));
            const requiredLimits = {};
            for (const k in a.limits) if (typeof a.limits[k] === "number") requiredLimits[k] = a.limits[k];
            const d = await a.requestDevice({ requiredFeatures, requiredLimits });
            // what happens to the device outside wisp's calls, handed to
            // wisp's callbacks by device_event at its next ProcessEvents
            d.wispEvents = [];
            d.lost.then((info) => {
              d.wispEvents.push({ event: 16 + (info.reason === "destroyed" ? 2 : 1), message: info.message || "" });
            });
            d.onuncapturederror = (e) => {
              console.error("WebGPU: " + e.error.message);
              d.wispEvents.push({ event: errorType(e.error), message: e.error.message });
            };
            return { state: ST.SUCCESS, value: g.put(d) };
          })(),
        ),
      limit: (h, ptr, len) => {
        const v = obj(h).limits[g.str(ptr, len)];
        return typeof v === "number" ? v : 0;
      },
      has_feature: (h, ptr, len) => (obj(h).features.has(g.str(ptr, len)) ? 1 : 0),
      info_string: (h, which, ptr, cap) => {
        const i = obj(h).info || {};
        return g.writeStr([i.vendor, i.architecture, i.device, i.description][which] || "", ptr, cap);
      },
      info_number: (h, which) => {
        const a = obj(h), i = a.info || {};
        if (which === 0) return a.isFallbackAdapter || i.isFallbackAdapter ? 1 : 0;
        return (which === 1 ? i.subgroupMinSize : i.subgroupMaxSize) || 0;
      },
      device_queue: (h) => g.put(obj(h).queue),
      create_buffer: (dh, usage, size, mapped) => {
        const b = obj(dh).createBuffer({ usage, size, mappedAtCreation: !!mapped });
        g.bufferSizes.set(b, b.size);
        g.bufferBytes += b.size;
        g.bufferPeak = Math.max(g.bufferPeak, g.bufferBytes);
        return g.put(b);
      },
      create_shader: (dh, ptr, len) => g.put(obj(dh).createShaderModule({ code: g.str(ptr, len) })),
      pipeline_constant: (ptr, len, value) => { g.constants[g.str(ptr, len)] = value; },
      create_pipeline: (dh, layout, module, ptr, len) => {
        const compute = { module: obj(module), entryPoint: g.str(ptr, len) };
        if (Object.keys(g.constants).length) compute.constants = g.constants;
        g.constants = {};
        return g.put(obj(dh).createComputePipeline({ layout: layout ? obj(layout) : "auto", compute }));
      },
      bind_entry: (binding, buf, offset, size) => {
        g.entries.push({ binding, resource: { buffer: obj(buf), offset, size: sz(size) } });
      },
      create_bind_group: (dh, layout) => {
        const entries = g.entries;
        g.entries = [];
        return g.put(obj(dh).createBindGroup({ layout: obj(layout), entries }));
      },
      create_encoder: (dh) => g.put(obj(dh).createCommandEncoder()),
      create_query_set: (dh, type, count) =>
        g.put(obj(dh).createQuerySet({ type: type === 2 ? "timestamp" : "occlusion", count })),
      push_error_scope: (dh, filter) => obj(dh).pushErrorScope(FILTERS[filter] || "validation"),
      pop_error_scope: (dh) =>
        g.op(
          obj(dh).popErrorScope().then((e) => {
            if (!e) return { state: ST.SUCCESS, value: ERR.NONE };
            return { state: ST.SUCCESS, value: errorType(e), message: e.message };
          }),
        ),
      destroy: (h) => {
        const o = obj(h);
        g.dropBuffer(o);
        if (o && o.destroy) o.destroy();
      },
      release: (h) => {
        if (h && g.objects[h] !== undefined) {
          const o = g.objects[h];
          g.dropBuffer(o);
          g.objects[h] = undefined;
          g.free.push(h);
        }
      },
      queue_submit: (qh, ptr, count) => {
        const hs = new Uint32Array(g.memory.buffer, ptr, count);
        obj(qh).submit(Array.from(hs, (h) => obj(h)));
      },
      queue_write: (qh, bh, offset, ptr, size) => obj(qh).writeBuffer(obj(bh), offset, g.memory.buffer, ptr, size),
      map_async: (bh, mode, offset, size) =>
        g.op(obj(bh).mapAsync(mode, offset, sz(size)).then(() => ({ state: ST.SUCCESS }))),
      read_mapped: (bh, offset, size, dst) => {
        const r = obj(bh).getMappedRange(offset, size);
        g.bytes().set(new Uint8Array(r), dst);
      },
      unmap: (bh) => obj(bh).unmap(),
      buffer_size: (bh) => obj(bh).size,
      bind_group_layout: (ph, i) => g.put(obj(ph).getBindGroupLayout(i)),
      begin_pass: (eh, qs, begin, end) =>
        g.put(obj(eh).beginComputePass(qs ? { timestampWrites: { querySet: obj(qs), beginningOfPassWriteIndex: begin, endOfPassWriteIndex: end } } : {})),
      copy_buffer: (eh, s, so, d, dof, n) => obj(eh).copyBufferToBuffer(obj(s), so, obj(d), dof, n),
      resolve_query_set: (eh, qs, first, count, dst, off) => obj(eh).resolveQuerySet(obj(qs), first, count, obj(dst), off),
      finish: (eh) => g.put(obj(eh).finish()),
      set_pipeline: (ph, pipe) => obj(ph).setPipeline(obj(pipe)),
      set_bind_group: (ph, i, gh, ptr, count) =>
        obj(ph).setBindGroup(i, obj(gh), count ? Array.from(new Uint32Array(g.memory.buffer, ptr, count)) : []),
      dispatch: (ph, x, y, z) => obj(ph).dispatchWorkgroups(x, y, z),
      end_pass: (ph) => obj(ph).end(),
    };
  }
}
