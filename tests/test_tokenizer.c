/* Tokenizer tests: hand-made tokenizer.json fixtures whose ids are worked out
 * by hand, the streaming decoder, chat templates, and (when present) the
 * reference data from tests/tokenizer/make_reference.py. */
#include <cJSON.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>
#include <utf8proc.h>

#include "fixtures.h"
#include "st_fixture.h"
#include "test.h"
#include "tokenizer/chat.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"

/* ---- a tiny byte-level BPE tokenizer.json ----
 * ids 0-255: the bytes; 256 he, 257 ll, 258 hell, 259 hello, 260 Ġw, 261 or,
 * 262 Ġwor, 263 ld, 264 Ġworld (no merge makes it); added: 265 <|im_start|>,
 * 266 <|im_end|>, 267 <s> (lstrip+rstrip), 268 <think> (normalized),
 * 269 fox (single_word), 270 <|startoftext|> (BOS via TemplateProcessing),
 * 271 <r> (rstrip only). */

static const char *GPT4_RE =
    "(?i:'s|'t|'re|'ve|'m|'ll|'d)|[^\\r\\n\\p{L}\\p{N}]?\\p{L}+|\\p{N}{1,3}| ?[^\\s\\p{L}\\p{N}]+[\\r\\n]*|\\s*[\\r\\n]+|"
    "\\s+(?!\\S)|\\s+";

/* byte -> its GPT-2 byte-level character, as UTF-8 */
static void byte_char(int b, char out[4]) {
  int n = 0, cp = -1;
  for (int i = 0; i < 256; i++) {
    int printable = (i >= 33 && i <= 126) || (i >= 161 && i <= 172) || (i >= 174 && i <= 255);
    int c = printable ? i : 256 + n++;
    if (i == b) cp = c;
  }
  utf8proc_ssize_t k = utf8proc_encode_char(cp, (utf8proc_uint8_t *)out);
  out[k] = 0;
}

static void add_added(cJSON *arr, int id, const char *content, int special, int lstrip, int rstrip, int normalized,
                      int single_word) {
  cJSON *o = cJSON_CreateObject();
  cJSON_AddNumberToObject(o, "id", id);
  cJSON_AddStringToObject(o, "content", content);
  cJSON_AddBoolToObject(o, "single_word", single_word);
  cJSON_AddBoolToObject(o, "lstrip", lstrip);
  cJSON_AddBoolToObject(o, "rstrip", rstrip);
  cJSON_AddBoolToObject(o, "normalized", normalized);
  cJSON_AddBoolToObject(o, "special", special);
  cJSON_AddItemToArray(arr, o);
}

static char *tiny_json(int ignore_merges, int nfc, const char *model_type) {
  cJSON *root = cJSON_CreateObject();
  cJSON_AddStringToObject(root, "version", "1.0");
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  add_added(added, 265, "<|im_start|>", 1, 0, 0, 0, 0);
  add_added(added, 266, "<|im_end|>", 1, 0, 0, 0, 0);
  add_added(added, 267, "<s>", 1, 1, 1, 0, 0);
  add_added(added, 268, "<think>", 0, 0, 0, 1, 0);
  add_added(added, 269, "fox", 0, 0, 0, 0, 1);
  add_added(added, 270, "<|startoftext|>", 1, 0, 0, 0, 0);
  add_added(added, 271, "<r>", 1, 0, 1, 0, 0);
  if (nfc) cJSON_AddItemToObject(root, "normalizer", cJSON_Parse("{\"type\":\"NFC\"}"));
  else cJSON_AddNullToObject(root, "normalizer");
  cJSON *pre = cJSON_AddObjectToObject(root, "pre_tokenizer");
  cJSON_AddStringToObject(pre, "type", "Sequence");
  cJSON *list = cJSON_AddArrayToObject(pre, "pretokenizers");
  cJSON *split = cJSON_CreateObject();
  cJSON_AddStringToObject(split, "type", "Split");
  cJSON_AddStringToObject(cJSON_AddObjectToObject(split, "pattern"), "Regex", GPT4_RE);
  cJSON_AddStringToObject(split, "behavior", "Isolated");
  cJSON_AddBoolToObject(split, "invert", 0);
  cJSON_AddItemToArray(list, split);
  cJSON_AddItemToArray(list, cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"trim_offsets\":true,"
                                         "\"use_regex\":false}"));
  cJSON_AddItemToObject(root, "post_processor", cJSON_Parse(
      "{\"type\":\"TemplateProcessing\",\"single\":[{\"SpecialToken\":{\"id\":\"<|startoftext|>\",\"type_id\":0}},"
      "{\"Sequence\":{\"id\":\"A\",\"type_id\":0}}],\"pair\":[],\"special_tokens\":{\"<|startoftext|>\":"
      "{\"id\":\"<|startoftext|>\",\"ids\":[270],\"tokens\":[\"<|startoftext|>\"]}}}"));
  cJSON_AddItemToObject(root, "decoder", cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,"
                                                     "\"trim_offsets\":true,\"use_regex\":true}"));
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "type", model_type);
  cJSON_AddNullToObject(model, "unk_token");
  cJSON_AddBoolToObject(model, "byte_fallback", 0);
  cJSON_AddBoolToObject(model, "ignore_merges", ignore_merges);
  cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
  char c[8];
  for (int b = 0; b < 256; b++) {
    byte_char(b, c);
    cJSON_AddNumberToObject(vocab, c, b);
  }
  const char *more[] = {"he", "ll", "hell", "hello", "\xc4\xa0w", "or", "\xc4\xa0wor", "ld", "\xc4\xa0world"};
  for (int i = 0; i < 9; i++) cJSON_AddNumberToObject(vocab, more[i], 256 + i);
  cJSON *merges = cJSON_AddArrayToObject(model, "merges");
  /* both spellings: "a b" strings and ["a", "b"] pairs */
  cJSON_AddItemToArray(merges, cJSON_CreateString("h e"));
  cJSON_AddItemToArray(merges, cJSON_CreateString("l l"));
  cJSON_AddItemToArray(merges, cJSON_CreateString("he ll"));
  const char *pairs[][2] = {{"hell", "o"}, {"\xc4\xa0", "w"}, {"o", "r"}, {"\xc4\xa0w", "or"}, {"l", "d"}};
  for (int i = 0; i < 5; i++) cJSON_AddItemToArray(merges, cJSON_CreateStringArray(pairs[i], 2));
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

