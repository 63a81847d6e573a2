/* SentencePiece vocabularies (docs/tokenizer.md, "SentencePiece
 * vocabularies"): a GGUF `llama` vocabulary imported as tokenizer.json, the
 * tokenizer.json features it uses (byte_fallback, Prepend/Replace
 * normalizer, Metaspace, the Replace/ByteFallback/Fuse/Strip decoder), and
 * the round trip through export-gguf.
 *
 * Reference data: tests/tokenizer/llama-spm/ holds llama.cpp's
 * models/ggml-vocab-llama-spm.gguf with its .inp/.out vocab test (the ids
 * were written by transformers' AutoTokenizer for Llama 2's tokenizer, and
 * llama.cpp's test-tokenizer-0 checks itself against them; MIT, see
 * LICENSE-llama.cpp there). tests/tokenizer/spm/ holds a SentencePiece BPE
 * model trained here and the ids Debian's sentencepiece library gives on
 * the tokenizer corpus (tools/spm-oracle.py says how). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "format/gguf.h"
#include "format/gguf_import.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "wisp.h"

#define SPM_DIR "tests/tokenizer/llama-spm"
#define SPM_GGUF SPM_DIR "/ggml-vocab-llama-spm.gguf"

/* The tokenizer import makes of a GGUF vocabulary (written under tmp/sub). */
static wisp_tokenizer *from_gguf(const char *path, const char *sub) {
  wisp_gguf *g = NULL;
  if (wisp_gguf_open(path, &g)) {
    test_fail_at(__FILE__, __LINE__, "%s", wisp_last_error());
    return NULL;
  }
  char dir[600], tj[700];
  snprintf(dir, sizeof dir, "%s/%s", test_tmpdir(), sub);
  mkdir(dir, 0755);
  int written = 0;
  wisp_status st = wisp_gguf_write_tokenizer(g, dir, &written);
  wisp_gguf_close(g);
  if (st || !written) {
    test_fail_at(__FILE__, __LINE__, "import: %s", st ? wisp_last_error() : "nothing written");
    return NULL;
  }
  snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
  wisp_tokenizer *t = NULL;
  if (wisp_tokenizer_from_file(tj, &t)) test_fail_at(__FILE__, __LINE__, "%s", wisp_last_error());
  return t;
}

/* Splits llama.cpp's .inp (texts between "\n__ggml_vocab_test__\n") and
 * .out (one line of ids per text). Returns the count; texts[i] point into inp. */
static int vocab_cases(char *inp, char *out, char **texts, char **ids, int cap) {
  static const char sep[] = "\n__ggml_vocab_test__\n";
  int n = 0;
  for (char *p = inp; n < cap;) {
    char *e = strstr(p, sep);
    if (!e) break;
    *e = 0;
    texts[n++] = p;
    p = e + strlen(sep);
  }
  int m = 0;
  for (char *p = out; m < n && *p;) {
    char *e = strchr(p, '\n');
    if (e) *e = 0;
    ids[m++] = p;
    if (!e) break;
    p = e + 1;
  }
  return m == n ? n : -1;
}

/* "1 2 3" == ids[0..n) */
static int ids_equal(const char *want, const int32_t *ids, int n) {
  const char *p = want;
  for (int i = 0; i < n; i++) {
    char *e;
    long v = strtol(p, &e, 10);
    if (e == p || v != ids[i]) return 0;
    p = e;
  }
  while (*p == ' ') p++;
  return *p == 0;
}

static void print_ids(char *buf, size_t cap, const int32_t *ids, int n) {
  size_t at = 0;
  buf[0] = 0;
  for (int i = 0; i < n && at + 16 < cap; i++) at += (size_t)snprintf(buf + at, cap - at, " %d", (int)ids[i]);
}

