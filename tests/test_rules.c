/* Selection rules: operators, value forms, first match wins, validation. */
#include "plan/rules.h"
#include "test.h"
#include "util/err.h"

static cJSON *chain(const char *text) { return cJSON_Parse(text); }

static wisp_ctx sample_ctx(void) {
  wisp_ctx c;
  wisp_ctx_init(&c);
  wisp_ctx_set_bool(&c, "hasSubgroups", 1);
  wisp_ctx_set_num(&c, "subgroupSize", 32);
  wisp_ctx_set_num(&c, "rows", 4096);
  wisp_ctx_set_str(&c, "vendor", "apple-m3");
  wisp_ctx_set_str(&c, "section", "attn.qkv");
  return c;
}

static const char *pick(const char *rules, int *idx) {
  static char out[128];
  wisp_ctx c = sample_ctx();
  cJSON *j = chain(rules);
  if (!j) return "(parse)";
  if (wisp_rules_validate(j, "t", 1)) { cJSON_Delete(j); return "(invalid)"; }
  wisp_status st = wisp_rules_select(j, &c, NULL, NULL, idx, out, sizeof out);
  cJSON_Delete(j);
  return st ? "(error)" : out;
}

TEST(rules_operators) {
  int i;
  CHECK(!strcmp(pick("[{\"match\":{\"rows\":{\"gt\":4096}},\"value\":\"a\"},{\"match\":{\"rows\":{\"gte\":4096}},\"value\":\"b\"}]", &i), "b") && i == 1);
  CHECK(!strcmp(pick("[{\"match\":{\"rows\":{\"lt\":4096}},\"value\":\"a\"},{\"match\":{\"rows\":{\"lte\":4096,\"gt\":1}},\"value\":\"b\"}]", &i), "b"));
  CHECK(!strcmp(pick("[{\"match\":{\"vendor\":{\"eq\":\"apple\"}},\"value\":\"a\"},{\"match\":{\"vendor\":{\"contains\":\"apple\"}},\"value\":\"b\"}]", &i), "b"));
  CHECK(!strcmp(pick("[{\"match\":{\"vendor\":{\"neq\":\"apple-m3\"}},\"value\":\"a\"},{\"match\":{\"subgroupSize\":{\"in\":[16,32]}},\"value\":\"b\"}]", &i), "b"));
  CHECK(!strcmp(pick("[{\"match\":{\"hasSubgroups\":false},\"value\":\"a\"},{\"match\":{\"hasSubgroups\":true,\"section\":\"attn.qkv\"},\"value\":\"b\"}]", &i), "b"));
  /* A key absent from the context never matches (even with neq). */
  CHECK(!strcmp(pick("[{\"match\":{\"tokens\":{\"neq\":1}},\"value\":\"a\"},{\"match\":{},\"value\":\"z\"}]", &i), "z") && i == 1);
  /* Nothing matches: index -1, empty value. */
  CHECK(!strcmp(pick("[{\"match\":{\"rows\":1},\"value\":\"a\"}]", &i), "") && i == -1);
}

TEST(rules_value_forms) {
  int i;
  CHECK(!strcmp(pick("[{\"match\":{},\"value\":{\"template\":\"q4_sg{subgroupSize}_{section}\"}}]", &i), "q4_sg32_attn.qkv"));
  CHECK(!strcmp(pick("[{\"match\":{},\"value\":{\"context\":\"vendor\"}}]", &i), "apple-m3"));
  CHECK(!strcmp(pick("[{\"match\":{},\"value\":64}]", &i), "64"));
  CHECK(!strcmp(pick("[{\"match\":{},\"value\":true}]", &i), "true"));
  /* A template naming a key the context lacks is an evaluation error. */
  CHECK(!strcmp(pick("[{\"match\":{},\"value\":{\"template\":\"x{tokens}\"}}]", &i), "(error)"));
}

static int reject_a(const char *v, void *ud) { (void)ud; return strcmp(v, "a") != 0; }

