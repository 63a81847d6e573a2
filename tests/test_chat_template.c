/* Chat templates rendered by wisp's Jinja renderer (tokenizer/jinja.h,
 * tokenizer/chat_template.h), byte for byte against the renderings
 * tools/chat-template-oracle.py made with jinja2 as transformers'
 * apply_chat_template renders (tests/data/chat_templates/expected.json:
 * 9 real templates x the cases of cases.json, errors included); and the
 * renderer's own rules: whitespace control, scoping, filters, errors that
 * name the construct and its place, and the limits. */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <cJSON.h>

#include "fixtures.h"
#include "test.h"
#include "tokenizer/chat_template.h"
#include "tokenizer/jinja.h"
#include "util/file.h"
#include "wisp.h"

#define DIR "tests/data/chat_templates/"

/* The request a case describes: messages, tools, the two switches, kwargs. */
static cJSON *request_of(const cJSON *c) {
  cJSON *r = cJSON_CreateObject();
  cJSON_AddItemToObject(r, "messages", cJSON_Duplicate(cJSON_GetObjectItem(c, "messages"), 1));
  const cJSON *tools = cJSON_GetObjectItem(c, "tools"), *kw = cJSON_GetObjectItem(c, "kwargs"), *e;
  if (tools) cJSON_AddItemToObject(r, "tools", cJSON_Duplicate(tools, 1));
  cJSON_AddBoolToObject(r, "add_generation_prompt", cJSON_IsTrue(cJSON_GetObjectItem(c, "add_generation_prompt")));
  if (cJSON_IsTrue(cJSON_GetObjectItem(c, "continue_final_message"))) cJSON_AddTrueToObject(r, "continue_final_message");
  cJSON_ArrayForEach(e, kw) cJSON_AddItemToObject(r, e->string, cJSON_Duplicate(e, 1));
  return r;
}

TEST(chat_template_real_templates_match_transformers) {
  cJSON *expected = fixture_read_json(DIR "expected.json"), *cases = fixture_read_json(DIR "cases.json");
  CHECK(expected && cases && cJSON_GetArraySize(expected) >= 8 * 9);
  int n = 0, outputs = 0;
  const cJSON *e;
  char seen[16][32] = {{0}};
  int n_seen = 0;
  cJSON_ArrayForEach(e, expected) {
    const char *tname = cJSON_GetObjectItem(e, "template")->valuestring, *cname = cJSON_GetObjectItem(e, "case")->valuestring;
    char path[256];
    snprintf(path, sizeof path, DIR "%s.json", tname);
    cJSON *cfg = fixture_read_json(path);
    CHECKF(cfg, "%s", path);
    wisp_chat_tmpl *t = NULL;
    CHECKF(!wisp_chat_tmpl_from_config(cfg, path, &t), "%s: %s", path, wisp_last_error());
    const cJSON *c = NULL, *x;
    cJSON_ArrayForEach(x, cases) if (!strcmp(cJSON_GetObjectItem(x, "name")->valuestring, cname)) c = x;
    CHECK(c);
    cJSON *req = request_of(c);
    char *out = NULL;
    wisp_status st = wisp_chat_tmpl_render(t, req, 1721990000, &out);
    const cJSON *want = cJSON_GetObjectItem(e, "output");
    if (want) {
      CHECKF(!st, "%s/%s: %s", tname, cname, wisp_last_error());
      CHECKF(!strcmp(out, want->valuestring), "%s/%s differs:\n got: %s\nwant: %s", tname, cname, out, want->valuestring);
      outputs++;
    } else {
      CHECKF(st && !out, "%s/%s: rendered, but jinja2 fails (%s)", tname, cname, cJSON_GetObjectItem(e, "error")->valuestring);
      CHECKF(!strchr(wisp_last_error(), '\n'), "%s/%s: a multi-line error", tname, cname);
    }
    int known = 0;
    for (int i = 0; i < n_seen; i++) known |= !strcmp(seen[i], tname);
    if (!known && n_seen < 16) snprintf(seen[n_seen++], sizeof seen[0], "%s", tname);
    free(out);
    cJSON_Delete(req);
    wisp_chat_tmpl_free(t);
    cJSON_Delete(cfg);
    n++;
  }
  CHECKF(n_seen >= 8 && outputs >= 70, "%d templates, %d outputs", n_seen, outputs);
  cJSON_Delete(expected);
  cJSON_Delete(cases);
}

/* Renders src with vars (JSON text); returns malloc'd output or NULL. */
static char *render(const char *src, const char *vars) {
  wisp_jinja *j = NULL;
  if (wisp_jinja_parse(src, &j)) return NULL;
  cJSON *v = cJSON_Parse(vars ? vars : "{}");
  char *out = NULL;
  wisp_jinja_render(j, v, 1721990000, &out);
  cJSON_Delete(v);
  wisp_jinja_free(j);
  return out;
}