TEST(spm_llama_vocab_matches_llama_cpp_vocab_test) {
  wisp_tokenizer *t = from_gguf(SPM_GGUF, "llama-spm");
  CHECK(t);
  char *inp = NULL, *out = NULL;
  CHECK(wisp_read_file(SPM_GGUF ".inp", &inp, NULL) == WISP_OK);
  CHECK(wisp_read_file(SPM_GGUF ".out", &out, NULL) == WISP_OK);
  char *texts[128], *want[128];
  int n = vocab_cases(inp, out, texts, want, 128);
  CHECKF(n > 30, "%d cases", n);
  int bad = 0;
  for (int i = 0; i < n; i++) {
    int32_t *ids = NULL;
    int k = 0;
    if (wisp_tokenizer_encode_n(t, texts[i], strlen(texts[i]), 0, &ids, &k)) {
      test_fail_at(__FILE__, __LINE__, "case %d: %s", i, wisp_last_error());
      bad++;
      continue;
    }
    if (!ids_equal(want[i], ids, k)) {
      char got[2048];
      print_ids(got, sizeof got, ids, k);
      test_fail_at(__FILE__, __LINE__, "case %d '%s': want%s got%s", i, texts[i], want[i], got);
      bad++;
    } else { /* the decoder gives the text back */
      char *back = NULL;
      size_t len = 0;
      CHECK(wisp_tokenizer_decode(t, ids, k, &back, &len) == WISP_OK);
      if (len != strlen(texts[i]) || memcmp(back, texts[i], len)) {
        test_fail_at(__FILE__, __LINE__, "case %d: decode gives '%s' for '%s'", i, back, texts[i]);
        bad++;
      }
      free(back);
    }
    free(ids);
  }
  CHECKF(bad == 0, "%d of %d cases differ", bad, n);
  /* with special tokens: the BOS first, as llama.cpp and transformers add it
   * (15043 3186 is "Hello world" in the .out file) */
  int32_t *ids = NULL;
  int k = 0;
  CHECK(wisp_tokenizer_encode_n(t, "Hello world", 11, 1, &ids, &k) == WISP_OK);
  CHECKF(k == 3 && ids[0] == 1 && ids[1] == 15043 && ids[2] == 3186, "%d ids", k);
  free(ids);
  free(inp);
  free(out);
  wisp_tokenizer_free(t);
}

/* ---- a SentencePiece model trained here, sentencepiece as the oracle ---- */

/* Undoes corpus.txt's escapes (\\ \n \r, and \t in vocab.tsv) in place. */
static size_t unescape(char *s) {
  char *o = s;
  for (char *p = s; *p; p++) {
    if (*p == '\\' && p[1]) {
      char c = p[1];
      if (c == '\\' || c == 'n' || c == 'r' || c == 't') {
        *o++ = c == 'n' ? '\n' : c == 'r' ? '\r' : c == 't' ? '\t' : '\\';
        p++;
        continue;
      }
    }
    *o++ = *p;
  }
  *o = 0;
  return (size_t)(o - s);
}

/* Next line of *p (NUL-terminated in place), or NULL at the end. */
static char *next_line(char **p) {
  if (!*p || !**p) return NULL;
  char *s = *p, *e = strchr(s, '\n');
  if (e) *e = 0, *p = e + 1;
  else *p = s + strlen(s);
  return s;
}

/* tests/tokenizer/spm/vocab.tsv as a GGUF vocabulary at path; add_space_prefix
 * < 0 leaves the key out. Returns the token count, 0 on failure. */
