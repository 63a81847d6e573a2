/* `wisp tune` and the manifest's tuned entries (engine/tune.h,
 * plan/tuned.h, docs/tuning.md): the quick sweep on lavapipe writes this
 * device's entry in place, keyed (another device's and another version's
 * stay, this device's is replaced), with a receipt and plots; a plan uses
 * the entry for its device and names every other with the reason; a
 * corrupt entry is a one-line error; --dry-run writes nothing. */
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "engine/engine.h"
#include "engine/internal.h"
#include "engine/plan_apply.h"
#include "engine/tune.h"
#include "engine/tune_accept.h"
#include "fixtures.h"
#include "test.h"
#include "util/file.h"
#include "webgpu_fixture.h"

#define DEFAULT_MODEL "models/default"

/* A copy of the default model under the test's scratch directory. */
static int copy_model(const char *name, char *dir, size_t cap) {
  char cmd[2400], out[1024];
  snprintf(dir, cap, "%s/%s", test_tmpdir(), name);
  snprintf(cmd, sizeof cmd, "rm -rf %s && cp -r %s %s", dir, DEFAULT_MODEL, dir);
  return test_run(cmd, out, sizeof out) == 0;
}

static cJSON *load_manifest(const char *dir) {
  char path[1100];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  return fixture_read_json(path);
}

static int save_manifest(const char *dir, const cJSON *m) {
  char path[1100];
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  char *text = cJSON_Print(m);
  int ok = text && wisp_write_file_atomic(path, text, strlen(text)) == WISP_OK;
  free(text);
  return ok;
}

static int one_line(const char *s) {
  size_t n = strlen(s);
  return n > 0 && strchr(s, '\n') == s + n - 1;
}

/* An entry with this device's key (from a tuned entry already written)
 * but wisp version `wisp`, or for another device when other != 0. */
static cJSON *entry_like(const cJSON *mine, const char *wisp, int other) {
  cJSON *e = cJSON_Duplicate(mine, 1);
  cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
  cJSON_ReplaceItemInObjectCaseSensitive(d, "wisp", cJSON_CreateString(wisp));
  if (other) {
    cJSON_ReplaceItemInObjectCaseSensitive(d, "vendorId", cJSON_CreateNumber(4318));
    cJSON_ReplaceItemInObjectCaseSensitive(d, "deviceId", cJSON_CreateNumber(8963));
    cJSON_ReplaceItemInObjectCaseSensitive(d, "name", cJSON_CreateString("NVIDIA H200"));
    cJSON_ReplaceItemInObjectCaseSensitive(d, "driver", cJSON_CreateString("NVIDIA 550.54.15"));
  }
  return e;
}

static int count_same_key(const cJSON *tuned, const cJSON *d0, const char *wisp) {
  int n = 0;
  for (const cJSON *e = tuned ? tuned->child : NULL; e; e = e->next) {
    const cJSON *d = cJSON_GetObjectItemCaseSensitive(e, "device");
    n += cJSON_Compare(cJSON_GetObjectItemCaseSensitive(d, "vendorId"), cJSON_GetObjectItemCaseSensitive(d0, "vendorId"), 1) &&
         cJSON_Compare(cJSON_GetObjectItemCaseSensitive(d, "deviceId"), cJSON_GetObjectItemCaseSensitive(d0, "deviceId"), 1) &&
         cJSON_Compare(cJSON_GetObjectItemCaseSensitive(d, "driver"), cJSON_GetObjectItemCaseSensitive(d0, "driver"), 1) &&
         !strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d, "wisp")), wisp);
  }
  return n;
}

/* The products of a tune receipt whose chosen geometry is not their
 * default (-1: no receipt). */
