/* wisp serve (src/server/, docs/serve.md): request parsing and validation,
 * SSE framing, stop strings across token pieces, the /metrics text; then the
 * OpenAI client tests (tests/server/client.mjs: the official `openai` npm
 * package against `wisp serve` on the CPU and on WebGPU) and the chat page
 * in headless Chromium (tests/server/chat_page.mjs). */
#include <stdlib.h>
#include <string.h>

#include "server/local_page.h"
#include "server/metrics.h"
#include "server/request.h"
#include "server/response.h"
#include "server/stop_match.h"
#include "test.h"
#include "webgpu_fixture.h"

static int parse(const char *body, srv_kind kind, srv_request *r, srv_error *e) {
  return srv_request_parse(body, strlen(body), kind, r, e);
}

TEST(server_request_chat_fields) {
  srv_request r;
  srv_error e;
  const char *body =
      "{\"model\":\"m\",\"messages\":[{\"role\":\"system\",\"content\":\"be brief\"},"
      "{\"role\":\"user\",\"content\":[{\"type\":\"text\",\"text\":\"Hel\"},{\"type\":\"text\",\"text\":\"lo\"}]},"
      "{\"role\":\"assistant\",\"content\":null},{\"role\":\"developer\",\"content\":\"x\"}],"
      "\"max_completion_tokens\":7,\"temperature\":0.5,\"top_p\":0.9,\"top_k\":40,\"min_p\":0.05,\"seed\":-1,"
      "\"stop\":[\"a\",\"bc\"],\"stream\":true,\"stream_options\":{\"include_usage\":true},"
      "\"presence_penalty\":-0.5,\"frequency_penalty\":1.5,\"n\":3,\"logprobs\":true,\"top_logprobs\":20,"
      "\"user\":\"ignored\",\"metadata\":{}}";
  CHECKF(parse(body, SRV_CHAT, &r, &e) == 0, "%d %s", e.status, e.message);
  CHECK(!strcmp(r.model, "m"));
  CHECK(r.n_messages == 4);
  CHECK(!strcmp(r.messages[1].role, "user") && !strcmp(r.messages[1].content, "Hello"));
  CHECK(!strcmp(r.messages[2].content, ""));
  CHECK(!strcmp(r.messages[3].role, "system"));
  CHECK(r.max_tokens == 7);
  CHECK_NEAR(r.temperature, 0.5, 1e-6);
  CHECK_NEAR(r.top_p, 0.9, 1e-6);
  CHECK(r.top_k == 40);
  CHECK_NEAR(r.min_p, 0.05, 1e-6);
  CHECK(r.has_seed && r.seed == UINT64_MAX);
  CHECK(r.n_stop == 2 && !strcmp(r.stop[1], "bc"));
  CHECK(r.stream && r.include_usage);
  CHECK_NEAR(r.presence_penalty, -0.5, 1e-6);
  CHECK_NEAR(r.frequency_penalty, 1.5, 1e-6);
  CHECK(r.n == 3 && r.logprobs && r.top_logprobs == 20);
  srv_request_free(&r);
}

TEST(server_request_defaults_and_prompts) {
  srv_request r;
  srv_error e;
  CHECK(parse("{\"prompt\":\"hi\"}", SRV_COMPLETION, &r, &e) == 0);
  CHECK(r.n_prompts == 1 && !strcmp(r.prompts[0], "hi"));
  CHECK(r.max_tokens == -1 && r.n == 1 && !r.stream && !r.has_seed && !r.model);
  CHECK_NEAR(r.temperature, 1, 0);
  srv_request_free(&r);
  CHECK(parse(" {\"prompt\":[\"a\",\"b\"],\"logprobs\":3,\"stop\":\"x\",\"max_tokens\":null}\n", SRV_COMPLETION, &r, &e) == 0);
  CHECK(r.n_prompts == 2 && !strcmp(r.prompts[1], "b"));
  CHECK(r.logprobs && r.top_logprobs == 3);
  CHECK(r.n_stop == 1 && !strcmp(r.stop[0], "x"));
  CHECK(r.max_tokens == -1);
  srv_request_free(&r);
  /* token ids, as OpenAI's completions take them: one prompt, or several mixed with text */
  CHECK(parse("{\"prompt\":[5,0,2147483647]}", SRV_COMPLETION, &r, &e) == 0);
  CHECK(r.n_prompts == 1 && !r.prompts[0] && r.n_prompt_ids[0] == 3);
  CHECK(r.prompt_ids[0][0] == 5 && r.prompt_ids[0][1] == 0 && r.prompt_ids[0][2] == 2147483647);
  srv_request_free(&r);
  CHECK(parse("{\"prompt\":[[7,8],\"t\",[9]]}", SRV_COMPLETION, &r, &e) == 0);
  CHECK(r.n_prompts == 3 && r.n_prompt_ids[0] == 2 && r.prompt_ids[0][1] == 8);
  CHECK(!strcmp(r.prompts[1], "t") && !r.prompt_ids[1]);
  CHECK(r.n_prompt_ids[2] == 1 && r.prompt_ids[2][0] == 9);
  srv_request_free(&r);
}

