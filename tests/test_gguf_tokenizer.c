/* GGUF and the tokenizer's behaviour (docs/gguf.md, "Tokenizer"): an
 * export + import of the default model keeps its prompt tokens (BOS
 * included), greedy tokens, stop tokens and chat formatting; export writes
 * llama.cpp's keys (add_bos_token, special ids, chat template); import reads
 * add_bos_token / add_eos_token, and without them follows llama.cpp's
 * default for the pre-tokenizer. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include <cJSON.h>

#include "format/gguf.h"
#include "format/gguf_import.h"
#include "fixtures.h"
#include "gguf_copy.h"
#include "test.h"
#include "tokenizer/chat.h"
#include "tokenizer/tok_settings.h"
#include "tokenizer/tokenizer.h"
#include "util/err.h"
#include "util/file.h"
#include "wisp.h"

#define DEFAULT_DIR "models/default"

/* stdout of a shell command (stderr dropped), or "" on failure. */
static int out_of(const char *cmd, char *out, size_t cap) {
  char full[4200];
  snprintf(full, sizeof full, "{ { %s; } 2>/dev/null; }", cmd);
  return test_run(full, out, cap);
}

/* An artifact's tokenizer, chat info and settings. */
typedef struct {
  wisp_tokenizer *tok;
  wisp_chat_info chat;
  wisp_tok_settings set;
} tok_side;

static int load_side(const char *dir, tok_side *s) {
  memset(s, 0, sizeof *s);
  char path[4200], cfg[4200], gen[4200];
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  if (wisp_tokenizer_from_file(path, &s->tok)) return -1;
  snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
  snprintf(gen, sizeof gen, "%s/generation_config.json", dir);
  if (wisp_chat_load(cfg, gen, s->tok, &s->chat)) return -1;
  char *text = NULL;
  snprintf(path, sizeof path, "%s/manifest.json", dir);
  if (wisp_read_file(path, &text, NULL)) return -1;
  cJSON *man = cJSON_Parse(text);
  free(text);
  int rc = wisp_tok_settings_for_artifact(dir, man, s->tok, &s->set) ? -1 : 0;
  cJSON_Delete(man);
  return rc;
}

static void free_side(tok_side *s) {
  wisp_tokenizer_free(s->tok);
  wisp_tok_settings_free(&s->set);
}

static int same_stops(const wisp_chat_info *a, const wisp_chat_info *b) {
  if (a->n_stop != b->n_stop) return 0;
  for (int i = 0; i < a->n_stop; i++)
    if (!wisp_chat_is_stop(b, a->stop[i])) return 0;
  return 1;
}

