/* Artifact format: the seed manifest, the layout, and every kind of bad input. */
#include <stdlib.h>
#include <sys/stat.h>

#include "fixtures.h"
#include "format/artifact.h"
#include "format/layout.h"
#include "test.h"
#include "util/file.h"

TEST(artifact_seed_manifest_loads_unchanged) {
  char *text = NULL;
  CHECK(wisp_read_file(fixture_seed_manifest(), &text, NULL) == WISP_OK);
  wisp_artifact *a = NULL;
  wisp_status st = wisp_manifest_parse(text, "seed", &a);
  free(text);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECK(a->shape.n_layers == 14 && a->shape.hidden == 1024 && a->shape.ffn == 2560 && a->shape.vocab == 65536);
  CHECK(a->shape.layer_types[2] == WISP_LAYER_ATTENTION && a->shape.layer_types[13] == WISP_LAYER_CONV);
  CHECK(a->weight_bytes == 168647680ull);
  CHECK(a->n_sections == 199);
  const wisp_section *h = wisp_artifact_section(a, "head.quant"), *e = wisp_artifact_section(a, "embed.quant");
  CHECK(h && e && h->offset == e->offset && h->bytes == e->bytes);
  wisp_artifact_free(a);
}

TEST(artifact_assets_copy_matches_shared_seed) {
  /* The repository ships a copy of the seed manifest for the default model. */
  char *a = NULL, *b = NULL;
  size_t la = 0, lb = 0;
  if (!wisp_path_exists("../shared/seeds/manifest-lfm2-hybrid-q4.json")) {
    CHECK(wisp_read_file("assets/lfm2-hybrid-q4.manifest.json", &a, &la) == WISP_OK);
    free(a);
    return;
  }
  CHECK(wisp_read_file("../shared/seeds/manifest-lfm2-hybrid-q4.json", &a, &la) == WISP_OK);
  CHECK(wisp_read_file("assets/lfm2-hybrid-q4.manifest.json", &b, &lb) == WISP_OK);
  int same = la == lb && memcmp(a, b, la) == 0;
  free(a);
  free(b);
  CHECK(same);
}

TEST(artifact_layout_reproduces_seed_offsets) {
  char *text = NULL;
  CHECK(wisp_read_file(fixture_seed_manifest(), &text, NULL) == WISP_OK);
  wisp_artifact *a = NULL;
  CHECK(wisp_manifest_parse(text, "seed", &a) == WISP_OK);
  free(text);
  wisp_layout_options o = {.f32 = 0, .tied = 1, .down_transposed = 1, .rope_rows = 1024, .rope_ext_rows = 2560};
  cJSON *secs = NULL;
  uint64_t total = 0;
  CHECK(wisp_layout_lfm2(&a->shape, &o, &secs, &total) == WISP_OK);
  int n = cJSON_GetArraySize(secs), bad = -1;
  for (int i = 0; i < n && i < a->n_sections; i++) {
    const cJSON *e = cJSON_GetArrayItem(secs, i);
    const wisp_section *s = &a->sections[i];
    if (strcmp(cJSON_GetObjectItem(e, "name")->valuestring, s->name) ||
        (uint64_t)cJSON_GetObjectItem(e, "offset")->valuedouble != s->offset ||
        (uint64_t)cJSON_GetObjectItem(e, "bytes")->valuedouble != s->bytes) {
      bad = i;
      break;
    }
  }
  int count_ok = n == a->n_sections, total_ok = total == a->weight_bytes;
  if (bad >= 0) fprintf(stderr, "  first mismatch at section %d (%s)\n", bad, a->sections[bad].name);
  cJSON_Delete(secs);
  wisp_artifact_free(a);
  CHECK(bad < 0);
  CHECK(count_ok);
  CHECK(total_ok);
}

static wisp_status open_and_bind(const char *dir) {
  /* wisp info binds the architecture too, so shape errors surface. */
  char cmd[1024], out[2048];
  snprintf(cmd, sizeof cmd, "%s info -m %s", test_wisp_bin(), dir);
  return test_run(cmd, out, sizeof out) == 0 ? WISP_OK : WISP_EFORMAT;
}

