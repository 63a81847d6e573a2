/* The manifest's tuned entries: checking them, picking this device's, and
 * laying it over the manifest's candidate and knee (tuned.h). */
#include "plan/tuned.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "plan/pjson.h"
#include "util/err.h"

#define GEOMETRY_KEYS 4
static const char *const k_geometry[GEOMETRY_KEYS] = {"workgroupSize", "subgroupSize", "rowsPerSubgroup",
                                                       "subgroupsPerRow"};

/* A geometry object: workgroupSize a positive integer, the others absent
 * or non-negative integers, nothing else. */
static wisp_status check_geometry(const cJSON *g, const char *where, const char *path) {
  if (!cJSON_IsObject(g)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object, got %s", where, path, wisp_json_type(g));
  for (const cJSON *k = g->child; k; k = k->next) {
    int known = 0;
    for (int i = 0; i < GEOMETRY_KEYS; i++) known |= !strcmp(k->string, k_geometry[i]);
    if (!known) return wisp_fail(WISP_EFORMAT, "%s: %s.%s: unknown key", where, path, k->string);
    if (!wisp_json_is_int(k) || k->valuedouble < 0 || k->valuedouble > 65536)
      return wisp_fail(WISP_EFORMAT, "%s: %s.%s: expected an integer in [0, 65536]", where, path, k->string);
  }
  const cJSON *wg = cJSON_GetObjectItemCaseSensitive(g, "workgroupSize");
  if (!wg || wg->valuedouble < 1) return wisp_fail(WISP_EFORMAT, "%s: %s.workgroupSize: missing or 0", where, path);
  return WISP_OK;
}

/* "AxB..." of n numbers in 1..1024. */
static int dims_ok(const cJSON *j, int n) {
  if (!cJSON_IsString(j)) return 0;
  const char *s = j->valuestring;
  for (int i = 0; i < n; i++) {
    char *end;
    long v = strtol(s, &end, 10);
    if (end == s || v < 1 || v > 1024 || (i + 1 < n ? *end != 'x' : *end != 0)) return 0;
    s = end + 1;
  }
  return 1;
}

static wisp_status need_string(const cJSON *o, const char *key, const char *where, const char *path) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!cJSON_IsString(j)) return wisp_fail(WISP_EFORMAT, "%s: %s.%s: expected a string, got %s", where, path, key, wisp_json_type(j));
  return WISP_OK;
}

static wisp_status need_uint(const cJSON *o, const char *key, double lo, double hi, const char *where, const char *path) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  if (!wisp_json_is_int(j) || j->valuedouble < lo || j->valuedouble > hi)
    return wisp_fail(WISP_EFORMAT, "%s: %s.%s: expected an integer in [%.0f, %.0f]", where, path, key, lo, hi);
  return WISP_OK;
}

/* One entry: device, timing, candidate, knee, flashOptima; unknown keys are
 * errors (a typo must not pass as "no tuning"). */
