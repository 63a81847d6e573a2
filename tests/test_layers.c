/* The layer rules of docs/architecture.md, checked against the tree: every
 * `#include "..."` under src/ goes from a folder to one that the rules let
 * it include, and no file reaches itself through includes (a circle). A
 * module is a file without its extension (x.c and x.h are one module: x.c
 * defines what x.h declares), so x.c including y.h while y.c includes x.h
 * is a circle too. The rules are read from the doc's ```layers block, so
 * the doc and the check cannot drift apart. */
#include <dirent.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "test.h"
#include "util/file.h"

#define MAX_FOLDERS 32
#define MAX_MODULES 1024
#define MAX_EDGES 8192

typedef struct {
  char name[32];
  char allowed[MAX_FOLDERS][32];
  int n_allowed;
} rule;

typedef struct {
  rule rules[MAX_FOLDERS];
  int n_rules;
  char modules[MAX_MODULES][160]; /* "engine/session" (under the tree's src/) */
  int n_modules;
  int from[MAX_EDGES], to[MAX_EDGES];
  int n_edges;
  int problems;
  char report[4096];
} layers;

static void problem(layers *L, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
static void problem(layers *L, const char *fmt, ...) {
  L->problems++;
  size_t used = strlen(L->report);
  if (used + 300 < sizeof L->report) {
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(L->report + used, sizeof L->report - used - 1, fmt, ap);
    va_end(ap);
    strcat(L->report, "\n");
  }
}

/* The ```layers block: one line a folder, "folder: allowed allowed ...". */
static int parse_rules(layers *L, const char *doc) {
  const char *p = strstr(doc, "```layers\n");
  if (!p) return 0;
  p += strlen("```layers\n");
  while (*p && strncmp(p, "```", 3)) {
    const char *eol = strchr(p, '\n');
    if (!eol) return 0;
    char line[512];
    size_t len = (size_t)(eol - p) < sizeof line - 1 ? (size_t)(eol - p) : sizeof line - 1;
    memcpy(line, p, len);
    line[len] = 0;
    p = eol + 1;
    char *colon = strchr(line, ':');
    if (!colon || L->n_rules == MAX_FOLDERS) continue;
    *colon = 0;
    rule *r = &L->rules[L->n_rules++];
    snprintf(r->name, sizeof r->name, "%.31s", line);
    for (char *tok = strtok(colon + 1, " \t"); tok && r->n_allowed < MAX_FOLDERS; tok = strtok(NULL, " \t"))
      snprintf(r->allowed[r->n_allowed++], sizeof r->allowed[0], "%.31s", tok);
  }
  return L->n_rules > 0;
}

static const rule *rule_of(const layers *L, const char *folder) {
  for (int i = 0; i < L->n_rules; i++)
    if (!strcmp(L->rules[i].name, folder)) return &L->rules[i];
  return NULL;
}

/* The folder a module belongs to: its top directory under src/, or
 * "backend/cpu" / "backend/webgpu" for a backend's own files. */
static void folder_of(const char *module, char *out, size_t cap) {
  const char *slash = strchr(module, '/');
  size_t n = slash ? (size_t)(slash - module) : 0;
  if (slash && !strncmp(module, "backend/", 8)) {
    const char *second = strchr(slash + 1, '/');
    if (second) n = (size_t)(second - module);
  }
  if (n >= cap) n = cap - 1;
  memcpy(out, module, n);
  out[n] = 0;
}

static int module_index(layers *L, const char *module) {
  for (int i = 0; i < L->n_modules; i++)
    if (!strcmp(L->modules[i], module)) return i;
  if (L->n_modules == MAX_MODULES) return -1;
  snprintf(L->modules[L->n_modules], sizeof L->modules[0], "%s", module);
  return L->n_modules++;
}

static int is_source(const char *name) {
  size_t n = strlen(name);
  return n > 2 && name[n - 2] == '.' && (name[n - 1] == 'c' || name[n - 1] == 'h');
}

static int exists(const char *path) {
  struct stat st;
  return stat(path, &st) == 0 && S_ISREG(st.st_mode);
}

/* One file's includes: each quoted include resolved against src/ (then the
 * file's own directory); "wisp.h" is the public header, which any file may
 * include. rel is the path under src/. */
static void scan_file(layers *L, const char *src, const char *rel) {
  char path[600], *text = NULL;
  snprintf(path, sizeof path, "%s/%s", src, rel);
  if (wisp_read_file(path, &text, NULL) != WISP_OK) {
    problem(L, "%s: cannot read", rel);
    return;
  }
  char module[160], folder[32];
  snprintf(module, sizeof module, "%.*s", (int)(strrchr(rel, '.') - rel), rel);
  folder_of(module, folder, sizeof folder);
  const rule *r = rule_of(L, folder);
  if (!r) problem(L, "%s: folder '%s' has no rule in docs/architecture.md", rel, folder);
  const int self = module_index(L, module);
  for (const char *p = text; (p = strstr(p, "#include")) != NULL; p++) {
    const char *q = p + strlen("#include");
    while (*q == ' ' || *q == '\t') q++;
    if (*q != '"') continue;
    const char *end = strchr(q + 1, '"');
    if (!end || end - q > 150) continue;
    char inc[160], target[600];
    snprintf(inc, sizeof inc, "%.*s", (int)(end - q - 1), q + 1);
    if (!strcmp(inc, "wisp.h")) continue;
    char resolved[160];
    snprintf(target, sizeof target, "%s/%s", src, inc);
    if (exists(target)) {
      snprintf(resolved, sizeof resolved, "%s", inc);
    } else {
      const char *dir_end = strrchr(rel, '/');
      if (snprintf(resolved, sizeof resolved, "%.*s/%s", dir_end ? (int)(dir_end - rel) : 0, rel, inc) >=
          (int)sizeof resolved)
        continue;
      snprintf(target, sizeof target, "%s/%s", src, resolved);
      if (!exists(target)) {
        problem(L, "%s: includes \"%s\", which is not a file under src/", rel, inc);
        continue;
      }
    }
    char to_module[160], to_folder[32];
    snprintf(to_module, sizeof to_module, "%.*s", (int)(strrchr(resolved, '.') - resolved), resolved);
    folder_of(to_module, to_folder, sizeof to_folder);
    if (r && strcmp(to_folder, folder)) {
      int ok = 0;
      for (int i = 0; i < r->n_allowed; i++) ok |= !strcmp(r->allowed[i], to_folder);
      if (!ok) problem(L, "%s includes \"%s\": %s may not include %s (docs/architecture.md)", rel, inc, folder, to_folder);
    }
    const int to = module_index(L, to_module);
    if (to >= 0 && self >= 0 && to != self && L->n_edges < MAX_EDGES) {
      L->from[L->n_edges] = self;
      L->to[L->n_edges++] = to;
    }
  }
  free(text);
}

static void scan_dir(layers *L, const char *src, const char *rel) {
  char path[600];
  snprintf(path, sizeof path, "%s%s%s", src, rel[0] ? "/" : "", rel);
  DIR *d = opendir(path);
  if (!d) {
    problem(L, "cannot open %s", path);
    return;
  }
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char child[400], full[1000];
    snprintf(child, sizeof child, "%s%s%s", rel, rel[0] ? "/" : "", e->d_name);
    snprintf(full, sizeof full, "%s/%s", src, child);
    struct stat st;
    if (stat(full, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) scan_dir(L, src, child);
    else if (is_source(e->d_name) && rel[0]) scan_file(L, src, child);
  }
  closedir(d);
}

/* Depth-first search for a circle through the module graph: colour 1 on
 * the current path, 2 done. Reports the first circle found from each root. */
static int find_circle(const layers *L, int v, int *colour, int *path, int depth, char *out, size_t cap) {
  colour[v] = 1;
  path[depth] = v;
  for (int e = 0; e < L->n_edges; e++) {
    if (L->from[e] != v) continue;
    const int w = L->to[e];
    if (colour[w] == 1) {
      size_t used = 0;
      int start = depth;
      while (start > 0 && path[start] != w) start--;
      for (int i = start; i <= depth && used + 170 < cap; i++)
        used += (size_t)snprintf(out + used, cap - used, "%s -> ", L->modules[path[i]]);
      snprintf(out + used, cap - used, "%s", L->modules[w]);
      return 1;
    }
    if (colour[w] == 0 && depth + 1 < MAX_MODULES && find_circle(L, w, colour, path, depth + 1, out, cap)) return 1;
  }
  colour[v] = 2;
  return 0;
}

/* Checks the tree under src (a directory holding the folders) against the
 * rules in doc; the number of problems, their text in L->report. */
static int check_tree(layers *L, const char *src, const char *doc) {
  memset(L, 0, sizeof *L);
  if (!parse_rules(L, doc)) {
    problem(L, "no ```layers block in the rules");
    return L->problems;
  }
  scan_dir(L, src, "");
  int *colour = calloc(MAX_MODULES, sizeof *colour), *path = calloc(MAX_MODULES, sizeof *path);
  char circle[2048];
  for (int v = 0; colour && path && v < L->n_modules; v++)
    if (colour[v] == 0 && find_circle(L, v, colour, path, 0, circle, sizeof circle)) {
      problem(L, "include circle: %s", circle);
      /* the rest of this circle's modules are on the path (colour 1): clear
       * them so that other circles are still found */
      for (int i = 0; i < L->n_modules; i++)
        if (colour[i] == 1) colour[i] = 2;
    }
  free(colour);
  free(path);
  return L->problems;
}

static char *read_doc(void) {
  char *doc = NULL;
  return wisp_read_file("docs/architecture.md", &doc, NULL) == WISP_OK ? doc : NULL;
}

TEST(layer_rules_hold_in_src) {
  char *doc = read_doc();
  CHECKF(doc, "docs/architecture.md: %s", wisp_last_error());
  layers *L = calloc(1, sizeof *L);
  CHECK(L);
  const int n = check_tree(L, "src", doc);
  CHECKF(n == 0, "%d layer problems:\n%s", n, L->report);
  CHECKF(L->n_modules > 50, "only %d modules found under src/", L->n_modules);
  free(L);
  free(doc);
}

static void plant(const char *root, const char *rel, const char *text) {
  char path[800];
  snprintf(path, sizeof path, "%s/%s", root, rel);
  for (char *s = strchr(path + 1, '/'); s; s = strchr(s + 1, '/')) {
    *s = 0;
    mkdir(path, 0755);
    *s = '/';
  }
  FILE *f = fopen(path, "w");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

/* A synthetic tree checked against the real rules: clean, it passes; with
 * a folder including one above it, or a circle, it fails naming them. */
TEST(layer_rules_check_fails_on_a_planted_break_and_circle) {
  char *doc = read_doc();
  CHECK(doc);
  char root[600];
  snprintf(root, sizeof root, "%s/layers-tree/src", test_tmpdir());
  plant(root, "util/err.h", "#include <stdio.h>\n#include \"wisp.h\"\n");
  plant(root, "util/err.c", "#include \"util/err.h\"\n");
  plant(root, "model/graph.h", "#include \"backend/backend.h\"\n");
  plant(root, "model/graph.c", "#include \"model/graph.h\"\n#include \"util/err.h\"\n");
  plant(root, "backend/backend.h", "#include \"util/err.h\"\n");
  layers *L = calloc(1, sizeof *L);
  CHECK(L);
  CHECKF(check_tree(L, root, doc) == 0, "a clean tree fails:\n%s", L->report);
  /* a layer break: util including a model header */
  plant(root, "util/err.c", "#include \"util/err.h\"\n#include \"model/graph.h\"\n");
  CHECK(check_tree(L, root, doc) >= 1);
  CHECKF(strstr(L->report, "util/err.c includes \"model/graph.h\": util may not include model"), "%s", L->report);
  plant(root, "util/err.c", "#include \"util/err.h\"\n");
  /* a circle of modules: graph.c includes run.h, run.c includes graph.h */
  plant(root, "model/run.h", "#include \"backend/backend.h\"\n");
  plant(root, "model/run.c", "#include \"model/run.h\"\n#include \"model/graph.h\"\n");
  CHECK(check_tree(L, root, doc) == 0);
  plant(root, "model/graph.c", "#include \"model/graph.h\"\n#include \"model/run.h\"\n");
  CHECK(check_tree(L, root, doc) == 1);
  CHECKF(strstr(L->report, "include circle: model/") && strstr(L->report, "model/graph") &&
             strstr(L->report, "model/run"),
         "%s", L->report);
  /* a folder the rules do not place, and an include of nothing */
  plant(root, "model/graph.c", "#include \"model/graph.h\"\n#include \"model/missing.h\"\n");
  plant(root, "newdir/x.c", "#include \"util/err.h\"\n");
  CHECK(check_tree(L, root, doc) == 2);
  CHECKF(strstr(L->report, "folder 'newdir' has no rule") && strstr(L->report, "\"model/missing.h\", which is not"),
         "%s", L->report);
  free(L);
  free(doc);
}

/* ---- src/backend names no architecture ---------------------------------- */

/* The words that name an architecture: the families wisp knows (the model
 * files of src/model, one an architecture, and the families they read). */
static const char *const k_arch_words[] = {"lfm", "qwen", "llama", "gemma", "mistral", "phi3"};

/* Appends to report (cap bytes) "FILE:LINE: WORD" for each line of the
 * files under dir (recursively) that holds an architecture word, in any
 * case; returns how many. */
static int arch_words_in(const char *dir, char *report, size_t cap) {
  DIR *d = opendir(dir);
  if (!d) return 0;
  int found = 0;
  struct dirent *e;
  while ((e = readdir(d)) != NULL) {
    if (e->d_name[0] == '.') continue;
    char path[1000];
    snprintf(path, sizeof path, "%s/%s", dir, e->d_name);
    struct stat st;
    if (stat(path, &st) != 0) continue;
    if (S_ISDIR(st.st_mode)) {
      found += arch_words_in(path, report, cap);
      continue;
    }
    char *text = NULL;
    size_t n = 0;
    if (wisp_read_file(path, &text, &n) != WISP_OK) continue;
    int line = 1;
    for (size_t i = 0; i < n; i++) {
      if (text[i] == '\n') line++;
      for (size_t w = 0; w < sizeof k_arch_words / sizeof *k_arch_words; w++) {
        const char *word = k_arch_words[w];
        size_t k = 0;
        while (word[k] && i + k < n && (text[i + k] | 0x20) == word[k]) k++;
        if (!word[k]) {
          size_t used = strlen(report);
          snprintf(report + used, cap - used, "%s:%d: %s\n", path, line, word);
          found++;
        }
      }
    }
    free(text);
  }
  closedir(d);
  return found;
}

/* docs/architecture.md: src/backend holds generic ops only, so no file of
 * it (C or WGSL, comments included) names an architecture. */
TEST(layer_rules_backend_names_no_architecture) {
  static char report[4096];
  report[0] = 0;
  const int found = arch_words_in("src/backend", report, sizeof report);
  CHECKF(found == 0, "%d architecture names in src/backend:\n%s", found, report);
  /* the check itself finds one planted */
  char root[600];
  snprintf(root, sizeof root, "%s/arch-words", test_tmpdir());
  plant(root, "webgpu/kernels/k.wgsl", "// fine\n// as Qwen 3.5 wants\n");
  report[0] = 0;
  CHECK(arch_words_in(root, report, sizeof report) == 1);
  CHECKF(strstr(report, "k.wgsl:2: qwen"), "%s", report);
}
