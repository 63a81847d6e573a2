/* The decode loop: tokens chosen where the logits are and fed to the next
 * step without a readback, a batch per submit, on both backends. */
#include <math.h>
#include <stdlib.h>
#include <sys/stat.h>

#include "backend/sampling.h"
#include "backend/webgpu/wgpu_backend.h"
#include "backend/webgpu/wgpu_products_i8.h"
#include "engine/engine.h"
#include "engine/sampler.h"
#include "fixtures.h"
#include "format/artifact.h"
#include "format/layout.h"
#include "format/synthetic.h"
#include "test.h"
#include "util/file.h"
#include "webgpu_fixture.h"

/* Greedy tokens by the host path: eval one token, argmax, repeat. */
static int host_greedy(wisp_session *s, const int32_t *prompt, int np, int n, int32_t *out) {
  int vocab = wisp_model_vocab(s->model);
  float *logits = malloc(sizeof(float) * (size_t)vocab);
  int ok = wisp_session_eval(s, prompt, np, logits) == WISP_OK;
  for (int i = 0; ok && i < n; i++) {
    out[i] = (int32_t)wisp_argmax(logits, vocab);
    ok = wisp_session_eval(s, &out[i], 1, logits) == WISP_OK;
  }
  free(logits);
  return ok;
}

/* First token from the prompt's logits, then the decode loop. */
static int loop_tokens(wisp_session *s, const int32_t *prompt, int np, int n, const wisp_generate_options *o,
                       int32_t *out) {
  char err[600] = "";
  int ok = test_decode(s, prompt, np, n, o, out, NULL, NULL, err, sizeof err);
  if (!ok) fprintf(stderr, "     %s\n", err);
  return ok;
}

static const int32_t k_prompt[5] = {72, 101, 108, 108, 111};

/* Logits of the whole model after a long decode, relative to max|logit|.
 * Measured on lavapipe: 3e-7 to 1.5e-6 of max|logit| after 100 to 128
 * tokens (the float sums' order is all that differs). 1e-3, the per-step
 * tolerance of test_webgpu_backend.c, is too loose for a random model:
 * with the persistent kernel leaving some of the seed's SwiGLU outputs
 * (rows past 2,048 of 2,560) unwritten, the logits moved by only 7.8e-4
 * of max|logit|, and not one token changed. */
#define TOL_LOGITS 1e-4

TEST(decode_loop_greedy_matches_host_path_for_any_batch) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session *s = NULL;
  CHECK(wisp_session_new(m, NULL, &s) == WISP_OK);
  int32_t ref[40], got[40];
  CHECK(host_greedy(s, k_prompt, 5, 40, ref));
  int batches[] = {1, 7, 64};
  for (int b = 0; b < 3; b++) {
    wisp_session_reset(s);
    wisp_generate_options o = {.temperature = 0, .batch = batches[b]};
    CHECK(loop_tokens(s, k_prompt, 5, 40, &o, got));
    CHECKF(memcmp(ref, got, sizeof ref) == 0, "batch %d differs", batches[b]);
    CHECK(wisp_session_position(s) == 5 + 39);
  }
  wisp_session_free(s);
  wisp_model_close(m);
}

/* A stop token inside a batch: the loop returns the tokens through the stop
 * and rewinds the state (snapshot before the batch, the kept steps run
 * again), so the session continues exactly as the per-token path would. */
static void stop_rewinds(const char *backend, const char *tuning, int batch, int sequential) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session_options so = {.backend = backend, .tuning = tuning};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &so, &s) == WISP_OK, "%s", wisp_last_error());
  int32_t ref[24];
  CHECK(host_greedy(s, k_prompt, 5, 24, ref));
  /* stop at the 6th generated token (ref[6] after first = ref[0]) */
  wisp_session_reset(s);
  float logits[512];
  CHECK(wisp_session_eval(s, k_prompt, 5, logits) == WISP_OK);
  int32_t stop = ref[6], out[19];
  int first_stop = 1;
  while (first_stop < 6 && ref[first_stop] != stop) first_stop++;
  wisp_generate_options o = {.temperature = 0, .batch = batch, .stop = &stop, .n_stop = 1, .sequential = sequential};
  int made = 0;
  CHECK(wisp_session_generate(s, ref[0], 19, &o, out, &made) == WISP_OK);
  CHECKF(made == first_stop && out[made - 1] == stop, "%s batch %d: made %d, first stop at %d", backend, batch, made,
         first_stop);
  CHECK(!s->ran_past_stop);
  CHECKF(wisp_session_position(s) == 5 + first_stop, "%s batch %d: position %d after the rewind, want %d", backend,
         batch, wisp_session_position(s), 5 + first_stop);
  /* continue from the stop token: the host path's tokens */
  int32_t t = stop;
  for (int i = first_stop + 1; i < 20; i++) {
    CHECK(wisp_session_eval(s, &t, 1, logits) == WISP_OK);
    t = (int32_t)wisp_argmax(logits, wisp_model_vocab(m));
    CHECKF(t == ref[i], "%s batch %d: after the rewind, token %d is %d, want %d", backend, batch, i, t, ref[i]);
    if (t != ref[i]) break;
  }
  wisp_session_free(s);
  wisp_model_close(m);
}

TEST(decode_loop_stop_token_rewinds_the_state) {
  stop_rewinds("cpu", NULL, 8, 1);
  stop_rewinds("cpu", NULL, 4, 1);
}

TEST(sampling_reference_properties) {
  float l[64];
  uint64_t st = 5;
  for (int i = 0; i < 64; i++) l[i] = test_rand_float(&st) * 4;
  int best = wisp_argmax(l, 64);
  wisp_sampling g = {0};
  CHECK(wisp_sample_reference(l, 64, &g, 0) == best);
  wisp_sampling k1 = {.temperature = 3, .top_k = 1, .top_p = 1, .seed = 9};
  for (uint32_t step = 0; step < 50; step++) CHECK(wisp_sample_reference(l, 64, &k1, step) == best);
  /* top-k 5: only the 5 best ever drawn */
  int rank[64];
  for (int i = 0; i < 64; i++) {
    rank[i] = 0;
    for (int j = 0; j < 64; j++) rank[i] += l[j] > l[i];
  }
  wisp_sampling k5 = {.temperature = 2, .top_k = 5, .top_p = 1, .seed = 3};
  for (uint32_t step = 0; step < 400; step++) CHECK(rank[wisp_sample_reference(l, 64, &k5, step)] < 5);
  /* temperature 1 over two tokens with logits 0 and log 3: p = 1/4, 3/4 */
  float two[2] = {0, logf(3)};
  wisp_sampling t1 = {.temperature = 1, .top_p = 1, .seed = 11};
  int ones = 0;
  for (uint32_t step = 0; step < 20000; step++) ones += wisp_sample_reference(two, 2, &t1, step);
  CHECK_NEAR(ones / 20000.0, 0.75, 0.015);
  /* top-p 0.5 keeps only the dominant token; min-p 0.3 keeps exactly the top two */
  float four[4] = {3, 2, 1, 0};
  wisp_sampling tp = {.temperature = 1, .top_p = 0.5f, .seed = 2}, mp = {.temperature = 1, .top_p = 1, .min_p = 0.3f, .seed = 2};
  int seen[4] = {0};
  for (uint32_t step = 0; step < 2000; step++) {
    CHECK(wisp_sample_reference(four, 4, &tp, step) == 0);
    seen[wisp_sample_reference(four, 4, &mp, step)]++;
  }
  CHECK(seen[0] && seen[1] && !seen[2] && !seen[3]);
}

/* The CPU backend's greedy sample_id splits a large vocabulary into ranges
 * over its threads: the id must stay the reference's first maximum, ties
 * across ranges included, and one non-finite logit anywhere must give
 * WISP_ID_NONFINITE. */
static uint32_t cpu_greedy_id(wisp_backend *be, wisp_buf *lb, wisp_buf *ids, int V) {
  wisp_sampling greedy = {.top_p = 1, .seed = 1};
  be->sample_id(be, lb, V, &greedy, 0, ids, 0);
  float f;
  be->buf_read(be, ids, 0, 1, &f);
  uint32_t id;
  memcpy(&id, &f, 4);
  return id;
}