/* Runs `wisp info` and checks: non-zero exit, exactly one line, and the
 * line contains `needle`. */
static int info_fails_with(const char *dir, const char *needle) {
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "%s info -m %s", test_wisp_bin(), dir);
  int rc = test_run(cmd, out, sizeof out);
  int lines = 0;
  for (char *p = out; *p; p++) lines += *p == '\n';
  int ok = rc != 0 && rc != -1 && lines == 1 && strstr(out, needle) != NULL;
  if (!ok) fprintf(stderr, "  rc=%d lines=%d output: %s", rc, lines, out);
  return ok;
}

TEST(artifact_small_model_opens) {
  const char *d = fixture_small_model();
  CHECK(d != NULL);
  CHECK(open_and_bind(d) == WISP_OK);
}

TEST(artifact_truncated_weights) {
  const char *d = fixture_variant("truncated", NULL, -100);
  CHECK(d && info_fails_with(d, "truncated"));
}

TEST(artifact_oversized_weights) {
  const char *d = fixture_variant("oversized", NULL, 64);
  CHECK(d && info_fails_with(d, "oversized"));
}

static cJSON *section_named(cJSON *m, const char *name) {
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "sections")) {
    if (!strcmp(cJSON_GetObjectItem(e, "name")->valuestring, name)) return e;
  }
  return NULL;
}

static void edit_past_end(cJSON *m) {
  cJSON *e = section_named(m, "head.norm");
  cJSON_SetNumberValue(cJSON_GetObjectItem(e, "offset"), 255000);
  cJSON_SetNumberValue(cJSON_GetObjectItem(e, "bytes"), 4096);
}
TEST(artifact_section_past_end) {
  const char *d = fixture_variant("past_end", edit_past_end, 0);
  CHECK(d && info_fails_with(d, "past weightBytes"));
}

static void edit_overlap(cJSON *m) {
  cJSON *a = section_named(m, "L0.conv.out_proj.quant");
  cJSON_SetNumberValue(cJSON_GetObjectItem(a, "offset"), 16);
}
TEST(artifact_overlapping_untied_sections) {
  const char *d = fixture_variant("overlap", edit_overlap, 0);
  CHECK(d && info_fails_with(d, "overlap"));
}

static void edit_wrong_shape(cJSON *m) {
  cJSON *shape = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "shape");
  cJSON_SetNumberValue(cJSON_GetObjectItem(shape, "ffn"), 96);
}
TEST(artifact_wrong_shape) {
  const char *d = fixture_variant("wrong_shape", edit_wrong_shape, 0);
  CHECK(d && info_fails_with(d, "wrong shape"));
}

static void edit_unknown_layer(cJSON *m) {
  cJSON *lt = cJSON_GetObjectItem(cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "shape"), "layerTypes");
  cJSON_ReplaceItemInArray(lt, 3, cJSON_CreateString("mamba"));
}
TEST(artifact_unknown_layer_type) {
  const char *d = fixture_variant("unknown_layer", edit_unknown_layer, 0);
  CHECK(d && info_fails_with(d, "unknown layer type 'mamba'"));
}

static void edit_missing_section(cJSON *m) {
  cJSON *secs = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "sections");
  int i = 0;
  cJSON *e;
  cJSON_ArrayForEach(e, secs) {
    if (!strcmp(cJSON_GetObjectItem(e, "name")->valuestring, "L2.attn.qkv.k_norm")) break;
    i++;
  }
  cJSON_DeleteItemFromArray(secs, i);
}
TEST(artifact_missing_section) {
  const char *d = fixture_variant("missing_section", edit_missing_section, 0);
  CHECK(d && info_fails_with(d, "missing section 'L2.attn.qkv.k_norm'"));
}

static void edit_duplicate(cJSON *m) {
  cJSON *secs = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "sections");
  cJSON_AddItemToArray(secs, cJSON_Duplicate(cJSON_GetArrayItem(secs, 0), 1));
}
TEST(artifact_duplicate_section) {
  const char *d = fixture_variant("duplicate", edit_duplicate, 0);
  CHECK(d && info_fails_with(d, "listed twice"));
}