static int matvec_moved(const char *outdir) {
  char path[1200], *text = NULL;
  snprintf(path, sizeof path, "%s/tune-receipt.json", outdir);
  if (wisp_read_file(path, &text, NULL) != WISP_OK) return -1;
  cJSON *r = cJSON_Parse(text);
  free(text);
  if (!r) return -1;
  int moved = 0;
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(r, "classes");
  for (const cJSON *c = cls ? cls->child : NULL; c; c = c->next) {
    const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind"));
    const char *chosen = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "chosen"));
    const char *def = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "default"));
    moved += k && chosen && def && strcmp(chosen, def) && !strcmp(k, "matvec");
  }
  cJSON_Delete(r);
  return moved;
}

/* The quick sweep in make test: two runs on a copy of the default model. */
/* The rule that keeps a default: a geometry is written only when faster
 * beyond both timings' spreads and by at least 2 %. */
TEST(tune_keeps_the_default_unless_beaten_beyond_the_noise) {
  CHECK(wisp_tune_beats_default(90.0, 0.0, 100.0, 0.0));
  CHECK(!wisp_tune_beats_default(99.0, 0.0, 100.0, 0.0));   /* 1 %: under the 2 % floor */
  CHECK(!wisp_tune_beats_default(100.0, 0.0, 100.0, 0.0));
  CHECK(!wisp_tune_beats_default(110.0, 0.0, 100.0, 0.0));
  CHECK(wisp_tune_beats_default(97.0, 0.0, 100.0, 0.0));
  CHECK(!wisp_tune_beats_default(97.0, 0.02, 100.0, 0.02)); /* 3 % inside 4 % of noise */
  CHECK(wisp_tune_beats_default(95.0, 0.02, 100.0, 0.02));
  CHECK(!wisp_tune_beats_default(80.0, 0.15, 100.0, 0.1));
}

/* The acceptance run's rule: each part of a tuned entry is taken out
 * where the workload it acts on was slower with the entry (no margin), and
 * only that part. */
TEST(tune_acceptance_drops_only_the_parts_that_lost) {
  const char *full = "{\"candidate\": {\"matvec\": {\"head\": {}}, \"flashBlocks\": 8, \"prefillTile\": \"32x32\", "
                     "\"prefillTileI8\": \"64x64x4x4x4\"}, \"knee\": []}";
  static const struct {
    int prefill_slower, decode_slower, dropped, tiles_left, decode_left;
  } cases[] = {
      {0, 0, 0, 1, 1}, /* nothing lost: all kept */
      {1, 0, 1, 0, 1}, /* the prefill lost: the tiles go, the one-token geometries stay */
      {0, 1, 1, 1, 0}, /* the decode lost: matvec, flashBlocks and the knee go */
      {1, 1, 1, 0, 0},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    cJSON *e = cJSON_Parse(full);
    CHECK(e != NULL);
    wisp_tune_ab ab = {0};
    ab.prefill_slower = cases[i].prefill_slower, ab.decode_slower = cases[i].decode_slower;
    char said[200] = "";
    const int dropped = wisp_tune_drop_losers(e, &ab, said, sizeof said);
    cJSON *c = cJSON_GetObjectItemCaseSensitive(e, "candidate");
    const int tiles = cJSON_GetObjectItemCaseSensitive(c, "prefillTile") && cJSON_GetObjectItemCaseSensitive(c, "prefillTileI8");
    const int dec = cJSON_GetObjectItemCaseSensitive(c, "matvec") && cJSON_GetObjectItemCaseSensitive(c, "flashBlocks") &&
                    cJSON_GetObjectItemCaseSensitive(e, "knee");
    CHECKF(dropped == cases[i].dropped && tiles == cases[i].tiles_left && dec == cases[i].decode_left,
           "case %zu: dropped %d, tiles %d, decode parts %d (%s)", i, dropped, tiles, dec, said);
    CHECKF(!cases[i].prefill_slower || strstr(said, "prefill tile"), "case %zu says '%s'", i, said);
    /* a slower workload whose parts are already out takes nothing more */
    CHECKF(!wisp_tune_drop_losers(e, &ab, said, sizeof said) || !dropped, "case %zu dropped twice", i);
    cJSON_Delete(e);
  }
  /* slower where the entry has nothing acting: nothing to take out */
  cJSON *e = cJSON_Parse("{\"candidate\": {\"matvec\": {\"head\": {}}}}");
  CHECK(e != NULL);
  wisp_tune_ab ab = {0};
  ab.prefill_slower = 1;
  CHECK(!wisp_tune_drop_losers(e, &ab, NULL, 0));
  CHECK(cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "candidate"), "matvec") != NULL);
  cJSON_Delete(e);
}

