/* The text half of the public API (wisp.h "Text" block, src/api/text.c):
 * tokenize/detokenize, chat templates, streaming generation, on the default
 * model (BPE tokenizer, LFM2 chat template). */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "fixtures.h"
#include "test.h"
#include "tokenizer/tokenizer.h"
#include "util/file.h"
#include "wisp.h"

#define DEFAULT_DIR "models/default"

static int have_default(void) { return wisp_path_exists(DEFAULT_DIR "/manifest.json"); }

TEST(api_tokenize_detokenize_round_trip) {
  if (!have_default()) SKIP("no %s", DEFAULT_DIR);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(DEFAULT_DIR, &m) == WISP_OK, "%s", wisp_last_error());
  const char *text = "In the beginning God created the heaven and the earth.";
  int32_t *ids = NULL, *plain = NULL;
  int n = 0, n_plain = 0;
  CHECKF(wisp_tokenize(m, text, strlen(text), 1, &ids, &n) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_tokenize(m, text, strlen(text), 0, &plain, &n_plain) == WISP_OK, "%s", wisp_last_error());
  /* add_special puts the tokenizer's BOS (<|startoftext|>) in front, nothing else changes */
  CHECKF(n == n_plain + 1 && n_plain > 5 && !memcmp(ids + 1, plain, sizeof(int32_t) * (size_t)n_plain), "%d vs %d", n,
         n_plain);
  char *back = NULL;
  size_t len = 0;
  CHECKF(wisp_detokenize(m, plain, n_plain, &back, &len) == WISP_OK, "%s", wisp_last_error());
  CHECKF(len == strlen(text) && !strcmp(back, text), "'%s'", back);
  wisp_free(back);
  CHECK(wisp_detokenize(m, ids, n, &back, NULL) == WISP_OK && !strncmp(back, "<|startoftext|>", 15));
  wisp_free(back);
  /* special tokens in the text are recognised */
  int32_t *sp = NULL;
  int n_sp = 0;
  CHECK(wisp_tokenize(m, "<|im_end|>", 10, 0, &sp, &n_sp) == WISP_OK && n_sp == 1);
  wisp_free(sp);
  /* bad input: one clear error, nothing allocated */
  int32_t *bad = (int32_t *)1;
  CHECK(wisp_tokenize(m, "\xff\xfe", 2, 0, &bad, &n) == WISP_EINVAL && bad == NULL && strstr(wisp_last_error(), "UTF-8"));
  CHECK(wisp_detokenize(m, ids, -1, &back, NULL) == WISP_EINVAL && back == NULL);
  CHECK(!strcmp(wisp_status_name(WISP_EIO), "WISP_EIO"));
  wisp_free(ids);
  wisp_free(plain);
  wisp_model_close(m);
}

TEST(api_chat_apply_uses_the_models_template) {
  if (!have_default()) SKIP("no %s", DEFAULT_DIR);
  wisp_model *m = NULL;
  CHECKF(wisp_model_open(DEFAULT_DIR, &m) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_chat_template_of(m) && !strcmp(wisp_chat_template_of(m), "lfm2"));
  wisp_chat_message msgs[] = {{"system", "Be brief."}, {"user", "Hi"}};
  char *text = NULL;
  CHECKF(wisp_chat_apply(m, msgs, 2, 1, 0, &text) == WISP_OK, "%s", wisp_last_error());
  CHECKF(!strcmp(text, "<|startoftext|><|im_start|>system\nBe brief.<|im_end|>\n<|im_start|>user\nHi<|im_end|>\n"
                       "<|im_start|>assistant\n"),
         "'%s'", text);
  wisp_free(text);
  wisp_chat_message bad[] = {{"user", NULL}};
  CHECK(wisp_chat_apply(m, bad, 1, 1, 0, &text) == WISP_EINVAL && text == NULL);
  /* the JSON request: content as parts, continue_final_message */
  CHECKF(wisp_chat_apply_json(m, "{\"messages\": [{\"role\": \"user\", \"content\": \"Hi\"}, {\"role\": \"assistant\", "
                                 "\"content\": \"Hello, I\"}], \"continue_final_message\": true}", &text) == WISP_OK,
         "%s", wisp_last_error());
  CHECKF(!strcmp(text, "<|startoftext|><|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\nHello, I"), "'%s'", text);
  wisp_free(text);
  CHECK(wisp_chat_apply_json(m, "[1]", &text) == WISP_EINVAL && text == NULL);
  /* a template of one's own keeps the model's tokens */
  CHECKF(wisp_chat_set_template(m, "{{ bos_token }}{% for x in messages %}[{{ x.role }}] {{ x.content }}\n{% endfor %}") == WISP_OK,
         "%s", wisp_last_error());
  CHECK(wisp_chat_apply(m, msgs, 2, 1, 0, &text) == WISP_OK);
  CHECKF(!strcmp(text, "<|startoftext|>[system] Be brief.\n[user] Hi\n"), "'%s'", text);
  wisp_free(text);
  CHECK(wisp_chat_set_template(m, "{% for %}") == WISP_EFORMAT && strstr(wisp_last_error(), "1:8"));
  wisp_model_close(m);
  /* a model whose tokenizer has no chat template: NULL and a message, not a guess */
  CHECKF(wisp_model_open(fixture_small_model(), &m) == WISP_OK, "%s", wisp_last_error());
  CHECK(wisp_chat_template_of(m) == NULL && strstr(wisp_last_error(), "no chat template"));
  CHECK(wisp_chat_apply(m, msgs, 2, 1, 0, &text) == WISP_EUNSUPPORTED);
  wisp_model_close(m);
}