static int write_spm_gguf(const char *path, int add_space_prefix) {
  char *tsv = NULL;
  if (wisp_read_file("tests/tokenizer/spm/vocab.tsv", &tsv, NULL)) return 0;
  int cap = 8192, n = 0;
  const char **pieces = calloc((size_t)cap, sizeof *pieces);
  float *scores = calloc((size_t)cap, sizeof *scores);
  int32_t *types = calloc((size_t)cap, sizeof *types);
  char *p = tsv, *line;
  while (pieces && scores && types && n < cap && (line = next_line(&p))) {
    char *t1 = strchr(line, '\t'), *t2 = t1 ? strchr(t1 + 1, '\t') : NULL;
    if (!t2) break;
    *t1 = *t2 = 0;
    unescape(line);
    pieces[n] = line;
    scores[n] = strtof(t1 + 1, NULL);
    types[n++] = atoi(t2 + 1);
  }
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  wisp_gguf_put_str(w, "general.architecture", "llama");
  wisp_gguf_put_str(w, "tokenizer.ggml.model", "llama");
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.tokens", pieces, (uint64_t)n);
  wisp_gguf_put_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n);
  wisp_gguf_put_arr_i32(w, "tokenizer.ggml.token_type", types, (uint64_t)n);
  wisp_gguf_put_u32(w, "tokenizer.ggml.unknown_token_id", 0);
  wisp_gguf_put_u32(w, "tokenizer.ggml.bos_token_id", 1);
  wisp_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", 2);
  if (add_space_prefix >= 0) wisp_gguf_put_bool(w, "tokenizer.ggml.add_space_prefix", add_space_prefix);
  int ok = wisp_gguf_writer_write(w, path) == WISP_OK;
  wisp_gguf_writer_free(w);
  free(pieces);
  free(scores);
  free(types);
  free(tsv);
  return ok ? n : 0;
}

TEST(spm_trained_model_matches_sentencepiece_on_corpus) {
  char gg[600];
  snprintf(gg, sizeof gg, "%s/trained.gguf", test_tmpdir());
  CHECKF(write_spm_gguf(gg, -1) > 1000, "%s", wisp_last_error());
  wisp_tokenizer *t = from_gguf(gg, "trained");
  CHECK(t);
  char *corpus = NULL, *expected = NULL;
  CHECK(wisp_read_file("tests/tokenizer/corpus.txt", &corpus, NULL) == WISP_OK);
  CHECK(wisp_read_file("tests/tokenizer/spm/expected.txt", &expected, NULL) == WISP_OK);
  char *cp = corpus, *ep = expected, *text, *want;
  int n = 0, bad = 0, fallback = 0;
  const int32_t first_byte = wisp_tokenizer_token_id(t, "<0x00>");
  while ((want = next_line(&ep)) && (text = next_line(&cp))) {
    size_t len = unescape(text);
    int32_t *ids = NULL;
    int k = 0;
    CHECKF(wisp_tokenizer_encode_n(t, text, len, 0, &ids, &k) == WISP_OK, "%s", wisp_last_error());
    n++;
    for (int i = 0; i < k; i++) fallback += ids[i] >= first_byte && ids[i] < first_byte + 256;
    if (!ids_equal(want, ids, k)) {
      if (bad++ < 5) {
        char got[4096];
        print_ids(got, sizeof got, ids, k);
        test_fail_at(__FILE__, __LINE__, "entry %d: want %s got%s", n, want, got);
      }
    } else {
      char *back = NULL;
      size_t blen = 0;
      CHECK(wisp_tokenizer_decode(t, ids, k, &back, &blen) == WISP_OK);
      if (blen != len || memcmp(back, text, len)) {
        if (bad++ < 5) test_fail_at(__FILE__, __LINE__, "entry %d: decode differs", n);
      }
      free(back);
    }
    free(ids);
  }
  CHECKF(n >= 1000 && bad == 0, "%d of %d entries differ", bad, n);
  CHECKF(fallback > 100, "only %d byte-fallback tokens: the corpus does not exercise byte fallback", fallback);
  free(corpus);
  free(expected);
  wisp_tokenizer_free(t);
}

/* Ids of the first `limit` corpus entries under t against expected.txt;
 * returns the number that differ (or -1 when the files cannot be read). */