TEST(webgpu_tune_quick_writes_a_keyed_entry) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char dir[1024], outdir[1100], cmd[4096];
  static char out[1 << 16];
  CHECK(copy_model("tune-quick", dir, sizeof dir));
  snprintf(outdir, sizeof outdir, "%s/tune-out", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s tune -m %s --quick -o %s", test_wisp_bin(), dir, outdir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s:\n%s", cmd, out);
  CHECKF(strstr(out, "tune [") && strstr(out, "wrote this device's entry into"), "no progress bar or summary:\n%s", out);
  /* the receipt: every class with its candidates' times and the chosen one */
  char path[1200], *text = NULL;
  snprintf(path, sizeof path, "%s/tune-receipt.json", outdir);
  CHECKF(wisp_read_file(path, &text, NULL) == WISP_OK, "no receipt at %s", path);
  cJSON *r = cJSON_Parse(text);
  free(text);
  CHECK(r != NULL);
  const cJSON *cls = cJSON_GetObjectItemCaseSensitive(r, "classes");
  int kinds = 0, timed = 0;
  for (const cJSON *c = cls ? cls->child : NULL; c; c = c->next) {
    const char *k = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "kind"));
    kinds |= !strcmp(k, "matvec") ? 1 : !strcmp(k, "attn") ? 2 : !strncmp(k, "prefill", 7) ? 4 : 0;
    for (const cJSON *x = cJSON_GetObjectItemCaseSensitive(c, "candidates")->child; x; x = x->next)
      timed += cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(x, "median_ns")) > 0;
    /* a geometry is chosen over the default only when faster beyond the
     * noise (at least 2 %): tuned is never slower than the default */
    const char *chosen = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "chosen"));
    const char *def = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "default"));
    if (chosen && def && strcmp(chosen, def)) {
      const double cn = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "chosen_ns"));
      const double dn = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(c, "default_ns"));
      CHECKF(cn < dn * 0.98, "%s: %s (%.0f ns) chosen over the default %s (%.0f ns), not 2 %% faster",
             cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "class")), chosen, cn, def, dn);
    }
    snprintf(path, sizeof path, "%s/tune-%s.svg", outdir, cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(c, "class")));
    for (char *p = path + strlen(outdir) + 6; *p; p++)
      if (*p == ':') *p = '-';
    CHECKF(wisp_path_exists(path), "no plot %s", path);
  }
  char timing[64] = "";
  const char *t = cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(r, "timing"));
  snprintf(timing, sizeof timing, "%s", t ? t : "");
  cJSON_Delete(r);
  CHECKF(kinds == 7 && timed >= 6, "the quick sweep must time a product, a prefill tile and an attention (kinds %d, %d timed)",
         kinds, timed);
  CHECKF((!strncmp(timing, "gpu-timestamps", 14) || !strncmp(timing, "wall", 4)), "timing '%s'", timing);
  /* the entry, in place, parseable, and nothing left beside it */
  cJSON *m = load_manifest(dir);
  CHECK(m != NULL);
  cJSON *tuned = cJSON_GetObjectItemCaseSensitive(m, "tuned");
  CHECKF(cJSON_GetArraySize(tuned) == 1, "expected one tuned entry");
  cJSON *mine = cJSON_GetArrayItem(tuned, 0);
  const cJSON *d0 = cJSON_GetObjectItemCaseSensitive(mine, "device");
  CHECK(!strcmp(cJSON_GetStringValue(cJSON_GetObjectItemCaseSensitive(d0, "wisp")), WISP_VERSION));
  snprintf(cmd, sizeof cmd, "ls -A %s | grep -c -e tmp -e lock", dir);
  CHECKF(test_run(cmd, out, sizeof out) != 0 && !strncmp(out, "0", 1), "temporaries left beside the manifest: %s", out);
  /* another device's entry and this device's of another version stay; this
   * device's own (marked) is replaced, not duplicated */
  cJSON_AddItemToArray(tuned, entry_like(mine, WISP_VERSION, 1));
  cJSON_AddItemToArray(tuned, entry_like(mine, "0.0.0-old", 0));
  cJSON *cand = cJSON_GetObjectItemCaseSensitive(mine, "candidate");
  cJSON_DeleteItemFromObjectCaseSensitive(cand, "flashBlocks");
  cJSON_AddNumberToObject(cand, "flashBlocks", 77);
  cJSON *d0copy = cJSON_Duplicate(d0, 1);
  CHECK(save_manifest(dir, m));
  cJSON_Delete(m);
  snprintf(cmd, sizeof cmd, "%s tune -m %s --quick -o %s", test_wisp_bin(), dir, outdir);
  int rc = test_run(cmd, out, sizeof out);
  m = load_manifest(dir);
  tuned = cJSON_GetObjectItemCaseSensitive(m, "tuned");
  char *all = cJSON_PrintUnformatted(tuned);
  const int n = cJSON_GetArraySize(tuned), same = count_same_key(tuned, d0copy, WISP_VERSION),
            old = count_same_key(tuned, d0copy, "0.0.0-old");
  const int marked = all && strstr(all, "\"flashBlocks\":77") != NULL;
  free(all);
  cJSON_Delete(m);
  cJSON_Delete(d0copy);
  CHECKF(rc == 0, "%s", out);
  CHECKF(n == 3 && same == 1 && old == 1 && !marked,
         "keyed write: %d entries, %d of this device and version, %d of the old version, stale entry %s", n, same, old,
         marked ? "kept" : "replaced");
  /* the plan uses this device's entry and names the others with reasons */
  snprintf(cmd, sizeof cmd, "%s plan -m %s --backend webgpu", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "  uses tuned[") && strstr(out, ": this device ("), "%s", out);
  CHECKF(strstr(out, "  ignores tuned[") && strstr(out, ": other device (NVIDIA H200"), "%s", out);
  CHECKF(strstr(out, ": other wisp version (measured with 0.0.0-old"), "%s", out);
  /* a product's geometry is in the entry (and the plan) only where it beat
   * the default in the run that wrote the entry (the second: its receipt
   * replaced the first's; which products beat their default is a matter of
   * timing, the agreement of receipt and plan is not); the plan's use of
   * one is checked with a given entry below */
  const int moved = matvec_moved(outdir);
  CHECKF(moved >= 0, "no receipt in %s after the second run", outdir);
  if (moved) CHECKF(strstr(out, "[manifest-candidate candidate tuned: matvec."), "the tuned geometry is not in the plan:\n%s", out);
  else CHECKF(!strstr(out, "candidate tuned: matvec."), "a default geometry written as tuned:\n%s", out);
}

