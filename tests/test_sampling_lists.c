/* The sampler's kept-token lists (src/backend/sampling.c, kernels/
 * sample_draw.wgsli): once a threshold above -64 is known, the later passes
 * walk the tokens at or above it instead of the vocabulary. That must not
 * change a single pick. The oracle is the sampler as sampling.h defines it,
 * written out here the plain way: every pass over the whole vocabulary. */
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "backend/sampling.h"
#include "backend/webgpu/wgpu_backend.h"
#include "test.h"
#include "webgpu_fixture.h"

/* sampling.h's algorithm, each pass over all `vocab` logits. */
static int sample_by_definition(const float *l, int vocab, const wisp_sampling *p, uint32_t step) {
  int best = 0;
  for (int i = 1; i < vocab; i++)
    if (l[i] > l[best]) best = i;
  if (p->temperature <= 0) return best;
  const float m = l[best], inv_t = 1.0f / p->temperature;
  float t = -64.0f;
  if (p->min_p > 0) t = fmaxf(t, logf(p->min_p));
  if (p->top_k > 0 && p->top_k < vocab) {
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      float mid = 0.5f * (lo + hi);
      int cnt = 0;
      for (int i = 0; i < vocab; i++) cnt += (l[i] - m) * inv_t >= mid;
      if (cnt >= p->top_k) lo = mid;
      else hi = mid;
    }
    t = lo;
  }
  if (p->top_p > 0 && p->top_p < 1) {
    float total = 0;
    for (int i = 0; i < vocab; i++) {
      float z = (l[i] - m) * inv_t;
      if (z >= t) total += expf(z);
    }
    float lo = t, hi = 0.0f;
    for (int it = 0; it < 24; it++) {
      float mid = 0.5f * (lo + hi), mass = 0;
      for (int i = 0; i < vocab; i++) {
        float z = (l[i] - m) * inv_t;
        if (z >= mid) mass += expf(z);
      }
      if (mass >= p->top_p * total) lo = mid;
      else hi = mid;
    }
    t = lo;
  }
  int pick = best;
  float top = -INFINITY;
  for (int i = 0; i < vocab; i++) {
    float z = (l[i] - m) * inv_t;
    if (z < t) continue;
    float g = -logf(-logf(wisp_sample_uniform(p->seed, step, (uint32_t)i)));
    if (z + g > top) {
      top = z + g;
      pick = i;
    }
  }
  return pick;
}

static uint64_t next_u64(uint64_t *s) {
  *s = *s * 6364136223846793005ull + 1442695040888963407ull;
  return *s >> 11;
}
static float uniform(uint64_t *s) { return (float)(next_u64(s) >> 29) * (1.0f / 16777216.0f); } /* [0, 1) */

/* Logits of the shapes a sampler meets: flat (most tokens kept), sharp (a
 * few near the top), ties at the top, and "strided": tokens whose index is
 * below 128 modulo 256 near the top, the rest far below, so that in a
 * 256-thread draw half the threads keep many tokens and half a few. */
enum shape { FLAT, SHARP, TIES, STRIDED, N_SHAPES };
static void fill(float *l, int vocab, enum shape sh, uint64_t *s) {
  for (int i = 0; i < vocab; i++) {
    float u = uniform(s);
    switch (sh) {
    case FLAT: l[i] = 4 * u; break;
    case SHARP: l[i] = u < 0.002f ? 12 + 3 * uniform(s) : 6 * u - 6; break;
    case TIES: l[i] = floorf(8 * u) * 0.5f; break;
    default: l[i] = i % 256 < 128 ? 3 * u : 3 * u - 30; break;
    }
  }
}