TEST(rules_first_acceptable_match_wins) {
  wisp_ctx c = sample_ctx();
  cJSON *j = chain("[{\"match\":{},\"value\":\"a\"},{\"match\":{},\"value\":\"b\"},{\"match\":{},\"value\":\"c\"}]");
  char out[32];
  int idx;
  CHECK(wisp_rules_select(j, &c, NULL, NULL, &idx, out, sizeof out) == WISP_OK && idx == 0 && !strcmp(out, "a"));
  CHECK(wisp_rules_select(j, &c, reject_a, NULL, &idx, out, sizeof out) == WISP_OK && idx == 1 && !strcmp(out, "b"));
  cJSON_Delete(j);
}

TEST(rules_validation_errors) {
  struct { const char *rules; const char *msg; } bad[] = {
      {"{}", "expected an array of rules"},
      {"[{\"value\":\"a\"}]", "t[0].match: missing"},
      {"[{\"match\":{}}]", "t[0].value: missing"},
      {"[{\"match\":{\"rows\":{\"gt\":\"big\"}},\"value\":\"a\"}]", "t[0].match.rows.gt: expected a number"},
      {"[{\"match\":{\"rows\":{\"in\":5}},\"value\":\"a\"}]", "t[0].match.rows.in: expected an array"},
      {"[{\"match\":{\"rows\":[1]},\"value\":\"a\"}]", "t[0].match.rows: expected a literal or an operator object"},
      {"[{\"match\":{\"shoeSize\":1},\"value\":\"a\"}]", "t[0].match.shoeSize: unknown context key"},
      {"[{\"match\":{},\"value\":{\"template\":\"x{nope}\"}}]", "unknown context key 'nope'"},
      {"[{\"match\":{},\"value\":{\"other\":1}}]", "t[0].value: expected a literal"},
      {"[{\"match\":{},\"value\":\"a\",\"when\":1}]", "t[0].when: unknown field"},
  };
  for (size_t k = 0; k < sizeof bad / sizeof bad[0]; k++) {
    cJSON *j = chain(bad[k].rules);
    CHECK(j);
    wisp_status st = wisp_rules_validate(j, "t", 1);
    cJSON_Delete(j);
    CHECKF(st == WISP_EFORMAT, "case %zu accepted", k);
    CHECKF(strstr(wisp_last_error(), bad[k].msg), "case %zu: '%s' lacks '%s'", k, wisp_last_error(), bad[k].msg);
  }
}

TEST(rules_device_caps) {
  wisp_device_caps d;
  wisp_device_caps_default(&d, "webgpu");
  CHECK(d.has_subgroups && d.subgroup_size == 32 && d.has_f16);
  CHECK(wisp_device_caps_set(&d, "hasSubgroups=false") == WISP_OK && !d.has_subgroups);
  CHECK(wisp_device_caps_set(&d, "subgroupSize=16") == WISP_OK && d.subgroup_size == 16);
  CHECK(wisp_device_caps_set(&d, "vendor=intel") == WISP_OK && !strcmp(d.vendor, "intel"));
  CHECK(wisp_device_caps_set(&d, "limits.maxComputeInvocationsPerWorkgroup=256") == WISP_OK && d.max_workgroup_size == 256);
  CHECK(wisp_device_caps_set(&d, "warp=32") == WISP_EINVAL && strstr(wisp_last_error(), "unknown key"));
  CHECK(wisp_device_caps_set(&d, "hasF16=maybe") == WISP_EINVAL);
  CHECK(wisp_device_has(&d, "subgroups") == 0 && wisp_device_has(&d, "shader-f16") == 1 && wisp_device_has(&d, "x") == -1);
  wisp_ctx c;
  wisp_ctx_init(&c);
  wisp_ctx_add_device(&c, &d);
  const wisp_value *v = wisp_ctx_get(&c, "subgroupSize");
  CHECK(v && v->type == WISP_V_NUM && v->num == 16);
}
