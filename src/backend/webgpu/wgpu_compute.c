/* Kernels, bind groups and batches; see wgpu_compute.h. */
#include "backend/webgpu/wgpu_compute.h"
#include "backend/webgpu/wgpu_profile.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "util/err.h"

static void release_above(wisp_wgpu_device *d);

/* ---- kernels ------------------------------------------------------------- */

wisp_status wisp_wgpu_shader_create(wisp_wgpu_device *d, const char *wgsl, const char *label,
                                    WGPUShaderModule *out) {
  *out = NULL;
  WGPUShaderSourceWGSL src;
  memset(&src, 0, sizeof src);
  src.chain.sType = WGPUSType_ShaderSourceWGSL;
  src.code = wisp_wgpu_str(wgsl);
  WGPUShaderModuleDescriptor md;
  memset(&md, 0, sizeof md);
  md.nextInChain = &src.chain;
  md.label = wisp_wgpu_str(label);
  char what[128];
  snprintf(what, sizeof what, "WebGPU: compiling WGSL %s", label ? label : "shader");
  wisp_wgpu_scope_begin(d);
  WGPUShaderModule m = d->api->DeviceCreateShaderModule(d->device, &md);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (m) d->api->ShaderModuleRelease(m);
    return st;
  }
  if (!m) return wisp_fail(WISP_EDEVICE, "%s: no module returned", what);
  *out = m;
  return WISP_OK;
}

wisp_status wisp_wgpu_kernel_from_module(wisp_wgpu_device *d, WGPUShaderModule module, const char *entry,
                                         const wisp_wgpu_const *consts, int n_consts, const char *label,
                                         wisp_wgpu_kernel **out) {
  *out = NULL;
  if (n_consts < 0 || n_consts > 64) return wisp_fail(WISP_EINVAL, "WebGPU: %d override constants", n_consts);
  WGPUConstantEntry ce[64];
  for (int i = 0; i < n_consts; i++) {
    memset(&ce[i], 0, sizeof ce[i]);
    ce[i].key = wisp_wgpu_str(consts[i].name);
    ce[i].value = consts[i].value;
  }
  WGPUComputePipelineDescriptor pd;
  memset(&pd, 0, sizeof pd);
  pd.label = wisp_wgpu_str(label);
  pd.layout = NULL;
  pd.compute.module = module;
  pd.compute.entryPoint = wisp_wgpu_str(entry);
  pd.compute.constantCount = (size_t)n_consts;
  pd.compute.constants = n_consts ? ce : NULL;
  char what[128];
  snprintf(what, sizeof what, "WebGPU: creating pipeline %s", label ? label : entry ? entry : "");
  wisp_wgpu_scope_begin(d);
  WGPUComputePipeline p = d->api->DeviceCreateComputePipeline(d->device, &pd);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (p) d->api->ComputePipelineRelease(p);
    return st;
  }
  if (!p) return wisp_fail(WISP_EDEVICE, "%s: no pipeline returned", what);
  wisp_wgpu_kernel *k = calloc(1, sizeof *k);
  if (!k) {
    d->api->ComputePipelineRelease(p);
    return wisp_fail(WISP_ENOMEM, "WebGPU: out of memory");
  }
  k->pipeline = p;
  k->layout = d->api->ComputePipelineGetBindGroupLayout(p, 0);
  snprintf(k->label, sizeof k->label, "%s", label ? label : entry ? entry : "kernel");
  *out = k;
  return WISP_OK;
}

wisp_status wisp_wgpu_kernel_create(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out) {
  WGPUShaderModule m;
  wisp_status st = wisp_wgpu_shader_create(d, wgsl, label, &m);
  if (st) return st;
  st = wisp_wgpu_kernel_from_module(d, m, entry, consts, n_consts, label, out);
  d->api->ShaderModuleRelease(m);
  return st;
}

void wisp_wgpu_kernel_free(wisp_wgpu_device *d, wisp_wgpu_kernel *k) {
  if (!k) return;
  if (k->layout) d->api->BindGroupLayoutRelease(k->layout);
  if (k->pipeline) d->api->ComputePipelineRelease(k->pipeline);
  free(k);
}

#define SHARED_CONSTS 20

typedef struct wisp_wgpu_shared_kernel {
  const char *wgsl; /* compared by address: the embedded kernels' text */
  char entry[32];
  int nc;
  char names[SHARED_CONSTS][32];
  double values[SHARED_CONSTS];
  wisp_wgpu_kernel *k;
} wisp_wgpu_shared_kernel;

static int same_kernel(const wisp_wgpu_shared_kernel *e, const char *wgsl, const char *entry,
                       const wisp_wgpu_const *c, int nc) {
  if (e->wgsl != wgsl || e->nc != nc || strcmp(e->entry, entry)) return 0;
  for (int i = 0; i < nc; i++)
    if (e->values[i] != c[i].value || strcmp(e->names[i], c[i].name)) return 0;
  return 1;
}

