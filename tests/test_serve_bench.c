/* bench/serve-bench.mjs, the serving benchmark, and its Python twin
 * bench/serve_bench.py against a mock OpenAI server
 * (tests/server/mock-openai.mjs) with 4 concurrent streaming clients:
 * tests/server/serve-bench-check.mjs checks the receipts' request and token
 * counts, the measured prompt length, the concurrency the server saw, error
 * counting, the multi-turn histories and that percentiles are ordered; no
 * timing value. Needs node (scripts/deps.sh installs it with the server tests;
 * without it the test is skipped, and says so). */
#include <stdio.h>
#include <string.h>

#include "test.h"

TEST(serve_bench_client_against_a_mock_server) {
  char out[8192];
  if (test_run("command -v node", out, sizeof out) != 0) SKIP("node is not installed (apt-get install nodejs)");
  char cmd[512];
  snprintf(cmd, sizeof cmd, "node tests/server/serve-bench-check.mjs %s 2>&1", test_tmpdir());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && strstr(out, "serve-bench-check: ok"), "exit %d:\n%s", rc, out);
}