/* No GPU needed: a plan for a device given by its caps picks the entry
 * with its key and names the others (other device, other version, unknown
 * kernel); on the cpu backend every entry is another device's. */
TEST(tune_plan_picks_this_devices_entry_and_says_why_not_the_others) {
  char dir[1024];
  CHECK(copy_model("tune-plan", dir, sizeof dir));
  cJSON *m = load_manifest(dir);
  CHECK(m != NULL);
  const char *entry =
      "{\"device\": {\"vendor\": \"acme\", \"vendorId\": 4660, \"deviceId\": 22136, \"driver\": \"acme 1.2\", "
      "\"name\": \"Acme GPU\", \"wisp\": \"%s\"}, \"timing\": \"wall\", \"candidate\": {\"matvec\": {\"mlp_down\": "
      "{\"geometry\": {\"workgroupSize\": 64, \"subgroupSize\": 32, \"rowsPerSubgroup\": 2, \"subgroupsPerRow\": 1}, "
      "\"variant\": \"%s\"}}, \"flashBlocks\": 8, \"prefillTile\": \"32x32\"}, \"flashOptima\": [{\"positions\": 256, \"blocks\": 8}]}";
  char buf[2048];
  cJSON *tuned = cJSON_AddArrayToObject(m, "tuned");
  const char *versions[4] = {"9.9.9", WISP_VERSION, WISP_VERSION, WISP_VERSION};
  const char *variants[4] = {"wgsl_matvec_subgroup_q4", "no_such_kernel", "wgsl_matvec_subgroup_q4", "wgsl_matvec_subgroup_q4"};
  for (int i = 0; i < 4; i++) {
    snprintf(buf, sizeof buf, entry, versions[i], variants[i]);
    cJSON *e = cJSON_Parse(buf);
    CHECK(e != NULL);
    if (i == 3) { /* another device */
      cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(e, "device"), "deviceId", cJSON_CreateNumber(1));
    }
    cJSON_AddItemToArray(tuned, e);
  }
  CHECK(save_manifest(dir, m));
  cJSON_Delete(m);
  wisp_model *model = NULL;
  CHECKF(wisp_model_open(dir, &model) == WISP_OK, "%s", wisp_last_error());
  wisp_device_caps caps;
  wisp_device_caps_default(&caps, "webgpu");
  caps.vendor_id = 4660, caps.device_id = 22136;
  snprintf(caps.driver, sizeof caps.driver, "acme 1.2");
  wisp_plan *plan = NULL;
  wisp_status st = wisp_engine_resolve_plan(model, &caps, "default", NULL, &plan);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECKF(plan->tuned_present && strstr(plan->tuned_used, "tuned[2]: this device (Acme GPU"), "used: %s", plan->tuned_used);
  CHECKF(plan->n_tuned_ignored == 3, "%d ignored", plan->n_tuned_ignored);
  CHECKF(strstr(plan->tuned_ignored[0], "tuned[0]: other wisp version (measured with 9.9.9"), "%s", plan->tuned_ignored[0]);
  CHECKF(strstr(plan->tuned_ignored[1], "tuned[1]: unknown kernel 'no_such_kernel'"), "%s", plan->tuned_ignored[1]);
  CHECKF(strstr(plan->tuned_ignored[2], "tuned[3]: other device (Acme GPU, 0x1234:0x0001"), "%s", plan->tuned_ignored[2]);
  CHECKF(plan->flash_blocks == 8, "flashBlocks %d (the entry's 8)", plan->flash_blocks);
  CHECKF(plan->prefill_tile[0] == 32 && plan->prefill_tile[1] == 32 && !plan->prefill_tile_i8[0], "prefill tile %dx%d",
         plan->prefill_tile[0], plan->prefill_tile[1]);
  wisp_backend_settings bs;
  wisp_engine_backend_settings(plan, &bs);
  CHECKF(bs.prefill_tm == 32 && bs.prefill_tn == 32 && bs.flash_blocks == 8, "settings: tile %dx%d, flashBlocks %d",
         bs.prefill_tm, bs.prefill_tn, bs.flash_blocks);
  int found = 0;
  for (int g = 0; g < plan->phases[WISP_PHASE_DECODE].n_groups; g++)
    for (int i = 0; i < plan->phases[WISP_PHASE_DECODE].groups[g].n_ops; i++) {
      const wisp_plan_op *op = &plan->phases[WISP_PHASE_DECODE].groups[g].ops[i];
      if (!strcmp(op->section, "mlp.down"))
        found = op->geometry.workgroup_size == 64 && op->geometry.rows_per_subgroup == 2 &&
                op->geometry_from.kind == WISP_PROV_CANDIDATE;
    }
  CHECKF(found, "mlp.down does not run the entry's geometry 64x2");
  const int has_tuned_json = strstr(plan->json, "\"tuned\":{") != NULL;
  wisp_plan_free(plan);
  CHECK(has_tuned_json);
  /* on the cpu backend: no entry is this device's */
  wisp_device_caps_default(&caps, "cpu");
  st = wisp_engine_resolve_plan(model, &caps, "default", NULL, &plan);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECKF(!plan->tuned_used[0] && plan->n_tuned_ignored == 4, "cpu: used '%s', %d ignored", plan->tuned_used,
         plan->n_tuned_ignored);
  wisp_plan_free(plan);
  wisp_model_close(model);
}