wisp_status wisp_wgpu_kernel_shared(wisp_wgpu_device *d, const char *wgsl, const char *entry,
                                    const wisp_wgpu_const *consts, int n_consts, const char *label,
                                    wisp_wgpu_kernel **out) {
  *out = NULL;
  int fits = n_consts <= SHARED_CONSTS && strlen(entry) < sizeof d->shared[0].entry;
  for (int i = 0; fits && i < n_consts; i++) fits = strlen(consts[i].name) < sizeof d->shared[0].names[0];
  if (!fits) return wisp_fail(WISP_EINVAL, "WebGPU: kernel %s: too many or too long constants to share", label);
  for (int i = 0; i < d->n_shared; i++)
    if (same_kernel(&d->shared[i], wgsl, entry, consts, n_consts)) {
      *out = d->shared[i].k;
      return WISP_OK;
    }
  wisp_status st = wisp_wgpu_kernel_create(d, wgsl, entry, consts, n_consts, label, out);
  if (st) return st;
  if (d->n_shared == d->cap_shared) {
    int cap = d->cap_shared ? 2 * d->cap_shared : 64;
    wisp_wgpu_shared_kernel *grown = realloc(d->shared, sizeof *grown * (size_t)cap);
    if (!grown) {
      wisp_wgpu_kernel_free(d, *out);
      *out = NULL;
      return wisp_fail(WISP_ENOMEM, "out of memory");
    }
    d->shared = grown;
    d->cap_shared = cap;
  }
  wisp_wgpu_shared_kernel *e = &d->shared[d->n_shared++];
  memset(e, 0, sizeof *e);
  e->wgsl = wgsl;
  snprintf(e->entry, sizeof e->entry, "%s", entry);
  e->nc = n_consts;
  for (int i = 0; i < n_consts; i++) {
    snprintf(e->names[i], sizeof e->names[i], "%s", consts[i].name);
    e->values[i] = consts[i].value;
  }
  e->k = *out;
  d->release_above = release_above; /* the device frees the shared kernels as it closes */
  return WISP_OK;
}

/* wisp_wgpu_device.release_above: the profiler (its report to stderr
 * first) and the shared kernels. */
static void release_above(wisp_wgpu_device *d) {
  if (d->profile) {
    wisp_wgpu_profile_report(d->profile, stderr);
    wisp_wgpu_profile_free(d->profile);
    d->profile = NULL;
  }
  wisp_wgpu_shared_kernels_free(d);
}

/* The profiler asked for at open, made at the first batch. */
static void profile_attach(wisp_wgpu_device *d) {
  if (!d->profile_repeat || d->profile) return;
  const int repeat = d->profile_repeat;
  d->profile_repeat = 0; /* asked once */
  d->profile = wisp_wgpu_profile_new(d, repeat);
  if (!d->profile) fprintf(stderr, "wisp: WISP_WEBGPU_PROFILE ignored: %s has no timestamp-query\n", d->info.name);
  d->release_above = release_above;
}

void wisp_wgpu_shared_kernels_free(wisp_wgpu_device *d) {
  for (int i = 0; i < d->n_shared; i++) wisp_wgpu_kernel_free(d, d->shared[i].k);
  free(d->shared);
  d->shared = NULL;
  d->n_shared = d->cap_shared = 0;
}

/* ---- bind groups --------------------------------------------------------- */

wisp_status wisp_wgpu_bind(wisp_wgpu_device *d, const wisp_wgpu_kernel *k, const wisp_wgpu_binding *bindings,
                           int n, WGPUBindGroup *out) {
  *out = NULL;
  if (n < 0 || n > 32) return wisp_fail(WISP_EINVAL, "WebGPU: %d bindings (at most 32)", n);
  WGPUBindGroupEntry e[32];
  for (int i = 0; i < n; i++) {
    memset(&e[i], 0, sizeof e[i]);
    e[i].binding = (uint32_t)i;
    e[i].buffer = bindings[i].buffer;
    e[i].offset = bindings[i].offset;
    e[i].size = bindings[i].size ? bindings[i].size : WGPU_WHOLE_SIZE;
  }
  WGPUBindGroupDescriptor bd;
  memset(&bd, 0, sizeof bd);
  bd.label = wisp_wgpu_str(k->label);
  bd.layout = k->layout;
  bd.entryCount = (size_t)n;
  bd.entries = e;
  char what[128];
  snprintf(what, sizeof what, "WebGPU: binding buffers for %s", k->label);
  wisp_wgpu_scope_begin(d);
  WGPUBindGroup g = d->api->DeviceCreateBindGroup(d->device, &bd);
  wisp_status st = wisp_wgpu_scope_end(d, what);
  if (st) {
    if (g) d->api->BindGroupRelease(g);
    return st;
  }
  *out = g;
  return WISP_OK;
}

void wisp_wgpu_bind_free(wisp_wgpu_device *d, WGPUBindGroup g) {
  if (g) d->api->BindGroupRelease(g);
}

/* ---- batches ------------------------------------------------------------- */