static const wisp_sampling k_settings[] = {
    {.temperature = 0.8f, .top_k = 40, .top_p = 0.95f, .min_p = 0.05f}, /* wisp's defaults */
    {.temperature = 1.0f, .top_p = 1, .min_p = 0.1f},                   /* min-p alone */
    {.temperature = 0.7f, .top_k = 5, .top_p = 1},                      /* top-k alone: lists after its bisection */
    {.temperature = 1.3f, .top_p = 0.8f},                               /* top-p alone: no list */
    {.temperature = 1.0f, .top_k = 100000, .top_p = 0.9f, .min_p = 0.01f}, /* top-k past the vocabulary */
    {.temperature = 0.5f, .top_k = 3, .top_p = 0.5f, .min_p = 1e-30f},  /* min-p below e^-64: no min-p list */
    {.temperature = 2.0f, .top_p = 1},                                  /* temperature alone */
};
enum { N_SETTINGS = sizeof k_settings / sizeof k_settings[0] };

TEST(sampling_lists_pick_as_the_whole_vocabulary_walk) {
  const int vocabs[] = {7, 1000, 50000};
  uint64_t s = 41;
  int draws = 0, not_best = 0;
  for (int v = 0; v < 3; v++) {
    const int V = vocabs[v];
    float *l = malloc(sizeof(float) * (size_t)V);
    CHECK(l != NULL);
    if (!l) return;
    for (int sh = 0; sh < N_SHAPES; sh++) {
      fill(l, V, (enum shape)sh, &s);
      for (int c = 0; c < N_SETTINGS; c++)
        for (uint32_t step = 0; step < 12; step++) {
          wisp_sampling p = k_settings[c];
          p.seed = (uint32_t)(1000 * c + sh);
          const int want = sample_by_definition(l, V, &p, step), got = wisp_sample_reference(l, V, &p, step);
          CHECKF(got == want, "vocab %d shape %d settings %d step %u: picked %d, the definition %d", V, sh, c, step,
                 got, want);
          draws++;
          not_best += got != wisp_sample_reference(l, V, &(wisp_sampling){.top_p = 1}, 0);
        }
    }
    free(l);
  }
  /* the draws are not all the argmax: a sampler that fell back to greedy would pass the above */
  CHECKF(not_best > draws / 4, "%d of %d draws differ from the argmax", not_best, draws);
}

/* On the device: sample_id's draws (list path, overflowing threads that walk
 * their share, and both in one draw) against the definition. Only the order
 * of top-p's float sums and the division 1/temperature can differ from the
 * host's, which moves a threshold across a token in rare cases. */
TEST(sampling_lists_webgpu_draws_as_the_definition) {
  WEBGPU_OR_SKIP(d);
  wisp_wgpu_backend_opts opts = {.device = d, .subgroups = -1};
  wisp_backend *be = NULL;
  CHECKF(wisp_wgpu_backend_new(&opts, &be) == WISP_OK, "%s", wisp_last_error());
  enum { V = 40000 };
  static float l[V];
  wisp_buf *lb = be->buf_new(be, V), *ids = be->buf_new(be, 1);
  uint64_t s = 9;
  int mismatches = 0, total = 0, not_best = 0;
  for (int sh = 0; sh < N_SHAPES; sh++) {
    fill(l, V, (enum shape)sh, &s);
    be->buf_write(be, lb, 0, V, l);
    const int best = sample_by_definition(l, V, &(wisp_sampling){.top_p = 1}, 0);
    for (int c = 0; c < N_SETTINGS; c++)
      for (uint32_t step = 0; step < 4; step++) {
        wisp_sampling p = k_settings[c];
        p.seed = (uint32_t)(77 * c + sh);
        be->sample_id(be, lb, V, &p, step, ids, 0);
        CHECK(be->sync(be) == WISP_OK);
        float f;
        be->buf_read(be, ids, 0, 1, &f);
        uint32_t got;
        memcpy(&got, &f, 4);
        const int want = sample_by_definition(l, V, &p, step);
        mismatches += (int)got != want;
        not_best += (int)got != best;
        total++;
      }
  }
  be->buf_free(be, lb);
  be->buf_free(be, ids);
  be->destroy(be);
  CHECKF(mismatches <= total / 50, "%d of %d draws differ from the definition's", mismatches, total);
  CHECKF(not_best > total / 4, "%d of %d draws differ from the argmax", not_best, total);
}
