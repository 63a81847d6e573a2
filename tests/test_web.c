/* wisp.wasm (make wasm) in its page, in headless Chromium on WebGPU
 * (tests/web/page.mjs, docs/browser.md): the default model's greedy text in
 * the page equals the native CLI's, the tokens stream in, the plan and the
 * adapter are shown, a seeded sampled run and a two-line chat on the page's
 * CPU backend equal the CLI's, a damaged artifact gives the CLI's one-line error,
 * a screenshot is kept as build/test-logs/wasm-page.png, the benchmark's
 * receipt downloads, a seed-shaped synthetic model (four layers, 76 MiB of
 * weights) runs on WebGPU with its
 * weights streamed (the native greedy tokens, the wasm memory peak under half
 * its weights), and a page without WebGPU runs a GGUF file (the default
 * model exported) with the native greedy text on its cpu backend.
 *
 * Needs what the set-up installs (scripts/deps.sh): build/wasm/ from
 * `make wasm` (scripts/test.sh builds it), Debian's chromium and node, and
 * `npm ci` in tests/web; without them the test fails and says which is
 * missing. The page runs the browser's wasm, which no sanitizer build
 * changes, so the test is only in the optimised suite's binary (a sanitized
 * build would run the same page again, for 30 s, to check nothing new). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"

#if !TEST_ASAN
static int readable(const char *path) {
  FILE *f = fopen(path, "rb");
  if (f) fclose(f);
  return f != NULL;
}

TEST(web_page_greedy_equals_native) {
  CHECKF(readable("build/wasm/wisp.wasm") && readable("build/wasm/index.html"),
         "build/wasm/ is missing: run make wasm (scripts/test.sh does)");
  CHECKF(readable("tests/web/node_modules/playwright-core/package.json"),
         "tests/web/node_modules is missing (scripts/deps.sh runs npm ci there)");
  CHECKF(readable("/usr/bin/chromium") || getenv("CHROMIUM"), "chromium is not installed (scripts/deps.sh installs it)");
  const char *tmp = test_tmpdir();
  char cmd[2048], out[8192];
  static char log[1 << 16];
  const char *prompt = "In the beginning";

  /* The native CLI's greedy and sampled texts, and a copy of the model with four bytes of
   * its weights changed with the CLI's error for it. */
  snprintf(cmd, sizeof cmd, "(%s run --profile exact -m models/default --backend cpu -p '%s' -n 16 --temp 0 >%s/expect.txt 2>/dev/null)",
           test_wisp_bin(), prompt, tmp);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "native run: exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd,
           "(%s run --profile exact -m models/default --backend cpu -p '%s' -n 16 --temp 0.8 --seed 7 >%s/sampled.txt 2>/dev/null)",
           test_wisp_bin(), prompt, tmp);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "native sampled run: exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd,
           "(printf 'Who was the king?\nAnd then?\n' | %s run --profile exact -m models/default --backend cpu --chat -n 12 --temp 0 "
           ">%s/chat.txt 2>/dev/null)",
           test_wisp_bin(), tmp);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "native chat: exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd,
           "cp -r models/default %s/bad && printf '\\377\\377\\377\\377' | "
           "dd of=%s/bad/weights.bin bs=1 seek=100000 conv=notrunc 2>/dev/null",
           tmp, tmp);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "damaging a copy: %s", out);
  snprintf(cmd, sizeof cmd, "(%s plan --profile exact -m %s/bad --backend cpu >/dev/null 2>%s/error.txt)", test_wisp_bin(), tmp, tmp);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1, "native plan of the damaged copy: exit %d", rc);

  /* A synthetic model of the seed's shape cut to its first four layers
   * (76 MiB of weights: the embedding and head whole), which the page
   * streams into GPU buffers, and its native greedy token. */
  snprintf(cmd, sizeof cmd,
           "(node tests/web/seed-layers.mjs assets/lfm2-hybrid-q4.manifest.json 4 >%s/big-like.json && "
           "%s gen-synthetic --like %s/big-like.json -o %s/big --seed 1 >/dev/null 2>&1 && "
           "%s run --profile exact -m %s/big --backend cpu -p I -n 1 --temp 0 >%s/expect-big.txt 2>/dev/null)",
           tmp, test_wisp_bin(), tmp, tmp, test_wisp_bin(), tmp, tmp);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "the seed-shaped model and its native run: exit %d: %s", rc, out);

  /* The default model as a GGUF file, and its native greedy text. */
  snprintf(cmd, sizeof cmd,
           "(mkdir -p %s/gguf && %s export-gguf -m models/default -o %s/gguf/default.gguf >/dev/null 2>&1 && "
           "%s run --profile exact -m %s/gguf/default.gguf --backend cpu -p '%s' -n 16 --temp 0 >%s/expect-gguf.txt 2>/dev/null)",
           tmp, test_wisp_bin(), tmp, test_wisp_bin(), tmp, prompt, tmp);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "the GGUF export and its native run: exit %d: %s", rc, out);

  snprintf(cmd, sizeof cmd,
           "node tests/web/page.mjs --web build/wasm --model models/default --prompt '%s' --n 16 "
           "--expect %s/expect.txt --expect-sampled %s/sampled.txt --expect-chat %s/chat.txt --bad-dir %s/bad --expect-error %s/error.txt "
           "--big %s/big --big-prompt I --expect-big %s/expect-big.txt --gguf %s/gguf/default.gguf "
           "--expect-gguf %s/expect-gguf.txt --out build/test-logs",
           prompt, tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp, tmp);
  rc = test_run(cmd, log, sizeof log);
  CHECKF(rc == 0, "tests/web/page.mjs exit %d:\n%s", rc, log);
  CHECKF(strstr(log, "ok page greedy text equals native") && strstr(log, "ok page sampled text") &&
             strstr(log, "ok page chat") &&
             strstr(log, "ok damaged artifact") && strstr(log, "ok receipt downloaded") &&
             strstr(log, "ok streamed weights") && strstr(log, "ok without WebGPU"), "%s", log);
}
#endif