/* Each bad body gets a 400 naming the field at fault. */
TEST(server_request_rejects_bad_bodies) {
  static const struct {
    srv_kind kind;
    const char *body, *param;
  } cases[] = {
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}]", ""},       /* truncated */
      {SRV_CHAT, "{\"messages\":[]} trailing", ""},
      {SRV_CHAT, "[1,2]", ""},
      {SRV_CHAT, "", ""},
      {SRV_CHAT, "{}", "messages"},
      {SRV_CHAT, "{\"messages\":\"hi\"}", "messages"},
      {SRV_CHAT, "{\"messages\":[]}", "messages"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"robot\",\"content\":\"x\"}]}", "messages[0].role"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\"}]}", "messages[0].content"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":5}]}", "messages[0].content"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":[{\"type\":\"image_url\"}]}]}", "messages[0].content"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":-5}", "max_tokens"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":\"5\"}", "max_tokens"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"max_tokens\":2.5}", "max_tokens"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":3}", "temperature"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"temperature\":\"hot\"}", "temperature"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream\":1}", "stream"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"a\",\"b\",\"c\",\"d\",\"e\"]}", "stop"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stop\":[\"\"]}", "stop"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"n\":0}", "n"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"logprobs\":true,\"top_logprobs\":21}", "top_logprobs"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"top_logprobs\":2}", "top_logprobs"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"model\":7}", "model"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"seed\":1.5}", "seed"},
      {SRV_CHAT, "{\"messages\":[{\"role\":\"user\",\"content\":\"x\"}],\"stream_options\":{\"include_usage\":\"yes\"}}",
       "stream_options.include_usage"},
      {SRV_COMPLETION, "{}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[1,-2,3]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[1,2.5]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[1,\"a\"]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[[1],5]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[[]]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[4294967296]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":[]}", "prompt"},
      {SRV_COMPLETION, "{\"prompt\":\"x\",\"logprobs\":true}", "logprobs"},
      {SRV_COMPLETION, "{\"prompt\":\"x\",\"presence_penalty\":2.5}", "presence_penalty"},
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
    srv_request r;
    srv_error e;
    int rc = parse(cases[i].body, cases[i].kind, &r, &e);
    CHECKF(rc == -1 && e.status == 400, "case %zu (%s): rc %d status %d", i, cases[i].body, rc, e.status);
    CHECKF(!strcmp(e.param, cases[i].param), "case %zu: param '%s', expected '%s' (%s)", i, e.param, cases[i].param,
           e.message);
    CHECK(e.message[0] && e.type);
    CHECK(r.n_messages == 0 && r.messages == NULL && r.n_prompts == 0 && r.n_stop == 0);
  }
}

TEST(server_request_rejects_invalid_utf8) {
  srv_request r;
  srv_error e;
  const char body[] = "{\"prompt\":\"a\xc3\x28\"}";
  CHECK(srv_request_parse(body, sizeof body - 1, SRV_COMPLETION, &r, &e) == -1);
  CHECK(e.status == 400 && !strcmp(e.code, "invalid_encoding"));
  /* a lone surrogate escape is not text either */
  CHECK(parse("{\"prompt\":\"\\ud800\"}", SRV_COMPLETION, &r, &e) == -1 && e.status == 400);
  /* but a pair is, and so is plain multi-byte text */
  CHECK(parse("{\"prompt\":\"\\ud83d\\ude00 \xc3\xa9\"}", SRV_COMPLETION, &r, &e) == 0);
  CHECK(!strcmp(r.prompts[0], "\xf0\x9f\x98\x80 \xc3\xa9"));
  srv_request_free(&r);
}