/* A corrupt entry stops every command that plans, with one line naming
 * its JSON path. */
TEST(tune_corrupt_entry_is_a_one_line_error) {
  char dir[1024], cmd[2048], out[8192];
  CHECK(copy_model("tune-corrupt", dir, sizeof dir));
  static const struct { const char *tuned, *says; } bad[] = {
      {"5", "tuned: expected an array, got number"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": 1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}, "
       "\"knee\": [{\"shape\": 3}]}]", "tuned[0].knee[0].shape: expected a string"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": -1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}}]",
       "tuned[0].device.vendorId: expected an integer"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": 1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}, "
       "\"candidate\": {\"matvec\": {\"head\": {\"variant\": \"v\", \"geometry\": {\"workgroupSize\": 0}}}}}]",
       "tuned[0].candidate.matvec.head.geometry.workgroupSize: missing or 0"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": 1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}, "
       "\"flashOptima\": [{\"positions\": 64, \"blocks\": 9999}]}]", "tuned[0].flashOptima[0].blocks: expected an integer"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": 1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}, \"knees\": []}]",
       "tuned[0].knees: unknown key"},
      {"[{\"device\": {\"vendor\": \"x\", \"vendorId\": 1, \"deviceId\": 2, \"driver\": \"d\", \"wisp\": \"0\"}, "
       "\"candidate\": {\"prefillTile\": \"64\"}}]", "tuned[0].candidate.prefillTile: expected \"TMxTN\""},
  };
  for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
    cJSON *m = load_manifest(dir);
    CHECK(m != NULL);
    cJSON_DeleteItemFromObjectCaseSensitive(m, "tuned");
    cJSON *t = cJSON_Parse(bad[i].tuned);
    CHECK(t != NULL);
    cJSON_AddItemToObject(m, "tuned", t);
    CHECK(save_manifest(dir, m));
    cJSON_Delete(m);
    snprintf(cmd, sizeof cmd, "%s plan -m %s --backend cpu", test_wisp_bin(), dir);
    int rc = test_run(cmd, out, sizeof out);
    CHECKF(rc == 1 && one_line(out) && strstr(out, bad[i].says) && strstr(out, "manifest.json"),
           "tuned %s -> exit %d:\n%s", bad[i].tuned, rc, out);
  }
}

/* --dry-run lists the classes and geometries and writes nothing. */
TEST(webgpu_tune_dry_run_lists_and_writes_nothing) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char dir[1024], cmd[2048], path[1100], *before = NULL, *after = NULL;
  static char out[1 << 16];
  CHECK(copy_model("tune-dry", dir, sizeof dir));
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  CHECK(wisp_read_file(path, &before, NULL) == WISP_OK);
  snprintf(cmd, sizeof cmd, "%s tune -m %s --dry-run", test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  CHECK(wisp_read_file(path, &after, NULL) == WISP_OK);
  const int same = !strcmp(before, after);
  free(before);
  free(after);
  CHECKF(rc == 0 && strstr(out, "matvec:mlp_down") && strstr(out, "matvec:head") && strstr(out, "attn:") &&
             strstr(out, "WGxROWS: 128x4*") && strstr(out, "shape classes"),
         "%s", out);
  CHECK(same);
}