TEST(decode_loop_cpu_greedy_over_threads_matches_reference) {
  enum { V = 250000 };
  static float l[V];
  wisp_backend *be = NULL;
  CHECKF(wisp_cpu_backend_new(4, &be) == WISP_OK, "%s", wisp_last_error());
  wisp_buf *lb = be->buf_new(be, V), *ids = be->buf_new(be, 1);
  uint64_t st = 5;
  for (int i = 0; i < V; i++) l[i] = test_rand_float(&st) * 6;
  wisp_sampling greedy = {.top_p = 1, .seed = 1};
  const int ties[][2] = {{200000, 90000}, {16384, 16383}, {249999, 3}, {40000, 40001}};
  for (int c = 0; c < 4; c++) {
    l[ties[c][0]] = l[ties[c][1]] = 7.0f + (float)c; /* a tie: the lower index wins */
    be->buf_write(be, lb, 0, V, l);
    int want = wisp_sample_reference(l, V, &greedy, 0);
    uint32_t got = cpu_greedy_id(be, lb, ids, V);
    int lower = ties[c][0] < ties[c][1] ? ties[c][0] : ties[c][1];
    CHECKF(want == lower && got == (uint32_t)want, "case %d: got %u, reference %d", c, got, want);
  }
  l[123456] = NAN;
  be->buf_write(be, lb, 0, V, l);
  CHECK(cpu_greedy_id(be, lb, ids, V) == WISP_ID_NONFINITE);
  l[123456] = 0;
  l[V - 1] = INFINITY;
  be->buf_write(be, lb, 0, V, l);
  CHECK(cpu_greedy_id(be, lb, ids, V) == WISP_ID_NONFINITE);
  be->buf_free(be, lb);
  be->buf_free(be, ids);
  be->destroy(be);
}

TEST(decode_loop_webgpu_sampler_matches_reference) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts opts = {.device = d, .subgroups = -1};
  wisp_backend *be = NULL;
  CHECKF(wisp_wgpu_backend_new(&opts, &be) == WISP_OK, "%s", wisp_last_error());
  enum { V = 5000 };
  static float l[V];
  uint64_t st = 77;
  for (int i = 0; i < V; i++) l[i] = test_rand_float(&st) * 6;
  l[4321] = l[17] = 9; /* a tie: the lower index wins */
  wisp_buf *lb = be->buf_new(be, V), *ids = be->buf_new(be, 4);
  be->buf_write(be, lb, 0, V, l);
  wisp_sampling cases[] = {{.top_p = 1, .seed = 1},
                           {.temperature = 0.8f, .top_k = 40, .top_p = 0.9f, .seed = 5},
                           {.temperature = 1.3f, .top_p = 0.7f, .min_p = 0.02f, .seed = 6},
                           {.temperature = 1.0f, .top_k = 3, .top_p = 1, .seed = 7}};
  int mismatches = 0, total = 0;
  for (size_t c = 0; c < sizeof cases / sizeof cases[0]; c++)
    for (uint32_t step = 0; step < 24; step++) {
      be->sample_id(be, lb, V, &cases[c], step, ids, 1);
      CHECK(be->sync(be) == WISP_OK);
      float got_f;
      be->buf_read(be, ids, 1, 1, &got_f);
      uint32_t got;
      memcpy(&got, &got_f, 4);
      int want = wisp_sample_reference(l, V, &cases[c], step);
      if (c == 0) CHECK(want == 17 && got == 17);
      mismatches += (int)got != want;
      total++;
    }
  be->buf_free(be, lb);
  be->buf_free(be, ids);
  be->destroy(be);
  /* Same algorithm and noise; only float summation order differs, which can
   * move a threshold across a token in rare cases. */
  CHECKF(mismatches <= total / 50, "%d of %d draws differ", mismatches, total);
}

TEST(decode_loop_webgpu_matches_cpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t a[33], b[33], c[33], e[33];
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu"}, gpu = {.backend = "webgpu"};
  wisp_generate_options greedy = {.temperature = 0, .batch = 16};
  wisp_generate_options sampled = {.temperature = 0.9f, .top_k = 40, .top_p = 0.95f, .seed = 42, .batch = 11};
  CHECK(wisp_session_new(m, &cpu, &s) == WISP_OK);
  CHECK(loop_tokens(s, k_prompt, 5, 33, &greedy, a));
  wisp_session_reset(s);
  CHECK(loop_tokens(s, k_prompt, 5, 33, &sampled, c));
  wisp_session_free(s);
  CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
  CHECK(loop_tokens(s, k_prompt, 5, 33, &greedy, b));
  wisp_session_reset(s);
  CHECK(loop_tokens(s, k_prompt, 5, 33, &sampled, e));
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(memcmp(a, b, sizeof a) == 0);
  int same = 0;
  for (int i = 0; i < 33; i++) same += c[i] == e[i];
  CHECKF(same >= 31, "sampled tokens: %d of 33 agree", same);
}

/* The decode loop with the packed-f16 KV cache (tuning kv=f16): greedy
 * tokens equal to the host path on the same backend. */
TEST(decode_loop_webgpu_kv16) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t a[33], b[33], c[33];
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu"}, gpu = {.backend = "webgpu", .tuning = "kv=f16"};
  wisp_generate_options greedy = {.temperature = 0, .batch = 16};
  CHECK(wisp_session_new(m, &cpu, &s) == WISP_OK);
  CHECK(loop_tokens(s, k_prompt, 5, 33, &greedy, a));
  wisp_session_free(s);
  wisp_status st = wisp_session_new(m, &gpu, &s);
  CHECKF(st == WISP_OK, "%s", wisp_last_error());
  CHECK(loop_tokens(s, k_prompt, 5, 33, &greedy, b));
  wisp_session_reset(s);
  CHECK(host_greedy(s, k_prompt, 5, 33, c));
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(memcmp(b, c, sizeof b) == 0);
  CHECK(memcmp(a, b, sizeof a) == 0);
}

/* Greedy decode with the head product and the token choice fused (argmax
 * partials in the head matvec) gives the same tokens as without
 * (tuning fuseArgmax=0), and the fusion is really used (op by op:
 * the persistent decode, on by default for batches, is turned off). */
TEST(decode_loop_webgpu_fused_argmax) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t a[40], b[40];
  wisp_session *s = NULL;
  wisp_session_options gpu = {.backend = "webgpu", .tuning = "persist=0"};
  wisp_generate_options greedy = {.temperature = 0, .batch = 13};
  CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
  CHECK(loop_tokens(s, k_prompt, 5, 40, &greedy, a));
  wisp_wgpu_backend_stats st = {0};
  CHECK(wisp_wgpu_backend_stats_get(s->backend, &st));
  wisp_session_free(s);
  CHECKF(st.argmax_fused == 39, "%llu fused argmax", (unsigned long long)st.argmax_fused);
  gpu.tuning = "persist=0,fuseArgmax=0";
  wisp_status rc = wisp_session_new(m, &gpu, &s);
  CHECKF(rc == WISP_OK, "%s", wisp_last_error());
  CHECK(loop_tokens(s, k_prompt, 5, 40, &greedy, b));
  CHECK(wisp_wgpu_backend_stats_get(s->backend, &st));
  wisp_session_free(s);
  wisp_model_close(m);
  CHECK(st.argmax_fused == 0);
  CHECK(memcmp(a, b, sizeof a) == 0);
}

/* With tuning decodeKick=4 the first batch of a pipelined generate goes to
 * the device in growing chunks (decode_loop.c, first_batch_kick): a
 * 32-token first batch is sent after steps 4, 12 and 28 and then read back
 * whole, so three submits more than without (the default), the same tokens
 * (the CPU's), and the second batch in one submit as before. Op by op (the
 * persistent decode off). */
TEST(decode_loop_webgpu_first_batch_goes_out_in_chunks) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t want[41], got[2][41];
  uint64_t submits[2] = {0, 0};
  wisp_session *s = NULL;
  wisp_session_options cpu = {.backend = "cpu"}, gpu = {.backend = "webgpu"};
  wisp_generate_options greedy = {.temperature = 0, .batch = 32};
  CHECK(wisp_session_new(m, &cpu, &s) == WISP_OK);
  CHECK(loop_tokens(s, k_prompt, 5, 41, &greedy, want));
  wisp_session_free(s);
  char err[600] = "";
  for (int i = 0; i < 2; i++) {
    gpu.tuning = i == 0 ? "persist=0,decodeKick=4" : "persist=0";
    wisp_status st = wisp_session_new(m, &gpu, &s);
    CHECKF(st == WISP_OK, "%s", wisp_last_error());
    int ok = test_decode(s, k_prompt, 5, 41, &greedy, got[i], NULL, &submits[i], err, sizeof err);
    wisp_session_free(s);
    CHECKF(ok, "%s", err);
  }
  wisp_model_close(m);
  CHECK(memcmp(want, got[0], sizeof want) == 0 && memcmp(want, got[1], sizeof want) == 0);
  CHECKF(submits[0] == submits[1] + 3, "%llu submits in chunks, %llu without", (unsigned long long)submits[0],
         (unsigned long long)submits[1]);
}

