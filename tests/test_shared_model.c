/* Several sessions over one model (what a server runs): the model is
 * read-only once open, so each session's plan (kernel choices) and its
 * backend's device copies are its own. Two sessions with different plans
 * or backends, created together and stepped in turn, each give the logits
 * it gives alone, bit for bit. */
#include <stdlib.h>
#include <string.h>

#include "engine/engine.h"
#include "fixtures.h"
#include "test.h"
#include "webgpu_fixture.h"

#define PROMPT 5
#define STEPS 3 /* one-token evaluations after the prompt (the decode phase's kernels) */

static const int32_t ids[PROMPT + STEPS] = {87, 105, 115, 112, 32, 105, 110, 103};

typedef struct {
  const char *backend, *profile;
} who;

static wisp_status open_session(wisp_model *m, who w, wisp_session **s) {
  wisp_session_options o = {.backend = w.backend, .threads = 1, .profile = w.profile};
  return wisp_session_new(m, &o, s);
}

/* Call k of a sequence: the prompt (k 0), else token PROMPT + k - 1 alone. */
static wisp_status feed(wisp_session *s, int k, float *logits) {
  return k == 0 ? wisp_session_eval(s, ids, PROMPT, logits) : wisp_session_eval(s, ids + PROMPT + k - 1, 1, logits);
}

/* out[(1 + STEPS) * vocab]: the logits of each call, the session alone on the model. */
static int run_alone(wisp_model *m, who w, float *out, int vocab) {
  wisp_session *s = NULL;
  int ok = open_session(m, w, &s) == WISP_OK;
  for (int k = 0; ok && k <= STEPS; k++) ok = feed(s, k, out + (size_t)k * vocab) == WISP_OK;
  wisp_session_free(s);
  return ok;
}

/* Both sessions made before either runs (the second's plan and backend
 * preparation come after the first's), then their calls in turn: each call
 * gives the logits it gave alone (la, lb from run_alone), bit for bit. */
static void check_together(wisp_model *m, who a, const float *la, who b, const float *lb) {
  const int vocab = wisp_model_vocab(m);
  const size_t n = (size_t)(1 + STEPS) * vocab;
  float *got = calloc(2 * n, sizeof *got);
  CHECK(got);
  wisp_session *sa = NULL, *sb = NULL;
  CHECKF(open_session(m, a, &sa) == WISP_OK, "%s", wisp_last_error());
  CHECKF(open_session(m, b, &sb) == WISP_OK, "%s", wisp_last_error());
  for (int k = 0; k <= STEPS; k++) {
    CHECKF(feed(sa, k, got + (size_t)k * vocab) == WISP_OK, "%s", wisp_last_error());
    CHECKF(feed(sb, k, got + n + (size_t)k * vocab) == WISP_OK, "%s", wisp_last_error());
  }
  wisp_session_free(sa);
  wisp_session_free(sb);
  for (int k = 0; k <= STEPS; k++) {
    CHECKF(!memcmp(got + (size_t)k * vocab, la + (size_t)k * vocab, vocab * sizeof(float)),
           "%s/%s beside %s/%s: call %d's logits differ from its logits alone", a.backend, a.profile, b.backend,
           b.profile, k);
    CHECKF(!memcmp(got + n + (size_t)k * vocab, lb + (size_t)k * vocab, vocab * sizeof(float)),
           "%s/%s beside %s/%s: call %d's logits differ from its logits alone", b.backend, b.profile, a.backend,
           a.profile, k);
  }
  free(got);
}

/* The logits of each session alone, in one block ([count][1 + STEPS][vocab]). */
static float *alone_logits(wisp_model *m, const who *w, int count) {
  const int vocab = wisp_model_vocab(m);
  const size_t n = (size_t)(1 + STEPS) * vocab;
  float *out = calloc(count * n, sizeof *out);
  for (int i = 0; out && i < count; i++)
    if (!run_alone(m, w[i], out + i * n, vocab)) {
      free(out);
      return NULL;
    }
  return out;
}

/* The exact products (default profile) beside the integer products
 * (throughput profile on an AVX2 CPU) on one model. */
TEST(shared_model_cpu_exact_beside_throughput) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  who a = {"cpu", "default"}, b = {"cpu", "throughput"};
  wisp_session *s = NULL;
  CHECK(open_session(m, b, &s) == WISP_OK);
  const int avx2 = wisp_session_plan(s)->device.has_avx2;
  wisp_session_free(s);
  if (!avx2) {
    wisp_model_close(m);
    SKIP("no AVX2: both profiles run the exact products (nothing to tell apart)");
  }
  const who w[2] = {a, b};
  const size_t n = (size_t)(1 + STEPS) * wisp_model_vocab(m);
  float *alone = alone_logits(m, w, 2);
  CHECKF(alone, "%s", wisp_last_error());
  /* the pairing means something only if the two plans give different logits */
  CHECK(memcmp(alone, alone + n, n * sizeof *alone) != 0);
  check_together(m, a, alone, b, alone + n);
  free(alone);
  /* the model's own matrices carry no session's choice */
  CHECK(wisp_graph_matrix(&m->graph, 3, "mlp.down")->choice[WISP_PHASE_DECODE].variant[0] == 0);
  CHECK(wisp_graph_matrix(&m->graph, -1, "head")->device == NULL);
  wisp_model_close(m);
}

/* The same on WebGPU, and one CPU session beside one WebGPU session. */
TEST(shared_model_webgpu_beside_webgpu_and_cpu) {
  WEBGPU_OR_SKIP(dev);
  (void)dev;
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  const who w[3] = {{"webgpu", "default"}, {"webgpu", "throughput"}, {"cpu", "default"}};
  const size_t n = (size_t)(1 + STEPS) * wisp_model_vocab(m);
  float *alone = alone_logits(m, w, 3);
  CHECKF(alone, "%s", wisp_last_error());
  check_together(m, w[0], alone, w[1], alone + n);
  CHECK(memcmp(alone, alone + 2 * n, n * sizeof *alone) != 0); /* the two backends' arithmetic differs */
  check_together(m, w[2], alone + 2 * n, w[0], alone);
  free(alone);
  CHECK(wisp_graph_matrix(&m->graph, 3, "mlp.down")->device == NULL);
  wisp_model_close(m);
}

/* A kernel name the backend does not have stops the session at creation
 * (check_kernel / prepare_matrix), and an op that meets one anyway fails
 * at sync: never a quiet run of another kernel. */
TEST(shared_model_unknown_kernel_is_an_error) {
  wisp_model *m = NULL;
  CHECK(wisp_model_open(fixture_small_model(), &m) == WISP_OK);
  wisp_session *s = NULL;
  CHECK(open_session(m, (who){"cpu", "default"}, &s) == WISP_OK);
  wisp_matrix *w = wisp_graph_matrix(&s->graph, 3, "mlp.down");
  CHECK(w);
  snprintf(w->choice[WISP_PHASE_DECODE].variant, sizeof w->choice[0].variant, "q4_nonesuch");
  CHECK(s->backend->prepare_matrix(s->backend, w) == WISP_EUNSUPPORTED);
  CHECKF(strstr(wisp_last_error(), "q4_nonesuch") != NULL, "%s", wisp_last_error());
  float *logits = calloc((size_t)wisp_model_vocab(m) * PROMPT, sizeof *logits);
  CHECK(wisp_session_eval(s, ids, 1, logits) == WISP_EUNSUPPORTED);
  CHECKF(strstr(wisp_last_error(), "q4_nonesuch") != NULL, "%s", wisp_last_error());
  free(logits);
  wisp_session_free(s);
  wisp_model_close(m);
}