TEST(gguf_roundtrip_keeps_prompt_greedy_and_chat_of_default_model) {
  char gg[600], b[600], cmd[4096], log[8192];
  snprintf(gg, sizeof gg, "%s/def.gguf", test_tmpdir());
  snprintf(b, sizeof b, "%s/def_b", test_tmpdir());
  snprintf(cmd, sizeof cmd, "%s export-gguf %s -o %s && %s convert %s -o %s --quant f32 --quiet", test_wisp_bin(),
           DEFAULT_DIR, gg, test_wisp_bin(), gg, b);
  CHECKF(test_run(cmd, log, sizeof log) == 0, "%s", log);

  /* the GGUF says what llama.cpp needs: BOS added, the ids, the template */
  wisp_gguf *f = NULL;
  CHECKF(wisp_gguf_open(gg, &f) == WISP_OK, "%s", wisp_last_error());
  int64_t add_bos = -1, add_eos = -1, bos = -1, eos = -1, eot = -1, pad = -1;
  wisp_gguf_get_int(f, "tokenizer.ggml.add_bos_token", &add_bos);
  wisp_gguf_get_int(f, "tokenizer.ggml.add_eos_token", &add_eos);
  wisp_gguf_get_int(f, "tokenizer.ggml.bos_token_id", &bos);
  wisp_gguf_get_int(f, "tokenizer.ggml.eos_token_id", &eos);
  wisp_gguf_get_int(f, "tokenizer.ggml.eot_token_id", &eot);
  wisp_gguf_get_int(f, "tokenizer.ggml.padding_token_id", &pad);
  const wisp_gguf_kv *tmpl = wisp_gguf_kv_find(f, "tokenizer.chat_template");
  int tmpl_ok = tmpl && tmpl->type == WISP_GGUF_STRING && tmpl->str.len > 20 &&
                !memcmp(tmpl->str.s, "{{- bos_token -}}", 17);
  wisp_gguf_close(f);
  /* models/default: BOS <|startoftext|> = 1 from the post-processor,
   * eos_token <|im_end|> = 4, generation_config's other stop 2, pad 0 */
  CHECKF(add_bos == 1 && add_eos == 0 && bos == 1 && eos == 4 && eot == 2 && pad == 0,
         "add_bos %lld add_eos %lld bos %lld eos %lld eot %lld pad %lld", (long long)add_bos, (long long)add_eos,
         (long long)bos, (long long)eos, (long long)eot, (long long)pad);
  CHECK(tmpl_ok);

  /* the same prompt tokens (BOS first) */
  static const char *prompts[] = {"In the beginning God created", "hi there\n\n<|im_end|> x  caf\xc3\xa9"};
  for (int i = 0; i < 2; i++) {
    char ta[2048], tb[2048];
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p '%s'", test_wisp_bin(), DEFAULT_DIR, prompts[i]);
    CHECK(out_of(cmd, ta, sizeof ta) == 0);
    snprintf(cmd, sizeof cmd, "%s tokenize -m %s -p '%s'", test_wisp_bin(), b, prompts[i]);
    CHECK(out_of(cmd, tb, sizeof tb) == 0);
    CHECKF(!strncmp(ta, "[1,", 3) && !strcmp(ta, tb), "prompt tokens differ:\n%s\n%s", ta, tb);
  }

  /* the same greedy tokens (and the same stop: no --ignore-eos) */
  char ga[4096], gb[4096];
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p 'And God said' -n 24 --temp 0 --ids 2>&1 | grep ids:", test_wisp_bin(),
           DEFAULT_DIR);
  CHECK(test_run(cmd, ga, sizeof ga) == 0);
  snprintf(cmd, sizeof cmd, "%s run --backend cpu --profile exact -m %s -p 'And God said' -n 24 --temp 0 --ids 2>&1 | grep ids:", test_wisp_bin(), b);
  CHECK(test_run(cmd, gb, sizeof gb) == 0);
  CHECKF(strstr(ga, "generated ids: ") && !strcmp(ga, gb), "greedy differs:\n%s\n%s", ga, gb);

  /* the same chat: template, stop tokens, settings, and a chat run */
  tok_side sa, sb;
  CHECKF(load_side(DEFAULT_DIR, &sa) == 0, "%s", wisp_last_error());
  if (load_side(b, &sb)) {
    free_side(&sa);
    CHECKF(0, "%s", wisp_last_error());
  }
  int same = sa.chat.kind == WISP_CHAT_LFM2 && sb.chat.kind == sa.chat.kind && same_stops(&sa.chat, &sb.chat) &&
             sa.set.bos == sb.set.bos && sa.set.eos == sb.set.eos && sa.set.pad == sb.set.pad &&
             sa.set.add_bos == sb.set.add_bos && sa.set.add_eos == sb.set.add_eos && sb.set.chat_template &&
             !strcmp(sa.set.chat_template, sb.set.chat_template);
  int n_stop_a = sa.chat.n_stop, n_stop_b = sb.chat.n_stop;
  free_side(&sa);
  free_side(&sb);
  CHECKF(same, "chat settings differ (stops %d vs %d)", n_stop_a, n_stop_b);
  char ca[4096], cb[4096];
  snprintf(cmd, sizeof cmd, "printf 'Who art thou?\\nAnd then?\\n' | %s run --backend cpu --profile exact -m %s --chat -sys 'Answer briefly.' -n 16 --temp 0",
           test_wisp_bin(), DEFAULT_DIR);
  CHECK(out_of(cmd, ca, sizeof ca) == 0);
  snprintf(cmd, sizeof cmd, "printf 'Who art thou?\\nAnd then?\\n' | %s run --backend cpu --profile exact -m %s --chat -sys 'Answer briefly.' -n 16 --temp 0",
           test_wisp_bin(), b);
  CHECK(out_of(cmd, cb, sizeof cb) == 0);
  CHECKF(strlen(ca) > 4 && !strcmp(ca, cb), "chat differs:\n%s\n---\n%s", ca, cb);
}