static void edit_candidate_unfused(cJSON *m) {
  cJSON *c = cJSON_AddObjectToObject(m, "candidate");
  cJSON_AddBoolToObject(c, "convFuse", 0);
  cJSON_AddNumberToObject(c, "flashBlocks", 2);
}

/* The manifest's tuned candidate reaches the backend through the plan:
 * convFuse false unfuses the decode conv (more dispatches, same tokens;
 * op by op, the persistent decode off). */
TEST(decode_loop_manifest_candidate_drives_the_webgpu_backend) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *dir = fixture_variant("candidate-unfused", edit_candidate_unfused, 0);
  CHECK(dir);
  wisp_model *fused_m = NULL, *unfused_m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &fused_m) == WISP_OK);
  CHECK(wisp_model_open(dir, &unfused_m) == WISP_OK);
  wisp_session_options gpu = {.backend = "webgpu", .tuning = "persist=0"};
  wisp_session *a = NULL, *b = NULL;
  CHECKF(wisp_session_new(fused_m, &gpu, &a) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_session_new(unfused_m, &gpu, &b) == WISP_OK);
  const wisp_plan *pb = wisp_session_plan(b);
  CHECK(!pb->conv_fuse && !strcmp(pb->conv_fuse_from, "manifest candidate") && pb->flash_blocks == 2);
  CHECK(wisp_session_plan(a)->conv_fuse);
  CHECK(strstr(pb->json, "\"shortconv/wgsl\"") != NULL && strstr(pb->json, "wgsl_fused_in_proj") == NULL);
  int32_t ta[20], tb[20];
  wisp_generate_options o = {.temperature = 0, .batch = 4};
  wisp_wgpu_backend_stats s0, s1, s2, s3;
  wisp_wgpu_backend_stats_get(a->backend, &s0);
  CHECK(loop_tokens(a, k_prompt, 5, 20, &o, ta));
  wisp_wgpu_backend_stats_get(a->backend, &s1);
  wisp_wgpu_backend_stats_get(b->backend, &s2);
  CHECK(loop_tokens(b, k_prompt, 5, 20, &o, tb));
  wisp_wgpu_backend_stats_get(b->backend, &s3);
  wisp_session_free(a);
  wisp_session_free(b);
  wisp_model_close(fused_m);
  wisp_model_close(unfused_m);
  CHECK(memcmp(ta, tb, sizeof ta) == 0);
  CHECKF(s3.dispatches - s2.dispatches > s1.dispatches - s0.dispatches, "unfused %llu vs fused %llu dispatches",
         (unsigned long long)(s3.dispatches - s2.dispatches), (unsigned long long)(s1.dispatches - s0.dispatches));
}

/* The pipelined loop (next batch recorded while the device runs the
 * current one) gives the sequential loop's tokens for every batch size and
 * with sampling; a stop token ends it with the tokens up to the stop and
 * the state rewound (a batch was in flight). */
TEST(decode_loop_webgpu_pipelined_matches_sequential) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session_options gpu = {.backend = "webgpu"};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &gpu, &s) == WISP_OK, "%s", wisp_last_error());
  CHECK(s->backend->read_start != NULL);
  int32_t seq[33], pip[33];
  int batches[] = {1, 3, 8};
  for (int b = 0; b < 3; b++) {
    for (int temp = 0; temp < 2; temp++) {
      wisp_generate_options o = {.temperature = temp ? 0.8f : 0, .top_k = 20, .seed = 7, .batch = batches[b]};
      o.sequential = 1;
      wisp_session_reset(s);
      CHECK(loop_tokens(s, k_prompt, 5, 33, &o, seq));
      double wait_seq = s->loop_wait_s;
      o.sequential = 0;
      wisp_session_reset(s);
      CHECK(loop_tokens(s, k_prompt, 5, 33, &o, pip));
      int at = 0;
      while (at < 33 && seq[at] == pip[at]) at++;
      CHECKF(at == 33, "batch %d temp %d: pipelined tokens differ from index %d (%d vs %d)", batches[b], temp, at,
             at < 33 ? seq[at] : 0, at < 33 ? pip[at] : 0);
      CHECK(wisp_session_position(s) == 5 + 32);
      CHECK(s->loop_wait_s > wait_seq); /* the pipelined run waited on its readbacks too */
    }
  }
  /* A stop token at index 9 of the greedy run, batch 4: tokens up to the
   * stop, and the session refuses more until reset. */
  wisp_generate_options o = {.temperature = 0, .batch = 4};
  wisp_session_reset(s);
  CHECK(loop_tokens(s, k_prompt, 5, 33, &o, seq));
  int32_t stop = seq[10];
  int first = 1;
  while (first < 10 && seq[first] != stop) first++;
  wisp_session_reset(s);
  float *logits = malloc(sizeof(float) * (size_t)wisp_model_vocab(m));
  CHECK(wisp_session_eval(s, k_prompt, 5, logits) == WISP_OK);
  int made = 0;
  wisp_generate_options os = {.temperature = 0, .batch = 4, .stop = &stop, .n_stop = 1};
  CHECK(wisp_session_generate(s, seq[0], 32, &os, pip, &made) == WISP_OK);
  CHECKF(made == first && pip[made - 1] == stop && memcmp(pip, seq + 1, sizeof(int32_t) * (size_t)made) == 0,
         "stopped after %d tokens, expected %d", made, first);
  CHECK(!s->ran_past_stop); /* rewound: the batch in flight and the steps past the stop undone */
  CHECKF(wisp_session_position(s) == 5 + made, "position %d after the rewind, want %d", wisp_session_position(s),
         5 + made);
  free(logits);
  wisp_session_free(s);
  wisp_model_close(m);
}

TEST(decode_loop_webgpu_stop_token_rewinds_the_state) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  stop_rewinds("webgpu", NULL, 8, 1); /* sequential, the stop inside a batch */
  stop_rewinds("webgpu", NULL, 4, 0); /* pipelined: the next batch is in flight too */
  stop_rewinds("webgpu", NULL, 6, 0); /* pipelined, the stop token at a batch's end */
}

/* ---- the persistent decode (wgpu_persist.c) ---- */

/* A WebGPU session with the persistent decode forced on (lavapipe leaves it
 * off by default) with `grid` workgroups and further tuning keys `more`
 * (NULL: none; e.g. "kv=f16"). */
static wisp_session *persist_session(wisp_model *m, const char *grid, const char *more) {
  char tuning[256];
  snprintf(tuning, sizeof tuning, "persist=1,persistGrid=%s%s%s", grid, more ? "," : "", more ? more : "");
  wisp_session_options gpu = {.backend = "webgpu", .tuning = tuning};
  wisp_session *s = NULL;
  wisp_status st = wisp_session_new(m, &gpu, &s);
  if (st) fprintf(stderr, "     session: %s\n", wisp_last_error());
  return st ? NULL : s;
}

/* n greedy tokens of the CPU backend's decode loop after k_prompt. */
static int cpu_loop_tokens(wisp_model *m, int n, int32_t *out) {
  wisp_session_options cpu = {.backend = "cpu"};
  wisp_session *s = NULL;
  wisp_generate_options greedy = {.temperature = 0, .batch = 16};
  int ok = wisp_session_new(m, &cpu, &s) == WISP_OK && loop_tokens(s, k_prompt, 5, n, &greedy, out);
  wisp_session_free(s);
  return ok;
}

static uint64_t persistent_steps(wisp_session *s) {
  wisp_wgpu_backend_stats st = {0};
  return wisp_wgpu_backend_stats_get(s->backend, &st) ? st.persistent_steps : 0;
}

/* Grid barriers that gave up, or grids the probe found smaller than asked:
 * on lavapipe a loaded machine deschedules a workgroup's thread for longer
 * than the barrier waits, which is the kernel's fallback doing its job, not
 * a wrong result; the tests then try again rather than fail on load. */
static uint64_t persistent_gave_up(wisp_session *s) {
  wisp_wgpu_backend_stats st = {0};
  return wisp_wgpu_backend_stats_get(s->backend, &st) ? st.persistent_gave_up : 0;
}

/* n greedy tokens (k_prompt first) of persistent sessions on grid `grid`
 * under tuning `more`, decode batches of `batch`: up to 4 tries, until a
 * run's barrier did not give up or every step after the first was still
 * persistent (persistent_gave_up: on a loaded machine the fallback, not a
 * wrong result). ref: the tokens each try must give (label names the
 * case), or NULL. got: the last try's tokens; *steps its persistent steps;
 * *settled 1 where a try settled (0 when every try gave up, or a check
 * failed: then the test has failed). */