static int corpus_mismatches(const wisp_tokenizer *t, int limit) {
  char *corpus = NULL, *expected = NULL;
  if (wisp_read_file("tests/tokenizer/corpus.txt", &corpus, NULL) ||
      wisp_read_file("tests/tokenizer/spm/expected.txt", &expected, NULL)) {
    free(corpus);
    return -1;
  }
  char *cp = corpus, *ep = expected, *text, *want;
  int n = 0, bad = 0;
  while (n < limit && (want = next_line(&ep)) && (text = next_line(&cp))) {
    size_t len = unescape(text);
    int32_t *ids = NULL;
    int k = 0;
    n++;
    if (wisp_tokenizer_encode_n(t, text, len, 0, &ids, &k) || !ids_equal(want, ids, k)) bad++;
    free(ids);
  }
  free(corpus);
  free(expected);
  return n == limit ? bad : -1;
}

TEST(spm_round_trip_through_export_gguf_and_convert) {
  char gg[600], art[600], out[600], back[600], cmd[4096], log[8192];
  snprintf(gg, sizeof gg, "%s/rt-vocab.gguf", test_tmpdir());
  CHECK(write_spm_gguf(gg, -1) > 1000);
  wisp_tokenizer *src = from_gguf(gg, "rt-src");
  CHECK(src);
  wisp_tokenizer_free(src);
  /* the default model with the SentencePiece tokenizer (vocab 3000 <= 4096) */
  snprintf(art, sizeof art, "%s/rt-art", test_tmpdir());
  snprintf(out, sizeof out, "%s/rt.gguf", test_tmpdir());
  snprintf(back, sizeof back, "%s/rt-back", test_tmpdir());
  snprintf(cmd, sizeof cmd,
           "cp -r models/default %s && cp %s/rt-src/*.json %s/ && %s export-gguf %s -o %s && "
           "%s convert %s -o %s --quant f32 --quiet",
           art, test_tmpdir(), art, test_wisp_bin(), art, out, test_wisp_bin(), out, back);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  /* tools/spm-llama-check.sh keeps the export to feed llama.cpp */
  const char *keep = getenv("WISP_SPM_EXPORT_TO");
  if (keep && *keep) {
    snprintf(cmd, sizeof cmd, "cp %s '%s'", out, keep);
    CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  }
  /* what llama.cpp reads */
  wisp_gguf *g = NULL;
  CHECKF(wisp_gguf_open(out, &g) == WISP_OK, "%s", wisp_last_error());
  const wisp_gguf_kv *model = wisp_gguf_kv_find(g, "tokenizer.ggml.model");
  const wisp_gguf_kv *types = wisp_gguf_kv_find(g, "tokenizer.ggml.token_type");
  const wisp_gguf_kv *scores = wisp_gguf_kv_find(g, "tokenizer.ggml.scores");
  int64_t prefix = -1, add_bos = -1, unk = -1;
  int model_ok = model && model->type == WISP_GGUF_STRING && model->str.len == 5 && !memcmp(model->str.s, "llama", 5);
  int types_ok = types && types->n == 4096 && wisp_gguf_arr_int(types, 0) == 2 && wisp_gguf_arr_int(types, 1) == 3 &&
                 wisp_gguf_arr_int(types, 3) == 6 && wisp_gguf_arr_int(types, 400) == 1 && wisp_gguf_arr_int(types, 4000) == 5;
  /* a later merge scores lower */
  int scores_ok = scores && scores->n == 4096 && wisp_gguf_arr_float(scores, 300) > wisp_gguf_arr_float(scores, 1200);
  wisp_gguf_get_int(g, "tokenizer.ggml.add_space_prefix", &prefix);
  wisp_gguf_get_int(g, "tokenizer.ggml.add_bos_token", &add_bos);
  wisp_gguf_get_int(g, "tokenizer.ggml.unknown_token_id", &unk);
  wisp_gguf_close(g);
  CHECK(model_ok);
  CHECK(types_ok);
  CHECK(scores_ok);
  CHECKF(prefix == 1 && add_bos == 1 && unk == 0, "add_space_prefix %lld add_bos %lld unk %lld", (long long)prefix,
         (long long)add_bos, (long long)unk);
  /* and back: the same ids, BOS added with special tokens */
  char tj[700];
  snprintf(tj, sizeof tj, "%s/tokenizer.json", back);
  wisp_tokenizer *t = NULL;
  CHECKF(wisp_tokenizer_from_file(tj, &t) == WISP_OK, "%s", wisp_last_error());
  int bad = corpus_mismatches(t, 400);
  CHECKF(bad == 0, "%d of 400 corpus entries differ after the round trip", bad);
  int32_t *ids = NULL;
  int k = 0;
  CHECK(wisp_tokenizer_encode_n(t, "Hello", 5, 1, &ids, &k) == WISP_OK);
  CHECKF(k >= 2 && ids[0] == 1, "k=%d first=%d", k, k ? (int)ids[0] : -1);
  free(ids);
  /* the GGUF run in place (-m FILE.gguf) tokenizes the same */
  const char *text = "Hello  world \xe4\xbd\xa0\xe5\xa5\xbd \xf0\x9f\xa6\x99";
  char want[1024] = "[", got[1024];
  CHECK(wisp_tokenizer_encode_n(t, text, strlen(text), 1, &ids, &k) == WISP_OK);
  for (int i = 0; i < k; i++)
    snprintf(want + strlen(want), sizeof want - strlen(want), "%s%d", i ? "," : "", (int)ids[i]);
  strcat(want, "]");
  free(ids);
  snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p '%s' 2>/dev/null", test_wisp_bin(), out, text);
  CHECKF(test_run(cmd, got, sizeof got) == 0, "%s", got);
  got[strcspn(got, "\n")] = 0;
  CHECKF(!strcmp(got, want), "-m FILE.gguf: %s, tokenizer.json: %s", got, want);
  wisp_tokenizer_free(t);
}

