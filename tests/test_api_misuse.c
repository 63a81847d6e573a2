/* Every public function of wisp.h called wrongly: NULL handles and
 * out-pointers, negative counts and options, slots and token ids out of
 * range, option structs of an unknown size. Each must return an error (or
 * the documented -1 / NULL) with a one-line message that names what was
 * wrong, crash nothing (the sanitized suite runs this under ASan and
 * UBSan) and leave the session usable. */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "test.h"
#include "util/file.h"
#include "wisp.h"

#define DEFAULT_DIR "models/default"

/* One line: not empty, no newline, and not the "no error" of a clean state. */
static int one_line(const char *msg) { return msg && *msg && !strchr(msg, '\n') && strcmp(msg, "no error"); }

/* `call` returns WISP_EINVAL and a one-line message containing `word`. */
#define REFUSED(call, word)                                                                                            \
  do {                                                                                                                 \
    wisp_status st_ = (call);                                                                                          \
    const char *msg_ = wisp_last_error();                                                                              \
    CHECKF(st_ == WISP_EINVAL && one_line(msg_) && strstr(msg_, (word)),                                               \
           "%s gave %s, '%s' (expected WISP_EINVAL naming '%s')", #call, wisp_status_name(st_), msg_, (word));         \
  } while (0)

/* `call` returns `bad` (-1 or NULL) with a one-line message containing `word`. */
#define REFUSED_VALUE(call, bad, word)                                                                                 \
  do {                                                                                                                 \
    int ok_ = (call) == (bad);                                                                                         \
    const char *msg_ = wisp_last_error();                                                                              \
    CHECKF(ok_ && one_line(msg_) && strstr(msg_, (word)), "%s: '%s' (expected %s naming '%s')", #call, msg_, #bad,     \
           (word));                                                                                                    \
  } while (0)

static wisp_model *open_default(void) {
  wisp_model *m = NULL;
  if (wisp_model_open(DEFAULT_DIR, &m) != WISP_OK) return NULL;
  return m;
}

TEST(api_misuse_version_and_option_inits) {
  /* the run-time version is the header's, and a plain MAJOR.MINOR.PATCH */
  const char *v = wisp_version();
  unsigned a, b, c;
  char rest;
  CHECKF(v && !strcmp(v, WISP_VERSION) && sscanf(v, "%u.%u.%u%c", &a, &b, &c, &rest) == 3, "'%s'", v ? v : "(null)");
  /* each init sets its size and zero defaults; NULL is ignored */
  wisp_session_options so;
  memset(&so, 0x5a, sizeof so);
  wisp_session_options_init(&so);
  CHECK(so.size == sizeof so && so.backend == NULL && so.threads == 0 && so.slots == 0 && so.tuning == NULL);
  wisp_generate_options go;
  memset(&go, 0x5a, sizeof go);
  wisp_generate_options_init(&go);
  CHECK(go.size == sizeof go && go.temperature == 0 && go.batch == 0 && go.stop == NULL && go.on_tokens == NULL);
  wisp_text_options to;
  memset(&to, 0x5a, sizeof to);
  wisp_text_options_init(&to);
  CHECK(to.size == sizeof to && to.max_tokens == 0 && to.on_text == NULL);
  wisp_step_options po;
  memset(&po, 0x5a, sizeof po);
  wisp_step_options_init(&po);
  CHECK(po.size == sizeof po && po.top_k == 0 && po.seed == 0);
  wisp_sched_options qo;
  memset(&qo, 0x5a, sizeof qo);
  wisp_sched_options_init(&qo);
  CHECK(qo.size == sizeof qo && qo.parallel == 0 && qo.backend == NULL);
  wisp_sched_request qr;
  memset(&qr, 0x5a, sizeof qr);
  wisp_sched_request_init(&qr);
  CHECK(qr.size == sizeof qr && qr.prompt == NULL && qr.on_event == NULL);
  wisp_session_options_init(NULL);
  wisp_generate_options_init(NULL);
  wisp_text_options_init(NULL);
  wisp_step_options_init(NULL);
  wisp_sched_options_init(NULL);
  wisp_sched_request_init(NULL);
  CHECK(!strcmp(wisp_status_name((wisp_status)99), "WISP_E?"));
}

TEST(api_misuse_models_and_sessions) {
  if (!wisp_path_exists(DEFAULT_DIR "/manifest.json")) SKIP("no %s", DEFAULT_DIR);
  wisp_model *m = NULL;
  REFUSED(wisp_model_open(NULL, &m), "artifact directory");
  REFUSED(wisp_model_open("", &m), "artifact directory");
  REFUSED(wisp_model_open(DEFAULT_DIR, NULL), "out is NULL");
  CHECK(m == NULL);
  REFUSED_VALUE(wisp_model_vocab(NULL), -1, "no model");
  wisp_model_close(NULL);
  wisp_session_free(NULL);
  wisp_session_reset(NULL);
  wisp_slot_reset(NULL, 0);
  wisp_free(NULL);

  m = open_default();
  CHECKF(m, "%s", wisp_last_error());
  wisp_session *s = (wisp_session *)&m; /* not NULL: a refused call must set it to NULL */
  REFUSED(wisp_session_new(NULL, NULL, &s), "no model");
  CHECK(s == NULL);
  REFUSED(wisp_session_new(m, NULL, NULL), "out is NULL");
  wisp_session_options o = {.threads = -1};
  REFUSED(wisp_session_new(m, &o, &s), "threads -1");
  o = (wisp_session_options){.threads = 1 << 20};
  REFUSED(wisp_session_new(m, &o, &s), "threads 1048576 is more than");
  o = (wisp_session_options){.slots = -2};
  REFUSED(wisp_session_new(m, &o, &s), "slots -2");
  o = (wisp_session_options){.slots = 1 << 20};
  REFUSED(wisp_session_new(m, &o, &s), "slots");
  o = (wisp_session_options){.max_context = -5};
  REFUSED(wisp_session_new(m, &o, &s), "max_context -5");
  o = (wisp_session_options){.backend = "nope"};
  REFUSED(wisp_session_new(m, &o, &s), "nope");
  /* a size that is neither 0 nor this header's: a struct from another wisp.h */
  o = (wisp_session_options){.size = 3};
  REFUSED(wisp_session_new(m, &o, &s), "wisp_session_options: size 3");
  o = (wisp_session_options){.size = sizeof o + 8};
  REFUSED(wisp_session_new(m, &o, &s), "wisp_session_options: size");
  CHECK(s == NULL);

  /* both accepted layouts: size 0 (zero-initialised) and sizeof */
  o = (wisp_session_options){.backend = "cpu", .threads = 1, .slots = 2};
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  wisp_session_free(s);
  wisp_session_options_init(&o);
  o.backend = "cpu";
  o.threads = 1;
  o.slots = 2;
  CHECKF(wisp_session_new(m, &o, &s) == WISP_OK, "%s", wisp_last_error());
  const int vocab = wisp_model_vocab(m);
  float *logits = malloc(sizeof(float) * (size_t)vocab * 2);
  CHECK(logits);
  const int32_t ok_ids[2] = {1, 2}, bad_low[2] = {1, -1};
  int32_t high[2] = {1, vocab};

  REFUSED(wisp_session_eval(NULL, ok_ids, 2, logits), "no session");
  REFUSED(wisp_session_eval(s, NULL, 2, logits), "tokens is NULL");
  REFUSED(wisp_session_eval(s, ok_ids, 0, logits), "no tokens");
  REFUSED(wisp_session_eval(s, ok_ids, -3, logits), "no tokens");
  REFUSED(wisp_session_eval(s, bad_low, 2, logits), "outside the vocabulary");
  REFUSED(wisp_session_eval(s, high, 2, logits), "outside the vocabulary");
  REFUSED(wisp_session_eval_all(NULL, ok_ids, 2, logits), "no session");
  REFUSED(wisp_session_eval_all(s, ok_ids, 2, NULL), "logits");
  REFUSED(wisp_session_eval_all(s, NULL, 2, logits), "tokens is NULL");
  CHECKF(wisp_session_position(s) == 0, "a refused eval moved the session to %d", wisp_session_position(s));

  REFUSED(wisp_session_reserve(NULL, 8), "no session");
  REFUSED(wisp_session_reserve(s, -1), "cannot reserve -1 positions");
  REFUSED(wisp_session_reserve(s, 1 << 30), "cannot reserve 1073741824 positions: the context is");
  CHECKF(wisp_session_reserve(s, 16) == WISP_OK, "%s", wisp_last_error());

  REFUSED_VALUE(wisp_session_position(NULL), -1, "no session");
  REFUSED_VALUE(wisp_session_plan_batch(NULL), -1, "no session");
  REFUSED_VALUE(wisp_session_plan_id(NULL), NULL, "no session");
  REFUSED_VALUE(wisp_session_slots(NULL), -1, "no session");

  /* generate */
  int32_t out[4];
  int n_out = 7;
  wisp_generate_options g = {.temperature = 0};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, NULL), "n_out is NULL");
  REFUSED(wisp_session_generate(NULL, 1, 4, &g, out, &n_out), "no session");
  CHECK(n_out == 0);
  REFUSED(wisp_session_generate(s, 1, -1, &g, out, &n_out), "negative");
  REFUSED(wisp_session_generate(s, 1, 4, &g, NULL, &n_out), "out is NULL");
  REFUSED(wisp_session_generate(s, -1, 4, &g, out, &n_out), "outside the vocabulary");
  REFUSED(wisp_session_generate(s, vocab, 4, &g, out, &n_out), "outside the vocabulary");
  g = (wisp_generate_options){.batch = -2};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "batch -2");
  g = (wisp_generate_options){.temperature = 1, .top_k = -1};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "top_k -1");
  g = (wisp_generate_options){.n_stop = 2};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "stop tokens");
  g = (wisp_generate_options){.n_stop = -1};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "stop tokens");
  g = (wisp_generate_options){.n_history = -1};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "history");
  g = (wisp_generate_options){.size = 1};
  REFUSED(wisp_session_generate(s, 1, 4, &g, out, &n_out), "wisp_generate_options: size 1");
  CHECKF(wisp_session_position(s) == 0, "a refused generate moved the session to %d", wisp_session_position(s));

  /* slots */
  REFUSED(wisp_slot_eval(NULL, 0, ok_ids, 2, logits), "no session");
  REFUSED(wisp_slot_eval(s, -1, ok_ids, 2, logits), "slot -1");
  REFUSED(wisp_slot_eval(s, 2, ok_ids, 2, logits), "slot 2");
  REFUSED(wisp_slot_eval(s, 1, NULL, 2, logits), "tokens is NULL");
  REFUSED(wisp_slot_eval(s, 1, bad_low, 2, logits), "outside the vocabulary");
  REFUSED_VALUE(wisp_slot_position(s, -1), -1, "slot -1");
  REFUSED_VALUE(wisp_slot_position(s, 2), -1, "slot 2");
  REFUSED_VALUE(wisp_slot_position(NULL, 0), -1, "slot 0");
  wisp_slot_reset(s, -1);
  wisp_slot_reset(s, 2);

  /* step */
  const int slots[2] = {0, 1}, dup[2] = {1, 1}, far[2] = {0, 5}, neg[2] = {0, -1};
  int32_t next[2];
  wisp_step_options so = {.temperature = 0};
  REFUSED(wisp_session_step(NULL, slots, ok_ids, 2, &so, next, NULL), "no session");
  REFUSED(wisp_session_step(s, NULL, ok_ids, 2, &so, next, NULL), "required");
  REFUSED(wisp_session_step(s, slots, NULL, 2, &so, next, NULL), "required");
  REFUSED(wisp_session_step(s, slots, ok_ids, 2, &so, NULL, NULL), "required");
  REFUSED(wisp_session_step(s, slots, ok_ids, 0, &so, next, NULL), "0 sequences");
  REFUSED(wisp_session_step(s, slots, ok_ids, -1, &so, next, NULL), "-1 sequences");
  REFUSED(wisp_session_step(s, slots, ok_ids, 3, &so, next, NULL), "3 sequences");
  REFUSED(wisp_session_step(s, dup, ok_ids, 2, &so, next, NULL), "given twice");
  REFUSED(wisp_session_step(s, far, ok_ids, 2, &so, next, NULL), "slot 5");
  REFUSED(wisp_session_step(s, neg, ok_ids, 2, &so, next, NULL), "slot -1");
  REFUSED(wisp_session_step(s, slots, bad_low, 2, &so, next, NULL), "outside the vocabulary");
  REFUSED(wisp_session_step(s, slots, high, 2, &so, next, NULL), "outside the vocabulary");
  so = (wisp_step_options){.temperature = 1, .top_k = -4};
  REFUSED(wisp_session_step(s, slots, ok_ids, 2, &so, next, NULL), "top_k -4");
  so = (wisp_step_options){.size = sizeof so * 2};
  REFUSED(wisp_session_step(s, slots, ok_ids, 2, &so, next, NULL), "wisp_step_options: size");
  CHECK(wisp_slot_position(s, 0) == 0 && wisp_slot_position(s, 1) == 0);

  /* after all that, the session works */
  CHECKF(wisp_session_eval(s, ok_ids, 2, logits) == WISP_OK && wisp_session_position(s) == 2, "%s",
         wisp_last_error());
  CHECKF(wisp_session_step(s, slots, ok_ids, 2, NULL, next, NULL) == WISP_OK && wisp_slot_position(s, 1) == 1, "%s",
         wisp_last_error());
  free(logits);
  wisp_session_free(s);
  wisp_model_close(m);
}

