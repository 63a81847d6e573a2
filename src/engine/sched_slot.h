/* What the serving scheduler (scheduler.c) keeps beside each slot of its
 * session for prompt reuse (docs/scheduler.md): the tokens the slot's state
 * holds, and snapshots of its conv and recurrent state at turn boundaries.
 *
 * Attention's KV cache can be cut back to any common prefix by moving the
 * slot's position back (rows beyond it are never read). Conv and recurrent
 * state summarize every token fed so far and cannot be cut back: a prefix
 * shorter than what the slot holds is reachable only from a snapshot taken
 * at or before it. */
#ifndef WISP_SCHED_SLOT_H
#define WISP_SCHED_SLOT_H

#include <stdint.h>

#include "engine/internal.h"
#include "engine/slots.h"

#define SCHED_MAX_SNAPS 8 /* snapshots a slot may keep (wisp_sched_options.snapshots) */

typedef struct {
  int pos;                     /* tokens of the history the snapshot holds; -1: empty */
  wisp_buf *buf[WISP_MAX_SNAP]; /* copies of the slot's state buffers (made on first use) */
  uint64_t taken;              /* when (a counter): the oldest is replaced first */
} sched_snap;

typedef struct {
  int32_t *hist;   /* the tokens the slot's state holds, in order (its position is n_hist) */
  int n_hist, cap_hist;
  int held;           /* a history is kept for reuse (set under the scheduler's lock, for its stats) */
  uint64_t last_used; /* when a request last ended here (a counter; 0: never): free slots are taken LRU */
  int n_bufs;         /* conv/recurrent state buffers (0: KV only, any prefix is reachable) */
  wisp_buf *src[WISP_MAX_SNAP];
  size_t len[WISP_MAX_SNAP];
  int n_snaps;        /* snapshots kept (<= SCHED_MAX_SNAPS) */
  sched_snap snap[SCHED_MAX_SNAPS];
} sched_slot;

/* Binds slot `slot` of session s with up to n_snaps snapshots (0: none). */
void sched_slot_init(sched_slot *sl, wisp_session *s, int slot, int n_snaps);
void sched_slot_free(sched_slot *sl, wisp_backend *be);
/* Records tokens fed to the slot's state; 0 when out of memory. */
int sched_slot_append(sched_slot *sl, const int32_t *t, int n);
/* How many of prompt's first tokens the slot can resume from (<= n - 1,
 * so at least one token is left to feed): the common prefix where the
 * state can be brought back to it, else the newest snapshot at or before
 * it, else 0. */
int sched_slot_reusable(const sched_slot *sl, const int32_t *prompt, int n);
/* Brings the slot's state to hold the first `keep` tokens of its history
 * (a value sched_slot_reusable gave): the live state, a restored snapshot
 * with the position moved back, or an empty slot. Snapshots past keep are
 * dropped. */
wisp_status sched_slot_resume(sched_slot *sl, wisp_session *s, int slot, int keep);
/* Snapshots the slot's state at its current position (replacing the
 * oldest); nothing when the slot keeps none or has no conv/recurrent state. */
void sched_slot_snapshot(sched_slot *sl, wisp_backend *be, uint64_t now);
/* Forgets the history and the snapshots and empties the slot (after an error). */
void sched_slot_clear(sched_slot *sl, wisp_session *s, int slot);

#endif
