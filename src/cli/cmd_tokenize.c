/* wisp tokenize: the tokenizer on its own, for checking against Hugging Face.
 *   wisp tokenize [-m DIR | --tokenizer FILE] [--no-special] (-p TEXT | -f FILE)
 *       prints the ids as a JSON array (-p - and -f - read standard input;
 *       without -m or --tokenizer, the default model's tokenizer)
 *   wisp tokenize ... --corpus FILE
 *       one JSON array per line of FILE (tests/tokenizer/corpus.txt escapes:
 *       \\ \n \r), the format of tests/tokenizer/<kind>/expected.jsonl
 *   wisp tokenize ... --decode 1,2,3
 *       prints the exact bytes of the ids; an id outside the vocabulary,
 *       or anything but comma-separated decimal ids, is an error */
#include <stdint.h>
#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/commands.h"
#include "engine/engine.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "cli/opts.h"

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
  const char *model_dir = NULL, *file = NULL, *text = NULL, *text_file = NULL, *corpus = NULL, *decode = NULL;
  int no_special = 0;
  const cli_opt opts[] = {
      {"-m|--model", CLI_STR, &model_dir, 0, 0, "DIR", "the model whose tokenizer to use (default: models/default)"},
      {"--tokenizer", CLI_STR, &file, 0, 0, "FILE", "a tokenizer.json instead of a model"},
      {"-p|--prompt", CLI_STR, &text, 0, 0, "TEXT", "encode TEXT (\"-\": standard input)"},
      {"-f|--file", CLI_STR, &text_file, 0, 0, "FILE", "encode the text of FILE"},
      {"--corpus", CLI_STR, &corpus, 0, 0, "FILE", "encode each line (escapes \\\\ \\n \\r), one JSON array per line"},
      {"--decode", CLI_STR, &decode, 0, 0, "IDS", "decode ids (1,2,3 or tokenize's [1,2,3]; \"\" or [] is none) to their bytes"},
      {"--no-special", CLI_FLAG, &no_special, 0, 0, NULL, "do not add the post-processor's special tokens"},
  };
  const cli_spec spec = {"tokenize", "[-m DIR | --tokenizer FILE] (-p TEXT | -f FILE | --corpus FILE | --decode IDS)",
                         "The tokenizer on its own: ids as JSON arrays, or the bytes of ids.",
                         opts, (int)(sizeof opts / sizeof opts[0]), NULL, 0, NULL};
  int pr = cli_parse(&spec, argc, argv);
  if (pr != CLI_CONTINUE) return pr;
  const int add_special = !no_special;
  if ((model_dir && file) || (!!text + !!text_file + !!corpus + !!decode) != 1) {
    fprintf(stderr, "wisp tokenize: give one of -p, -f, --corpus, --decode, and -m or --tokenizer at most "
                    "(see wisp tokenize --help)\n");
    return 2;
  }
  if (!file && !model_dir && !(model_dir = cli_default_model())) return cli_error("tokenize");
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
  if (text || text_file) {
    size_t len = 0;
    if (text_file || !strcmp(text, "-")) {
      if (cli_read_text(text_file ? text_file : "-", WISP_FILE_MAX, &data, &len)) goto done;
      text = data;
    } else {
      len = strlen(text);
    }
    if (wisp_tokenizer_encode_n(t, text, len, add_special, &ids, &n)) goto done;
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
    /* Strict: decimal ids separated by commas, each inside the vocabulary;
     * tokenize's own output ([1,2,3], also [1, 2, 3]) and the empty list
     * ("" or [], an empty text's ids) are accepted as they are. */
    const int vocab = m ? wisp_model_vocab(m) : wisp_tokenizer_vocab_size(t);
    ids = malloc(sizeof(int32_t) * (strlen(decode) / 2 + 1));
    if (!ids) { wisp_fail(WISP_ENOMEM, "out of memory"); goto done; }
    const char *q = decode, *end = decode + strlen(decode);
    while (q < end && isspace((unsigned char)*q)) q++;
    while (end > q && isspace((unsigned char)end[-1])) end--;
    if (q < end && *q == '[') {
      if (end[-1] != ']' || end - q < 2) {
        wisp_fail(WISP_EINVAL, "--decode: '%s' opens a [ list it does not close", decode);
        goto done;
      }
      q++;
      end--;
    }
    while (q < end && isspace((unsigned char)*q)) q++;
    while (q < end) {
      const char *comma = memchr(q, ',', (size_t)(end - q));
      const char *stop = comma ? comma : end;
      while (q < stop && isspace((unsigned char)*q)) q++;
      const char *last = stop;
      while (last > q && isspace((unsigned char)last[-1])) last--;
      size_t l = (size_t)(last - q);
      char one[32];
      int64_t v;
      snprintf(one, sizeof one, "%.*s", (int)(l < sizeof one - 1 ? l : sizeof one - 1), q);
      if (l == 0 || l >= sizeof one || !cli_read_i64(one, INT32_MIN, INT32_MAX, &v)) {
        wisp_fail(WISP_EINVAL, "--decode needs comma-separated decimal ids, got '%.*s'", (int)l, q);
        goto done;
      }
      if (v < 0 || v >= vocab) {
        wisp_fail(WISP_EINVAL, "--decode: id %lld is outside the vocabulary (0..%d)", (long long)v, vocab - 1);
        goto done;
      }
      ids[n++] = (int32_t)v;
      if (!comma) break;
      q = comma + 1;
      if (q >= end) { /* "1,2," */
        wisp_fail(WISP_EINVAL, "--decode needs comma-separated decimal ids, got a trailing comma");
        goto done;
      }
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