TEST(api_misuse_text) {
  if (!wisp_path_exists(DEFAULT_DIR "/manifest.json")) SKIP("no %s", DEFAULT_DIR);
  wisp_model *m = open_default();
  CHECKF(m, "%s", wisp_last_error());
  const int vocab = wisp_model_vocab(m);
  int32_t *ids = NULL;
  int n = 0;
  REFUSED(wisp_tokenize(NULL, "hi", 2, 0, &ids, &n), "no model");
  REFUSED(wisp_tokenize(m, NULL, 2, 0, &ids, &n), "no text");
  REFUSED(wisp_tokenize(m, "hi", 2, 0, NULL, &n), "ids");
  REFUSED(wisp_tokenize(m, "hi", 2, 0, &ids, NULL), "n_ids");

  /* detokenize refuses what the CLI's --decode refuses: ids outside the vocabulary */
  char *text = (char *)"untouched";
  const int32_t known[3] = {1, 2, 3}, low[3] = {1, -1, 3};
  int32_t high[3] = {1, 2, vocab};
  REFUSED(wisp_detokenize(m, low, 3, &text, NULL), "id -1 (entry 1) is outside the vocabulary");
  CHECK(text == NULL);
  REFUSED(wisp_detokenize(m, high, 3, &text, NULL), "outside the vocabulary");
  REFUSED(wisp_detokenize(m, known, -1, &text, NULL), "-1 ids");
  REFUSED(wisp_detokenize(m, NULL, 3, &text, NULL), "ids is NULL");
  REFUSED(wisp_detokenize(m, known, 3, NULL, NULL), "text is NULL");
  REFUSED(wisp_detokenize(NULL, known, 3, &text, NULL), "no model");
  CHECKF(wisp_detokenize(m, known, 3, &text, NULL) == WISP_OK, "%s", wisp_last_error());
  wisp_free(text);
  CHECKF(wisp_detokenize(m, NULL, 0, &text, NULL) == WISP_OK && text && !*text, "%s", wisp_last_error());
  wisp_free(text);

  REFUSED_VALUE(wisp_chat_template_of(NULL), NULL, "no model");
  const int32_t *stop = NULL;
  int n_stop = 0;
  REFUSED(wisp_stop_tokens(NULL, &stop, &n_stop), "no model");
  REFUSED(wisp_stop_tokens(m, NULL, &n_stop), "ids");
  REFUSED(wisp_stop_tokens(m, &stop, NULL), "n_ids");

  wisp_chat_message msgs[2] = {{"user", "Hi"}, {NULL, "no role"}};
  REFUSED(wisp_chat_apply(NULL, msgs, 1, 1, 0, &text), "no model");
  REFUSED(wisp_chat_apply(m, msgs, 1, 1, 0, NULL), "text is NULL");
  REFUSED(wisp_chat_apply(m, msgs, -1, 1, 0, &text), "bad message list");
  REFUSED(wisp_chat_apply(m, NULL, 1, 1, 0, &text), "bad message list");
  REFUSED(wisp_chat_apply(m, msgs, 2, 1, 0, &text), "message 1");

  wisp_session_options so = {.backend = "cpu", .threads = 1};
  wisp_session *s = NULL;
  CHECKF(wisp_session_new(m, &so, &s) == WISP_OK, "%s", wisp_last_error());
  REFUSED(wisp_chat_turn(NULL, NULL, "Hi", 0, &text), "no session");
  REFUSED(wisp_chat_turn(s, NULL, "Hi", 0, NULL), "text is NULL");
  REFUSED(wisp_chat_turn(s, NULL, NULL, 0, &text), "no user message");

  wisp_text_options to = {.max_tokens = 2};
  REFUSED(wisp_generate_text(NULL, "Hi", &to, NULL), "no session");
  REFUSED(wisp_generate_text(s, NULL, &to, NULL), "no session or prompt");
  REFUSED(wisp_generate_text(s, "", &to, NULL), "empty");
  to = (wisp_text_options){.max_tokens = -1};
  REFUSED(wisp_generate_text(s, "Hi", &to, NULL), "max_tokens -1");
  to = (wisp_text_options){.top_k = -1, .temperature = 1};
  REFUSED(wisp_generate_text(s, "Hi", &to, NULL), "top_k -1");
  to = (wisp_text_options){.repeat_last_n = -1, .repeat_penalty = 1.1f};
  REFUSED(wisp_generate_text(s, "Hi", &to, NULL), "repeat_last_n -1");
  to = (wisp_text_options){.size = 7};
  REFUSED(wisp_generate_text(s, "Hi", &to, NULL), "wisp_text_options: size 7");
  CHECK(wisp_session_position(s) == 0);
  /* and a well-formed call, with the init function's struct, runs */
  wisp_text_options_init(&to);
  to.max_tokens = 2;
  wisp_text_result r;
  CHECKF(wisp_generate_text(s, "In the beginning", &to, &r) == WISP_OK && r.n_prompt > 0, "%s", wisp_last_error());
  wisp_session_free(s);
  wisp_model_close(m);
}
