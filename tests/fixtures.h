/* Shared fixtures: small synthetic artifacts and files written into the
 * test's scratch directory. */
#ifndef WISP_TEST_FIXTURES_H
#define WISP_TEST_FIXTURES_H

#include <cJSON.h>
#include <stddef.h>
#include <stdint.h>

/* Path of a small synthetic LFM2 artifact (generated once per run, seed 7). */
const char *fixture_small_model(void);
/* Copies the small model to test_tmpdir()/name after passing its manifest
 * through `edit` (may be NULL); `weights_delta` bytes are appended (>0) or
 * cut (<0) from weights.bin. Returns the new directory. */
const char *fixture_variant(const char *name, void (*edit)(cJSON *manifest), long weights_delta);
/* Records the sha256 of every section of DIR/weights.bin (and of the whole
 * file) in DIR/manifest.json, as the writer does: for a test that changes
 * weights on purpose and wants a model that opens (a model open refuses
 * sections that do not match, format/digest.h). 0 or -1. */
int fixture_rehash(const char *dir);
/* Path of the seed-shaped synthetic artifact (`wisp gen-synthetic --like`
 * the seed manifest, seed 5: 161 MB of Q4 weights), generated once per run
 * by the CLI under test and shared by the tests that need it; NULL with the
 * CLI's output in log when that fails. Tests must not change it. */
const char *fixture_seed_shaped_model(char *log, size_t cap);
/* The JSON document in the file at path (a receipt, a manifest), or NULL
 * when it cannot be read or parsed. The caller deletes it. */
cJSON *fixture_read_json(const char *path);
/* Writes text to test_tmpdir()/name and returns the path. */
const char *fixture_write(const char *name, const char *text);
/* A byte-level BPE tokenizer.json into json[cap]: tokens "t0".."t255" at
 * ids 0..255, no merges, then `more_vocab` (further vocab members, each
 * after a comma, e.g. ", \"<|end|>\": 258", or "") and `added` (the
 * added_tokens array's members). */
void fixture_byte_bpe_json(char *json, size_t cap, const char *more_vocab, const char *added);
/* Path of the seed manifest: ../shared/seeds copy when present, else the
 * repository's assets/ copy. */
const char *fixture_seed_manifest(void);
/* The seed runtime profile, likewise (tests/data/plan/seeds/ holds a copy). */
const char *fixture_seed_profile(void);

/* The CPU logits of an artifact at a thread count: a prefill of
 * ids[0..n_prefill) then n_decode single-token steps on ids[n_prefill..),
 * under `profile` (NULL: default). Returns (1 + n_decode) x vocab floats
 * (the prefill's last row, then each step's), or NULL with the error in
 * wisp_last_error(). The caller frees it; *vocab receives the width. */
float *fixture_cpu_logits(const char *dir, const int32_t *ids, int n_prefill, int n_decode, int threads,
                          const char *profile, int *vocab);
/* 1 when the CPU logits of fixture_cpu_logits at 2, 4 and 5 threads are
 * those of 1 thread bit for bit (and the decode steps' logits differ from
 * the prefill's); else 0 with the first difference in why. */
int fixture_cpu_thread_invariant(const char *dir, const int32_t *ids, int n_prefill, int n_decode,
                                 const char *profile, char *why, size_t cap);

#endif