TEST(artifact_malformed_json) {
  const char *d = fixture_variant("malformed", NULL, 0);
  CHECK(d);
  char path[700];
  snprintf(path, sizeof path, "%s/manifest.json", d);
  FILE *f = fopen(path, "wb");
  CHECK(f);
  fputs("{\"runtime\": {\"shape\": [1, 2,, }", f);
  fclose(f);
  CHECK(info_fails_with(d, "malformed JSON"));
}

TEST(artifact_missing_dir) {
  char path[600];
  snprintf(path, sizeof path, "%s/does-not-exist", test_tmpdir());
  CHECK(info_fails_with(path, "cannot open"));
}

static void edit_bad_type(cJSON *m) {
  cJSON *shape = cJSON_GetObjectItem(cJSON_GetObjectItem(m, "runtime"), "shape");
  cJSON_ReplaceItemInObject(shape, "hidden", cJSON_CreateString("wide"));
}
TEST(artifact_field_of_wrong_type) {
  const char *d = fixture_variant("bad_type", edit_bad_type, 0);
  CHECK(d && info_fails_with(d, "runtime.shape.hidden must be an integer"));
}

TEST(artifact_verify_detects_changed_weights) {
  const char *d = fixture_variant("tampered", NULL, 0);
  CHECK(d);
  char path[700];
  snprintf(path, sizeof path, "%s/weights.bin", d);
  FILE *f = fopen(path, "r+b");
  CHECK(f);
  fseek(f, 1000, SEEK_SET);
  fputc(0x5A, f);
  fclose(f);
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "%s info -m %s --verify", test_wisp_bin(), d);
  int rc = test_run(cmd, out, sizeof out);
  CHECK(rc == 1);
  CHECK(strstr(out, "does not match") != NULL);
}

/* gen-synthetic --like the seed manifest (the shared fixture, made by the
 * CLI) writes the seed's exact byte size, and the model runs. */
TEST(artifact_gen_synthetic_seed_size) {
  char cmd[1024], out[4096];
  const char *dir = fixture_seed_shaped_model(out, sizeof out);
  CHECKF(dir, "%s", out);
  char path[700];
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  struct stat st;
  CHECK(stat(path, &st) == 0);
  CHECK(st.st_size == 168647680);
  /* It must also run: two greedy tokens. */
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p hi -n 2 --temp 0", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
}

TEST(artifact_gen_synthetic_is_deterministic) {
  char cmd[4096], out[4096], a[600], b[600];
  snprintf(a, sizeof a, "%s/det-a", test_tmpdir());
  snprintf(b, sizeof b, "%s/det-b", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --small -o %s --seed 9 && %s gen-synthetic --small -o %s --seed 9 && cmp %s/weights.bin %s/weights.bin",
           test_wisp_bin(), a, test_wisp_bin(), b, a, b);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
}

TEST(artifact_no_half_written_output) {
  /* A manifest naming a section gen-synthetic cannot fill must leave nothing. */
  char *text = NULL;
  CHECK(wisp_read_file(fixture_seed_manifest(), &text, NULL) == WISP_OK);
  cJSON *m = cJSON_Parse(text);
  free(text);
  cJSON *e = section_named(m, "rope.sin_ext");
  cJSON_ReplaceItemInObject(e, "name", cJSON_CreateString("mystery.blob"));
  char *bad = cJSON_Print(m);
  cJSON_Delete(m);
  const char *path = fixture_write("mystery.json", bad);
  free(bad);
  char cmd[2048], out[4096], dir[600];
  snprintf(dir, sizeof dir, "%s/half", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --like %s -o %s", test_wisp_bin(), path, dir);
  int rc = test_run(cmd, out, sizeof out);
  CHECK(rc == 1);
  CHECK(strstr(out, "mystery.blob") != NULL);
  CHECK(!wisp_path_exists(dir));
  snprintf(cmd, sizeof cmd, "ls %s | grep -c partial", test_tmpdir());
  test_run(cmd, out, sizeof out);
  CHECK(atoi(out) == 0);
}