static int32_t *enc(const wisp_tokenizer *t, const char *s, size_t len, int special, int *k) {
  int32_t *ids = NULL;
  *k = 0;
  if (wisp_tokenizer_encode_n(t, s, len, special, &ids, k)) return NULL;
  return ids;
}

TEST(spm_add_space_prefix_off_as_gemma) {
  /* Without the dummy prefix, " X" normalizes to what "X" does with it, so
   * the sentencepiece ids of X (expected.txt, dummy prefix on) are the ids
   * of " X" here; and X itself decodes back without a space taken off. */
  char gg[600];
  snprintf(gg, sizeof gg, "%s/noprefix.gguf", test_tmpdir());
  CHECK(write_spm_gguf(gg, 0) > 1000);
  wisp_tokenizer *t = from_gguf(gg, "noprefix");
  CHECK(t);
  char *corpus = NULL, *expected = NULL;
  CHECK(wisp_read_file("tests/tokenizer/corpus.txt", &corpus, NULL) == WISP_OK);
  CHECK(wisp_read_file("tests/tokenizer/spm/expected.txt", &expected, NULL) == WISP_OK);
  char *cp = corpus, *ep = expected, *text, *want;
  int n = 0, bad = 0;
  while (n < 500 && (want = next_line(&ep)) && (text = next_line(&cp))) {
    size_t len = unescape(text);
    char *spaced = malloc(len + 2);
    CHECK(spaced);
    spaced[0] = ' ';
    memcpy(spaced + 1, text, len + 1);
    int k;
    /* (an empty text gets no dummy prefix: it stays empty) */
    int32_t *ids = len ? enc(t, spaced, len + 1, 0, &k) : enc(t, "", 0, 0, &k);
    n++;
    if (!ids || !ids_equal(want, ids, k)) {
      if (bad < 3) test_fail_at(__FILE__, __LINE__, "entry %d '%.40s': want %s", n, text, want);
      bad++;
    }
    free(ids);
    ids = enc(t, text, len, 0, &k);
    char *back = NULL;
    size_t blen = 0;
    if (!ids || wisp_tokenizer_decode(t, ids, k, &back, &blen) || blen != len || memcmp(back, text, len)) bad++;
    free(back);
    free(ids);
    free(spaced);
  }
  CHECKF(n == 500 && bad == 0, "%d mismatches in %d entries", bad, n);
  /* "Hello" alone starts without "▁" */
  int k;
  int32_t *ids = enc(t, "Hello", 5, 0, &k);
  CHECK(ids && k > 0);
  size_t l;
  const char *first = wisp_tokenizer_token_bytes(t, ids[0], &l);
  CHECKF(first && l > 0 && first[0] == 'H', "first piece '%.*s'", (int)l, first ? first : "");
  free(ids);
  free(corpus);
  free(expected);
  wisp_tokenizer_free(t);
}

