/* wisp tokenize: the tokenizer on its own, for checking against Hugging Face.
 *   wisp tokenize (-m DIR | --tokenizer FILE) [--no-special] -p TEXT
 *       prints the ids as a JSON array
 *   wisp tokenize ... --corpus FILE
 *       one JSON array per line of FILE (tests/tokenizer/corpus.txt escapes:
 *       \\ \n \r), the format of tests/tokenizer/<kind>/expected.jsonl
 *   wisp tokenize ... --decode 1,2,3
 *       prints the exact bytes of the ids */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"

static void print_ids(const int32_t *ids, int n) {
  putchar('[');
  for (int i = 0; i < n; i++) printf(i ? ",%d" : "%d", ids[i]);
  printf("]\n");
}

static size_t unescape(char *s, size_t n) {
  size_t o = 0;
  for (size_t i = 0; i < n; i++) {
    if (s[i] == '\\' && i + 1 < n && (s[i + 1] == '\\' || s[i + 1] == 'n' || s[i + 1] == 'r')) {
      s[o++] = s[i + 1] == 'n' ? '\n' : s[i + 1] == 'r' ? '\r' : '\\';
      i++;
    } else {
      s[o++] = s[i];
    }
  }
  return o;
}

int cmd_tokenize(int argc, char **argv) {
  const char *model_dir = NULL, *file = NULL, *text = NULL, *corpus = NULL, *decode = NULL;
  int add_special = 1;
  for (int i = 1; i < argc; i++) {
    const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
    if (!strcmp(a, "--no-special")) { add_special = 0; continue; }
    if (!v) { fprintf(stderr, "wisp tokenize: unknown option or missing value: '%s'\n", a); return 2; }
    i++;
    if (!strcmp(a, "-m")) model_dir = v;
    else if (!strcmp(a, "--tokenizer")) file = v;
    else if (!strcmp(a, "-p")) text = v;
    else if (!strcmp(a, "--corpus")) corpus = v;
    else if (!strcmp(a, "--decode")) decode = v;
    else { fprintf(stderr, "wisp tokenize: unknown option '%s'\n", a); return 2; }
  }
  if ((!model_dir) == (!file) || (!!text + !!corpus + !!decode) != 1) {
    fprintf(stderr, "usage: wisp tokenize (-m DIR | --tokenizer FILE) [--no-special] (-p TEXT | --corpus FILE | --decode IDS)\n");
    return 2;
  }
  wisp_tokenizer *t = NULL;
  wisp_model *m = NULL;
  char *data = NULL;
  int32_t *ids = NULL;
  int rc = 1, n = 0;
  if (file) {
    if (wisp_tokenizer_from_file(file, &t)) goto done;
  } else {
    if (wisp_model_open(model_dir, &m)) goto done;
    if (wisp_tokenizer_for_artifact(m->artifact->dir, m->artifact->tokenizer, m->artifact->manifest,
                                    wisp_model_vocab(m), &t))
      goto done;
  }
  if (text) {
    if (wisp_tokenizer_encode_n(t, text, strlen(text), add_special, &ids, &n)) goto done;
    print_ids(ids, n);
  } else if (corpus) {
    size_t len;
    if (wisp_read_file(corpus, &data, &len)) goto done;
    char *p = data, *end = data + len;
    int line = 0;
    while (p < end) {
      char *nl = memchr(p, '\n', (size_t)(end - p));
      size_t l = nl ? (size_t)(nl - p) : (size_t)(end - p);
      line++;
      l = unescape(p, l);
      if (wisp_tokenizer_encode_n(t, p, l, add_special, &ids, &n)) {
        wisp_error_prefix("%s line %d", corpus, line);
        goto done;
      }
      print_ids(ids, n);
      free(ids);
      ids = NULL;
      p = nl ? nl + 1 : end;
    }
  } else {
    int cap = 16;
    ids = malloc(sizeof(int32_t) * (size_t)cap);
    for (const char *q = decode; ids && *q;) {
      char *e;
      long v = strtol(q, &e, 10);
      if (e == q) { wisp_fail(WISP_EINVAL, "--decode needs comma-separated ids"); goto done; }
      if (n == cap) ids = realloc(ids, sizeof(int32_t) * (size_t)(cap *= 2));
      if (!ids) break;
      ids[n++] = (int32_t)v;
      q = *e == ',' ? e + 1 : e;
    }
    char *out = NULL;
    size_t len = 0;
    if (!ids) { wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    if (wisp_tokenizer_decode(t, ids, n, &out, &len)) goto done;
    fwrite(out, 1, len, stdout);
    free(out);
  }
  rc = 0;
done:
  if (rc) cli_error("tokenize");
  free(ids);
  free(data);
  wisp_tokenizer_free(t);
  wisp_model_close(m);
  return rc;
}
