/* A small chat program built on wisp.h alone: one user message per line of
 * standard input, the reply streams to standard output as it is made.
 *
 *   cc chat.c $(pkg-config --cflags --libs wisp) -o chat
 *   ./chat MODEL_DIR [cpu|webgpu|auto]
 *
 * MODEL_DIR is a wisp artifact with a chat template (the installed default
 * model is PREFIX/share/wisp/models/default). The session keeps the whole
 * conversation, so each turn feeds only the new message. */
#include <stdio.h>
#include <string.h>
#include <wisp.h>

static int print_piece(void *user, const char *text, size_t len) {
  (void)user;
  fwrite(text, 1, len, stdout);
  fflush(stdout);
  return 0; /* non-zero would stop the reply here */
}

static int fail(const char *what, wisp_status st) {
  fprintf(stderr, "chat: %s: %s (%s)\n", what, wisp_last_error(), wisp_status_name(st));
  return 1;
}

int main(int argc, char **argv) {
  if (argc < 2) {
    fprintf(stderr, "usage: %s MODEL_DIR [cpu|webgpu|auto]\n", argv[0]);
    return 2;
  }
  wisp_model *model = NULL;
  wisp_session *session = NULL;
  wisp_status st = wisp_model_open(argv[1], &model);
  if (st) return fail("open", st);
  /* The init functions set every option's default and the struct's size,
   * so this program keeps working against a later libwisp.so.0. */
  wisp_session_options so;
  wisp_session_options_init(&so);
  so.backend = argc > 2 ? argv[2] : "cpu";
  if ((st = wisp_session_new(model, &so, &session))) {
    wisp_model_close(model);
    return fail("session", st);
  }
  const char *tmpl = wisp_chat_template_of(model);
  if (!tmpl) {
    wisp_session_free(session);
    wisp_model_close(model);
    return fail("chat template", WISP_EUNSUPPORTED);
  }
  fprintf(stderr, "wisp %s, chat template %s; one message per line, end of input to quit\n", wisp_version(), tmpl);

  wisp_text_options opt;
  wisp_text_options_init(&opt);
  opt.temperature = 0.7f;
  opt.top_k = 40;
  opt.top_p = 0.9f;
  opt.seed = 1;
  opt.max_tokens = 64;
  opt.on_text = print_piece;
  char line[4096];
  int rc = 0;
  while (fgets(line, sizeof line, stdin)) {
    line[strcspn(line, "\r\n")] = 0;
    if (!line[0]) continue;
    char *turn = NULL;
    wisp_text_result res;
    if ((st = wisp_chat_turn(session, "You are a helpful assistant.", line, 0, &turn)) ||
        (st = wisp_generate_text(session, turn, &opt, &res))) {
      wisp_free(turn);
      rc = fail("generate", st);
      break;
    }
    wisp_free(turn);
    printf("\n");
    fprintf(stderr, "[%d prompt tokens, %d reply tokens%s]\n", res.n_prompt, res.n_generated,
            res.stopped == 1 ? ", ended by the model" : "");
  }
  wisp_session_free(session);
  wisp_model_close(model);
  return rc;
}