TEST(server_sse_framing) {
  srv_buf b = {0};
  srv_sse_event(&b, "{\"a\":1}");
  srv_sse_event(&b, "{}");
  srv_sse_done(&b);
  CHECK(!b.failed);
  CHECK(!strcmp(b.s, "data: {\"a\":1}\n\ndata: {}\n\ndata: [DONE]\n\n"));
  CHECK(b.n == strlen(b.s));
  srv_buf_free(&b);
  srv_error e = {0};
  srv_error_set(&e, 404, "invalid_request_error", "model_not_found", "model", "no model '%s'", "x\"y");
  char *j = srv_error_json(&e);
  CHECK(j && !strcmp(j, "{\"error\":{\"message\":\"no model 'x\\\"y'\",\"type\":\"invalid_request_error\","
                        "\"param\":\"model\",\"code\":\"model_not_found\"}}"));
  free(j);
}

TEST(server_utf8_sanitize) {
  char *s = srv_utf8_sanitize("a\xe2\x82\xac" "b\xe2\x82" "c\xff", 9);
  CHECK(s && !strcmp(s, "a\xe2\x82\xac" "b\xef\xbf\xbd\xef\xbf\xbd" "c\xef\xbf\xbd"));
  free(s);
}

/* Pushes pieces through a matcher; returns what it released (joined) and whether it stopped. */
static int run_stop(const char *const *stops, int n_stops, const char *const *pieces, int n_pieces, char *out,
                    size_t cap) {
  srv_stop_match m;
  srv_stop_init(&m, stops, n_stops);
  size_t at = 0;
  int hit = 0;
  for (int i = 0; i < n_pieces && !hit; i++) {
    const char *p;
    size_t n;
    hit = srv_stop_push(&m, pieces[i], strlen(pieces[i]), &p, &n);
    if (at + n < cap) { memcpy(out + at, p, n); at += n; }
  }
  if (!hit) {
    const char *p;
    size_t n;
    srv_stop_flush(&m, &p, &n);
    if (at + n < cap) { memcpy(out + at, p, n); at += n; }
  }
  out[at] = 0;
  srv_stop_free(&m);
  return hit;
}

TEST(server_stop_strings_across_pieces) {
  char out[128];
  /* the stop string spans three pieces; the text before it is kept whole */
  const char *stops1[] = {"o wor"};
  const char *p1[] = {"Hel", "lo w", "o", "rld!", "never"};
  CHECK(run_stop(stops1, 1, p1, 5, out, sizeof out) == 1 && !strcmp(out, "Hell"));
  /* a held prefix that does not become the stop string is released */
  const char *p2[] = {"so w", "ow", " end"};
  CHECK(run_stop(stops1, 1, p2, 3, out, sizeof out) == 0 && !strcmp(out, "so wow end"));
  /* held at the end of the reply: flushed */
  const char *p3[] = {"hello", " wo"};
  CHECK(run_stop(stops1, 1, p3, 2, out, sizeof out) == 0 && !strcmp(out, "hello wo"));
  /* several stop strings: the earliest in the text wins */
  const char *stops2[] = {"END", "\n\n", "\xc3\xa9t\xc3\xa9"};
  const char *p4[] = {"un \xc3\xa9", "t\xc3\xa9", " END\n\n"};
  CHECK(run_stop(stops2, 3, p4, 3, out, sizeof out) == 1 && !strcmp(out, "un "));
  const char *p5[] = {"a\n", "\nb END"};
  CHECK(run_stop(stops2, 3, p5, 2, out, sizeof out) == 1 && !strcmp(out, "a"));
  /* a stop string at the very start */
  const char *p6[] = {"END of it"};
  CHECK(run_stop(stops2, 3, p6, 1, out, sizeof out) == 1 && !strcmp(out, ""));
  /* no stop strings: everything passes at once */
  CHECK(run_stop(NULL, 0, p1, 5, out, sizeof out) == 0 && !strcmp(out, "Hello world!never"));
}

/* Every line is a comment or "name{labels} value"; histograms are cumulative
 * and end with +Inf = _count. */