wisp_status wisp_wgpu_batch_begin(wisp_wgpu_device *d, wisp_wgpu_batch *b) {
  memset(b, 0, sizeof *b);
  b->d = d;
  profile_attach(d);
  WGPUCommandEncoderDescriptor ed = {NULL, wisp_wgpu_str("wisp batch")};
  b->enc = d->api->DeviceCreateCommandEncoder(d->device, &ed);
  if (!b->enc) return wisp_fail(WISP_EDEVICE, "WebGPU: could not create a command encoder");
  if (d->profile) return WISP_OK; /* one pass per dispatch, opened by wisp_wgpu_batch_dispatch */
  WGPUComputePassDescriptor pd;
  memset(&pd, 0, sizeof pd);
  b->pass = d->api->CommandEncoderBeginComputePass(b->enc, &pd);
  if (!b->pass) {
    d->api->CommandEncoderRelease(b->enc);
    b->enc = NULL;
    return wisp_fail(WISP_EDEVICE, "WebGPU: could not begin a compute pass");
  }
  return WISP_OK;
}

void wisp_wgpu_batch_dispatch(wisp_wgpu_batch *b, const wisp_wgpu_kernel *k, WGPUBindGroup g, uint32_t x,
                              uint32_t y, uint32_t z) {
  const wisp_wgpu_api *w = b->d->api;
  if (b->d->profile) { /* a timed pass of its own */
    if (b->pass) {
      w->ComputePassEncoderEnd(b->pass);
      w->ComputePassEncoderRelease(b->pass);
    }
    WGPUComputePassDescriptor pd;
    memset(&pd, 0, sizeof pd);
    pd.timestampWrites = wisp_wgpu_profile_next(b->d->profile, k->label);
    b->pass = w->CommandEncoderBeginComputePass(b->enc, &pd);
    b->current = NULL;
  }
  if (b->current != k->pipeline) {
    w->ComputePassEncoderSetPipeline(b->pass, k->pipeline);
    b->current = k->pipeline;
  }
  w->ComputePassEncoderSetBindGroup(b->pass, 0, g, 0, NULL);
  const int reps = b->d->profile ? wisp_wgpu_profile_repeat(b->d->profile) : 1;
  for (int r = 0; r < reps; r++) w->ComputePassEncoderDispatchWorkgroups(b->pass, x, y ? y : 1, z ? z : 1);
  b->n_dispatches++;
}

wisp_status wisp_wgpu_batch_submit(wisp_wgpu_batch *b) { return wisp_wgpu_batch_submit_copy(b, NULL, 0, NULL, 0, 0); }

wisp_status wisp_wgpu_batch_submit_copy(wisp_wgpu_batch *b, WGPUBuffer src, uint64_t src_off, WGPUBuffer dst,
                                        uint64_t dst_off, uint64_t size) {
  wisp_wgpu_device *d = b->d;
  const wisp_wgpu_api *w = d->api;
  if (!b->enc) return wisp_fail(WISP_EINVAL, "WebGPU: batch was not begun");
  if (b->pass) {
    w->ComputePassEncoderEnd(b->pass);
    w->ComputePassEncoderRelease(b->pass);
  }
  if (d->profile) wisp_wgpu_profile_resolve(d->profile, b->enc);
  if (src && dst && size) w->CommandEncoderCopyBufferToBuffer(b->enc, src, src_off, dst, dst_off, size);
  WGPUCommandBufferDescriptor cd = {NULL, wisp_wgpu_str(NULL)};
  WGPUCommandBuffer cmd = w->CommandEncoderFinish(b->enc, &cd);
  w->CommandEncoderRelease(b->enc);
  b->enc = NULL;
  b->pass = NULL;
  if (cmd) {
    w->QueueSubmit(d->queue, 1, &cmd);
    w->CommandBufferRelease(cmd);
  }
  wisp_status st = wisp_wgpu_device_check(d);
  if (!st && d->profile) st = wisp_wgpu_profile_collect(d->profile);
  if (st) wisp_error_prefix("batch of %d dispatches", b->n_dispatches);
  return st;
}

void wisp_wgpu_batch_abort(wisp_wgpu_batch *b) {
  if (!b->enc) return;
  const wisp_wgpu_api *w = b->d->api;
  if (b->pass) {
    w->ComputePassEncoderEnd(b->pass);
    w->ComputePassEncoderRelease(b->pass);
  }
  if (b->d->profile) wisp_wgpu_profile_discard(b->d->profile);
  w->CommandEncoderRelease(b->enc);
  b->enc = NULL;
  b->pass = NULL;
}

void wisp_wgpu_grid(const wisp_wgpu_device *d, uint32_t n, uint32_t *x, uint32_t *y) {
  uint32_t maxd = d->info.max_compute_workgroups_per_dimension ? d->info.max_compute_workgroups_per_dimension
                                                               : 65535u;
  if (n <= maxd) {
    *x = n ? n : 1;
    *y = 1;
    return;
  }
  *y = (n + maxd - 1) / maxd;
  *x = (n + *y - 1) / *y;
}