static wisp_tokenizer *tiny(int ignore_merges, int nfc) {
  char *json = tiny_json(ignore_merges, nfc, "BPE");
  wisp_tokenizer *t = NULL;
  if (wisp_tokenizer_from_json(json, "tiny", &t)) fprintf(stderr, "tiny: %s\n", wisp_last_error());
  free(json);
  return t;
}

/* Encodes and compares with the expected ids; returns 1 when equal. */
static int enc_is(const wisp_tokenizer *t, const char *text, int add_special, const int32_t *want, int n_want) {
  int32_t *ids = NULL;
  int n = 0;
  if (wisp_tokenizer_encode_n(t, text, strlen(text), add_special, &ids, &n)) {
    fprintf(stderr, "encode '%s': %s\n", text, wisp_last_error());
    return 0;
  }
  int ok = n == n_want && !memcmp(ids, want, sizeof(int32_t) * (size_t)n);
  if (!ok) {
    fprintf(stderr, "encode '%s': got", text);
    for (int i = 0; i < n; i++) fprintf(stderr, " %d", ids[i]);
    fprintf(stderr, ", want");
    for (int i = 0; i < n_want; i++) fprintf(stderr, " %d", want[i]);
    fprintf(stderr, "\n");
  }
  free(ids);
  return ok;
}

#define ENC_IS(t, text, special, ...)                                                   \
  do {                                                                                 \
    const int32_t want_[] = {__VA_ARGS__};                                             \
    CHECK(enc_is(t, text, special, want_, (int)(sizeof want_ / sizeof want_[0])));     \
  } while (0)

static int roundtrip(const wisp_tokenizer *t, const char *text) {
  int32_t *ids = NULL;
  int n = 0;
  char *back = NULL;
  size_t len = 0;
  int ok = !wisp_tokenizer_encode_n(t, text, strlen(text), 0, &ids, &n) && !wisp_tokenizer_decode(t, ids, n, &back, &len) &&
           len == strlen(text) && !memcmp(back, text, len);
  free(ids);
  free(back);
  return ok;
}

TEST(bpe_merges_by_rank_and_ignore_merges) {
  wisp_tokenizer *t = tiny(0, 0);
  CHECK(t);
  CHECK(!strcmp(wisp_tokenizer_kind(t), "bpe"));
  CHECK(wisp_tokenizer_vocab_size(t) == 272);
  ENC_IS(t, "hello", 0, 259);
  ENC_IS(t, "hello world", 0, 259, 262, 263);   /* Ġ w o r l d -> Ġw or l d -> Ġw or ld -> Ġwor ld */
  ENC_IS(t, "lll", 0, 257, 108);            /* equal ranks: leftmost first */
  ENC_IS(t, "hello", 1, 270, 259);          /* TemplateProcessing adds BOS */
  CHECK(wisp_tokenizer_bos(t) == 270);
  ENC_IS(t, "12345", 0, 49, 50, 51, 52, 53); /* \p{N}{1,3} splits, no merges */
  wisp_tokenizer_free(t);
  t = tiny(1, 0);
  CHECK(t);
  ENC_IS(t, "hello world", 0, 259, 264);    /* " world" is in the vocabulary as a whole */
  ENC_IS(t, "worlds", 0, 119, 261, 263, 115);
  wisp_tokenizer_free(t);
  /* A vocabulary string outside the byte-level alphabet ("中" as itself) is
   * never matched by ignore_merges and decodes to its own UTF-8 bytes. */
  char *json = tiny_json(1, 0, "BPE");
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON_AddNumberToObject(cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "vocab"), "\xe4\xb8\xad", 272);
  json = cJSON_Print(root);
  cJSON_Delete(root);
  CHECK(!wisp_tokenizer_from_json(json, "raw", &t));
  free(json);
  ENC_IS(t, "\xe4\xb8\xad", 0, 228, 184, 173);
  size_t len;
  const char *bytes = wisp_tokenizer_token_bytes(t, 272, &len);
  CHECK(bytes && len == 3 && !memcmp(bytes, "\xe4\xb8\xad", 3));
  wisp_tokenizer_free(t);
}

/* The tiny tokenizer with another pre_tokenizer. */
static wisp_tokenizer *tiny_with_pretok(const char *pretok) {
  char *json = tiny_json(0, 0, "BPE");
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON_ReplaceItemInObject(root, "pre_tokenizer", cJSON_Parse(pretok));
  json = cJSON_Print(root);
  cJSON_Delete(root);
  wisp_tokenizer *t = NULL;
  if (wisp_tokenizer_from_json(json, "tiny", &t)) fprintf(stderr, "tiny: %s\n", wisp_last_error());
  free(json);
  return t;
}

