/* The shared library's ABI: libwisp.so exports the functions wisp.h
 * declares and nothing else (src/api/libwisp.map), under the soname
 * libwisp.so.MAJOR of WISP_VERSION. */
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/file.h"
#include "wisp.h"

#define MAX_NAMES 4096 /* the archive has some 500 global functions */
#define NAME_CAP 96

typedef struct {
  char name[MAX_NAMES][NAME_CAP];
  int n;
} name_set;

static int has(const name_set *s, const char *name) {
  for (int i = 0; i < s->n; i++)
    if (!strcmp(s->name[i], name)) return 1;
  return 0;
}

static void add(name_set *s, const char *name, size_t len) {
  if (s->n >= MAX_NAMES || len >= NAME_CAP) return;
  memcpy(s->name[s->n], name, len);
  s->name[s->n][len] = 0;
  if (!has(s, s->name[s->n])) s->n++;
}

/* The functions wisp.h declares: a line that starts in column 0 with a
 * type (comments start with a space or '/') and names wisp_...( . */
static int declared_functions(name_set *out) {
  FILE *f = fopen("include/wisp.h", "r");
  if (!f) return 0;
  char line[512];
  while (fgets(line, sizeof line, f)) {
    if (!isalpha((unsigned char)line[0]) || !strncmp(line, "typedef", 7)) continue;
    const char *p = strstr(line, "wisp_");
    for (; p; p = strstr(p + 1, "wisp_")) {
      size_t len = strspn(p, "abcdefghijklmnopqrstuvwxyz0123456789_");
      if (p[len] == '(') {
        add(out, p, len);
        break;
      }
    }
  }
  fclose(f);
  return out->n;
}

/* Global defined symbols that `nm_cmd` lists ("ADDR TYPE NAME" lines), the
 * symbol version (name@@WISP_0) cut off; version nodes (type A) skipped. */
static int nm_symbols(const char *nm_cmd, name_set *out, char *all, size_t cap) {
  FILE *p = popen(nm_cmd, "r");
  if (!p) return 0;
  char line[512];
  size_t used = 0;
  all[0] = 0;
  while (fgets(line, sizeof line, p)) {
    char addr[64], type[8], name[256];
    if (sscanf(line, "%63s %7s %255s", addr, type, name) != 3 || !strcmp(type, "A")) continue;
    name[strcspn(name, "@")] = 0;
    add(out, name, strlen(name));
    int w = snprintf(all + used, cap - used, "%s ", name);
    if (w > 0 && (size_t)w < cap - used) used += (size_t)w;
  }
  return pclose(p) == 0;
}

TEST(abi_shared_library_exports_only_the_public_api) {
  char out[8192];
  CHECKF(test_run("make -s BUILD=build build/libwisp.so build/libwisp.a >/dev/null 2>&1 || "
                  "{ echo 'make build/libwisp.so failed'; exit 1; }",
                  out, sizeof out) == 0,
         "%s", out);
  static name_set declared, exported, archive;
  memset(&declared, 0, sizeof declared);
  memset(&exported, 0, sizeof exported);
  memset(&archive, 0, sizeof archive);
  CHECKF(declared_functions(&declared) >= 30, "found %d functions in include/wisp.h", declared.n);
  static char listing[65536];
  CHECK(nm_symbols("nm -D --defined-only build/libwisp.so", &exported, listing, sizeof listing));
  for (int i = 0; i < exported.n; i++)
    CHECKF(!strncmp(exported.name[i], "wisp_", 5) && has(&declared, exported.name[i]),
           "libwisp.so exports %s, which include/wisp.h does not declare (src/api/libwisp.map)", exported.name[i]);
  /* every declared function the library defines is exported (a function
   * declared but not yet written is absent from both) */
  static char archive_listing[1 << 18];
  CHECK(nm_symbols("nm -g --defined-only build/libwisp.a 2>/dev/null | grep ' T '", &archive, archive_listing,
                   sizeof archive_listing));
  int n_defined = 0;
  for (int i = 0; i < declared.n; i++) {
    if (!has(&archive, declared.name[i])) continue;
    n_defined++;
    CHECKF(has(&exported, declared.name[i]), "%s is in wisp.h and the library but not exported; add it to src/api/libwisp.map",
           declared.name[i]);
  }
  CHECKF(n_defined >= 30 && exported.n == n_defined, "%d exported, %d defined: %s", exported.n, n_defined, listing);
  /* control: the library does define non-API globals, which the check above hides */
  CHECKF(has(&archive, "cli_parse") || has(&archive, "wisp_fail"), "the archive's globals: %.400s", archive_listing);
  CHECK(!has(&exported, "wisp_fail") && !has(&exported, "cli_parse"));

  /* the soname carries the major version of WISP_VERSION */
  char want[64];
  snprintf(want, sizeof want, "[libwisp.so.%.*s]", (int)strcspn(WISP_VERSION, "."), WISP_VERSION);
  CHECK(test_run("readelf -d build/libwisp.so | grep SONAME", out, sizeof out) == 0);
  CHECKF(strstr(out, want) != NULL, "soname: %s (expected %s)", out, want);
}