/* ---- import of the flags, on a hand-made tokenizer ---- */

static void byte_char(int b, char out[4]) {
  int cp = b;
  if (!((b >= 33 && b <= 126) || (b >= 161 && b <= 172) || (b >= 174 && b <= 255))) {
    int n = 0;
    for (int x = 0; x < b; x++)
      if (!((x >= 33 && x <= 126) || (x >= 161 && x <= 172) || (x >= 174 && x <= 255))) n++;
    cp = 256 + n;
  }
  if (cp < 0x80) { out[0] = (char)cp; out[1] = 0; }
  else { out[0] = (char)(0xC0 | cp >> 6); out[1] = (char)(0x80 | (cp & 63)); out[2] = 0; }
}

typedef struct {
  const char *pre;
  int bos, eos;           /* -1: key absent */
  int add_bos, add_eos;   /* -1: key absent */
  const char *expect;     /* ids of "hel" with special tokens, or NULL: import fails */
} flag_case;

/* Ids: 256 bytes, 256 "he", 257 "hel", 258 <|end|>, 259 <s> (control). */
static int import_case(const flag_case *c, int k, char *got, size_t cap) {
  static char names[256][4];
  const char *tokens[260];
  int32_t types[260];
  for (int b = 0; b < 256; b++) { byte_char(b, names[b]); tokens[b] = names[b]; types[b] = 1; }
  tokens[256] = "he"; types[256] = 1;
  tokens[257] = "hel"; types[257] = 1;
  tokens[258] = "<|end|>"; types[258] = 3;
  tokens[259] = "<s>"; types[259] = 3;
  const char *merges[2] = {"h e", "he l"};
  wisp_gguf_writer *w = gguf_gpt2_vocab_writer(c->pre, tokens, types, 260, merges, 2);
  if (!w) return -1;
  if (c->bos >= 0) wisp_gguf_put_u32(w, "tokenizer.ggml.bos_token_id", (uint32_t)c->bos);
  if (c->eos >= 0) wisp_gguf_put_u32(w, "tokenizer.ggml.eos_token_id", (uint32_t)c->eos);
  if (c->add_bos >= 0) wisp_gguf_put_bool(w, "tokenizer.ggml.add_bos_token", c->add_bos);
  if (c->add_eos >= 0) wisp_gguf_put_bool(w, "tokenizer.ggml.add_eos_token", c->add_eos);
  wisp_gguf_put_str(w, "tokenizer.chat_template", "{{ bos_token }}<|im_start|>{{ m }}<|im_end|>");
  char path[700], dir[600];
  snprintf(path, sizeof path, "%s/flags%d.gguf", test_tmpdir(), k);
  snprintf(dir, sizeof dir, "%s/flags%d", test_tmpdir(), k);
  wisp_status st = wisp_gguf_writer_write(w, path);
  wisp_gguf_writer_free(w);
  if (st || mkdir(dir, 0755)) return -1;
  wisp_gguf *f = NULL;
  if (wisp_gguf_open(path, &f)) return -1;
  int written = 0;
  st = wisp_gguf_write_tokenizer(f, dir, &written);
  wisp_gguf_close(f);
  if (st) { snprintf(got, cap, "error: %s", wisp_last_error()); return 1; }
  snprintf(path, sizeof path, "%s/tokenizer.json", dir);
  wisp_tokenizer *t = NULL;
  if (wisp_tokenizer_from_file(path, &t)) return -1;
  int32_t *ids = NULL;
  int n = 0;
  if (wisp_tokenizer_encode(t, "hel", &ids, &n)) { wisp_tokenizer_free(t); return -1; }
  size_t at = 0;
  got[0] = 0;
  for (int i = 0; i < n; i++) at += (size_t)snprintf(got + at, cap - at, i ? ",%d" : "%d", ids[i]);
  free(ids);
  /* the template and bos_token land in tokenizer_config.json */
  char cfg[700], gen[700];
  snprintf(cfg, sizeof cfg, "%s/tokenizer_config.json", dir);
  snprintf(gen, sizeof gen, "%s/generation_config.json", dir);
  wisp_chat_info ci;
  st = wisp_chat_load(cfg, gen, t, &ci);
  wisp_tokenizer_free(t);
  if (st || ci.kind != WISP_CHAT_CHATML) return -1;
  return 0;
}

