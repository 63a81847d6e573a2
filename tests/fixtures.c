/* Fixtures; see fixtures.h. */
#include "fixtures.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "format/synthetic.h"
#include "test.h"
#include "util/file.h"
#include "wisp.h"

const char *fixture_small_model(void) {
  static char path[600];
  if (path[0]) return path;
  snprintf(path, sizeof path, "%s/small", test_tmpdir());
  char *text = wisp_synthetic_small_manifest();
  if (!text || wisp_synthetic_write(text, "small", path, 7) != WISP_OK) {
    fprintf(stderr, "fixture: cannot build the small model: %s\n", wisp_last_error());
    free(text);
    path[0] = 0;
    return NULL;
  }
  free(text);
  return path;
}

const char *fixture_seed_shaped_model(char *log, size_t cap) {
  static char path[600];
  static int failed;
  if (log && cap) log[0] = 0;
  if (path[0]) return path;
  if (failed) {
    if (log && cap) snprintf(log, cap, "generating the seed-shaped model failed earlier in this run");
    return NULL;
  }
  char dir[600], cmd[1400], out[4096];
  snprintf(dir, sizeof dir, "%s/seed-shaped", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s gen-synthetic --like %s -o %s --seed 5", test_wisp_bin(), fixture_seed_manifest(), dir);
  if (test_run(cmd, out, sizeof out) != 0) {
    failed = 1;
    if (log && cap) snprintf(log, cap, "%s", out);
    return NULL;
  }
  snprintf(path, sizeof path, "%s", dir);
  return path;
}

void fixture_byte_bpe_json(char *json, size_t cap, const char *more_vocab, const char *added) {
  size_t at = (size_t)snprintf(json, cap, "{\"model\": {\"type\": \"BPE\", \"merges\": [], \"vocab\": {");
  for (int b = 0; b < 256 && at < cap; b++) at += (size_t)snprintf(json + at, cap - at, "%s\"t%d\": %d", b ? ", " : "", b, b);
  if (at < cap)
    snprintf(json + at, cap - at, "%s}}, \"pre_tokenizer\": {\"type\": \"ByteLevel\"}, \"added_tokens\": [%s]}", more_vocab,
             added);
}

const char *fixture_write(const char *name, const char *text) {
  static char path[8][600];
  static int slot;
  char *p = path[slot++ % 8];
  snprintf(p, 600, "%s/%s", test_tmpdir(), name);
  FILE *f = fopen(p, "wb");
  if (f) {
    fwrite(text, 1, strlen(text), f);
    fclose(f);
  }
  return p;
}

const char *fixture_variant(const char *name, void (*edit)(cJSON *manifest), long weights_delta) {
  static char dir[8][600];
  static int slot;
  char *d = dir[slot++ % 8];
  const char *src = fixture_small_model();
  if (!src) return NULL;
  snprintf(d, 600, "%s/%s", test_tmpdir(), name);
  mkdir(d, 0755);
  char path[700], *text = NULL;
  snprintf(path, sizeof path, "%s/manifest.json", src);
  if (wisp_read_file(path, &text, NULL)) return NULL;
  cJSON *m = cJSON_Parse(text);
  free(text);
  if (edit) edit(m);
  char *out = cJSON_Print(m);
  cJSON_Delete(m);
  snprintf(path, sizeof path, "%s/manifest.json", d);
  FILE *f = fopen(path, "wb");
  if (!f) { free(out); return NULL; }
  fputs(out, f);
  fclose(f);
  free(out);
  char *w = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/weights.bin", src);
  if (wisp_read_file(path, &w, &len)) return NULL;
  snprintf(path, sizeof path, "%s/weights.bin", d);
  f = fopen(path, "wb");
  if (!f) { free(w); return NULL; }
  long keep = (long)len + (weights_delta < 0 ? weights_delta : 0);
  fwrite(w, 1, (size_t)(keep > 0 ? keep : 0), f);
  for (long i = 0; i < weights_delta; i++) fputc(0, f);
  fclose(f);
  free(w);
  return d;
}

const char *fixture_seed_manifest(void) {
  if (wisp_path_exists("../shared/seeds/manifest-lfm2-hybrid-q4.json")) return "../shared/seeds/manifest-lfm2-hybrid-q4.json";
  return "assets/lfm2-hybrid-q4.manifest.json";
}

const char *fixture_seed_profile(void) {
  static const char *shared = "../shared/seeds/profile-qwen-3-5-2b-metal-throughput.json";
  if (wisp_path_exists(shared)) return shared;
  return "tests/data/plan/seeds/profile-qwen-3-5-2b-metal-throughput.json";
}

float *fixture_cpu_logits(const char *dir, const int32_t *ids, int n_prefill, int n_decode, int threads,
                          const char *profile, int *vocab) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  float *out = NULL;
  if (wisp_model_open(dir, &m) != WISP_OK) return NULL;
  wisp_session_options o = {.backend = "cpu", .threads = threads, .profile = profile};
  if (wisp_session_new(m, &o, &s) == WISP_OK) {
    const int V = wisp_model_vocab(m);
    out = malloc(sizeof(float) * (size_t)V * (size_t)(1 + n_decode));
    int ok = out && wisp_session_eval(s, ids, n_prefill, out) == WISP_OK;
    for (int k = 0; ok && k < n_decode; k++)
      ok = wisp_session_eval(s, ids + n_prefill + k, 1, out + (size_t)V * (size_t)(1 + k)) == WISP_OK;
    if (!ok) {
      free(out);
      out = NULL;
    }
    *vocab = V;
  }
  wisp_session_free(s);
  wisp_model_close(m);
  return out;
}