static void persist_tries(wisp_model *m, const char *grid, const char *more, int batch, int n, const int32_t *ref,
                          const char *label, int32_t *got, uint64_t *steps, int *settled) {
  *settled = 0;
  for (int attempt = 0; attempt < 4; attempt++) {
    wisp_session *s = persist_session(m, grid, more);
    CHECK(s != NULL);
    wisp_generate_options o = {.temperature = 0, .batch = batch};
    const int ok = loop_tokens(s, k_prompt, 5, n, &o, got);
    *steps = persistent_steps(s);
    const uint64_t gave_up = persistent_gave_up(s);
    wisp_session_free(s);
    CHECK(ok);
    if (ref) CHECKF(memcmp(ref, got, sizeof *got * (size_t)n) == 0, "%s: tokens differ from the CPU's", label);
    if (!gave_up || *steps == (uint64_t)(n - 1)) {
      *settled = 1;
      return;
    }
  }
}

/* Greedy tokens of the persistent decode equal the CPU backend's, for one
 * and for two workgroups (grid barriers really crossed), batches of 1, 7
 * and 16 steps a dispatch, f32 and f16 KV caches, attention in one and in
 * three key ranges a head (merged by stage_attn), the default and the
 * other OPT code paths, both product engines; and every step after the
 * first really ran in the persistent kernel. */
TEST(decode_loop_webgpu_persistent_matches_cpu) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t ref[33], got[33];
  CHECK(cpu_loop_tokens(m, 33, ref));
  /* The fifth case runs the kernel's other code paths (OPT 0: the serial
   * merge, lane-0 residuals; the default is 1 + 8 + 64 + 128, without
   * 128 on a CPU adapter); the sixth the short-conv
   * and attention phases on the units-split product engine (persistSplit=1:
   * the engine they run on beside Gated DeltaNet layers in a mixed graph).
   * (The grouped-query attention, OPT 32, has its cases in test_gemma3.c
   * and test_webgpu_qswitch.c.) */
  const char *grids[] = {"1", "2", "1", "2", "2", "2"}, *splits[] = {NULL, NULL, NULL, "3", "3", "3"};
  const char *opts[] = {NULL, NULL, NULL, NULL, "0", NULL};
  const int batches[] = {16, 7, 1, 16, 16, 7}, kv16[] = {0, 1, 1, 0, 1, 1}, split[] = {0, 0, 0, 0, 0, 1};
  for (int c = 0; c < 6; c++) {
    char more[128] = "";
    snprintf(more, sizeof more, "kv=%s", kv16[c] ? "f16" : "f32");
    if (splits[c]) snprintf(more + strlen(more), sizeof more - strlen(more), ",persistSplits=%s", splits[c]);
    if (opts[c]) snprintf(more + strlen(more), sizeof more - strlen(more), ",persistOpt=%s", opts[c]);
    if (split[c]) snprintf(more + strlen(more), sizeof more - strlen(more), ",persistSplit=1");
    uint64_t steps = 0;
    int settled = 0;
    char label[96];
    snprintf(label, sizeof label, "grid %s batch %d kv16 %d split %d", grids[c], batches[c], kv16[c], split[c]);
    /* the tokens are the CPU's whether or not the barrier gave up */
    persist_tries(m, grids[c], more, batches[c], 33, ref, label, got, &steps, &settled);
    if (test_failed_now()) break;
    if (!settled) {
      wisp_model_close(m);
      SKIP("grid %s batch %d: the grid barrier gave up on 4 tries (a loaded machine); tokens equal the CPU's, "
           "the all-persistent run unchecked", grids[c], batches[c]);
    }
    CHECKF(steps == 32, "grid %s batch %d: %llu persistent steps, want 32", grids[c], batches[c],
           (unsigned long long)steps);
  }
  wisp_model_close(m);
}

/* tuning persistSkip (timing probes) reaches the kernel: with the head left
 * out (bit 512) every persistent step chooses token 0, where the CPU's
 * loop does not, and the run is not taken for a failed one (all its steps
 * stay persistent). */
TEST(decode_loop_webgpu_persist_skip_leaves_the_head_out) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t ref[9], got[9];
  CHECK(cpu_loop_tokens(m, 9, ref));
  int ref_nonzero = 0;
  for (int i = 1; i < 9; i++) ref_nonzero += ref[i] != 0;
  CHECKF(ref_nonzero > 0, "the CPU's tokens after the first are all 0: the check below could not fail");
  uint64_t steps = 0;
  int settled = 0;
  persist_tries(m, "1", "persistSkip=512", 8, 9, NULL, NULL, got, &steps, &settled);
  wisp_model_close(m);
  if (test_failed_now()) return;
  if (!settled) SKIP("the grid barrier gave up on 4 tries (a loaded machine): persistSkip unchecked");
  CHECKF(got[0] == ref[0], "the prefill's token %d, the CPU's %d", got[0], ref[0]);
  for (int i = 1; i < 9; i++) CHECKF(got[i] == 0, "step %d chose %d with the head left out, want 0", i, got[i]);
  CHECKF(steps == 8, "%llu persistent steps, want 8", (unsigned long long)steps);
}

/* By default (no setting) the persistent decode runs greedy decode batches
 * of any size; tuning persist=0 turns it off; the tokens are the CPU
 * backend's either way. */
TEST(decode_loop_webgpu_persistent_by_default) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t ref[17], got[17];
  CHECK(cpu_loop_tokens(m, 17, ref));
  const int batches[] = {8, 1, 8};
  const char *tuning[] = {NULL, NULL, "persist=0"};
  for (int c = 0; c < 3; c++) {
    wisp_session_options gpu = {.backend = "webgpu", .tuning = tuning[c]};
    wisp_session *s = NULL;
    wisp_status rc = wisp_session_new(m, &gpu, &s);
    CHECKF(rc == WISP_OK, "%s", wisp_last_error());
    if (rc) break;
    wisp_generate_options o = {.temperature = 0, .batch = batches[c]};
    CHECK(loop_tokens(s, k_prompt, 5, 17, &o, got));
    uint64_t steps = persistent_steps(s);
    wisp_session_free(s);
    CHECKF(memcmp(ref, got, sizeof ref) == 0, "case %d: tokens differ from the CPU's", c);
    uint64_t want = c < 2 ? 16 : 0;
    CHECKF(steps == want, "case %d (batch %d): %llu persistent steps, want %llu", c, batches[c],
           (unsigned long long)steps, (unsigned long long)want);
  }
  wisp_model_close(m);
}

/* The state the persistent decode leaves is the session's: after a
 * generate, a prompt evaluated op by op (prefill reads the conv states and
 * KV rows the kernel wrote) and a second generate continue exactly as on
 * the CPU; a stop token inside a batch rewinds as on the op-by-op path. */
TEST(decode_loop_webgpu_persistent_state_continues) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t out[2][3][12];
  const int32_t more[3] = {44, 32, 119};
  for (int b = 0; b < 2; b++) {
    wisp_session_options cpu = {.backend = "cpu"};
    wisp_session *s = NULL;
    if (b == 0) CHECK(wisp_session_new(m, &cpu, &s) == WISP_OK);
    else s = persist_session(m, "2", NULL);
    CHECK(s != NULL);
    if (!s) break;
    wisp_generate_options o = {.temperature = 0, .batch = 5};
    float logits[4096];
    int made = 0;
    CHECK(wisp_session_eval(s, k_prompt, 5, logits) == WISP_OK);
    int32_t first = (int32_t)wisp_argmax(logits, wisp_model_vocab(m));
    CHECK(wisp_session_generate(s, first, 12, &o, out[b][0], &made) == WISP_OK && made == 12);
    CHECK(wisp_session_eval(s, more, 3, logits) == WISP_OK);
    first = (int32_t)wisp_argmax(logits, wisp_model_vocab(m));
    CHECK(wisp_session_generate(s, first, 12, &o, out[b][1], &made) == WISP_OK && made == 12);
    CHECK(wisp_session_generate(s, out[b][1][11], 12, &o, out[b][2], &made) == WISP_OK && made == 12);
    if (b == 1) CHECKF(persistent_steps(s) == 36, "%llu persistent steps", (unsigned long long)persistent_steps(s));
    wisp_session_free(s);
  }
  wisp_model_close(m);
  for (int i = 0; i < 3; i++) CHECKF(memcmp(out[0][i], out[1][i], sizeof out[0][i]) == 0, "part %d differs", i);
  stop_rewinds("webgpu", "persist=1,persistGrid=2", 8, 1);
  stop_rewinds("webgpu", "persist=1,persistGrid=2", 4, 0);
}