TEST(gguf_import_add_bos_eos_as_llama_cpp_reads_them) {
  static const flag_case cases[] = {
      {"llama-bpe", 259, 258, -1, -1, "259,257"},     /* llama.cpp's default for llama-bpe: add BOS */
      {"qwen2", 259, 258, -1, -1, "257"},             /* ... and for qwen2: none */
      {"llama-bpe", 259, 258, 0, -1, "257"},          /* the key wins over the default */
      {"qwen2", 259, 258, 1, 1, "259,257,258"},       /* BOS and EOS */
      {"llama-bpe", -1, 258, -1, -1, "257"},          /* default BOS without a BOS id: none */
      {"qwen2", -1, 258, 1, -1, NULL},                /* add_bos_token without a BOS id */
      {"qwen2", 259, -1, -1, 1, NULL},                /* add_eos_token without an EOS id */
  };
  for (int k = 0; k < (int)(sizeof cases / sizeof cases[0]); k++) {
    char got[512];
    int rc = import_case(&cases[k], k, got, sizeof got);
    CHECKF(rc >= 0, "case %d: %s", k, wisp_last_error());
    if (!cases[k].expect) {
      CHECKF(rc == 1 && strstr(got, "token_id is missing") && !strchr(got, '\n'), "case %d: %s", k, got);
    } else {
      CHECKF(rc == 0 && !strcmp(got, cases[k].expect), "case %d: got [%s], want [%s]", k, got, cases[k].expect);
    }
  }
}

/* Writes w (and frees it) as TMP/name.gguf, then imports its vocabulary
 * into the folder TMP/name: the import's status (an I/O failure before it
 * is WISP_EIO). */
static wisp_status import_written(wisp_gguf_writer *w, const char *name, char path[700], char dir[600]) {
  snprintf(path, 700, "%s/%s.gguf", test_tmpdir(), name);
  snprintf(dir, 600, "%s/%s", test_tmpdir(), name);
  wisp_status st = wisp_gguf_writer_write(w, path);
  wisp_gguf_writer_free(w);
  if (st || mkdir(dir, 0755)) return st ? st : wisp_fail(WISP_EIO, "%s: cannot make the folder", dir);
  wisp_gguf *f = NULL;
  if ((st = wisp_gguf_open(path, &f))) return st;
  int written = 0;
  st = wisp_gguf_write_tokenizer(f, dir, &written);
  wisp_gguf_close(f);
  if (!st && !written) st = wisp_fail(WISP_EFORMAT, "%s: no tokenizer written", path);
  return st;
}

/* import_written, then the tokenizer.json it wrote, parsed (NULL, the
 * error in wisp_last_error() or a parse failure, when either fails). */
static cJSON *imported_json(wisp_gguf_writer *w, const char *name) {
  char path[700], dir[600], json[700];
  if (import_written(w, name, path, dir)) return NULL;
  snprintf(json, sizeof json, "%s/tokenizer.json", dir);
  return fixture_read_json(json);
}

/* A vocabulary that is not the weights': 260 tokens over a token_embd.weight
 * of 100 rows is one line naming the file and the way out. */
TEST(gguf_import_vocab_larger_than_the_embedding_is_one_line) {
  static char names[256][4];
  const char *tokens[260];
  for (int b = 0; b < 256; b++) { byte_char(b, names[b]); tokens[b] = names[b]; }
  tokens[256] = "he", tokens[257] = "hel", tokens[258] = "<|end|>", tokens[259] = "<s>";
  const char *merges[2] = {"h e", "he l"};
  wisp_gguf_writer *w = gguf_gpt2_vocab_writer("qwen2", tokens, NULL, 260, merges, 2);
  CHECK(w != NULL);
  static float emb[100 * 8];
  const uint64_t ne[2] = {8, 100};
  CHECK(wisp_gguf_add_tensor(w, "token_embd.weight", 2, ne, 0, emb, sizeof emb) == WISP_OK);
  char path[700], dir[600];
  wisp_status st = import_written(w, "vocab_rows", path, dir);
  const char *e = wisp_last_error();
  CHECKF(st != WISP_OK && strstr(e, path) && strstr(e, "260 tokens") && strstr(e, "100 rows") &&
             strstr(e, "take the GGUF as it was exported") && !strchr(e, '\n'),
         "%s", e);
}