/* Compares the logits of threads 2, 4 and 5 with those of 1 thread. */
int fixture_cpu_thread_invariant(const char *dir, const int32_t *ids, int n_prefill, int n_decode,
                                      const char *profile, char *why, size_t cap) {
  int V = 0;
  float *one = fixture_cpu_logits(dir, ids, n_prefill, n_decode, 1, profile, &V);
  if (!one) return snprintf(why, cap, "1 thread: %s", wisp_last_error()), 0;
  const size_t n = (size_t)V * (size_t)(1 + n_decode);
  /* the steps must see different contexts, or equal logits mean little */
  int moved = n_decode > 0 && memcmp(one, one + V, sizeof(float) * (size_t)V) != 0;
  int ok = moved;
  if (!moved) snprintf(why, cap, "the decode step's logits equal the prefill's");
  const int counts[3] = {2, 4, 5};
  for (int c = 0; ok && c < 3; c++) {
    int V2 = 0;
    float *got = fixture_cpu_logits(dir, ids, n_prefill, n_decode, counts[c], profile, &V2);
    if (!got) {
      snprintf(why, cap, "%d threads: %s", counts[c], wisp_last_error());
      ok = 0;
    } else if (V2 != V || memcmp(got, one, n * sizeof(float))) {
      size_t i = 0;
      while (i < n && got[i] == one[i]) i++;
      snprintf(why, cap, "%d threads: logit %zu (step %zu) is %.9g, 1 thread %.9g", counts[c], i % (size_t)V,
               i / (size_t)V, i < n ? got[i] : 0.0, i < n ? one[i] : 0.0);
      ok = 0;
    }
    free(got);
  }
  free(one);
  return ok;
}

int fixture_rehash(const char *dir) {
  char path[1024], *text = NULL;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  if (wisp_read_file(path, &text, NULL)) return -1;
  cJSON *m = cJSON_Parse(text);
  free(text);
  const uint8_t *w = NULL;
  size_t len = 0;
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  if (!m || wisp_map_file(path, &w, &len)) { cJSON_Delete(m); return -1; }
  cJSON *e;
  cJSON_ArrayForEach(e, cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(m, "runtime"), "sections")) {
    double off = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "offset"));
    double sz = cJSON_GetNumberValue(cJSON_GetObjectItemCaseSensitive(e, "bytes"));
    if (!(off >= 0 && sz >= 0 && off + sz <= (double)len) || !cJSON_GetObjectItemCaseSensitive(e, "sha256")) continue;
    char hex[65];
    wisp_sha256_hex(w ? w + (size_t)off : (const uint8_t *)"", (size_t)sz, hex);
    cJSON_ReplaceItemInObjectCaseSensitive(e, "sha256", cJSON_CreateString(hex));
  }
  char hex[65];
  wisp_sha256_hex(w ? (const void *)w : "", len, hex);
  wisp_unmap_file(w, len);
  cJSON *ext = cJSON_GetObjectItemCaseSensitive(m, "wisp");
  if (ext && cJSON_GetObjectItemCaseSensitive(ext, "weightsSha256"))
    cJSON_ReplaceItemInObjectCaseSensitive(ext, "weightsSha256", cJSON_CreateString(hex));
  char *out = cJSON_Print(m);
  cJSON_Delete(m);
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  int rc = out && wisp_write_file_atomic(path, out, strlen(out)) == WISP_OK ? 0 : -1;
  free(out);
  return rc;
}

cJSON *fixture_read_json(const char *path) {
  char *text = NULL;
  if (wisp_read_file(path, &text, NULL) != WISP_OK) return NULL;
  cJSON *j = cJSON_Parse(text);
  free(text);
  return j;
}
