/* Shared fixtures: small synthetic artifacts and files written into the
 * test's scratch directory. */
#ifndef WISP_TEST_FIXTURES_H
#define WISP_TEST_FIXTURES_H

#include <cJSON.h>
#include <stddef.h>

/* Path of a small synthetic LFM2 artifact (generated once per run, seed 7). */
const char *fixture_small_model(void);
/* Copies the small model to test_tmpdir()/name after passing its manifest
 * through `edit` (may be NULL); `weights_delta` bytes are appended (>0) or
 * cut (<0) from weights.bin. Returns the new directory. */
const char *fixture_variant(const char *name, void (*edit)(cJSON *manifest), long weights_delta);
/* Path of the seed-shaped synthetic artifact (`wisp gen-synthetic --like`
 * the seed manifest, seed 5: 161 MB of Q4 weights), generated once per run
 * by the CLI under test and shared by the tests that need it; NULL with the
 * CLI's output in log when that fails. Tests must not change it. */
const char *fixture_seed_shaped_model(char *log, size_t cap);
/* Writes text to test_tmpdir()/name and returns the path. */
const char *fixture_write(const char *name, const char *text);
/* Path of the seed manifest: ../shared/seeds copy when present, else the
 * repository's assets/ copy. */
const char *fixture_seed_manifest(void);
/* The seed runtime profile, likewise (tests/data/plan/seeds/ holds a copy). */
const char *fixture_seed_profile(void);

#endif