/* With stop tokens the decode loop snapshots the recurrent state before
 * each batch. The snapshot reads the state (the arena's newer rows are
 * flushed out first) but writes only the snapshot's own buffers, so the
 * next batch goes on from the arena: one copy-in for the whole generate,
 * not one a batch (each would copy every KV row again). A rewind writes
 * the state and the run after it copies in again. */
TEST(decode_loop_webgpu_persistent_snapshots_keep_the_arena) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t ref[25];
  CHECK(cpu_loop_tokens(m, 25, ref));
  /* a stop token the greedy run never makes: every batch is snapshotted */
  int32_t never = 0;
  for (int used = 1; used;) {
    used = 0;
    for (int i = 0; i < 25; i++) used |= ref[i] == never;
    if (used) never++;
  }
  for (int attempt = 0; attempt < 4; attempt++) {
    wisp_session *s = persist_session(m, "2", NULL);
    CHECK(s != NULL);
    if (!s) break;
    float logits[4096];
    CHECK(wisp_session_eval(s, k_prompt, 5, logits) == WISP_OK);
    int32_t out[24];
    int made = 0;
    wisp_generate_options o = {.temperature = 0, .batch = 6, .stop = &never, .n_stop = 1};
    CHECK(wisp_session_generate(s, (int32_t)wisp_argmax(logits, wisp_model_vocab(m)), 24, &o, out, &made) == WISP_OK);
    wisp_wgpu_backend_stats st = {0};
    CHECK(wisp_wgpu_backend_stats_get(s->backend, &st));
    wisp_session_free(s);
    if (st.persistent_gave_up) continue; /* a loaded machine: the fallback ran, try again */
    CHECKF(made == 24 && memcmp(out, ref + 1, sizeof out) == 0, "the tokens differ from the CPU's (%d made)", made);
    CHECKF(st.persistent_steps == 24, "%llu persistent steps, want 24", (unsigned long long)st.persistent_steps);
    CHECKF(st.persistent_copy_ins == 1, "%llu copies of the state into the arena for 4 snapshotted batches, want 1",
           (unsigned long long)st.persistent_copy_ins);
    break;
  }
  wisp_model_close(m);
}

/* A persistent run whose grid barrier gives up (simulated by
 * tuning persistFail=N: run N starts with the timeout flag set and
 * leaves its conv states scribbled on) is decoded again op by op: the
 * batch after it, already in flight, is dropped, the state is put back as
 * the failed run found it (from a copy recorded before each run), and the
 * generate returns the CPU's tokens. The persistent decode stays off for
 * the session after that. The failing run is the first, the second (the KV rows and conv
 * states of the first still only in the persistent decode's arena) or the
 * last of the call (nothing in flight behind it), and the second again
 * with stop-token snapshots. */
TEST(decode_loop_webgpu_persistent_failure_is_redone) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  int32_t ref[17], got[17];
  CHECK(cpu_loop_tokens(m, 17, ref));
  /* the last case has a stop token (one the model does not choose): the
   * loop then snapshots the state before each batch, which copies the
   * persistent decode's state out after every run, the failed one's too */
  static const char *fail[] = {"1", "2", "4", "2"};
  const int32_t never = wisp_model_vocab(m) - 1;
  for (int i = 0; i < 17; i++) CHECK(ref[i] != never);
  for (int f = 0; f < 4; f++) {
    char more[32];
    snprintf(more, sizeof more, "persistFail=%s", fail[f]);
    wisp_session *s = persist_session(m, "2", more);
    CHECK(s != NULL);
    if (!s) break;
    wisp_generate_options greedy = {.temperature = 0, .batch = 4};
    if (f == 3) greedy.stop = &never, greedy.n_stop = 1;
    memset(got, 0, sizeof got);
    int ok = loop_tokens(s, k_prompt, 5, 17, &greedy, got);
    CHECKF(ok, "run %s failing: %s", fail[f], wisp_last_error());
    if (memcmp(ref, got, sizeof ref)) for (int i = 0; i < 17; i++) fprintf(stderr, "%d:%d/%d ", i, ref[i], got[i]);
    CHECKF(memcmp(ref, got, sizeof ref) == 0, "run %s failing: tokens differ from the CPU's", fail[f]);
    uint64_t before = persistent_steps(s);
    CHECKF(before >= (uint64_t)4 * (uint64_t)atoi(fail[f]), "%llu persistent steps", (unsigned long long)before);
    wisp_session_reset(s);
    CHECK(loop_tokens(s, k_prompt, 5, 17, &greedy, got));
    CHECK(memcmp(ref, got, sizeof ref) == 0);
    CHECKF(persistent_steps(s) == before, "%llu persistent steps after the failure, want %llu (off for good)",
           (unsigned long long)persistent_steps(s), (unsigned long long)before);
    wisp_session_free(s);
  }
  wisp_model_close(m);
}

/* Asked for more workgroups than can run at once (lavapipe runs a couple),
 * the grid probe settles on fewer instead of deadlocking the barrier, and
 * a repetition penalty takes the op-by-op path. */
TEST(decode_loop_webgpu_persistent_probe_and_fallback) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session *s = NULL;
  int32_t ref[17], got[17];
  CHECK(cpu_loop_tokens(m, 17, ref));
  wisp_generate_options greedy = {.temperature = 0, .batch = 8};
  s = persist_session(m, "64", NULL);
  CHECK(s != NULL);
  if (s) {
    CHECK(loop_tokens(s, k_prompt, 5, 17, &greedy, got));
    CHECK(memcmp(ref, got, sizeof ref) == 0);
    CHECK(persistent_steps(s) == 16);
    wisp_session_reset(s);
    wisp_generate_options penalized = {.temperature = 0.8f, .top_k = 20, .seed = 3, .batch = 8,
                                       .repeat_penalty = 1.3f, .repeat_last_n = 16};
    CHECK(loop_tokens(s, k_prompt, 5, 17, &penalized, got));
    CHECK(persistent_steps(s) == 16); /* unchanged: the penalty ran op by op */
    wisp_session_free(s);
  }
  wisp_model_close(m);
}

/* With tuning persist=1 sampled decoding runs in the persistent kernel too
 * (the head keeps its logits, workgroup 0 draws as sample.wgsl does,
 * persist.wgsl draw_step), and its tokens are those of the op-by-op draw
 * (tuning persist=0; also what a session without tuning does) for the
 * same seed: top-k alone (the bisection over the whole vocabulary, then
 * the lists), wisp's defaults (min-p first), top-p alone; one and two
 * workgroups (the pick crosses a grid barrier), batches of 8 and 5. */
TEST(decode_loop_webgpu_persistent_sampled_matches_op_by_op) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  enum { N = 25 };
  const wisp_generate_options cases[] = {
      {.temperature = 0.8f, .top_k = 20, .seed = 3, .batch = 8},
      {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f, .seed = 11, .batch = 8},
      {.temperature = 1.2f, .top_p = 0.9f, .seed = 5, .batch = 5}};
  const char *grids[] = {"1", "2", "2"};
  for (int c = 0; c < 3 && !test_failed_now(); c++) {
    int32_t ref[N], got[N];
    wisp_session_options off = {.backend = "webgpu", .tuning = c == 0 ? NULL : "persist=0"};
    wisp_session *s = NULL;
    CHECKF(wisp_session_new(m, &off, &s) == WISP_OK, "%s", wisp_last_error());
    CHECK(loop_tokens(s, k_prompt, 5, N, &cases[c], ref));
    CHECKF(persistent_steps(s) == 0, "case %d: a sampled run went persistent without persist=1", c);
    wisp_session_free(s);
    int distinct = 0;
    for (int i = 1; i < N; i++) distinct += ref[i] != ref[i - 1];
    CHECKF(distinct > 0, "case %d: one token throughout: a sampler stuck on a token would pass", c);
    uint64_t steps = 0;
    int settled = 0;
    for (int attempt = 0; attempt < 4 && !settled && !test_failed_now(); attempt++) {
      s = persist_session(m, grids[c], NULL);
      CHECK(s != NULL);
      if (!s) break;
      CHECK(loop_tokens(s, k_prompt, 5, N, &cases[c], got));
      steps = persistent_steps(s);
      settled = persistent_gave_up(s) == 0;
      wisp_session_free(s);
      /* a batch whose barrier gave up is redone op by op: the same tokens */
      CHECKF(memcmp(ref, got, sizeof ref) == 0, "case %d (grid %s): the persistent draw's tokens differ from the "
             "op-by-op draw's", c, grids[c]);
    }
    if (!test_failed_now() && !settled) {
      wisp_model_close(m);
      SKIP("case %d: the grid barrier gave up on 4 tries (a loaded machine); tokens equal, the all-persistent run "
           "unchecked", c);
    }
    CHECKF(steps == N - 1, "case %d: %llu persistent steps, want %d", c, (unsigned long long)steps, N - 1);
  }
  wisp_model_close(m);
}