TEST(bpe_pretokenizer_variants) {
  /* ByteLevel alone, GPT-2 regex and a prefix space: " hello", " world" */
  wisp_tokenizer *t = tiny_with_pretok("{\"type\":\"ByteLevel\",\"add_prefix_space\":true,\"use_regex\":true}");
  CHECK(t);
  ENC_IS(t, "hello world", 0, 32, 259, 262, 263);
  ENC_IS(t, " hello", 0, 32, 259);
  wisp_tokenizer_free(t);
  /* Split on a literal string, behaviors */
  const char *seq = "{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"String\":\"l\"},"
                    "\"behavior\":\"%s\",\"invert\":false},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}";
  char buf[512];
  snprintf(buf, sizeof buf, seq, "Removed");
  t = tiny_with_pretok(buf);
  CHECK(t);
  ENC_IS(t, "hello", 0, 256, 111);   /* "he" "o" */
  wisp_tokenizer_free(t);
  snprintf(buf, sizeof buf, seq, "Isolated");
  t = tiny_with_pretok(buf);
  ENC_IS(t, "hello", 0, 256, 108, 108, 111);
  wisp_tokenizer_free(t);
  snprintf(buf, sizeof buf, seq, "MergedWithPrevious");
  t = tiny_with_pretok(buf);
  ENC_IS(t, "hello", 0, 256, 108, 108, 111);  /* "hel" "l" "o" */
  ENC_IS(t, "lo", 0, 108, 111);
  wisp_tokenizer_free(t);
  snprintf(buf, sizeof buf, seq, "MergedWithNext");
  t = tiny_with_pretok(buf);
  ENC_IS(t, "hello", 0, 256, 108, 108, 111);  /* "he" "l" "lo" */
  wisp_tokenizer_free(t);
  /* \s is Unicode White_Space as in Oniguruma: U+3000 is, U+180E is not */
  t = tiny_with_pretok("{\"type\":\"Sequence\",\"pretokenizers\":[{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\s+\"},"
                       "\"behavior\":\"Removed\"},{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":false}]}");
  CHECK(t);
  ENC_IS(t, "a\xe3\x80\x80" "b", 0, 97, 98);
  ENC_IS(t, "a\xe1\xa0\x8e" "b", 0, 97, 225, 160, 142, 98);
  wisp_tokenizer_free(t);
  snprintf(buf, sizeof buf, seq, "Contiguous");
  CHECK(tiny_with_pretok(buf) == NULL && strstr(wisp_last_error(), "behavior 'Contiguous' is not supported"));
  CHECK(tiny_with_pretok("{\"type\":\"Whitespace\"}") == NULL && strstr(wisp_last_error(), "'Whitespace' is not supported"));
  CHECK(tiny_with_pretok("{\"type\":\"Split\",\"pattern\":{\"Regex\":\"\\\\p{L\"}}") == NULL &&
        strstr(wisp_last_error(), "PCRE2"));
  /* no ByteLevel pre-tokenizer: the ByteLevel decoder still makes it byte-level */
  t = tiny_with_pretok("{\"type\":\"Split\",\"pattern\":{\"String\":\" \"},\"behavior\":\"Removed\"}");
  CHECK(t);
  ENC_IS(t, "a b", 0, 97, 98);
  wisp_tokenizer_free(t);
}

TEST(cli_tokenize) {
  char *json = tiny_json(0, 0, "BPE");
  const char *path = fixture_write("tok.json", json);
  free(json);
  char p[700], cmd[1024], out[4096];
  snprintf(p, sizeof p, "%s", path);
  snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s -p 'hello world'", test_wisp_bin(), p);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, "[270,259,262,263]\n"), "%s", out);
  snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s --decode 259,262,263", test_wisp_bin(), p);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, "hello world"), "%s", out);
  const char *corpus = fixture_write("c.txt", "hello\\nworld\nlll\n");
  snprintf(cmd, sizeof cmd, "%s tokenize --tokenizer %s --no-special --corpus %s", test_wisp_bin(), p, corpus);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && !strcmp(out, "[259,10,119,261,263]\n[257,108]\n"), "%s", out);
}

TEST(bpe_added_tokens_and_flags) {
  wisp_tokenizer *t = tiny(0, 1);
  CHECK(t);
  ENC_IS(t, "<|im_start|>hello<|im_end|>", 0, 265, 259, 266);
  ENC_IS(t, "a <|im_end|> b", 0, 97, 32, 266, 32, 98);
  ENC_IS(t, "a <s> b", 0, 97, 267, 98);            /* lstrip + rstrip eat the spaces */
  ENC_IS(t, "a  <s>\n\nb", 0, 97, 267, 98);
  ENC_IS(t, "a <r> b", 0, 97, 32, 271, 98);        /* rstrip only */
  ENC_IS(t, "fox foxes", 0, 269, 32, 102, 111, 120, 101, 115); /* single_word */
  ENC_IS(t, "xfox fox", 0, 120, 102, 111, 120, 32, 269);
  ENC_IS(t, "<think>x", 0, 268, 120);              /* a normalized added token */
  ENC_IS(t, "<|im_start|<|im_start|>", 0, 60, 124, 105, 109, 95, 115, 116, 97, 114, 116, 124, 265);
  ENC_IS(t, "e\xcc\x81", 0, 195, 169);             /* NFC: e + combining acute -> U+00E9 */
  CHECK(wisp_tokenizer_token_id(t, "<|im_end|>") == 266);
  CHECK(wisp_tokenizer_token_id(t, "hello") == 259);
  CHECK(wisp_tokenizer_token_id(t, "nope") == -1);
  CHECK(wisp_tokenizer_is_special(t, 266) && !wisp_tokenizer_is_special(t, 268) && !wisp_tokenizer_is_special(t, 259));
  const char *texts[] = {"hello world", "<|im_start|>user\nhi<|im_end|>\n", "Привет, мир! 😀👨‍👩‍👧", "  \t\n\n x",
                         "", "don't I'LL 123456"};
  for (size_t i = 0; i < sizeof texts / sizeof texts[0]; i++) CHECKF(roundtrip(t, texts[i]), "round trip '%s'", texts[i]);
  /* invalid UTF-8 is an error, not a crash */
  int32_t *ids = NULL;
  int n = 0;
  CHECK(wisp_tokenizer_encode_n(t, "a\xff", 2, 0, &ids, &n) == WISP_EINVAL);
  CHECK(strstr(wisp_last_error(), "UTF-8"));
  wisp_tokenizer_free(t);
}