TEST(spm_byte_fallback_and_streaming) {
  char gg[600];
  snprintf(gg, sizeof gg, "%s/bytes.gguf", test_tmpdir());
  CHECK(write_spm_gguf(gg, -1) > 1000);
  wisp_tokenizer *t = from_gguf(gg, "bytes");
  CHECK(t);
  /* U+1F999 (llama) is no token of this vocabulary: its 4 UTF-8 bytes are
   * the <0xF0> <0x9F> <0xA6> <0x99> tokens (ids 3 + byte) */
  const char text[] = "a \xf0\x9f\xa6\x99!";
  int k;
  int32_t *ids = enc(t, text, strlen(text), 0, &k);
  CHECK(ids);
  int at = -1;
  for (int i = 0; i + 3 < k && at < 0; i++)
    if (ids[i] == 3 + 0xF0 && ids[i + 1] == 3 + 0x9F && ids[i + 2] == 3 + 0xA6 && ids[i + 3] == 3 + 0x99) at = i;
  CHECKF(at >= 0, "no byte tokens for the emoji (%d ids)", k);
  char *back = NULL;
  size_t blen;
  CHECK(wisp_tokenizer_decode(t, ids, k, &back, &blen) == WISP_OK);
  CHECKF(blen == strlen(text) && !memcmp(back, text, blen), "decoded '%s'", back);
  free(back);
  /* the streaming decoder holds the bytes until the character is whole */
  wisp_stream_decoder d;
  wisp_stream_init(&d, t);
  const char *o;
  size_t ol;
  for (int i = 0; i <= at + 2; i++) CHECK(wisp_stream_push(&d, ids[i], &o, &ol) == WISP_OK);
  CHECKF(ol == 0, "%zu bytes of a partial character came out", ol);
  CHECK(wisp_stream_push(&d, ids[at + 3], &o, &ol) == WISP_OK);
  CHECKF(ol == 4 && !memcmp(o, "\xf0\x9f\xa6\x99", 4), "%zu bytes", ol);
  wisp_stream_free(&d);
  free(ids);
  wisp_tokenizer_free(t);
}

/* The imported tokenizer.json with its normalizer replaced by a Metaspace
 * pre-tokenizer (Llama 3 era files with legacy=false, Mistral v3). */