/* ---- 128 greedy tokens, WebGPU against the CPU ---- */

/* The largest |got - ref| over n logits (INFINITY when either has a NaN:
 * fmax alone would skip it); *mx gets max|ref|. */
static double logit_error(const float *ref, const float *got, int n, double *mx) {
  double e = 0, m = 0;
  for (int i = 0; i < n; i++) {
    if (isnan(ref[i]) || isnan(got[i])) e = INFINITY;
    m = fmax(m, fabs(ref[i]));
    e = fmax(e, fabs((double)got[i] - ref[i]));
  }
  *mx = m;
  return e;
}

/* n greedy tokens after k_prompt through the decode loop with the plan's
 * batch (as `wisp run`: no batch given), then the logits of one step more
 * (the last token fed back, op by op). *steps: decode steps the persistent
 * kernel ran; *mm8: int8 products recorded (the exact path runs none). */
static int greedy_run(wisp_model *m, const char *backend, const char *tuning, int n, int32_t *out, float *logits,
                      uint64_t *steps, uint64_t *mm8) {
  wisp_session_options so = {.backend = backend, .tuning = tuning};
  wisp_session *s = NULL;
  if (wisp_session_new(m, &so, &s)) {
    fprintf(stderr, "     %s session: %s\n", backend, wisp_last_error());
    return 0;
  }
  wisp_generate_options greedy = {.temperature = 0};
  int ok = loop_tokens(s, k_prompt, 5, n, &greedy, out);
  *steps = persistent_steps(s);
  *mm8 = 0;
  uint64_t quants = 0;
  if (!strcmp(backend, "webgpu")) wisp_wgpu_mm8_counts(s->backend, mm8, &quants);
  if (ok && wisp_session_eval(s, &out[n - 1], 1, logits) != WISP_OK) {
    fprintf(stderr, "     %s eval after the decode loop: %s\n", backend, wisp_last_error());
    ok = 0;
  }
  wisp_session_free(s);
  return ok;
}

/* The WebGPU backend's n greedy tokens (the persistent decode, as `wisp
 * run` decodes; grid: tuning persistGrid, NULL = the default probe)
 * equal the CPU backend's, every decode step really persistent (persist 1;
 * -1: when the device's largest storage binding holds weights.bin; when it
 * does not, the kernel may be unable to bind the weights it needs, and then
 * every step runs op by op, which is what lavapipe does with the seed
 * shape), no int8 product; and the logits of one step more agree within
 * TOL_LOGITS (same argmax), so the state the n - 1 decode steps left is
 * compared too, not only the argmaxes: the synthetic models fall into long
 * runs of one token (the seed-shaped one repeats a single token from the
 * first step on), which a token comparison alone would hardly notice. */
static void greedy_parity(const char *dir, int n, const char *grid, int persist, const char *label) {
  char path[700];
  snprintf(path, sizeof path, "%s/weights.bin", dir);
  struct stat sb;
  CHECKF(stat(path, &sb) == 0, "%s: %s", label, path);
  const int fits = (uint64_t)sb.st_size <= test_webgpu()->info.max_storage_buffer_binding_size;
  const int must_persist = persist == 1 || fits;
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(dir, &m) == WISP_OK, "%s: %s", label, wisp_last_error());
  const int V = wisp_model_vocab(m);
  int32_t *ref = calloc((size_t)n, sizeof(int32_t)), *got = calloc((size_t)n, sizeof(int32_t));
  float *lc = malloc(sizeof(float) * (size_t)V), *lg = malloc(sizeof(float) * (size_t)V);
  uint64_t steps = 0, cpu_steps = 0, mm8 = 0, cpu_mm8 = 0;
  int ok = ref && got && lc && lg && greedy_run(m, "cpu", NULL, n, ref, lc, &cpu_steps, &cpu_mm8);
  if (ok) {
    char tuning[64] = "";
    if (grid) snprintf(tuning, sizeof tuning, "persistGrid=%s", grid);
    ok = greedy_run(m, "webgpu", tuning, n, got, lg, &steps, &mm8);
  }
  wisp_model_close(m);
  int at = 0;
  while (ok && at < n && ref[at] == got[at]) at++;
  double mx = 0, e = ok ? logit_error(lc, lg, V, &mx) : 0;
  const int tc = ok ? wisp_argmax(lc, V) : 0, tg = ok ? wisp_argmax(lg, V) : 0;
  const int32_t want = ok && at < n ? ref[at] : 0, have = ok && at < n ? got[at] : 0;
  int distinct = 0;
  for (int i = 0; ok && i < n; i++) {
    int seen = 0;
    for (int j = 0; j < i && !seen; j++) seen = ref[j] == ref[i];
    distinct += !seen;
  }
  free(ref);
  free(got);
  free(lc);
  free(lg);
  CHECKF(ok, "%s: a run failed", label);
  CHECKF(at == n, "%s: WebGPU token %d of %d is %d, the CPU's %d", label, at, n, have, want);
  CHECKF(steps == (uint64_t)(n - 1) || (!must_persist && steps == 0),
         "%s: %llu persistent steps of %d (weights.bin %lld bytes, bindings up to %llu)", label,
         (unsigned long long)steps, n - 1, (long long)sb.st_size,
         (unsigned long long)test_webgpu()->info.max_storage_buffer_binding_size);
  CHECKF(mm8 == 0, "%s: %llu int8 products (the exact path runs none)", label, (unsigned long long)mm8);
  CHECKF(tc == tg && e <= TOL_LOGITS * mx,
         "%s: after %d tokens, next token cpu %d gpu %d, logit error %.3g of max %.3g", label, n, tc, tg, e, mx);
  printf("     %s: %d greedy tokens (%d distinct) as the CPU's (%s), next-step logit error %.3g of max|logit|\n", label,
         n, distinct, steps ? "persistent decode" : "op by op: the weights exceed one binding", mx > 0 ? e / mx : e);
}

/* 128 greedy tokens on the small synthetic model: the persistent decode
 * with the grid it probes (as `wisp run`), and with two workgroups (grid
 * barriers really crossed; lavapipe's default probe settles on one). */
TEST(decode_loop_webgpu_128_tokens_small_model) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *dir = fixture_small_model();
  CHECK(dir);
  greedy_parity(dir, 128, NULL, 1, "small model");
  greedy_parity(dir, 128, "2", 1, "small model, 2 workgroups");
}

/* The two seed-shape parities below decode fewer tokens in the sanitized
 * build. What ASan and UBSan check there is wisp's host code, and what is
 * particular to the seed shape on the host is all in the first steps: the
 * model made, opened and uploaded (sections of tens of MB), the persistent
 * decode refused (weights past one binding) or laid out for 14 layers near
 * the binding's limit, the head and the token choice over the whole
 * vocabulary. Each further step runs the same host code again while
 * lavapipe spends a fifth of a second or more on the kernels over 100+ MB
 * of weights, the same in both builds and checked token for token by the
 * optimised one. The host side of longer decodes (the attention split
 * over several key tiles and merged) stays under the sanitizers through
 * the small model's tests (decode_loop_manifest_flash_blocks_cap_the_
 * attention_splits: up to four tiles, op by op and persistent). */

/* 64 greedy tokens on the seed-shaped synthetic model (gen-synthetic
 * --like the seed manifest: 14 layers, hidden 1024, vocabulary 65,536,
 * 161 MB of random Q4 weights), through the path `wisp run` takes. The
 * persistent decode needs all weights in one storage binding: on lavapipe
 * (128 MiB) this model's do not fit, and its decode runs op by op (the
 * other test below runs the same layers in the persistent kernel). 64
 * tokens after the 5-token prompt attend over three 32-key tiles; 128 took
 * 77 of the sanitized suite's 710 CPU seconds. The sanitized build decodes
 * 8 (see above): the same host paths but the tiles' merge. */