TEST(server_metrics_text_format) {
  srv_metrics m;
  srv_metrics_init(&m);
  srv_metrics_count_status(&m, 200);
  srv_metrics_count_status(&m, 200);
  srv_metrics_count_status(&m, 429);
  srv_metrics_count_status(&m, 418);
  srv_metrics_observe_ttft(&m, 0.003);
  srv_metrics_observe_ttft(&m, 0.2);
  srv_metrics_observe_ttft(&m, 100);
  srv_metrics_observe_itl(&m, 0.01);
  wisp_sched_stats st = {.prompt_tokens = 12, .generated_tokens = 34, .running = 2, .queued = 1, .slots = 4,
                         .slots_used = 3};
  char *text = srv_metrics_render(&m, &st);
  srv_metrics_destroy(&m);
  CHECK(text);
  CHECK(strstr(text, "wisp_http_requests_total{code=\"200\"} 2\n"));
  CHECK(strstr(text, "wisp_http_requests_total{code=\"429\"} 1\n"));
  CHECK(strstr(text, "wisp_http_requests_total{code=\"other\"} 1\n"));
  CHECK(strstr(text, "wisp_time_to_first_token_seconds_bucket{le=\"0.005\"} 1\n"));
  CHECK(strstr(text, "wisp_time_to_first_token_seconds_bucket{le=\"0.25\"} 2\n"));
  CHECK(strstr(text, "wisp_time_to_first_token_seconds_bucket{le=\"30\"} 2\n"));
  CHECK(strstr(text, "wisp_time_to_first_token_seconds_bucket{le=\"+Inf\"} 3\n"));
  CHECK(strstr(text, "wisp_time_to_first_token_seconds_count 3\n"));
  CHECK(strstr(text, "wisp_inter_token_latency_seconds_count 1\n"));
  CHECK(strstr(text, "wisp_prompt_tokens_total 12\n"));
  CHECK(strstr(text, "wisp_generated_tokens_total 34\n"));
  CHECK(strstr(text, "wisp_sequences_running 2\n"));
  CHECK(strstr(text, "wisp_sequences_queued 1\n"));
  CHECK(strstr(text, "wisp_slots_used 3\n"));
  /* every sample line parses, and names a family declared by a TYPE line before it */
  int samples = 0;
  for (char *line = text; *line;) {
    char *nl = strchr(line, '\n');
    CHECK(nl);
    *nl = 0;
    if (line[0] != '#') {
      char name[128], *sp = strrchr(line, ' ');
      CHECK(sp && sp > line);
      char *end;
      strtod(sp + 1, &end);
      CHECKF(end != sp + 1 && *end == 0, "bad value in '%s'", line);
      size_t k = strcspn(line, "{ ");
      CHECK(k < sizeof name);
      memcpy(name, line, k);
      name[k] = 0;
      char family[140];
      snprintf(family, sizeof family, "# TYPE %s ", name);
      int declared = strstr(text, family) && strstr(text, family) < line;
      for (const char *sfx = "_bucket"; !declared && sfx; sfx = !strcmp(sfx, "_bucket") ? "_sum" : !strcmp(sfx, "_sum") ? "_count" : NULL) {
        size_t ns = strlen(name), nx = strlen(sfx);
        if (ns > nx && !strcmp(name + ns - nx, sfx)) {
          snprintf(family, sizeof family, "# TYPE %.*s histogram", (int)(ns - nx), name);
          declared = strstr(text, family) && strstr(text, family) < line;
        }
      }
      CHECKF(declared, "no TYPE line before '%s'", line);
      samples++;
    }
    *nl = '\n';
    line = nl + 1;
  }
  CHECK(samples > 40);
  free(text);
}

/* ---- wisp serve end to end, driven by node (tests/server/) ----------------
 * node and the pinned npm packages come from the set-up (scripts/deps.sh:
 * Debian's nodejs, `npm ci` in tests/server); without them these tests fail
 * and say so, rather than pass untested. */

static int node_ready(char *why, size_t cap) {
  char out[512];
  if (test_run("node --version", out, sizeof out) != 0) {
    snprintf(why, cap, "node is not installed (scripts/deps.sh installs Debian's nodejs)");
    return 0;
  }
  FILE *f = fopen("tests/server/node_modules/openai/package.json", "r");
  if (!f) {
    snprintf(why, cap, "tests/server/node_modules is missing (scripts/deps.sh runs npm ci there)");
    return 0;
  }
  fclose(f);
  return 1;
}