typedef struct {
  char buf[8192];
  size_t n;
  int calls, stop_after;
} collect;

static int collect_text(void *user, const char *text, size_t len) {
  collect *c = user;
  if (c->n + len < sizeof c->buf) {
    memcpy(c->buf + c->n, text, len);
    c->n += len;
    c->buf[c->n] = 0;
  }
  c->calls++;
  return c->stop_after && c->calls >= c->stop_after;
}

/* Two greedy chat turns through wisp_chat_turn + wisp_generate_text give
 * exactly what `wisp run --chat` prints for the same lines. */
TEST(api_chat_turns_match_the_cli) {
  if (!have_default()) SKIP("no %s", DEFAULT_DIR);
  const char *lines[] = {"Who made the heaven?", "And the earth?"};
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECKF(wisp_model_open(DEFAULT_DIR, &m) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_session_new(m, NULL, &s) == WISP_OK, "%s", wisp_last_error());
  collect c = {0};
  for (int t = 0; t < 2; t++) {
    char *turn = NULL;
    CHECKF(wisp_chat_turn(s, NULL, lines[t], 0, &turn) == WISP_OK, "%s", wisp_last_error());
    wisp_text_options o = {.max_tokens = 24, .on_text = collect_text, .user = &c};
    wisp_text_result r;
    CHECKF(wisp_generate_text(s, turn, &o, &r) == WISP_OK, "%s", wisp_last_error());
    wisp_free(turn);
    CHECK(r.n_prompt > 3 && r.n_generated > 0 && r.n_generated <= 24);
    collect_text(&c, "\n", 1);
  }
  wisp_session_free(s);
  wisp_model_close(m);
  char cmd[1024], out[8192];
  snprintf(cmd, sizeof cmd, "(printf '%s\\n%s\\n' | %s run --backend cpu --profile exact -m %s --chat -n 24 --temp 0 2>/dev/null)", lines[0], lines[1],
           test_wisp_bin(), DEFAULT_DIR);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  CHECKF(strlen(c.buf) > 20 && !strcmp(out, c.buf), "library:\n%s\ncli:\n%s", c.buf, out);
}

TEST(api_generate_text_streams_and_stops) {
  if (!have_default()) SKIP("no %s", DEFAULT_DIR);
  wisp_model *m = NULL;
  wisp_session *s = NULL;
  CHECKF(wisp_model_open(DEFAULT_DIR, &m) == WISP_OK, "%s", wisp_last_error());
  CHECKF(wisp_session_new(m, NULL, &s) == WISP_OK, "%s", wisp_last_error());
  /* on_text asking to stop ends the reply after that piece */
  collect c = {.stop_after = 3};
  wisp_text_options o = {.add_special = 1, .max_tokens = 50, .on_text = collect_text, .user = &c};
  wisp_text_result r;
  CHECKF(wisp_generate_text(s, "In the beginning", &o, &r) == WISP_OK, "%s", wisp_last_error());
  CHECKF(r.stopped == 2 && c.calls == 3 && r.n_generated >= 3 && r.n_generated < 50, "stopped %d calls %d made %d",
         r.stopped, c.calls, r.n_generated);
  CHECK(wisp_session_position(s) == r.n_prompt + r.n_generated); /* every reply token was fed */
  /* the same greedy prompt as `wisp run` (which feeds the BOS too) gives its text */
  wisp_session_reset(s);
  collect all = {0};
  o = (wisp_text_options){.add_special = 1, .max_tokens = 12, .ignore_stop = 1, .on_text = collect_text, .user = &all};
  CHECKF(wisp_generate_text(s, "In the beginning", &o, &r) == WISP_OK, "%s", wisp_last_error());
  CHECK(r.n_generated == 12 && r.stopped == 0);
  char cmd[1024], out[4096];
  snprintf(cmd, sizeof cmd, "(%s run --backend cpu --profile exact -m %s -p 'In the beginning' -n 12 --temp 0 --ignore-eos 2>/dev/null)", test_wisp_bin(),
           DEFAULT_DIR);
  CHECKF(test_run(cmd, out, sizeof out) == 0, "%s", out);
  char want[8300];
  snprintf(want, sizeof want, "In the beginning%s\n", all.buf);
  CHECKF(!strcmp(out, want), "library: '%s'\ncli: '%s'", want, out);
  /* bad input */
  CHECK(wisp_generate_text(s, "", &o, &r) == WISP_EINVAL && strstr(wisp_last_error(), "empty"));
  o.max_tokens = -1;
  CHECK(wisp_generate_text(s, "x", &o, NULL) == WISP_EINVAL);
  wisp_session_free(s);
  wisp_model_close(m);
}