TEST(decode_loop_webgpu_64_tokens_seed_shaped_model) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char out[4096];
  const char *dir = fixture_seed_shaped_model(out, sizeof out);
  CHECKF(dir, "%s", out);
  greedy_parity(dir, TEST_ASAN ? 8 : 64, NULL, -1, "seed-shaped model");
}

/* The seed manifest with another vocabulary: its runtime.sections laid out
 * again by wisp_layout_lfm2 (checked first to give the seed's own sections
 * back for the seed's vocabulary), written with seeded weights to dir. */
static int seed_layers_model(int vocab, const char *dir, char *err, size_t cap) {
  char *text = NULL, *out = NULL;
  wisp_artifact *a = NULL;
  cJSON *secs[2] = {NULL, NULL};
  uint64_t total[2] = {0, 0};
  int ok = wisp_read_file(fixture_seed_manifest(), &text, NULL) == WISP_OK &&
           wisp_manifest_parse(text, fixture_seed_manifest(), &a) == WISP_OK;
  if (!ok) snprintf(err, cap, "seed manifest: %s", wisp_last_error());
  const wisp_section *cos = ok ? wisp_artifact_section(a, "rope.cos") : NULL;
  const wisp_section *ext = ok ? wisp_artifact_section(a, "rope.cos_ext") : NULL;
  const wisp_section *emb = ok ? wisp_artifact_section(a, "embed.quant") : NULL;
  const wisp_section *head = ok ? wisp_artifact_section(a, "head.quant") : NULL;
  const int half = ok ? a->shape.head_dim / 2 : 1;
  wisp_layout_options lo = {.tied = emb && head && emb->offset == head->offset,
                            .down_transposed = ok && wisp_artifact_section(a, "L0.mlp.down.kquant") != NULL,
                            .rope_rows = cos ? (int)(cos->bytes / 4 / (uint64_t)half) : 0,
                            .rope_ext_rows = ext ? (int)(ext->bytes / 4 / (uint64_t)half) : 0};
  wisp_shape sh = ok ? a->shape : (wisp_shape){0};
  ok = ok && wisp_layout_lfm2(&sh, &lo, &secs[0], &total[0]) == WISP_OK;
  /* the seed's own layout again, section by section */
  int same = ok && total[0] == a->weight_bytes && cJSON_GetArraySize(secs[0]) == a->n_sections;
  for (int i = 0; same && i < a->n_sections; i++) {
    const cJSON *e = cJSON_GetArrayItem(secs[0], i);
    const cJSON *nm = cJSON_GetObjectItemCaseSensitive(e, "name"), *of = cJSON_GetObjectItemCaseSensitive(e, "offset"),
                *by = cJSON_GetObjectItemCaseSensitive(e, "bytes");
    same = cJSON_IsString(nm) && !strcmp(nm->valuestring, a->sections[i].name) && cJSON_IsNumber(of) &&
           (uint64_t)of->valuedouble == a->sections[i].offset && cJSON_IsNumber(by) &&
           (uint64_t)by->valuedouble == a->sections[i].bytes;
  }
  if (ok && !same) snprintf(err, cap, "wisp_layout_lfm2 does not give the seed manifest's sections back");
  ok = ok && same;
  sh.vocab = vocab;
  ok = ok && wisp_layout_lfm2(&sh, &lo, &secs[1], &total[1]) == WISP_OK;
  if (ok) {
    cJSON *rt = cJSON_GetObjectItemCaseSensitive(a->manifest, "runtime");
    cJSON_ReplaceItemInObjectCaseSensitive(rt, "sections", secs[1]);
    secs[1] = NULL;
    cJSON_ReplaceItemInObjectCaseSensitive(rt, "weightBytes", cJSON_CreateNumber((double)total[1]));
    cJSON_ReplaceItemInObjectCaseSensitive(cJSON_GetObjectItemCaseSensitive(rt, "shape"), "vocab",
                                           cJSON_CreateNumber(vocab));
    out = cJSON_Print(a->manifest);
    ok = out && wisp_synthetic_write(out, "seed layers", dir, 5) == WISP_OK;
    if (!ok) snprintf(err, cap, "writing the model: %s", wisp_last_error());
  }
  cJSON_Delete(secs[0]);
  cJSON_Delete(secs[1]);
  wisp_artifact_free(a);
  free(text);
  free(out);
  return ok;
}

/* The seed-shaped model's 14 layers (the seed's sections, but for embed /
 * head) with a vocabulary of 16,384: the persistent kernel's weights come
 * to ~108 MiB, under lavapipe's 128 MiB binding (the seed's own 138 MiB
 * are over it), so the kernel runs the seed's layer shapes here: 64
 * greedy tokens, every step persistent, as the CPU's. The last steps
 * attend over up to 69 keys, past the first round of 64 keys of the
 * streamed attention (attn_stream, one 256-key chunk in rounds of 64):
 * 128 tokens ran no kernel path more, for twice the time. Two workgroups:
 * grid barriers really crossed, and 18 s on lavapipe where the one
 * workgroup the probe settles on for a CPU adapter takes 77 s. The
 * sanitized build decodes 10 tokens (see above the seed-shaped test). */
TEST(decode_loop_webgpu_seed_layers_persistent) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char dir[600], err[600] = "", cmd[700];
  snprintf(dir, sizeof dir, "%s/seed-layers", test_tmpdir());
  CHECKF(seed_layers_model(16384, dir, err, sizeof err), "%s", err);
  greedy_parity(dir, TEST_ASAN ? 10 : 64, "2", 1, "seed layers, vocabulary 16,384");
  snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
  CHECK(system(cmd) == 0);
}

/* ---- flashBlocks ---- */

static void edit_flash_blocks_1(cJSON *m) {
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(m, "candidate"), "flashBlocks", 1);
}

static void edit_flash_blocks_2(cJSON *m) {
  cJSON_AddNumberToObject(cJSON_AddObjectToObject(m, "candidate"), "flashBlocks", 2);
}

/* One WebGPU session of the model in dir: the prompt, n - 1 greedy steps
 * of the decode loop (positions 5 to n + 3), then the logits of one step
 * more. *plan_blocks / *from: the plan's flashBlocks and where it came
 * from; *blocks: the key blocks the decode loop's attentions were split
 * over (stats.attn_splits); *persistent: decode steps the persistent kernel
 * ran. */
static int flash_run(const char *dir, const char *tuning, int n, int32_t *out, float *logits, int *plan_blocks,
                     char *from, size_t cap, uint64_t *blocks, uint64_t *persistent) {
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  wisp_session_options gpu = {.backend = "webgpu", .tuning = tuning};
  int ok = wisp_model_open(dir, &m) == WISP_OK && wisp_session_new(m, &gpu, &s) == WISP_OK;
  if (ok) {
    const wisp_plan *pl = wisp_session_plan(s);
    *plan_blocks = pl->flash_blocks;
    snprintf(from, cap, "%s", pl->flash_blocks_from);
  }
  const int V = m ? wisp_model_vocab(m) : 1;
  ok = ok && wisp_session_eval(s, k_prompt, 5, logits) == WISP_OK;
  out[0] = ok ? (int32_t)wisp_argmax(logits, V) : -1;
  wisp_wgpu_backend_stats s0 = {0}, s1 = {0};
  if (ok) wisp_wgpu_backend_stats_get(s->backend, &s0);
  wisp_generate_options greedy = {.temperature = 0};
  int made = 0;
  ok = ok && wisp_session_generate(s, out[0], n - 1, &greedy, out + 1, &made) == WISP_OK && made == n - 1;
  if (ok) wisp_wgpu_backend_stats_get(s->backend, &s1);
  ok = ok && wisp_session_eval(s, &out[n - 1], 1, logits) == WISP_OK;
  if (!ok) fprintf(stderr, "     %s: %s\n", dir, wisp_last_error());
  *blocks = s1.attn_splits - s0.attn_splits;
  *persistent = s1.persistent_steps;
  wisp_session_free(s);
  wisp_model_close(m);
  return ok;
}

/* The manifest candidate's flashBlocks reaches the backend's decode
 * attention through the plan (wisp_backend_settings.flash_blocks): a
 * token's attention at position p covers p / 32 + 1 key tiles of
 * attn_decode.wgsl and is split over at most flashBlocks of them, so the
 * key blocks recorded (stats.attn_splits) over a 100-token greedy decode
 * (positions 5 to 103, up to 4 tiles) are sum min(tiles, flashBlocks) per
 * attention layer and step: fewer with 2 than with the default 32, none
 * split with 1. The tokens are the CPU backend's in every case, and so are
 * the logits of one step more (within TOL_LOGITS). Op by op first, then
 * through the persistent decode (see there). */