TEST(bpe_bad_files_are_one_line_errors) {
  wisp_tokenizer *t = NULL;
  char *json = tiny_json(0, 0, "Unigram");
  CHECK(wisp_tokenizer_from_json(json, "x.json", &t) == WISP_EUNSUPPORTED);
  CHECKF(strstr(wisp_last_error(), "x.json: tokenizer model type 'Unigram' is not supported"), "%s", wisp_last_error());
  free(json);
  json = tiny_json(0, 0, "WordPiece");
  CHECK(wisp_tokenizer_from_json(json, "x.json", &t) == WISP_EUNSUPPORTED && strstr(wisp_last_error(), "WordPiece"));
  free(json);
  CHECK(wisp_tokenizer_from_json("{\"model\": {\"type\": \"BPE\", ", "bad.json", &t) == WISP_EFORMAT);
  CHECKF(strstr(wisp_last_error(), "bad.json: malformed JSON"), "%s", wisp_last_error());
  json = tiny_json(0, 0, "BPE");
  char *at = strstr(json, "\"l d\"") ? strstr(json, "\"l d\"") : NULL;
  (void)at;
  cJSON *root = cJSON_Parse(json);
  free(json);
  cJSON *merges = cJSON_GetObjectItem(cJSON_GetObjectItem(root, "model"), "merges");
  cJSON_AddItemToArray(merges, cJSON_CreateString("q z"));
  json = cJSON_Print(root);
  cJSON_Delete(root);
  CHECK(wisp_tokenizer_from_json(json, "m.json", &t) == WISP_EFORMAT && strstr(wisp_last_error(), "merges[8]"));
  free(json);
  CHECK(wisp_tokenizer_from_file("/nonexistent/tokenizer.json", &t) == WISP_EIO);
  CHECK(t == NULL);
}

TEST(utf8_prefix_and_streaming_decoder) {
  CHECK(wisp_utf8_complete_prefix("\xc3", 1) == 0);
  CHECK(wisp_utf8_complete_prefix("a\xe2\x82", 3) == 1);
  CHECK(wisp_utf8_complete_prefix("\xe2\x82\xac", 3) == 3);
  CHECK(wisp_utf8_complete_prefix("a\xf0\x9f\x98", 4) == 1);
  CHECK(wisp_utf8_complete_prefix("\xff", 1) == 1);     /* invalid: nothing to wait for */
  CHECK(wisp_utf8_complete_prefix("\xc3\x28", 2) == 2);
  CHECK(wisp_utf8_complete_prefix("\xed\xa0", 2) == 2); /* a surrogate never completes */
  CHECK(wisp_utf8_valid("\xe2\x82\xac", 3) && !wisp_utf8_valid("\xc0\xaf", 2) && !wisp_utf8_valid("\xed\xa0\x80", 3));
  wisp_tokenizer *t = tiny(0, 0);
  CHECK(t);
  const char *text = "\xc3\xa9\xf0\x9f\x98\x80" "a";  /* é 😀 a: one byte token each */
  int32_t *ids = NULL;
  int n = 0;
  CHECK(!wisp_tokenizer_encode_n(t, text, strlen(text), 0, &ids, &n) && n == 7);
  wisp_stream_decoder d;
  wisp_stream_init(&d, t);
  const size_t want[7] = {0, 2, 0, 0, 0, 4, 1};
  char all[64];
  size_t at = 0;
  int ok = 1;
  for (int i = 0; i < n; i++) {
    const char *out;
    size_t len;
    CHECK(!wisp_stream_push(&d, ids[i], &out, &len));
    ok &= len == want[i] && wisp_utf8_valid(out, len);
    memcpy(all + at, out, len);
    at += len;
  }
  const char *out;
  size_t len;
  /* a dangling lead byte comes out only at the flush */
  CHECK(!wisp_stream_push(&d, 0xe2, &out, &len) && len == 0);
  wisp_stream_flush(&d, &out, &len);
  CHECK(len == 1 && (unsigned char)out[0] == 0xe2);
  wisp_stream_free(&d);
  free(ids);
  wisp_tokenizer_free(t);
  CHECK(ok);
  CHECK(at == strlen(text) && !memcmp(all, text, at));
}

TEST(byte_tokenizer_still_works) {
  wisp_tokenizer *t = NULL;
  CHECK(!wisp_tokenizer_new("byte", 300, &t));
  ENC_IS(t, "ab", 1, 97, 98);
  char p[16];
  CHECK(wisp_tokenizer_piece(t, 290, p, sizeof p) == 7 && !memcmp(p, "<|290|>", 7));
  CHECK(wisp_tokenizer_bos(t) == -1);
  wisp_tokenizer_free(t);
  CHECK(wisp_tokenizer_new("sentencepiece", 300, &t) == WISP_EUNSUPPORTED);
}

/* ---- chat templates ---- */

static const wisp_chat_message CONV[] = {
    {"system", "You are a helpful assistant."},
    {"user", "Hello, who are you?"},
    {"assistant", "I am wisp."},
    {"user", "Tell me a joke."},
};