static int renders(const char *src, const char *vars, const char *want) {
  char *out = render(src, vars);
  int ok = out && !strcmp(out, want);
  if (!ok) fprintf(stderr, "  %s -> %s (want %s; %s)\n", src, out ? out : "(error)", want, out ? "" : wisp_last_error());
  free(out);
  return ok;
}

TEST(chat_template_jinja_semantics) {
  /* whitespace: trim_blocks, lstrip_blocks, - and + */
  CHECK(renders("a\n  {% if 1 %}\n  b\n  {% endif %}\nc\n", NULL, "a\n  b\nc"));
  CHECK(renders("a  {%- if 1 -%}  b  {%- endif %}", NULL, "ab"));
  CHECK(renders("  {%+ if 1 %}x{% endif +%}\ny", NULL, "  x\ny"));
  CHECK(renders("{# c #}\n{{ 1 }}\n{{- 2 }}", NULL, "12"));
  CHECK(renders("a\u00a0{%- if 1 %}b{% endif -%}\u3000 c\n\u2003 {% if 1 %}d{% endif %}", NULL, "abc\nd")); /* Python's whitespace */
  /* scoping: a set in a loop body lives one iteration; namespaces carry */
  CHECK(renders("{% set y = 0 %}{% for x in [1,2] %}{% if loop.first %}{% set y = 1 %}{% endif %}[{{ y }}]{% endfor %}{{ y }}", NULL, "[1][0]0"));
  CHECK(renders("{% set ns = namespace(n=0) %}{% for x in 'abc' %}{% set ns.n = ns.n + loop.index %}{% endfor %}{{ ns.n }}", NULL, "6"));
  CHECK(renders("{% for x in [1,2,3,4] if x is odd %}{{ loop.index0 }}/{{ loop.length }}{{ ',' if not loop.last }}{% else %}none{% endfor %}", NULL, "0/2,1/2"));
  CHECK(renders("{% for x in range(10) %}{% if x == 3 %}{% break %}{% endif %}{% if x == 1 %}{% continue %}{% endif %}{{ x }}{% endfor %}", NULL, "02"));
  CHECK(renders("{% macro m(a, b=2) %}<{{ a }}{{ b }}{{ y }}>{% endmacro %}{% set y = 5 %}{{ m(1) }}{{ m(1, b=3) }}", NULL, "<125><135>"));
  /* values as Python prints them */
  CHECK(renders("{{ [1, 'a', none, true] }} {{ {'k': 1.5} }} {{ 1.0 }} {{ 7 // 2 }} {{ 7 / 2 }} {{ -7 % 3 }} {{ 'a' ~ 1 }} {{ 1e-5 }}", NULL,
                "[1, 'a', None, True] {'k': 1.5} 1.0 3 3.5 2 a1 1e-05"));
  CHECK(renders("{{ 'héllo'[::-1] }} {{ 'héllo'[1:3] }} {{ 'héllo' | length }} {{ [1,2,3][-1] }} {{ 'a,b,,c'.split(',') }}", NULL,
                "olléh él 5 3 ['a', 'b', '', 'c']"));
  CHECK(renders("{{ x | tojson }}|{{ x | tojson(indent=2) }}", "{\"x\": {\"a\": [1, \"é\\\"\\n\"], \"b\": {}}}",
                "{\"a\": [1, \"é\\\"\\n\"], \"b\": {}}|{\n  \"a\": [\n    1,\n    \"é\\\"\\n\"\n  ],\n  \"b\": {}\n}"));
  CHECK(renders("{{ m.content if m.content is string else m.content | map(attribute='text') | join('') }}",
                "{\"m\": {\"content\": [{\"type\": \"text\", \"text\": \"a\"}, {\"type\": \"text\", \"text\": \"b\"}]}}", "ab"));
  CHECK(renders("{{ xs | selectattr('role', 'equalto', 'user') | list | length }} {{ xs | first | tojson }} {{ (xs | last).role | upper }}",
                "{\"xs\": [{\"role\": \"user\"}, {\"role\": \"bot\"}, {\"role\": \"user\"}]}", "2 {\"role\": \"user\"} USER"));
  CHECK(renders("{{ undefined_thing }}{{ d.missing is defined }} {{ d.get('k', 'z') }} {{ 'x' in d }} {{ none is none }} {{ d is mapping }}",
                "{\"d\": {\"x\": 1}}", "False z True True True"));
  CHECK(renders("{{ '  a b  '.strip() }}|{{ 'xxaxx'.lstrip('x') }}|{{ 'a-b'.replace('-', '+') }}|{{ 'Ab'.startswith(('a', 'A')) }}|{{ '  t ' | trim }}|{{ 'ab' | capitalize }}",
                NULL, "a b|axx|a+b|True|t|Ab"));
  CHECK(renders("[{{ s | trim }}] {{ s.split() }} [{{ s.rstrip() }}] [{{ 'ééxé'.strip('é') }}]", "{\"s\": \"\\u00a0a\\u3000b\\u2003\"}",
                "[a\u3000b] ['a', 'b'] [\u00a0a\u3000b] [x]"));
  CHECK(renders("{{ strftime_now('%Y') }}", NULL, "2024"));
  CHECK(renders("{% set x %}in{{ 1 }}{% endset %}{{ x }}{{ x | default('d') }}{{ y | default('d') }}", NULL, "in1in1d"));
  CHECK(renders("{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "{\"d\": {\"a\": 1, \"b\": [2]}}", "a=1;b=[2];"));
}

/* Errors are one line naming the construct and its place. */
static int fails_with(const char *src, const char *vars, const char *want) {
  char *out = render(src, vars);
  const char *err = wisp_last_error();
  int ok = !out && strstr(err, want) && !strchr(err, '\n');
  if (!ok) fprintf(stderr, "  %s -> %s / %s (want error with '%s')\n", src, out ? out : "(error)", err, want);
  free(out);
  return ok;
}

TEST(chat_template_errors_name_the_construct) {
  CHECK(fails_with("a\n{% include 'x' %}", NULL, "2:4: unsupported construct 'include'"));
  CHECK(fails_with("{{ x | frobnicate }}", "{\"x\": 1}", "1:8: unsupported filter 'frobnicate'"));
  CHECK(fails_with("{{ x is frob }}", NULL, "unsupported test 'frob'"));
  CHECK(fails_with("{% if x %}", NULL, "'if' without 'endif'"));
  CHECK(fails_with("{{ raise_exception('Roles must alternate') }}", NULL, "raise_exception: Roles must alternate"));
  CHECK(fails_with("{{ 'a' + 1 }}", NULL, "unsupported operand types"));
  CHECK(fails_with("{{ x.y.z }}", NULL, "'x' is undefined"));
  CHECK(fails_with("{% set d = {} %}{% set d.a = 1 %}", NULL, "only of a namespace"));
  CHECK(fails_with("{{ 'x' * 100000000 }}", NULL, "MiB"));
  CHECK(fails_with("{% set xs = range(1000) %}{% for i in xs %}{% for j in xs %}{% for k in xs %}{% endfor %}{% endfor %}{% endfor %}",
                   NULL, "loop iterations"));
  CHECK(fails_with("{% macro f(n) %}{{ f(n) }}{% endmacro %}{{ f(1) }}", NULL, "nested more than"));
  char deep[2000] = "{{ ";
  for (int i = 0; i < 300; i++) strcat(deep, "(");
  strcat(deep, "1");
  for (int i = 0; i < 300; i++) strcat(deep, ")");
  strcat(deep, " }}");
  CHECK(fails_with(deep, NULL, "nested more than"));
}

TEST(chat_template_turns_and_messages) {
  cJSON *cfg = fixture_read_json(DIR "qwen3.json");
  wisp_chat_tmpl *t = NULL;
  CHECK(cfg && !wisp_chat_tmpl_from_config(cfg, "qwen3", &t));
  wisp_chat_message m[2] = {{"system", "S"}, {"user", "U"}};
  char *s = NULL;
  CHECK(!wisp_chat_tmpl_messages(t, m, 2, 1, 0, &s));
  CHECK(!strcmp(s, "<|im_start|>system\nS<|im_end|>\n<|im_start|>user\nU<|im_end|>\n<|im_start|>assistant\n<think>\n\n</think>\n\n"));
  free(s);
  CHECK(!wisp_chat_tmpl_turn(t, 0, "S", "Next", 1, &s));
  CHECK(!strcmp(s, "<|im_end|>\n<|im_start|>user\nNext<|im_end|>\n<|im_start|>assistant\n"));
  free(s);
  wisp_chat_tmpl_free(t);
  cJSON_Delete(cfg);
  cfg = fixture_read_json(DIR "gemma3.json");
  CHECK(cfg && !wisp_chat_tmpl_from_config(cfg, "gemma3", &t));
  CHECK(!wisp_chat_tmpl_turn(t, 0, NULL, "Again", 0, &s));
  CHECK(!strcmp(s, "<end_of_turn>\n<start_of_turn>user\nAgain<end_of_turn>\n<start_of_turn>model\n"));
  free(s);
  wisp_chat_tmpl_free(t);
  cJSON_Delete(cfg);
}
