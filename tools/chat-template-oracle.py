#!/usr/bin/env python3
"""The reference renderings wisp's chat-template renderer is tested against.

Default mode renders every template in tests/data/chat_templates/*.json with
every case of cases.json the way transformers' apply_chat_template does, using
jinja2 alone (transformers is not needed): an ImmutableSandboxedEnvironment
with trim_blocks and lstrip_blocks, the loopcontrols extension, a tojson
filter that is json.dumps(ensure_ascii=False, indent=...), raise_exception and
strftime_now as globals; the variables messages, tools (None when absent),
documents (None), add_generation_prompt, bos_token, eos_token and the case's
kwargs; and continue_final_message's cut after the last message.
strftime_now reads a fixed instant (NOW), in both modes. It writes
expected.json (an "output" or an "error" per template and case), which
tests/test_chat_template.c compares byte for byte.

--transformers renders the same with transformers' own apply_chat_template
(on a machine that has transformers) and reports every difference from
expected.json: the check that this file renders as transformers does.

  tools/chat-template-oracle.py                 # rewrite expected.json
  tools/chat-template-oracle.py --transformers  # compare with transformers
"""
import datetime
import json
import os
import sys

# The clock strftime_now reads, fixed so that renderings are reproducible
# (tests/test_chat_template.c renders with the same instant).
NOW = datetime.datetime.fromtimestamp(1721990000)

HERE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "tests", "data", "chat_templates")


def jinja_render(template, messages, tools, add_generation_prompt, variables):
    import jinja2
    import jinja2.ext
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def raise_exception(message):
        raise jinja2.exceptions.TemplateError(message)

    def tojson(x, ensure_ascii=False, indent=None, separators=None, sort_keys=False):
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    def strftime_now(fmt):
        return NOW.strftime(fmt)

    env = ImmutableSandboxedEnvironment(trim_blocks=True, lstrip_blocks=True, extensions=[jinja2.ext.loopcontrols])
    env.filters["tojson"] = tojson
    env.globals["raise_exception"] = raise_exception
    env.globals["strftime_now"] = strftime_now
    return env.from_string(template).render(
        messages=messages, tools=tools, documents=None, add_generation_prompt=add_generation_prompt, **variables)


def continue_final(rendered, messages):
    """transformers' continue_final_message: the text ends where the last
    message's content does, so generation continues it."""
    final = messages[-1]["content"]
    if isinstance(final, (list, tuple)):
        final = next(part["text"] for part in reversed(final) if "text" in part)
    if final.strip() not in rendered:
        raise ValueError("continue_final_message: the final message is not in the rendered text")
    at = rendered.rindex(final.strip())
    if rendered[at:at + len(final.lstrip())] == final:
        return rendered[:at + len(final.lstrip())]
    return rendered[:at + len(final.strip())]


def render_case(tmpl, case, use_transformers=False):
    # transformers passes the special tokens the tokenizer has (Qwen has no bos_token)
    variables = {k: tmpl[k] for k in ("bos_token", "eos_token") if tmpl.get(k) is not None}
    variables.update(case.get("kwargs", {}))
    messages, tools = case["messages"], case.get("tools")
    gen = case.get("add_generation_prompt", False)
    if use_transformers:
        # transformers' public path: apply_chat_template of a tokenizer with
        # this template and these special tokens (its vocabulary is unused)
        import transformers.utils.chat_template_utils as ctu
        from tokenizers import Tokenizer, models
        from transformers import PreTrainedTokenizerFast

        class FixedClock(datetime.datetime):
            @classmethod
            def now(cls, tz=None):
                return NOW
        ctu.datetime = FixedClock  # its strftime_now reads datetime.now()
        special = {k: tmpl[k] for k in ("bos_token", "eos_token") if tmpl.get(k)}
        tok = PreTrainedTokenizerFast(tokenizer_object=Tokenizer(models.WordLevel({"<unk>": 0}, unk_token="<unk>")),
                                      **special)
        kwargs = dict(case.get("kwargs", {}))
        return tok.apply_chat_template(messages, tools=tools, chat_template=tmpl["chat_template"], tokenize=False,
                                       add_generation_prompt=gen,
                                       continue_final_message=case.get("continue_final_message", False), **kwargs)
    out = jinja_render(tmpl["chat_template"], messages, tools, gen, variables)
    if case.get("continue_final_message"):
        out = continue_final(out, messages)
    return out


def render_all(use_transformers):
    cases = json.load(open(os.path.join(HERE, "cases.json")))
    results = []
    for fname in sorted(os.listdir(HERE)):
        if fname in ("cases.json", "expected.json") or not fname.endswith(".json"):
            continue
        tmpl = json.load(open(os.path.join(HERE, fname)))
        for case in cases:
            entry = {"template": fname[:-5], "case": case["name"]}
            try:
                entry["output"] = render_case(tmpl, case, use_transformers)
            except Exception as e:  # the renderer must fail too
                entry["error"] = "%s: %s" % (type(e).__name__, e)
            results.append(entry)
    return results


def main():
    if "--transformers" in sys.argv:
        want = {(e["template"], e["case"]): e for e in json.load(open(os.path.join(HERE, "expected.json")))}
        bad = 0
        got = render_all(True)
        for e in got:
            w = want.get((e["template"], e["case"]))
            same = w is not None and ("output" in e) == ("output" in w) and e.get("output") == w.get("output")
            if not same:
                bad += 1
                print("DIFFERS %s/%s\n  transformers: %r\n  expected.json: %r" % (
                    e["template"], e["case"], e.get("output", e.get("error")), w and w.get("output", w.get("error"))))
        print("%d of %d renderings match transformers" % (len(got) - bad, len(got)))
        sys.exit(1 if bad else 0)
    results = render_all(False)
    with open(os.path.join(HERE, "expected.json"), "w") as f:
        json.dump(results, f, ensure_ascii=False, indent=1)
        f.write("\n")
    print("%d renderings, %d errors" % (len(results), sum("error" in e for e in results)))


if __name__ == "__main__":
    main()