/* The repository's LFM2 and Qwen 3.5 templates, rendered (tokenizer/chat_template.h). */
TEST(chat_templates_render) {
  wisp_chat_tmpl *lfm2 = NULL, *qwen = NULL;
  CHECKF(!wisp_chat_tmpl_load("tests/tokenizer/lfm2/tokenizer_config.json", NULL, &lfm2), "%s", wisp_last_error());
  CHECKF(!wisp_chat_tmpl_load("tests/tokenizer/qwen35/tokenizer_config.json", NULL, &qwen), "%s", wisp_last_error());
  char *s = NULL;
  CHECK(!wisp_chat_tmpl_messages(lfm2, CONV, 4, 1, 0, &s));
  CHECKF(!strcmp(s, "<|startoftext|><|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\nI am wisp.<|im_end|>\n"
                    "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n"),
         "%s", s);
  /* turn by turn (kept state) gives the same text for LFM2 */
  char *t1 = NULL, *t2 = NULL;
  CHECK(!wisp_chat_tmpl_turn(lfm2, 1, CONV[0].content, CONV[1].content, 0, &t1));
  CHECK(!wisp_chat_tmpl_turn(lfm2, 0, NULL, CONV[3].content, 0, &t2));
  char joined[1024];
  snprintf(joined, sizeof joined, "%s%s%s", t1, CONV[2].content, t2);
  CHECK(!strcmp(joined, s));
  free(s);
  free(t1);
  free(t2);
  CHECK(!wisp_chat_tmpl_messages(qwen, CONV, 4, 1, 0, &s));
  CHECKF(!strcmp(s, "<|im_start|>system\nYou are a helpful assistant.<|im_end|>\n"
                    "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\nI am wisp.<|im_end|>\n"
                    "<|im_start|>user\nTell me a joke.<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"),
         "%s", s);
  free(s);
  CHECK(!wisp_chat_tmpl_messages(qwen, CONV + 1, 1, 1, 1, &s));
  CHECK(!strcmp(s, "<|im_start|>user\nHello, who are you?<|im_end|>\n<|im_start|>assistant\n"));
  free(s);
  CHECK(!wisp_chat_tmpl_turn(qwen, 0, "ignored", "Hi", 0, &s));
  CHECK(!strcmp(s, "<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  free(s);
  wisp_chat_tmpl_free(lfm2);
  wisp_chat_tmpl_free(qwen);
}

TEST(chat_detect_and_stop_tokens) {
  cJSON *c = cJSON_Parse("{\"bos_token\": \"<|startoftext|>\", \"chat_template\": \"{{- bos_token -}}{% for m in messages %}<|im_start|>{% endfor %}\"}");
  CHECK(wisp_chat_detect(c) == WISP_CHAT_LFM2);
  cJSON_Delete(c);
  c = cJSON_Parse("{\"chat_template\": \"{%- if enable_thinking is defined %}<think>{% endif %}<|im_start|>\"}");
  CHECK(wisp_chat_detect(c) == WISP_CHAT_QWEN);
  cJSON_Delete(c);
  c = cJSON_Parse("{\"bos_token\": \"<|startoftext|>\", \"chat_template\": \"{{ bos_token }}<think></think><|im_start|>\"}");
  CHECK(wisp_chat_detect(c) == WISP_CHAT_LFM2);
  cJSON_Delete(c);
  c = cJSON_Parse("{\"chat_template\": [{\"name\": \"tool_use\", \"template\": \"x\"}, {\"name\": \"default\", \"template\": \"<|im_start|>\"}]}");
  CHECK(wisp_chat_detect(c) == WISP_CHAT_CHATML);
  cJSON_Delete(c);
  c = cJSON_Parse("{\"chat_template\": \"[INST] {{ m }} [/INST]\"}");
  CHECK(wisp_chat_detect(c) == WISP_CHAT_NONE);
  cJSON_Delete(c);
  CHECK(wisp_chat_detect(NULL) == WISP_CHAT_NONE);
  wisp_tokenizer *t = tiny(0, 0);
  CHECK(t);
  const char *cfg = fixture_write("tc.json", "{\"eos_token\": {\"content\": \"<|startoftext|>\"}, \"chat_template\": \"<|startoftext|>\"}");
  char cfgp[700];
  snprintf(cfgp, sizeof cfgp, "%s", cfg);
  const char *gen = fixture_write("gc.json", "{\"eos_token_id\": [265, 7]}");
  wisp_chat_info info;
  CHECK(!wisp_chat_load(cfgp, gen, t, &info));
  CHECK(info.kind == WISP_CHAT_LFM2);
  CHECK(info.n_stop == 4 && wisp_chat_is_stop(&info, 265) && wisp_chat_is_stop(&info, 7) &&
        wisp_chat_is_stop(&info, 270) && wisp_chat_is_stop(&info, 266) && !wisp_chat_is_stop(&info, 259));
  gen = fixture_write("gc2.json", "{\"eos_token_id\": 3}");
  CHECK(!wisp_chat_load(NULL, gen, t, &info) && info.n_stop == 2 && wisp_chat_is_stop(&info, 3) && info.kind == WISP_CHAT_NONE);
  gen = fixture_write("gc3.json", "{\"eos_token_id\": \"x\"}");
  CHECK(wisp_chat_load(NULL, gen, t, &info) == WISP_EFORMAT);
  wisp_tokenizer_free(t);
}

/* ---- reference data from tests/tokenizer/make_reference.py ---- */

/* Undoes make_corpus.py's escapes (\\ \n \r) in place; returns the length. */
static size_t unescape(char *s) {
  size_t o = 0;
  for (size_t i = 0; s[i]; i++) {
    if (s[i] == '\\' && (s[i + 1] == '\\' || s[i + 1] == 'n' || s[i + 1] == 'r')) {
      s[o++] = s[i + 1] == 'n' ? '\n' : s[i + 1] == 'r' ? '\r' : '\\';
      i++;
    } else {
      s[o++] = s[i];
    }
  }
  s[o] = 0;
  return o;
}

/* Splits a buffer into lines (on '\n' only), in place. */
static int split_lines(char *buf, char ***lines) {
  int n = 0, cap = 1024;
  *lines = malloc(sizeof(char *) * (size_t)cap);
  char *p = buf;
  while (*lines && *p) {
    char *nl = strchr(p, '\n');
    if (n == cap) *lines = realloc(*lines, sizeof(char *) * (size_t)(cap *= 2));
    if (!*lines) break;
    (*lines)[n++] = p;
    if (!nl) break;
    *nl = 0;
    p = nl + 1;
  }
  return n;
}

static void print_ids(char *out, size_t cap, const int32_t *ids, int n) {
  size_t at = 0;
  out[0] = 0;
  for (int i = 0; i < n && at + 16 < cap; i++) at += (size_t)snprintf(out + at, cap - at, "%s%d", i ? "," : "", ids[i]);
}

static void check_reference(const char *kind, int add_special, int nfc) {
  char dir[256], path[512];
  snprintf(dir, sizeof dir, "tests/tokenizer/%s", kind);
  snprintf(path, sizeof path, "%s/expected.jsonl", dir);
  CHECKF(wisp_path_exists(path),
         "%s is missing: run `python3 tests/tokenizer/make_reference.py` (tokenizers 0.23 + transformers) on the GPU "
         "machine from the repository root and commit tests/tokenizer/%s/",
         path, kind);
  char *corpus = NULL, *expected = NULL, **cl = NULL, **el = NULL;
  wisp_tokenizer *t = NULL;
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  int ok = !wisp_tokenizer_from_file(path, &t);
  CHECKF(ok, "%s", wisp_last_error());
  snprintf(path, sizeof path, "%s/expected.jsonl", dir);
  ok = !wisp_read_file("tests/tokenizer/corpus.txt", &corpus, NULL) && !wisp_read_file(path, &expected, NULL);
  int nc = ok ? split_lines(corpus, &cl) : 0, ne = ok ? split_lines(expected, &el) : 0;
  int mismatches = 0, roundtrip_bad = 0, stream_bad = 0, first = -1;
  char first_msg[4096] = "", rt_msg[1024] = "", st_msg[512] = "";
  if (ok && nc != ne) {
    snprintf(first_msg, sizeof first_msg, "corpus.txt has %d lines, %s has %d: regenerate the reference", nc, path, ne);
    mismatches = 1;
  }
  for (int i = 0; ok && !mismatches && i < nc; i++) {
    size_t len = unescape(cl[i]);
    int32_t *ids = NULL;
    int n = 0;
    if (wisp_tokenizer_encode_n(t, cl[i], len, add_special, &ids, &n)) {
      if (!mismatches++) snprintf(first_msg, sizeof first_msg, "line %d: %s", i + 1, wisp_last_error());
      continue;
    }
    cJSON *ref = cJSON_Parse(el[i]);
    int nr = cJSON_IsArray(ref) ? cJSON_GetArraySize(ref) : -1, same = nr == n;
    int32_t *rids = malloc(sizeof(int32_t) * (size_t)(nr > 0 ? nr : 1));
    for (int k = 0; k < nr; k++) rids[k] = (int32_t)cJSON_GetArrayItem(ref, k)->valuedouble;
    for (int k = 0; same && k < n; k++) same = ids[k] == rids[k];
    cJSON_Delete(ref);
    if (!same && !mismatches++) {
      char a[1500], b[1500];
      print_ids(a, sizeof a, ids, n);
      print_ids(b, sizeof b, rids, nr);
      first = i + 1;
      snprintf(first_msg, sizeof first_msg, "line %d \"%.200s\": wisp [%s] vs reference [%s]", first, cl[i], a, b);
    }
    free(rids);
    /* decode(encode(x)) == x (NFC(x) when the tokenizer normalizes), without the BOS */
    free(ids);
    if (wisp_tokenizer_encode_n(t, cl[i], len, 0, &ids, &n)) continue;
    char *back = NULL, *want = cl[i];
    size_t blen = 0, wlen = len;
    utf8proc_uint8_t *norm = NULL;
    if (nfc) {
      utf8proc_ssize_t r = utf8proc_map((const utf8proc_uint8_t *)cl[i], (utf8proc_ssize_t)len, &norm,
                                        UTF8PROC_STABLE | UTF8PROC_COMPOSE);
      if (r >= 0) want = (char *)norm, wlen = (size_t)r;
    }
    if (wisp_tokenizer_decode(t, ids, n, &back, &blen) || blen != wlen || memcmp(back, want, wlen)) {
      if (!roundtrip_bad++) snprintf(rt_msg, sizeof rt_msg, "line %d \"%.200s\" decodes to \"%.200s\"", i + 1, cl[i], back ? back : "");
    }
    /* streaming: same bytes, every chunk valid UTF-8 */
    wisp_stream_decoder d;
    wisp_stream_init(&d, t);
    size_t at = 0;
    int good = 1;
    for (int k = 0; k < n && good; k++) {
      const char *out;
      size_t ol;
      good = !wisp_stream_push(&d, ids[k], &out, &ol) && wisp_utf8_valid(out, ol) && at + ol <= blen &&
             !memcmp(back + at, out, ol);
      at += ol;
    }
    const char *out;
    size_t ol;
    wisp_stream_flush(&d, &out, &ol);
    good = good && ol == 0 && at == blen;
    wisp_stream_free(&d);
    if (!good && !stream_bad++) snprintf(st_msg, sizeof st_msg, "line %d: streaming decode differs or split a character", i + 1);
    free(norm);
    free(back);
    free(ids);
  }
  free(cl);
  free(el);
  free(corpus);
  free(expected);
  wisp_tokenizer_free(t);
  CHECKF(ok, "cannot read the corpus or %s", path);
  CHECKF(!mismatches, "%s: %d of %d lines differ; first: %s", kind, mismatches, nc, first_msg);
  CHECKF(!roundtrip_bad, "%s: %d lines do not round-trip; first: %s", kind, roundtrip_bad, rt_msg);
  CHECKF(!stream_bad, "%s: %d lines stream badly; first: %s", kind, stream_bad, st_msg);
  /* chat.json: templates as transformers renders them */
  snprintf(path, sizeof path, "%s/chat.json", dir);
  if (!wisp_path_exists(path)) return;
  char *text = NULL;
  CHECK(!wisp_read_file(path, &text, NULL));
  cJSON *chat = cJSON_Parse(text);
  free(text);
  CHECK(chat);
  wisp_chat_template kind_t = !strcmp(kind, "lfm2") ? WISP_CHAT_LFM2 : WISP_CHAT_QWEN;
  char cfg[512];
  snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
  wisp_chat_info info;
  snprintf(path, sizeof path, "%s/generation_config.json", dir);
  wisp_tokenizer *t2 = NULL;
  char tj[512];
  snprintf(tj, sizeof tj, "%s/tokenizer.json", dir);
  int loaded = !wisp_tokenizer_from_file(tj, &t2) && !wisp_chat_load(cfg, path, t2, &info);
  int32_t im_end = t2 ? wisp_tokenizer_token_id(t2, "<|im_end|>") : -1;
  wisp_tokenizer_free(t2);
  const cJSON *gp = cJSON_GetObjectItem(chat, "generation_prompt"), *gt = cJSON_GetObjectItem(chat, "generation_prompt_thinking");
  wisp_chat_tmpl *tm = NULL;
  char *mine = NULL, *mine_t = NULL;
  if (!wisp_chat_tmpl_load(cfg, NULL, &tm)) {
    wisp_chat_tmpl_messages(tm, CONV, 4, 1, 0, &mine);
    wisp_chat_tmpl_messages(tm, CONV, 4, 1, 1, &mine_t);
  }
  wisp_chat_tmpl_free(tm);
  int same = cJSON_IsString(gp) && mine && !strcmp(mine, gp->valuestring);
  int same_t = !gt || (cJSON_IsString(gt) && mine_t && !strcmp(mine_t, gt->valuestring));
  char msg[2048];
  snprintf(msg, sizeof msg, "wisp:\n%s\ntransformers:\n%s", mine ? mine : "", cJSON_IsString(gp) ? gp->valuestring : "");
  free(mine);
  free(mine_t);
  cJSON_Delete(chat);
  CHECKF(loaded && info.kind == kind_t && wisp_chat_is_stop(&info, im_end), "%s: template detection/stop ids", kind);
  CHECKF(same, "%s chat template differs: %s", kind, msg);
  CHECK(same_t);
}

TEST(tokenizer_matches_reference_lfm2) { check_reference("lfm2", 1, 0); }
TEST(tokenizer_matches_reference_qwen35) { check_reference("qwen35", 0, 1); }

/* ---- wisp run --chat on a small artifact with the tiny BPE tokenizer ---- */

static void make_bpe_manifest(cJSON *m) {
  cJSON *w = cJSON_GetObjectItem(m, "wisp");
  if (!w) w = cJSON_AddObjectToObject(m, "wisp");
  cJSON_DeleteItemFromObject(w, "tokenizer");
  cJSON_AddStringToObject(w, "tokenizer", "bpe");
  cJSON *f = cJSON_AddObjectToObject(w, "tokenizerFiles");
  cJSON_AddStringToObject(f, "tokenizer", "tokenizer.json");
  cJSON_AddStringToObject(f, "config", "tokenizer_config.json");
  cJSON_AddStringToObject(f, "generation", "generation_config.json");
}

static void write_to(const char *dir, const char *name, const char *text) {
  char p[800];
  snprintf(p, sizeof p, "%s/%s", dir, name);
  FILE *f = fopen(p, "wb");
  if (f) {
    fputs(text, f);
    fclose(f);
  }
}

static const char *chat_model(void) {
  static char dir[600];
  if (dir[0]) return dir;
  const char *d = fixture_variant("chat-model", make_bpe_manifest, 0);
  if (!d) return NULL;
  snprintf(dir, sizeof dir, "%s", d);
  char *json = tiny_json(0, 0, "BPE");
  write_to(dir, "tokenizer.json", json);
  free(json);
  write_to(dir, "tokenizer_config.json",
           "{\"bos_token\": \"<|startoftext|>\", \"eos_token\": \"<|im_end|>\", \"chat_template\": "
           "\"{{- bos_token -}}{%- for message in messages -%}{{- '<|im_start|>' + message['role'] + '\\\\n' + "
           "message['content'] + '<|im_end|>\\\\n' -}}{%- endfor -%}\"}");
  write_to(dir, "generation_config.json", "{\"eos_token_id\": 266}");
  return dir;
}

TEST(cli_chat_two_turns) {
  const char *dir = chat_model();
  CHECK(dir);
  char cmd[2048], out[16384];
  snprintf(cmd, sizeof cmd, "printf 'hello\\nhow are you?\\n' | %s run --backend cpu --profile exact -m %s --chat -sys 'Be brief.' -n 6 --temp 0",
           test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strstr(out, "lfm2 template") && strstr(out, "[reply 1: ") && strstr(out, "[reply 2: ") &&
             !strstr(out, "[reply 3: "),
         "%s", out);
  /* /exit ends the conversation */
  snprintf(cmd, sizeof cmd, "printf 'hello\\n/exit\\nnever\\n' | %s run --backend cpu --profile exact -m %s --chat -n 4 --temp 0", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "[reply 1: ") && !strstr(out, "[reply 2: "), "%s", out);
  /* plain run works with the BPE tokenizer too (prompt tokens: BOS + hello) */
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p hello -n 3 --temp 0", test_wisp_bin(), dir);
  CHECKF(test_run(cmd, out, sizeof out) == 0 && strstr(out, "2 prompt tokens"), "%s", out);
  /* a byte-tokenizer model has no chat template */
  snprintf(cmd, sizeof cmd, "echo hi | %s run --backend cpu --profile exact -m %s --chat -n 2", test_wisp_bin(), fixture_small_model());
  CHECKF(test_run(cmd, out, sizeof out) == 1 && strstr(out, "no chat template"), "%s", out);
}

/* ---- wisp convert carries the tokenizer ---- */

/* A tokenizer small enough for the 96-token test checkpoint: bytes 32..122
 * are ids 0..90, then four specials. */
static char *micro_json(void) {
  cJSON *root = cJSON_CreateObject();
  cJSON *added = cJSON_AddArrayToObject(root, "added_tokens");
  add_added(added, 91, "<|startoftext|>", 1, 0, 0, 0, 0);
  add_added(added, 92, "<|im_start|>", 1, 0, 0, 0, 0);
  add_added(added, 93, "<|im_end|>", 1, 0, 0, 0, 0);
  add_added(added, 94, "<|endoftext|>", 1, 0, 0, 0, 0);
  cJSON_AddItemToObject(root, "pre_tokenizer", cJSON_Parse("{\"type\":\"ByteLevel\",\"add_prefix_space\":false,\"use_regex\":true}"));
  cJSON *model = cJSON_AddObjectToObject(root, "model");
  cJSON_AddStringToObject(model, "type", "BPE");
  cJSON *vocab = cJSON_AddObjectToObject(model, "vocab");
  char c[8];
  for (int b = 32; b <= 122; b++) {
    byte_char(b, c);
    cJSON_AddNumberToObject(vocab, c, b - 32);
  }
  cJSON_AddArrayToObject(model, "merges");
  char *text = cJSON_Print(root);
  cJSON_Delete(root);
  return text;
}

TEST(convert_copies_tokenizer_files) {
  char hf[600], out[700], cmd[2048], log[16384];
  snprintf(hf, sizeof hf, "%s/hf_tok", test_tmpdir());
  CHECK(mkdir(hf, 0755) == 0 && fx_write_tiny_lfm2(hf, NULL) == 0);
  char *json = micro_json();
  write_to(hf, "tokenizer.json", json);
  free(json);
  write_to(hf, "tokenizer_config.json", "{\"bos_token\": \"<|startoftext|>\", \"eos_token\": \"<|im_end|>\", "
                                        "\"chat_template\": \"{{ bos_token }}{% for m in messages %}<|im_start|>{{ m.role }}\\n{{ m.content }}"
                                        "<|im_end|>\\n{% endfor %}{% if add_generation_prompt %}<|im_start|>assistant\\n{% endif %}\"}");
  write_to(hf, "generation_config.json", "{\"eos_token_id\": [93, 94]}");
  snprintf(out, sizeof out, "%s/art_tok", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, out);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);
  const char *names[] = {"tokenizer.json", "tokenizer_config.json", "generation_config.json"};
  for (int i = 0; i < 3; i++) {
    char p[800];
    snprintf(p, sizeof p, "%s/%s", out, names[i]);
    CHECKF(wisp_path_exists(p), "%s missing", p);
  }
  char mp[800], *text = NULL;
  snprintf(mp, sizeof mp, "%s/manifest.json", out);
  CHECK(!wisp_read_file(mp, &text, NULL));
  cJSON *m = cJSON_Parse(text);
  free(text);
  cJSON *w = cJSON_GetObjectItem(m, "wisp"), *files = cJSON_GetObjectItem(w, "tokenizerFiles");
  int ok = !strcmp(cJSON_GetObjectItem(w, "tokenizer")->valuestring, "bpe") && files &&
           !strcmp(cJSON_GetObjectItem(files, "generation")->valuestring, "generation_config.json");
  cJSON_Delete(m);
  CHECK(ok);
  /* the artifact chats: LFM2 template, stops on <|im_end|> / <|endoftext|> */
  snprintf(cmd, sizeof cmd, "printf 'hi there\\nand again\\n' | %s run --backend cpu --profile exact -m %s --chat -n 5 --temp 0", test_wisp_bin(), out);
  CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "lfm2 template, 2 stop tokens") && strstr(log, "[reply 2: "),
         "%s", log);
  /* --chat-template FILE replaces the model's template: "hi there" + ">" is 9 byte tokens */
  char tp[800];
  snprintf(tp, sizeof tp, "%s/my.jinja", test_tmpdir());
  write_to(test_tmpdir(), "my.jinja", "{% for m in messages %}{{ m.content }}{% endfor %}{% if add_generation_prompt %}>{% endif %}\n");
  snprintf(cmd, sizeof cmd, "printf 'hi there\\nmore\\n' | %s run --backend cpu --profile exact -m %s --chat --chat-template %s -n 2 --temp 0",
           test_wisp_bin(), out, tp);
  CHECKF(test_run(cmd, log, sizeof log) == 0 && strstr(log, "my.jinja template") && strstr(log, "[reply 1: 9 prompt tokens") &&
             strstr(log, "[reply 2: 5 prompt tokens"),
         "%s", log);
  write_to(test_tmpdir(), "bad.jinja", "ok\n{% include 'x' %}");
  snprintf(tp, sizeof tp, "%s/bad.jinja", test_tmpdir());
  snprintf(cmd, sizeof cmd, "printf 'hi\\n' | %s run --backend cpu --profile exact -m %s --chat --chat-template %s -n 2", test_wisp_bin(), out, tp);
  CHECKF(test_run(cmd, log, sizeof log) == 1 && strstr(log, "bad.jinja") && strstr(log, "2:4: unsupported construct 'include'"),
         "%s", log);
  /* removing the tokenizer file makes the artifact fail to open, clearly */
  snprintf(mp, sizeof mp, "%s/tokenizer.json", out);
  CHECK(unlink(mp) == 0);
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p hi -n 1", test_wisp_bin(), out);
  CHECKF(test_run(cmd, log, sizeof log) == 1 && strstr(log, "tokenizer.json is missing"), "%s", log);
  /* a tokenizer larger than the model's vocabulary is refused, nothing left behind */
  json = tiny_json(0, 0, "BPE");
  write_to(hf, "tokenizer.json", json);
  free(json);
  snprintf(out, sizeof out, "%s/art_tok_big", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s convert %s -o %s --quant f32 --quiet", test_wisp_bin(), hf, out);
  CHECKF(test_run(cmd, log, sizeof log) == 1 && strstr(log, "vocab_size is 96"), "%s", log);
  CHECK(!wisp_path_exists(out));
  /* an unsupported tokenizer is a one-line error */
  json = tiny_json(0, 0, "Unigram");
  write_to(hf, "tokenizer.json", json);
  free(json);
  CHECKF(test_run(cmd, log, sizeof log) == 1 && strstr(log, "'Unigram' is not supported"), "%s", log);
}