static wisp_status check_entry(const cJSON *e, const char *where, int i) {
  char path[96], sub[192];
  wisp_path(path, sizeof path, "tuned[%d]", i);
  if (!cJSON_IsObject(e)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object, got %s", where, path, wisp_json_type(e));
  static const char *const keys[] = {"device", "timing", "candidate", "knee", "flashOptima", "prefill", "acceptance"};
  for (const cJSON *k = e->child; k; k = k->next) {
    int known = 0;
    for (size_t j = 0; j < sizeof keys / sizeof *keys; j++) known |= !strcmp(k->string, keys[j]);
    if (!known) return wisp_fail(WISP_EFORMAT, "%s: %s.%s: unknown key", where, path, k->string);
  }
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
  wisp_path(sub, sizeof sub, "%s.device", path);
  if (!cJSON_IsObject(d)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object, got %s", where, sub, wisp_json_type(d));
  wisp_status st;
  if ((st = need_string(d, "vendor", where, sub)) || (st = need_string(d, "driver", where, sub)) ||
      (st = need_string(d, "wisp", where, sub)) || (st = need_uint(d, "vendorId", 0, 4294967295.0, where, sub)) ||
      (st = need_uint(d, "deviceId", 0, 4294967295.0, where, sub)))
    return st;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(e, "timing");
  if (t && (!cJSON_IsString(t) || (strcmp(t->valuestring, "gpu-timestamps") && strcmp(t->valuestring, "wall"))))
    return wisp_fail(WISP_EFORMAT, "%s: %s.timing: expected \"gpu-timestamps\" or \"wall\"", where, path);
  const cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "candidate");
  if (c) {
    wisp_path(sub, sizeof sub, "%s.candidate", path);
    if (!cJSON_IsObject(c)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object, got %s", where, sub, wisp_json_type(c));
    const cJSON *mv = cJSON_GetObjectItemCaseSensitive(c, "matvec");
    if (mv && !cJSON_IsObject(mv)) return wisp_fail(WISP_EFORMAT, "%s: %s.matvec: expected an object", where, sub);
    for (const cJSON *s = mv ? mv->child : NULL; s; s = s->next) {
      char sp[160];
      wisp_path(sp, sizeof sp, "%s.matvec.%.40s", sub, s->string);
      if (!cJSON_IsObject(s)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object", where, sp);
      if ((st = need_string(s, "variant", where, sp))) return st;
      char gp[192];
      wisp_path(gp, sizeof gp, "%s.geometry", sp);
      if ((st = check_geometry(cJSON_GetObjectItemCaseSensitive(s, "geometry"), where, gp))) return st;
    }
    const cJSON *fb = cJSON_GetObjectItemCaseSensitive(c, "flashBlocks");
    if (fb && (st = need_uint(c, "flashBlocks", 1, 256, where, sub))) return st;
    static const char *const tiles[2] = {"prefillTile", "prefillTileI8"};
    for (int i = 0; i < 2; i++) {
      const cJSON *t = cJSON_GetObjectItemCaseSensitive(c, tiles[i]);
      if (t && !dims_ok(t, i ? 5 : 2))
        return wisp_fail(WISP_EFORMAT, "%s: %s.%s: expected \"%s\" (numbers 1..1024)", where, sub, tiles[i],
                         i ? "TMxTNxRMxRNxKB" : "TMxTN");
    }
  }
  const cJSON *k = cJSON_GetObjectItemCaseSensitive(e, "knee");
  if (k && !cJSON_IsArray(k)) return wisp_fail(WISP_EFORMAT, "%s: %s.knee: expected an array", where, path);
  int j = 0;
  for (const cJSON *x = k ? k->child : NULL; x; x = x->next, j++) {
    wisp_path(sub, sizeof sub, "%s.knee[%d]", path, j);
    if (!cJSON_IsObject(x)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object", where, sub);
    if ((st = need_string(x, "shape", where, sub))) return st;
    char gp[224];
    wisp_path(gp, sizeof gp, "%s.geometry", sub);
    if ((st = check_geometry(cJSON_GetObjectItemCaseSensitive(x, "geometry"), where, gp))) return st;
  }
  const cJSON *f = cJSON_GetObjectItemCaseSensitive(e, "flashOptima");
  if (f && !cJSON_IsArray(f)) return wisp_fail(WISP_EFORMAT, "%s: %s.flashOptima: expected an array", where, path);
  j = 0;
  for (const cJSON *x = f ? f->child : NULL; x; x = x->next, j++) {
    wisp_path(sub, sizeof sub, "%s.flashOptima[%d]", path, j);
    if (!cJSON_IsObject(x)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object", where, sub);
    if ((st = need_uint(x, "positions", 1, 1 << 30, where, sub)) || (st = need_uint(x, "blocks", 1, 256, where, sub)))
      return st;
  }
  const cJSON *p = cJSON_GetObjectItemCaseSensitive(e, "prefill");
  if (p && !cJSON_IsArray(p)) return wisp_fail(WISP_EFORMAT, "%s: %s.prefill: expected an array", where, path);
  j = 0;
  for (const cJSON *x = p ? p->child : NULL; x; x = x->next, j++) {
    wisp_path(sub, sizeof sub, "%s.prefill[%d]", path, j);
    if (!cJSON_IsObject(x)) return wisp_fail(WISP_EFORMAT, "%s: %s: expected an object", where, sub);
    if ((st = need_string(x, "shape", where, sub)) || (st = need_string(x, "tile", where, sub))) return st;
  }
  return WISP_OK;
}

static const char *str_of(const cJSON *o, const char *key) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsString(j) ? j->valuestring : "";
}

static double num_of(const cJSON *o, const char *key) {
  const cJSON *j = cJSON_GetObjectItemCaseSensitive(o, key);
  return cJSON_IsNumber(j) ? j->valuedouble : -1;
}

int wisp_tuned_same_device(const cJSON *e, const wisp_device_caps *dev) {
  const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
  return !strcmp(dev->backend, "webgpu") && num_of(d, "vendorId") == (double)dev->vendor_id &&
         num_of(d, "deviceId") == (double)dev->device_id && !strcmp(str_of(d, "driver"), dev->driver);
}

/* The first kernel an entry names that the registry's matmul op lacks. */
static const char *unknown_kernel(const cJSON *e, const wisp_registry *reg) {
  const wisp_operation *op = reg ? wisp_registry_op(reg, "matmul") : NULL;
  const cJSON *mv = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "candidate"), "matvec");
  for (const cJSON *s = mv ? mv->child : NULL; s; s = s->next) {
    const char *v = str_of(s, "variant");
    if (!op || !wisp_registry_variant(op, v)) return v;
  }
  return NULL;
}

static void note_ignored(wisp_tuned_choice *out, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void note_ignored(wisp_tuned_choice *out, const char *fmt, ...) {
  if (out->n_ignored < WISP_TUNED_MAX_NOTES) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(out->ignored[out->n_ignored], sizeof out->ignored[0], fmt, ap);
    va_end(ap);
  }
  out->n_ignored++;
}

wisp_status wisp_tuned_select(const cJSON *manifest, const char *where, const wisp_device_caps *dev,
                              const char *version, const wisp_registry *reg, wisp_tuned_choice *out) {
  memset(out, 0, sizeof *out);
  out->used = -1;
  const cJSON *t = cJSON_GetObjectItemCaseSensitive(manifest, "tuned");
  if (!t) return WISP_OK;
  if (!cJSON_IsArray(t)) return wisp_fail(WISP_EFORMAT, "%s: tuned: expected an array, got %s", where, wisp_json_type(t));
  out->present = 1;
  int i = 0;
  for (const cJSON *e = t->child; e; e = e->next, i++) {
    wisp_status st = check_entry(e, where, i);
    if (st) return st;
  }
  i = 0;
  for (const cJSON *e = t->child; e; e = e->next, i++) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
    const char *name = str_of(d, "name")[0] ? str_of(d, "name") : str_of(d, "vendor");
    const char *bad;
    if (!wisp_tuned_same_device(e, dev)) {
      note_ignored(out, "tuned[%d]: other device (%.60s, 0x%04x:0x%04x, driver '%.48s')", i, name,
                   (unsigned)num_of(d, "vendorId"), (unsigned)num_of(d, "deviceId"), str_of(d, "driver"));
    } else if (strcmp(str_of(d, "wisp"), version)) {
      note_ignored(out, "tuned[%d]: other wisp version (measured with %.32s, this is %.32s)", i, str_of(d, "wisp"), version);
    } else if ((bad = unknown_kernel(e, reg))) {
      note_ignored(out, "tuned[%d]: unknown kernel '%.64s' (not a matmul variant of this registry)", i, bad);
    } else if (out->used >= 0) {
      note_ignored(out, "tuned[%d]: this device again (tuned[%d] is used)", i, out->used);
    } else {
      out->used = i;
      out->entry = e;
      const char *timing = str_of(e, "timing");
      wisp_path(out->used_note, sizeof out->used_note, "tuned[%d]: this device (%.60s, driver '%.48s'; timed by %s)", i, name,
               str_of(d, "driver"), timing[0] ? timing : "?");
    }
  }
  return WISP_OK;
}

wisp_status wisp_tuned_overlay(const cJSON *manifest_candidate, const cJSON *manifest_knee, const wisp_tuned_choice *c,
                               cJSON **candidate, cJSON **knee) {
  *candidate = manifest_candidate ? cJSON_Duplicate(manifest_candidate, 1) : NULL;
  *knee = manifest_knee ? cJSON_Duplicate(manifest_knee, 1) : NULL;
  if ((manifest_candidate && !*candidate) || (manifest_knee && !*knee)) goto oom;
  if (!c || !c->entry) return WISP_OK;
  const cJSON *ec = cJSON_GetObjectItemCaseSensitive(c->entry, "candidate");
  if (ec) {
    if (!*candidate && !(*candidate = cJSON_CreateObject())) goto oom;
    cJSON *key = cJSON_CreateString("tuned");
    if (!key) goto oom;
    if (cJSON_GetObjectItemCaseSensitive(*candidate, "key")) cJSON_ReplaceItemInObjectCaseSensitive(*candidate, "key", key);
    else cJSON_AddItemToObject(*candidate, "key", key);
    const cJSON *emv = cJSON_GetObjectItemCaseSensitive(ec, "matvec");
    cJSON *mv = cJSON_GetObjectItemCaseSensitive(*candidate, "matvec");
    if (emv && !mv && !(mv = cJSON_AddObjectToObject(*candidate, "matvec"))) goto oom;
    for (const cJSON *s = emv ? emv->child : NULL; s; s = s->next) {
      cJSON *copy = cJSON_Duplicate(s, 1);
      if (!copy) goto oom;
      if (cJSON_GetObjectItemCaseSensitive(mv, s->string)) cJSON_ReplaceItemInObjectCaseSensitive(mv, s->string, copy);
      else cJSON_AddItemToObject(mv, s->string, copy);
    }
    static const char *const keys[3] = {"flashBlocks", "prefillTile", "prefillTileI8"};
    for (int i = 0; i < 3; i++) {
      const cJSON *v = cJSON_GetObjectItemCaseSensitive(ec, keys[i]);
      if (!v) continue;
      cJSON *copy = cJSON_Duplicate(v, 0);
      if (!copy) goto oom;
      if (cJSON_GetObjectItemCaseSensitive(*candidate, keys[i])) cJSON_ReplaceItemInObjectCaseSensitive(*candidate, keys[i], copy);
      else cJSON_AddItemToObject(*candidate, keys[i], copy);
    }
  }
  const cJSON *ek = cJSON_GetObjectItemCaseSensitive(c->entry, "knee");
  if (ek) {
    cJSON_Delete(*knee);
    if (!(*knee = cJSON_Duplicate(ek, 1))) goto oom;
  }
  return WISP_OK;
oom:
  cJSON_Delete(*candidate);
  cJSON_Delete(*knee);
  *candidate = *knee = NULL;
  return wisp_fail(WISP_ENOMEM, "out of memory");
}