TEST(decode_loop_manifest_flash_blocks_cap_the_attention_splits) {
  WEBGPU_OR_SKIP(d);
  enum { N = 100 };
  /* keys a tile: attn_decode's 32 where it runs (subgroups, 9 storage
   * bindings), else attn_flash's 64 */
  const int kt = d->has_subgroups && d->info.max_storage_buffers_per_shader_stage >= 9 ? 32 : 64;
  const char *dirs[3] = {fixture_small_model(), fixture_variant("flash-blocks-2", edit_flash_blocks_2, 0),
                         fixture_variant("flash-blocks-1", edit_flash_blocks_1, 0)};
  static const int want_blocks[3] = {32, 2, 1};
  static const char *want_from[3] = {"default", "manifest candidate", "manifest candidate"};
  CHECK(dirs[0] && dirs[1] && dirs[2]);
  wisp_model *m = NULL;
  CHECK(wisp_model_open(dirs[0], &m) == WISP_OK);
  const int V = wisp_model_vocab(m);
  int attn_layers = 0;
  for (int l = 0; l < m->artifact->shape.n_layers; l++)
    attn_layers += m->artifact->shape.layer_types[l] == WISP_LAYER_ATTENTION;
  /* the CPU's tokens and next-step logits */
  int32_t ref[N], got[3][N];
  float *lc = malloc(sizeof(float) * (size_t)V), *lg = malloc(sizeof(float) * (size_t)V * 3);
  wisp_session_options cpu = {.backend = "cpu"};
  wisp_session *s = NULL;
  int ok = lc && lg && cpu_loop_tokens(m, N, ref) && wisp_session_new(m, &cpu, &s) == WISP_OK &&
           wisp_session_eval(s, k_prompt, 5, NULL) == WISP_OK && wisp_session_eval(s, ref, N, lc) == WISP_OK;
  wisp_session_free(s);
  wisp_model_close(m);
  int plan_blocks[3] = {0, 0, 0}, run_ok[3] = {0, 0, 0};
  char from[3][64] = {"", "", ""};
  uint64_t blocks[3] = {0, 0, 0}, persistent[3] = {0, 0, 0};
  double worst = 0;
  for (int c = 0; ok && c < 3; c++)
    run_ok[c] = flash_run(dirs[c], "persist=0", N, got[c], lg + (size_t)c * V, &plan_blocks[c], from[c],
                          sizeof from[c], &blocks[c], &persistent[c]);
  CHECKF(ok && attn_layers > 0, "the CPU's run: %s", wisp_last_error());
  for (int c = 0; c < 3; c++) {
    CHECKF(run_ok[c], "flashBlocks %d: the WebGPU run failed", want_blocks[c]);
    CHECKF(plan_blocks[c] == want_blocks[c] && !strcmp(from[c], want_from[c]), "plan: flashBlocks %d from %s, want %d",
           plan_blocks[c], from[c], want_blocks[c]);
    CHECK(persistent[c] == 0);
    uint64_t want = 0;
    for (int pos = 5; pos < 5 + N - 1; pos++) {
      const int tiles = pos / kt + 1;
      want += (uint64_t)attn_layers * (uint64_t)(tiles < want_blocks[c] ? tiles : want_blocks[c]);
    }
    CHECKF(blocks[c] == want, "flashBlocks %d: %llu key blocks recorded over %d decode steps, want %llu",
           want_blocks[c], (unsigned long long)blocks[c], N - 1, (unsigned long long)want);
    int at = 0;
    while (at < N && ref[at] == got[c][at]) at++;
    CHECKF(at == N, "flashBlocks %d: token %d is %d, the CPU's %d", want_blocks[c], at, at < N ? got[c][at] : 0,
           at < N ? ref[at] : 0);
    double mx = 0, e = logit_error(lc, lg + (size_t)c * V, V, &mx);
    CHECKF(e <= TOL_LOGITS * mx, "flashBlocks %d: next-step logit error %.3g of max %.3g", want_blocks[c], e, mx);
    worst = fmax(worst, e / mx);
  }
  CHECKF(blocks[1] < blocks[0] && blocks[2] < blocks[1], "key blocks: %llu (32), %llu (2), %llu (1)",
         (unsigned long long)blocks[0], (unsigned long long)blocks[1], (unsigned long long)blocks[2]);
  printf("     key blocks over %d decode steps: %llu with flashBlocks 32, %llu with 2, %llu with 1; the CPU's "
         "tokens, next-step logit error up to %.3g of max|logit|\n",
         N - 1, (unsigned long long)blocks[0], (unsigned long long)blocks[1], (unsigned long long)blocks[2], worst);
  /* The persistent decode (the default for greedy LFM2) takes the same cap: its splits are
   * n_splits(pos) = min(pos / 32 + 1, nsmax) (persist_mixers.wgsli, 32 keys a block), nsmax
   * its grid's share of the heads (16 here, tuning persistSplits: lavapipe's grid
   * is 1-2 workgroups) capped by flashBlocks. */
  for (int c = 0; c < 3; c++)
    run_ok[c] = flash_run(dirs[c], "persistSplits=16", N, got[c], lg + (size_t)c * V, &plan_blocks[c], from[c],
                          sizeof from[c], &blocks[c], &persistent[c]);
  for (int c = 0; c < 3; c++) {
    CHECKF(run_ok[c] && persistent[c] == N - 1, "flashBlocks %d, persistent: %llu persistent steps",
           want_blocks[c], (unsigned long long)persistent[c]);
    uint64_t want = 0;
    const int cap = want_blocks[c] < 16 ? want_blocks[c] : 16;
    for (int pos = 5; pos < 5 + N - 1; pos++) {
      const int blk = pos / 32 + 1;
      want += (uint64_t)attn_layers * (uint64_t)(blk < cap ? blk : cap);
    }
    CHECKF(blocks[c] == want, "flashBlocks %d, persistent: %llu key blocks over %d decode steps, want %llu",
           want_blocks[c], (unsigned long long)blocks[c], N - 1, (unsigned long long)want);
    CHECKF(!memcmp(got[c], ref, sizeof ref), "flashBlocks %d, persistent: tokens differ from the CPU's",
           want_blocks[c]);
  }
  free(lc);
  free(lg);
}

/* `wisp bench`'s warm-up takes every path its timed run takes: the KV caches
 * grown to the request's length (prompt 200 + decode 100 passes the caches'
 * first 256 positions) and two decode batches (later batches take their
 * input from the device, through a kernel of their own). Where it did not,
 * an H200 receipt's first run paid a pipeline compile and a cache growth
 * inside its timed decode. Counts, not times: a loaded machine cannot fail
 * it. */
TEST(cli_bench_timed_run_compiles_nothing_and_grows_no_cache) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  const char *profiles[] = {"throughput", "exact"};
  for (int i = 0; i < 2 && !test_failed_now(); i++) {
    char cmd[1400], out[8192], path[700];
    snprintf(path, sizeof path, "%s/bench-warm-%s.json", test_tmpdir(), profiles[i]);
    snprintf(cmd, sizeof cmd, "%s bench -m %s --backend webgpu --profile %s --prompt 200 --decode 100 -o %s --force 2>&1",
             test_wisp_bin(), fixture_small_model(), profiles[i], path);
    CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
    cJSON *r = fixture_read_json(path);
    CHECKF(r, "cannot read the receipt %s", path);
    cJSON *c = cJSON_GetObjectItem(r, "compile"), *dec = cJSON_GetObjectItem(r, "decode"),
          *pf = cJSON_GetObjectItem(r, "prefill");
    cJSON *pipes = c ? cJSON_GetObjectItem(c, "pipelines_in_timed_phases") : NULL;
    cJSON *grows = dec ? cJSON_GetObjectItem(dec, "kv_grows") : NULL, *pgrows = pf ? cJSON_GetObjectItem(pf, "kv_grows") : NULL;
    CHECKF(cJSON_IsNumber(pipes) && pipes->valuedouble == 0, "%s: %g pipelines compiled in the timed phases", profiles[i],
           cJSON_IsNumber(pipes) ? pipes->valuedouble : -1.0);
    CHECKF(cJSON_IsNumber(grows) && grows->valuedouble == 0 && cJSON_IsNumber(pgrows) && pgrows->valuedouble == 0,
           "%s: KV caches grown in the timed run: prefill %g, decode %g", profiles[i],
           cJSON_IsNumber(pgrows) ? pgrows->valuedouble : -1.0, cJSON_IsNumber(grows) ? grows->valuedouble : -1.0);
    cJSON_Delete(r);
  }
}