/* Runs a node script against the CLI under test; the script prints one line
 * per check and exits non-zero at the first failure. */
static void run_node(const char *script, const char *backend) {
  char why[256];
  CHECKF(node_ready(why, sizeof why), "%s", why);
  char cmd[1024];
  static char out[1 << 16];
  snprintf(cmd, sizeof cmd, "node tests/server/%s --wisp %s --model models/default --backend %s --out build/test-logs",
           script, test_wisp_bin(), backend);
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 0, "%s (%s) exit %d:\n%s", script, backend, rc, out);
}

/* The OpenAI client against wisp serve on the CPU: every endpoint, streaming
 * and not, stop strings, usage, 8 concurrent streams against each alone, bad
 * requests and hostile clients (tests/server/client.mjs). */
TEST(server_openai_client_cpu) { run_node("client.mjs", "cpu"); }

/* The same on the WebGPU backend (lavapipe on a CPU-only machine). */
TEST(server_openai_client_webgpu) {
  WEBGPU_OR_SKIP(d); /* also sets VK_DRIVER_FILES for the child when needed */
  (void)d;
  run_node("client.mjs", "webgpu");
}

/* The chat page at / in headless Chromium: a typed message gets a streamed
 * reply; the screenshot is build/test-logs/chat-page.png. */
TEST(server_chat_page_in_chromium) { run_node("chat_page.mjs", "cpu"); }

/* Bad command lines and a model that cannot be opened: one line, the right
 * exit status, and no server left behind. */
TEST(server_cli_errors) {
  char cmd[1024], out[4096];
  /* a GGUF opens through wisp_model_open like a directory: a missing one is
   * the load's error, naming the file */
  snprintf(cmd, sizeof cmd, "%s serve --backend cpu --profile exact -m %s/model.gguf --port 0", test_wisp_bin(), test_tmpdir());
  int rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "model.gguf: cannot open"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "%s serve --backend cpu --profile exact --port 70000", test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "--port"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "%s serve --backend cpu --profile exact --api-key ''", test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 2 && strstr(out, "--api-key"), "exit %d: %s", rc, out);
  snprintf(cmd, sizeof cmd, "%s serve --backend cpu --profile exact --host not-an-address --port 0", test_wisp_bin());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "cannot listen on not-an-address"), "exit %d: %s", rc, out);
  /* listening works, the model does not: the load's error, exit 1 */
  snprintf(cmd, sizeof cmd, "%s serve --backend cpu --profile exact -m %s/no-such-model --port 0", test_wisp_bin(), test_tmpdir());
  rc = test_run(cmd, out, sizeof out);
  CHECKF(rc == 1 && strstr(out, "listening on") && strstr(out, "no-such-model/manifest.json"), "exit %d: %s", rc, out);
}

/* wisp serve's /local page (server/local_page.h): the five files of the
 * browser build, by fixed names, from the tree's build/wasm (make wasm,
 * which scripts/test.sh runs before the suite); any other name is refused. */
TEST(server_local_page_files) {
  char path[4200];
  const char *type = NULL, *why = NULL;
  CHECKF(srv_local_file("", path, sizeof path, &type, &why) == 0, "the page: %s", why ? why : "not found");
  CHECK(strstr(path, "/build/wasm/index.html") != NULL || strstr(path, "/share/wisp/web/index.html") != NULL);
  CHECK(!strcmp(type, "text/html; charset=utf-8"));
  CHECK(srv_local_file("wisp.wasm", path, sizeof path, &type, &why) == 0 && !strcmp(type, "application/wasm"));
  CHECK(srv_local_file("wgpu.js", path, sizeof path, &type, &why) == 0 && strstr(type, "javascript"));
  const char *refused[] = {"../manifest.json", "deps/lib/libcjson.a", "index.html/", "obj", "/etc/passwd", "wisp.wasm.d"};
  for (size_t i = 0; i < sizeof refused / sizeof refused[0]; i++)
    CHECKF(srv_local_file(refused[i], path, sizeof path, &type, &why) == -1, "%s was served", refused[i]);
}

/* The same over HTTP: wisp serve's /local redirect, the page and its files
 * with their types and build/wasm's bytes, 404 for any other name
 * (tests/server/local_page.mjs). */
TEST(server_local_page_over_http) { run_node("local_page.mjs", "cpu"); }
