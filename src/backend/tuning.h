/* A session's tuning string: "key=value,key=value" of settings that are not
 * the plan's, for measurements (tuning sweeps on a GPU) and tests (paths
 * forced on or off, faults injected). Normal runs give none. The keys and
 * their meaning: the table in tuning.c and docs/configuration.md. An unknown key or
 * a bad value is a one-line error at session creation.
 *
 *   wisp_tuning *t;
 *   if (wisp_tuning_new("persist=0,kv=f16", &t)) die(wisp_last_error());
 *   ...
 *   wisp_tuning_free(t);
 */
#ifndef WISP_BACKEND_TUNING_H
#define WISP_BACKEND_TUNING_H

#include <stddef.h>
#include <stdint.h>

#include "backend/backend.h"
#include "backend/tuning_defaults.h"
#include "wisp.h"

/* Opaque above the backends (its fields, the webgpu backend's options
 * among them, are in backend/tuning_fields.h, for tuning.c and tests). */
typedef struct wisp_tuning wisp_tuning;

/* The same parse into a wisp_tuning of its own (free with
 * wisp_tuning_free), for code that does not see the fields. */
wisp_status wisp_tuning_new(const char *text, wisp_tuning **out);
void wisp_tuning_free(wisp_tuning *t);

/* The keys the session itself takes (0: not given). */
typedef struct {
  int prefill_chunk; /* prefillChunk=N: tokens per prefill forward call */
  int decode_kick;   /* decodeKick=N: a generate's first batch goes out in growing chunks from N steps */
  int kv_fixed;      /* kvGrow=0: KV caches made for the whole context up front */
} wisp_tuning_session_keys;
void wisp_tuning_session(const wisp_tuning *t, wisp_tuning_session_keys *out);

/* Parses text (NULL or "" = nothing) into *out, zeroed first (0: the
 * default); out->webgpu.given has a bit for each key the text gave. */
wisp_status wisp_tuning_parse(const char *text, wisp_tuning *out);

/* The defaults are the table's: backend/tuning_defaults.h. */

/* Builds the settings object's tuning part, by one rule: every key given
 * that names a plan setting (matvec: the one-token geometry of every
 * matrix, attnSplits: flash_blocks, kv=f16: kv_f16) replaces the plan's
 * value in *s, which wisp_engine_backend_settings filled from the plan. */
void wisp_tuning_over_plan(const wisp_tuning *t, wisp_backend_settings *s);

/* Opening a device, before any plan: the one thing a tuning key sets
 * there (dawnToggles). Every other key reaches the backend through the
 * settings object, at configure (wisp_backend_settings.tuning). */
typedef struct wisp_device_request {
  const char *dawn_toggles; /* "a:b:..." or NULL; points into the wisp_tuning */
} wisp_device_request;
void wisp_tuning_device_request(const wisp_tuning *t, wisp_device_request *out);

/* The caps a plan reads are the device's, less what keys turn off: the
 * fusions (fuse=0: all of them, fuseArgmax=0: head+argmax; the table marks
 * them) and AVX2 (cpuScalar=1). The backend is made without keys, so the session applies this to
 * the caps it reads before it resolves the plan. */
void wisp_tuning_over_caps(const wisp_tuning *t, wisp_device_caps *caps);

/* The keys for users, comma-separated, into out (cap bytes): the test-only
 * keys (a path forced, a fault injected) are left out of every listing. */
void wisp_tuning_list(char *out, size_t cap);
/* 1: key is a test-only key, 0: a key for users, -1: no such key. */
int wisp_tuning_key_is_test(const char *key);

#endif