static wisp_tokenizer *metaspace_variant(const char *dir, const char *scheme, int split) {
  char path[700], *text = NULL;
  snprintf(path, sizeof path, "%s/%s/tokenizer.json", test_tmpdir(), dir);
  if (wisp_read_file(path, &text, NULL)) return NULL;
  cJSON *root = cJSON_Parse(text);
  free(text);
  cJSON_ReplaceItemInObject(root, "normalizer", cJSON_CreateNull());
  char pre[200], dec[200];
  snprintf(pre, sizeof pre, "{\"type\":\"Metaspace\",\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"%s\",\"split\":%s}",
           scheme, split ? "true" : "false");
  snprintf(dec, sizeof dec, "{\"type\":\"Sequence\",\"decoders\":[{\"type\":\"ByteFallback\"},{\"type\":\"Metaspace\","
           "\"replacement\":\"\xe2\x96\x81\",\"prepend_scheme\":\"%s\",\"split\":%s}]}", scheme, split ? "true" : "false");
  cJSON_ReplaceItemInObject(root, "pre_tokenizer", cJSON_Parse(pre));
  cJSON_ReplaceItemInObject(root, "decoder", cJSON_Parse(dec));
  char *json = cJSON_PrintUnformatted(root);
  cJSON_Delete(root);
  wisp_tokenizer *t = NULL;
  if (wisp_tokenizer_from_json(json, "metaspace", &t)) test_fail_at(__FILE__, __LINE__, "%s", wisp_last_error());
  free(json);
  return t;
}

TEST(spm_metaspace_pretokenizer) {
  char gg[600];
  snprintf(gg, sizeof gg, "%s/meta.gguf", test_tmpdir());
  CHECK(write_spm_gguf(gg, -1) > 1000);
  wisp_tokenizer *base = from_gguf(gg, "meta");
  CHECK(base);
  wisp_tokenizer *always = metaspace_variant("meta", "always", 0), *first = metaspace_variant("meta", "first", 0);
  wisp_tokenizer *split = metaspace_variant("meta", "always", 1);
  CHECK(always && first && split);
  /* no split, prepend: the same ids as Prepend + Replace for text that does
   * not start with a space (Metaspace adds no second "▁") */
  const char *texts[] = {"Hello world", "int main() {\n  return 0;\n}", "\xe4\xbd\xa0\xe5\xa5\xbd \xe4\xb8\x96\xe7\x95\x8c",
                         "a   b    c", "x\xf0\x9f\x98\x80y"};
  for (int i = 0; i < 5; i++) {
    int ka, kb;
    int32_t *a = enc(always, texts[i], strlen(texts[i]), 0, &ka), *b = enc(base, texts[i], strlen(texts[i]), 0, &kb);
    CHECK(a && b);
    CHECKF(ka == kb && !memcmp(a, b, sizeof(int32_t) * (size_t)ka), "'%s': %d vs %d ids", texts[i], ka, kb);
    char *back = NULL;
    size_t bl;
    CHECK(wisp_tokenizer_decode(always, a, ka, &back, &bl) == WISP_OK);
    CHECKF(bl == strlen(texts[i]) && !memcmp(back, texts[i], bl), "'%s' decodes to '%s'", texts[i], back);
    free(back);
    free(a);
    free(b);
  }
  /* " Hello": Prepend makes "▁▁Hello", Metaspace keeps "▁Hello", what
   * Prepend makes of "Hello" */
  int k1, k2;
  int32_t *m = enc(always, " Hello", 6, 0, &k1), *p = enc(base, "Hello", 5, 0, &k2);
  CHECK(m && p);
  CHECKF(k2 == k1 && !memcmp(m, p, sizeof(int32_t) * (size_t)k1), "%d vs %d ids", k1, k2);
  free(m);
  free(p);
  /* after a special token: "always" prepends again, "first" only at the start */
  m = enc(always, "</s>Hello", 9, 0, &k1);
  p = enc(first, "</s>Hello", 9, 0, &k2);
  int kh;
  int32_t *h = enc(base, "Hello", 5, 0, &kh);
  CHECK(m && p && h);
  CHECKF(m[0] == 2 && p[0] == 2 && k1 == 1 + kh && !memcmp(m + 1, h, sizeof(int32_t) * (size_t)kh),
         "always: %d ids", k1);
  size_t l;
  const char *s = wisp_tokenizer_token_bytes(first, p[1], &l);
  CHECKF(k2 >= 2 && s && s[0] == 'H', "first: the piece after </s> is '%.*s'", (int)l, s ? s : "");
  free(m);
  free(p);
  free(h);
  /* split: every "▁" starts a piece, so no token spans two words */
  m = enc(split, "a   b", 5, 0, &k1);
  CHECK(m);
  for (int i = 0; i < k1; i++) {
    s = wisp_tokenizer_token_bytes(split, m[i], &l);
    /* a piece holds at most one space, at its start (decoded "▁" -> " ") */
    int spaces = 0;
    for (size_t j = 0; j < l; j++) spaces += s[j] == ' ';
    CHECKF(spaces <= 1 && (spaces == 0 || s[0] == ' '), "piece %d '%.*s'", i, (int)l, s);
  }
  free(m);
  wisp_tokenizer_free(base);
  wisp_tokenizer_free(always);
  wisp_tokenizer_free(first);
  wisp_tokenizer_free(split);
}

