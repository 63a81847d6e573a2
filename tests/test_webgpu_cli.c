/* `wisp devices`: lists the adapter; a missing library is a one-line error. */
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "webgpu_fixture.h"

TEST(webgpu_cli_devices_lists_adapter) {
  WEBGPU_OR_SKIP(d); /* also sets VK_DRIVER_FILES for the child when needed */
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s devices", test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "exit %d: %s", rc, out);
  CHECKF(strstr(out, "adapter 0: ") != NULL, "%s", out);
  CHECKF(strstr(out, d->info.name) != NULL, "adapter %s not listed: %s", d->info.name, out);
  CHECKF(strstr(out, "maxStorageBufferBindingSize") != NULL, "%s", out);
  if (d->has_subgroups) CHECKF(strstr(out, " subgroups") != NULL, "%s", out);
}

TEST(webgpu_cli_devices_missing_library) {
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "WISP_WEBGPU_LIB=/nonexistent/libwebgpu.so %s devices", test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1, "exit %d: %s", rc, out);
  CHECKF(strstr(out, "/nonexistent/libwebgpu.so") != NULL, "%s", out);
  size_t len = strlen(out);
  CHECKF(len > 0 && strchr(out, '\n') == out + len - 1, "not one line: %s", out);
}

/* A library without the WebGPU symbols: the error names the first missing one. */
TEST(webgpu_cli_devices_missing_symbol) {
  const char *lib = "/lib/x86_64-linux-gnu/libm.so.6";
  FILE *f = fopen(lib, "rb");
  if (!f) SKIP("%s not present", lib);
  fclose(f);
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "WISP_WEBGPU_LIB=%s %s devices", lib, test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1, "exit %d: %s", rc, out);
  CHECKF(strstr(out, "lacks symbol wgpuCreateInstance") != NULL && strstr(out, lib) != NULL, "%s", out);
}

/* `wisp run` without the WebGPU library: `--backend webgpu` is a one-line
 * error naming the path; `--backend auto` says it falls back and generates
 * on the CPU. */
TEST(webgpu_cli_run_missing_library) {
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd,
           "WISP_WEBGPU_LIB=/nonexistent/libwebgpu.so %s run --profile exact -m models/default -p hello -n 4 --backend webgpu",
           test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1, "exit %d: %s", rc, out);
  CHECKF(strstr(out, "WebGPU library not found") && strstr(out, "/nonexistent/libwebgpu.so"), "%s", out);
  size_t len = strlen(out);
  CHECKF(len > 0 && strchr(out, '\n') == out + len - 1, "not one line: %s", out);

  snprintf(cmd, sizeof cmd,
           "WISP_WEBGPU_LIB=/nonexistent/libwebgpu.so %s run --profile exact -m models/default -p hello -n 4 --backend auto",
           test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "exit %d: %s", rc, out);
  CHECKF(strstr(out, "wisp: using the cpu backend (WebGPU: ") && strstr(out, "/nonexistent/libwebgpu.so"), "%s", out);
  CHECKF(strstr(out, "| backend cpu |") && strstr(out, "decode: "), "%s", out);
}

/* A run on the GPU says that it compiles kernels before it does (a cold
 * first run on a CPU Vulkan driver takes tens of seconds), how many it
 * compiled and how long that took, and keeps that time out of tok/s. */
TEST(webgpu_cli_run_announces_kernel_compilation) {
  WEBGPU_OR_SKIP(d);
  (void)d;
  char cmd[1024], out[16384];
  snprintf(cmd, sizeof cmd, "%s run --profile exact -m models/default -p hello -n 3 --temp 0 --backend webgpu", test_wisp_bin());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "exit %d: %s", rc, out);
  const char *a = strstr(out, "wisp: compiling "), *b = strstr(out, "compiled ");
  CHECKF(a && strstr(a, " kernels (first run)...\n") && b && b > a && strstr(b, " kernels in ") &&
             strstr(b, "(not counted in tok/s)"), "%s", out);
  /* the announcement comes before the prompt is evaluated */
  const char *p = strstr(out, "prompt: ");
  CHECKF(p && a < p, "%s", out);
  /* bench's receipt reports compilation apart from its phases */
  char receipt[700];
  snprintf(receipt, sizeof receipt, "%s/compile_receipt.json", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s bench --profile exact -m models/default -p 4 -n 2 --backend webgpu -o %s", test_wisp_bin(), receipt);
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0 && strstr(out, "compiling kernels (first run"), "exit %d: %s", rc, out);
  FILE *f = fopen(receipt, "rb");
  CHECK(f);
  char text[65536];
  size_t n = fread(text, 1, sizeof text - 1, f);
  fclose(f);
  text[n] = 0;
  const char *c = strstr(text, "\"compile\"");
  CHECKF(c && strstr(c, "\"pipelines\"") && strstr(c, "\"seconds\"") && !strstr(c, "\"pipelines\":\t0,"), "%s", text);
}
