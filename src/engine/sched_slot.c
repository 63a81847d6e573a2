/* A scheduler slot's history and state snapshots (sched_slot.h). */
#include "engine/sched_slot.h"

#include <stdlib.h>
#include <string.h>

#include "util/err.h"

void sched_slot_init(sched_slot *sl, wisp_session *s, int slot, int n_snaps) {
  memset(sl, 0, sizeof *sl);
  sl->n_bufs = wisp_slot_state_bufs(s, slot, sl->src, sl->len, WISP_MAX_SNAP);
  /* without a copy op the state cannot be snapshot: only the live state is reused */
  sl->n_snaps = sl->n_bufs > 0 && s->backend->buf_copy_to ? n_snaps : 0;
  if (sl->n_snaps > SCHED_MAX_SNAPS) sl->n_snaps = SCHED_MAX_SNAPS;
  for (int i = 0; i < SCHED_MAX_SNAPS; i++) sl->snap[i].pos = -1;
}

void sched_slot_free(sched_slot *sl, wisp_backend *be) {
  for (int i = 0; i < sl->n_snaps; i++)
    for (int b = 0; b < sl->n_bufs; b++)
      if (sl->snap[i].buf[b]) be->buf_free(be, sl->snap[i].buf[b]);
  free(sl->hist);
  memset(sl, 0, sizeof *sl);
}

int sched_slot_append(sched_slot *sl, const int32_t *t, int n) {
  if (sl->n_hist + n > sl->cap_hist) {
    int cap = sl->cap_hist ? sl->cap_hist : 256;
    while (cap < sl->n_hist + n) cap *= 2;
    int32_t *h = realloc(sl->hist, (size_t)cap * sizeof *h);
    if (!h) return 0;
    sl->hist = h;
    sl->cap_hist = cap;
  }
  memcpy(sl->hist + sl->n_hist, t, (size_t)n * sizeof *t);
  sl->n_hist += n;
  return 1;
}

int sched_slot_reusable(const sched_slot *sl, const int32_t *prompt, int n) {
  int common = 0;
  while (common < sl->n_hist && common < n && sl->hist[common] == prompt[common]) common++;
  const int limit = common < n - 1 ? common : n - 1;
  if (sl->n_bufs == 0) return limit > 0 ? limit : 0; /* KV only: move the position back */
  if (common == sl->n_hist && sl->n_hist <= n - 1) return sl->n_hist; /* the live state, as it is */
  int best = 0;
  for (int i = 0; i < sl->n_snaps; i++)
    if (sl->snap[i].pos > best && sl->snap[i].pos <= limit) best = sl->snap[i].pos;
  return best;
}

wisp_status sched_slot_resume(sched_slot *sl, wisp_session *s, int slot, int keep) {
  for (int i = 0; i < sl->n_snaps; i++)
    if (sl->snap[i].pos > keep) sl->snap[i].pos = -1; /* another branch of the history */
  if (keep == sl->n_hist) return WISP_OK;
  sl->n_hist = keep;
  if (keep == 0) {
    wisp_slot_reset(s, slot);
    return WISP_OK;
  }
  if (sl->n_bufs > 0) {
    const sched_snap *from = NULL;
    for (int i = 0; i < sl->n_snaps; i++)
      if (sl->snap[i].pos == keep) from = &sl->snap[i];
    if (!from) return wisp_fail(WISP_EINVAL, "slot %d: no state snapshot at position %d", slot, keep);
    for (int b = 0; b < sl->n_bufs; b++) s->backend->buf_copy_to(s->backend, sl->src[b], from->buf[b], sl->len[b]);
  }
  return wisp_slot_rewind(s, slot, keep);
}

void sched_slot_snapshot(sched_slot *sl, wisp_backend *be, uint64_t now) {
  if (sl->n_snaps == 0 || sl->n_hist == 0) return;
  sched_snap *to = NULL;
  for (int i = 0; i < sl->n_snaps; i++)
    if (sl->snap[i].pos == sl->n_hist) return; /* already held */
  for (int i = 0; i < sl->n_snaps && !to; i++)
    if (sl->snap[i].pos < 0) to = &sl->snap[i];
  if (!to) { /* all held: replace the oldest */
    to = &sl->snap[0];
    for (int i = 1; i < sl->n_snaps; i++)
      if (sl->snap[i].taken < to->taken) to = &sl->snap[i];
  }
  for (int b = 0; b < sl->n_bufs; b++) {
    if (!to->buf[b] && !(to->buf[b] = be->buf_new(be, sl->len[b]))) {
      to->pos = -1; /* out of memory: this snapshot stays empty, reuse falls back further */
      return;
    }
    be->buf_copy_to(be, to->buf[b], sl->src[b], sl->len[b]);
  }
  to->pos = sl->n_hist;
  to->taken = now;
}

void sched_slot_clear(sched_slot *sl, wisp_session *s, int slot) {
  sl->n_hist = 0;
  for (int i = 0; i < sl->n_snaps; i++) sl->snap[i].pos = -1;
  wisp_slot_reset(s, slot);
}