/* A one-line error for what import cannot read. */
static void expect_import_error(const char *name, const char *model, int n_scores, const char *msg) {
  char path[600], dir[700];
  snprintf(path, sizeof path, "%s/%s.gguf", test_tmpdir(), name);
  const char *tokens[3] = {"<unk>", "a", "\xe2\x96\x81" "a"};
  const float scores[3] = {0, -1, -2};
  wisp_gguf_writer *w = wisp_gguf_writer_new();
  wisp_gguf_put_str(w, "tokenizer.ggml.model", model);
  wisp_gguf_put_arr_str(w, "tokenizer.ggml.tokens", tokens, 3);
  wisp_gguf_put_arr_f32(w, "tokenizer.ggml.scores", scores, (uint64_t)n_scores);
  int ok = wisp_gguf_writer_write(w, path) == WISP_OK;
  wisp_gguf_writer_free(w);
  CHECK(ok);
  wisp_gguf *g = NULL;
  CHECK(wisp_gguf_open(path, &g) == WISP_OK);
  snprintf(dir, sizeof dir, "%s/%s-dir", test_tmpdir(), name);
  mkdir(dir, 0755);
  int written = 1;
  wisp_status st = wisp_gguf_write_tokenizer(g, dir, &written);
  wisp_gguf_close(g);
  CHECKF(st != WISP_OK && !written && strstr(wisp_last_error(), msg) && !strchr(wisp_last_error(), '\n'),
         "%s: %s", name, st ? wisp_last_error() : "accepted");
}

TEST(spm_tokenizer_json_errors) {
  /* one line each, never a hang: an empty Metaspace replacement, a Regex Replace */
  const char *cases[][2] = {
      {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"decoder\":{\"type\":\"Metaspace\","
       "\"replacement\":\"\"}}", "empty replacement"},
      {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"pre_tokenizer\":{\"type\":\"Metaspace\","
       "\"replacement\":\"\"}}", "Metaspace replacement must be one character"},
      {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"normalizer\":{\"type\":\"Replace\","
       "\"pattern\":{\"Regex\":\" +\"},\"content\":\"x\"}}", "Regex pattern is not supported"},
      {"{\"model\":{\"type\":\"BPE\",\"vocab\":{\"a\":0},\"merges\":[]},\"decoder\":{\"type\":\"Strip\","
       "\"content\":\" \",\"start\":1,\"stop\":1}}", "Strip decoder is supported"},
  };
  for (int i = 0; i < 4; i++) {
    wisp_tokenizer *t = NULL;
    wisp_status st = wisp_tokenizer_from_json(cases[i][0], "bad.json", &t);
    CHECKF(st != WISP_OK && !t && strstr(wisp_last_error(), cases[i][1]), "case %d: %s", i,
           st ? wisp_last_error() : "accepted");
  }
}

TEST(spm_import_errors) {
  expect_import_error("bert", "bert", 3, "tokenizer.ggml.model 'bert' is not supported (wisp reads 'gpt2' byte-level BPE "
                      "and 'llama' SentencePiece)");
  expect_import_error("short-scores", "llama", 2, "tokenizer.ggml.scores must be a float array as long as the tokens");
}
