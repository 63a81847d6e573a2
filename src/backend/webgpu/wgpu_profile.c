/* Per-kernel GPU timing with timestamp queries; see wgpu_profile.h. */
#include "backend/webgpu/wgpu_profile.h"

#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "backend/webgpu/wgpu_device_memory.h"

/* WebGPU caps a query set at 4096 queries: two per dispatch. */
#define PROFILE_DISPATCHES 2048
#define PROFILE_KERNELS 128

typedef struct {
  char label[64];
  uint64_t dispatches;
  uint64_t ns;
} kernel_total;

struct wisp_wgpu_profile {
  wisp_wgpu_device *d;
  WGPUQuerySet queries;
  WGPUBuffer resolved;         /* QueryResolve | CopySrc, 8 bytes per query */
  wisp_wgpu_buf staging;       /* map-read copy of `resolved` */
  WGPUPassTimestampWrites tw;  /* handed out by wisp_wgpu_profile_next */
  int pending;                 /* dispatches timed in the current submit */
  int pending_kernel[PROFILE_DISPATCHES];
  int resolved_count;          /* queries resolved by the last submit */
  kernel_total k[PROFILE_KERNELS];
  int nk;
  uint64_t untimed;            /* dispatches past a full query set */
  int repeat;                  /* WISP_WEBGPU_PROFILE=N */
};

wisp_wgpu_profile *wisp_wgpu_profile_new(wisp_wgpu_device *d, int repeat) {
  if (!d->has_timestamp_query) return NULL;
  wisp_wgpu_profile *p = calloc(1, sizeof *p);
  if (!p) return NULL;
  p->d = d;
  p->repeat = repeat >= 1 && repeat <= 64 ? repeat : 1;
  WGPUQuerySetDescriptor qd;
  memset(&qd, 0, sizeof qd);
  qd.label = wisp_wgpu_str("wisp profile");
  qd.type = WGPUQueryType_Timestamp;
  qd.count = 2 * PROFILE_DISPATCHES;
  p->queries = d->api->DeviceCreateQuerySet(d->device, &qd);
  WGPUBufferDescriptor bd;
  memset(&bd, 0, sizeof bd);
  bd.label = wisp_wgpu_str("wisp profile resolve");
  bd.usage = WGPUBufferUsage_QueryResolve | WGPUBufferUsage_CopySrc;
  bd.size = 2 * PROFILE_DISPATCHES * sizeof(uint64_t);
  p->resolved = d->api->DeviceCreateBuffer(d->device, &bd);
  if (!p->queries || !p->resolved || wisp_wgpu_staging_reserve(d, &p->staging, bd.size)) {
    wisp_wgpu_profile_free(p);
    return NULL;
  }
  return p;
}

static int kernel_index(wisp_wgpu_profile *p, const char *label) {
  for (int i = 0; i < p->nk; i++)
    if (!strcmp(p->k[i].label, label)) return i;
  if (p->nk == PROFILE_KERNELS) return PROFILE_KERNELS - 1; /* lumped into the last row */
  snprintf(p->k[p->nk].label, sizeof p->k[p->nk].label, "%s", label);
  return p->nk++;
}

const WGPUPassTimestampWrites *wisp_wgpu_profile_next(wisp_wgpu_profile *p, const char *label) {
  if (p->pending == PROFILE_DISPATCHES) {
    p->untimed++;
    return NULL;
  }
  p->pending_kernel[p->pending] = kernel_index(p, label && *label ? label : "(unnamed)");
  memset(&p->tw, 0, sizeof p->tw);
  p->tw.querySet = p->queries;
  p->tw.beginningOfPassWriteIndex = (uint32_t)(2 * p->pending);
  p->tw.endOfPassWriteIndex = (uint32_t)(2 * p->pending + 1);
  p->pending++;
  return &p->tw;
}

void wisp_wgpu_profile_resolve(wisp_wgpu_profile *p, WGPUCommandEncoder enc) {
  p->resolved_count = 2 * p->pending;
  if (!p->resolved_count) return;
  const wisp_wgpu_api *w = p->d->api;
  w->CommandEncoderResolveQuerySet(enc, p->queries, 0, (uint32_t)p->resolved_count, p->resolved, 0);
  w->CommandEncoderCopyBufferToBuffer(enc, p->resolved, 0, p->staging.b, 0,
                                      (uint64_t)p->resolved_count * sizeof(uint64_t));
}