/* The BPE vocab written for a gpt2 vocabulary: a repeated text keeps its
 * first id, and a text first seen as a control token belongs to the later
 * normal token (control tokens are added tokens, not vocab entries). The
 * importer looks these up in a hash index, not in the JSON it builds. */
TEST(gguf_import_bpe_vocab_keeps_the_first_normal_id_of_a_repeated_text) {
  static char names[256][4];
  const char *tokens[261];
  int32_t types[261];
  for (int b = 0; b < 256; b++) { byte_char(b, names[b]); tokens[b] = names[b]; types[b] = 1; }
  tokens[256] = "he", types[256] = 1;
  tokens[257] = "<c>", types[257] = 3;
  tokens[258] = "he", types[258] = 1; /* repeated: 256 keeps it */
  tokens[259] = "<c>", types[259] = 1; /* the control 257 is no vocab entry: 259 is */
  tokens[260] = "hel", types[260] = 1;
  const char *merges[2] = {"h e", "he l"};
  wisp_gguf_writer *w = gguf_gpt2_vocab_writer("qwen2", tokens, types, 261, merges, 2);
  CHECK(w != NULL);
  cJSON *root = imported_json(w, "repeated");
  CHECKF(root != NULL, "%s", wisp_last_error());
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(cJSON_GetObjectItemCaseSensitive(root, "model"), "vocab");
  const cJSON *he = cJSON_GetObjectItemCaseSensitive(vocab, "he"), *c = cJSON_GetObjectItemCaseSensitive(vocab, "<c>");
  const cJSON *hel = cJSON_GetObjectItemCaseSensitive(vocab, "hel");
  int n = cJSON_GetArraySize(vocab);
  int he_id = cJSON_IsNumber(he) ? he->valueint : -1, c_id = cJSON_IsNumber(c) ? c->valueint : -1;
  int hel_id = cJSON_IsNumber(hel) ? hel->valueint : -1;
  cJSON_Delete(root);
  CHECKF(n == 259 && he_id == 256 && c_id == 259 && hel_id == 260, "vocab of %d entries: he %d, <c> %d, hel %d", n,
         he_id, c_id, hel_id);
}

/* The vocab and merges are written as JSON text, not through cJSON
 * (format/json_text.h): token texts with a quote, a backslash, a newline, a
 * tab and other control bytes, and a merge of them, come back from the
 * tokenizer.json as the same bytes, each at its id. */
TEST(gguf_import_bpe_vocab_escapes_every_awkward_text) {
  static char names[256][4];
  const char *tokens[262];
  for (int b = 0; b < 256; b++) { byte_char(b, names[b]); tokens[b] = names[b]; }
  static const char *const odd[6] = {"a\"b", "c\\d", "e\nf\tg", "\x01\x1f", "\xc3\xa9\"", "a\"bc\\d"};
  for (int i = 0; i < 6; i++) tokens[256 + i] = odd[i];
  const char *merges[1] = {"a\"b c\\d"};
  wisp_gguf_writer *w = gguf_gpt2_vocab_writer("qwen2", tokens, NULL, 262, merges, 1);
  CHECK(w != NULL);
  cJSON *root = imported_json(w, "escapes");
  CHECKF(root != NULL, "no tokenizer.json, or it does not parse: %s", wisp_last_error());
  const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
  const cJSON *vocab = cJSON_GetObjectItemCaseSensitive(model, "vocab");
  const cJSON *mer = cJSON_GetObjectItemCaseSensitive(model, "merges");
  CHECKF(cJSON_GetArraySize(vocab) == 262, "%d vocab entries", cJSON_GetArraySize(vocab));
  for (int i = 0; i < 6; i++) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(vocab, odd[i]);
    CHECKF(cJSON_IsNumber(v) && v->valueint == 256 + i, "token %d: %d", i, cJSON_IsNumber(v) ? v->valueint : -1);
  }
  const cJSON *m0 = cJSON_GetArrayItem(mer, 0);
  CHECKF(cJSON_GetArraySize(mer) == 1 && cJSON_IsString(m0) && !strcmp(m0->valuestring, merges[0]), "merges: %s",
         cJSON_IsString(m0) ? m0->valuestring : "(none)");
  cJSON_Delete(root);
}