wisp_status wisp_wgpu_profile_collect(wisp_wgpu_profile *p) {
  int n = p->resolved_count / 2;
  p->pending = 0;
  p->resolved_count = 0;
  if (!n) return WISP_OK;
  uint64_t t[2 * PROFILE_DISPATCHES];
  wisp_status st = wisp_wgpu_staging_read(p->d, p->staging, t, (size_t)n * 2 * sizeof(uint64_t));
  if (st) return st;
  for (int i = 0; i < n; i++) {
    kernel_total *k = &p->k[p->pending_kernel[i]];
    k->dispatches++;
    /* Timestamps are nanoseconds; an end before its beginning (a wrapped or
     * reset counter) counts as zero rather than as 2^64. */
    if (t[2 * i + 1] > t[2 * i]) k->ns += (t[2 * i + 1] - t[2 * i]) / (uint64_t)p->repeat;
  }
  return WISP_OK;
}

void wisp_wgpu_profile_discard(wisp_wgpu_profile *p) {
  p->pending = 0;
  p->resolved_count = 0;
}

uint64_t wisp_wgpu_profile_dispatches(const wisp_wgpu_profile *p, const char *label, uint64_t *ns) {
  for (int i = 0; i < p->nk; i++)
    if (!strcmp(p->k[i].label, label)) {
      if (ns) *ns = p->k[i].ns;
      return p->k[i].dispatches;
    }
  if (ns) *ns = 0;
  return 0;
}

uint64_t wisp_wgpu_profile_total(const wisp_wgpu_profile *p, uint64_t *ns) {
  uint64_t n = 0, t = 0;
  for (int i = 0; i < p->nk; i++) n += p->k[i].dispatches, t += p->k[i].ns;
  if (ns) *ns = t;
  return n;
}

int wisp_wgpu_profile_repeat(const wisp_wgpu_profile *p) { return p->repeat; }

static int by_time(const void *a, const void *b) {
  const kernel_total *x = a, *y = b;
  return x->ns < y->ns ? 1 : x->ns > y->ns ? -1 : 0;
}

void wisp_wgpu_profile_report(const wisp_wgpu_profile *p, FILE *f) {
  kernel_total k[PROFILE_KERNELS];
  memcpy(k, p->k, sizeof k);
  qsort(k, (size_t)p->nk, sizeof *k, by_time);
  uint64_t total = 0, n = 0;
  for (int i = 0; i < p->nk; i++) total += k[i].ns, n += k[i].dispatches;
  fprintf(f, "webgpu profile: %llu dispatches, %.3f ms of GPU time (timestamp queries, one pass per dispatch",
          (unsigned long long)n, (double)total / 1e6);
  if (p->repeat > 1) fprintf(f, ", each recorded %d times: per-dispatch times are marginal, tokens meaningless", p->repeat);
  fprintf(f, ")\n");
  fprintf(f, "%-40s %10s %12s %10s %7s\n", "kernel", "dispatches", "total ms", "mean us", "share");
  for (int i = 0; i < p->nk; i++)
    fprintf(f, "%-40s %10llu %12.3f %10.2f %6.1f%%\n", k[i].label, (unsigned long long)k[i].dispatches,
            (double)k[i].ns / 1e6, k[i].dispatches ? (double)k[i].ns / 1e3 / (double)k[i].dispatches : 0.0,
            total ? 100.0 * (double)k[i].ns / (double)total : 0.0);
  if (p->untimed) fprintf(f, "(%llu dispatches untimed: more than %d in one submit)\n",
                          (unsigned long long)p->untimed, PROFILE_DISPATCHES);
}

void wisp_wgpu_profile_free(wisp_wgpu_profile *p) {
  if (!p) return;
  const wisp_wgpu_api *w = p->d->api;
  if (p->queries) {
    w->QuerySetDestroy(p->queries);
    w->QuerySetRelease(p->queries);
  }
  if (p->resolved) w->BufferRelease(p->resolved);
  wisp_wgpu_buf_free(p->d, &p->staging);
  free(p);
}
