/* Unit tests of the Jinja subset (llm/jinja.h): each construct on small templates, whitespace
 * control as transformers configures jinja2 (trim_blocks, lstrip_blocks), Python value
 * formatting, errors naming line and column, and every limit. Expected strings are what jinja2
 * renders (the same cases and many more are compared with jinja2 itself in
 * tests/oracle/test_chat_template.py). */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "llm/jinja.h"

/* variables every case sees: name -> JSON text */
static const char *const VARS[][2] = {
    {"xs", "[1, 2, 3]"},
    {"d", "{\"a\": 1, \"b\": [1, 2], \"c\": null}"},
    {"s", "\"h\\u00e9llo w\\u00f6rld\""},
    {"ws", "\"  padded \\n \""},
    {"e", "\"\""},
    {"n", "null"},
    {"f", "1.5"},
    {"one_f", "1.0"},
    {"msgs", "[{\"role\": \"system\", \"content\": \"S\"}, {\"role\": \"user\", \"content\": \"U\"},"
             " {\"role\": \"assistant\", \"content\": \"A\"}]"},
};

/* Renders src with VARS and limits lim (NULL = defaults); returns the output (caller frees) or
 * NULL with *err filled. */
static char *render_lim(const char *src, const wm_jinja_limits *lim, wm_error *err) {
    wm_jinja *t = NULL;
    wm_jinja_ctx *c = NULL;
    char *out = NULL;
    size_t n;
    memset(err, 0, sizeof *err);
    if (wm_jinja_compile(src, strlen(src), lim, &t, err)) return NULL;
    assert_int_equal(wm_jinja_ctx_new(lim, 86400 * 365, &c, err), WM_OK);
    for (size_t i = 0; i < sizeof VARS / sizeof VARS[0]; i++)
        assert_int_equal(wm_jinja_ctx_set_json(c, VARS[i][0], VARS[i][1], strlen(VARS[i][1]), err), WM_OK);
    if (wm_jinja_render(t, c, &out, &n, err)) out = NULL;
    wm_jinja_ctx_free(c);
    wm_jinja_free(t);
    return out;
}

static char *render(const char *src, wm_error *err) { return render_lim(src, NULL, err); }

typedef struct {
    const char *tmpl, *want;
} tcase;

static void run_cases(const tcase *cases, size_t n) {
    for (size_t i = 0; i < n; i++) {
        wm_error err;
        char *out = render(cases[i].tmpl, &err);
        if (!out) fail_msg("template %s: error %s", cases[i].tmpl, err.msg);
        if (strcmp(out, cases[i].want) != 0) fail_msg("template %s\n  got  [%s]\n  want [%s]", cases[i].tmpl, out, cases[i].want);
        free(out);
    }
}

static void test_output_and_literals(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"plain", "plain"},
        {"{{ 'a' }}{{ \"b\" }}{{ 1 }}{{ 1.0 }}{{ -2 }}{{ 0x1F }}{{ 1_000 }}{{ 1e3 }}", "ab11.0-23110001000.0"},
        {"{{ true }} {{ False }} {{ none }} {{ None }}", "True False None None"},
        {"{{ 'a\\n\\t\\\\\\'' }}", "a\n\t\\'"},
        {"{{ '\\x41\\u00e9\\101' }}", "A\xc3\xa9" "A"},
        {"{{ 'adj' 'acent' }}", "adjacent"},
        {"{{ xs }} {{ d }} {{ (1,) }} {{ (1, 2) }} {{ [] }} {{ {} }}", "[1, 2, 3] {'a': 1, 'b': [1, 2], 'c': None} (1,) (1, 2) [] {}"},
        {"{{ [\"it's\", 'say \"x\"', 'a\\nb'] }}", "[\"it's\", 'say \"x\"', 'a\\nb']"},
        {"{{ 0.1 }} {{ 1e16 }} {{ 1e15 }} {{ 0.0001 }} {{ 0.00001 }} {{ 1.5e-7 }} {{ 1e100 }} {{ -0.0 }}",
         "0.1 1e+16 1000000000000000.0 0.0001 1e-05 1.5e-07 1e+100 -0.0"},
        {"{{ one_f }} {{ f }} {{ 2 ** 0.5 }}", "1.0 1.5 1.4142135623730951"},
        {"[{{ undefined_name }}]", "[]"},
        {"{# a comment #}x", "x"},
        {"{% raw %}{{ kept }}{% endraw %}", "{{ kept }}"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_whitespace_control(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"a  {{- ' b ' -}}  c", "a b c"},
        {"x\n  {% if true %}\n  yes\n  {% endif %}\ny", "x\n  yes\ny"},      /* lstrip_blocks + trim_blocks */
        {"x\n  {%- if true -%}\n  yes\n  {%- endif -%}\ny", "xyesy"},
        {"x\n  {%+ if true %}\n  yes\n  {% endif +%}\ny", "x\n    yes\n\ny"}, /* + keeps the whitespace */
        {"  {{ 'v' }}\n", "  v"},                                             /* variables are not lstripped; one final newline dropped */
        {"a\n\n", "a\n"},
        {"keep\r\nwin\rmac", "keep\nwin\nmac"},
        {"{# c #}\nafter", "after"},
        {"\t{% for i in xs %}\n\t{{ i }}\n\t{% endfor %}\n", "\t1\n\t2\n\t3\n"},
        {"{% if true %}A{% endif %}\n{% if false %}B{% endif %}\nC", "AC"},
        {"  {%- raw -%}  {% x %}  {%- endraw -%}  end", "{% x %}end"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_operators(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"{{ 1 + 2 * 3 - 4 / 2 }} {{ 7 // 2 }} {{ -7 // 2 }} {{ -7 % 3 }} {{ 2 ** 10 }} {{ 2 ** 3 ** 2 }}", "5.0 3 -4 2 1024 64"},
        {"{{ 7.5 // 2 }} {{ -7.5 % 2 }} {{ 10 / 4 }}", "3.0 0.5 2.5"},
        {"{{ 'a' ~ 1 ~ none ~ f }}|{{ 'a' + 'b' }}|{{ xs + [4] }}|{{ 'ab' * 2 }}|{{ 2 * [0] }}", "a1None1.5|ab|[1, 2, 3, 4]|abab|[0, 0]"},
        {"{{ 1 == 1.0 }} {{ true == 1 }} {{ 1 < 2 < 3 }} {{ 3 > 2 > 2 }} {{ [1, 2] < [1, 3] }}", "True True True False True"},
        {"{{ 'a' in 'cat' }} {{ 'x' not in 'cat' }} {{ 2 in xs }} {{ 'a' in d }} {{ 'q' in nothing }}", "True True True True False"},
        {"{{ true and 'x' }} {{ 0 or 'y' }} {{ not xs }} {{ not e }}", "x y False True"},
        {"{{ 'y' if xs else 'n' }} [{{ 'z' if false }}] {{ 1 if false else 2 if true else 3 }}", "y [] 2"},
        {"{{ -(xs|length) }} {{ - - 3 }}", "-3 3"},
        {"{{ '%s-%d|%5.1f|%-3s|' % ('a', 3, 2.5, 'x') }} {{ '%(k)s'|format(k=1) }} {{ '%s' % xs }}", "a-3|  2.5|x  | 1 [1, 2, 3]"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_access_and_methods(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"{{ d.a }} {{ d['b'][1] }} {{ d.b.0 }} {{ msgs[0].role }} {{ msgs[-1]['content'] }}", "1 2 1 system A"},
        {"[{{ d.zz }}][{{ xs[9] }}] {{ d.zz is defined }} {{ d.c is none }}", "[][] False True"},
        {"{{ s[1:4] }} {{ s[::-1] }} {{ xs[::2] }} {{ xs[:-1] }} {{ s|length }}",
         "\xc3\xa9ll dlr\xc3\xb6w oll\xc3\xa9h [1, 3] [1, 2] 11"},
        {"{{ d.get('a') }} {{ d.get('q', 'dflt') }} {{ d.keys()|list }} {{ d.items()|list|length }}", "1 dflt ['a', 'b', 'c'] 3"},
        {"{{ ws.strip() }}|{{ ws.lstrip() }}|{{ ws.rstrip() }}|{{ 'xxaxx'.strip('x') }}", "padded|padded \n |  padded|a"},
        {"{{ 'a b  c'.split() }} {{ 'a,b,,c'.split(',') }} {{ 'a,b,c'.split(',', 1) }} {{ 'a b c'.rsplit(' ', 1) }}",
         "['a', 'b', 'c'] ['a', 'b', '', 'c'] ['a', 'b,c'] ['a b', 'c']"},
        {"{{ s.startswith('h') }} {{ s.endswith(('x', 'ld')) }} {{ s.replace('l', 'L', 1) }} {{ s.upper() }} {{ 'hi there'.title() }}",
         "True True h\xc3\xa9Llo w\xc3\xb6rld H\xc3\x89LLO W\xc3\x96RLD Hi There"},
        {"{{ s.find('l') }} {{ s.count('l') }} {{ '-'.join(['a', 'b']) }}", "2 3 a-b"},
        {"{% for k, v in d.items() %}{{ k }}={{ v }};{% endfor %}", "a=1;b=[1, 2];c=None;"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_filters_and_tests(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"{{ xs|length }} {{ d|count }} {{ nothing|length }} {{ ws|trim }} {{ 'xax'|trim('x') }}", "3 3 0 padded a"},
        {"{{ 'hELLo wORLD'|capitalize }} {{ 'a-b c_d'|title }} {{ 'Ab'|upper }}{{ 'Ab'|lower }}", "Hello world A-B C_d ABab"},
        {"{{ xs|join(',') }} {{ msgs|join('|', attribute='role') }} {{ xs|first }} {{ xs|last }}", "1,2,3 system|user|assistant 1 3"},
        {"{{ nothing|default('x') }} {{ n|default('x') }} {{ e|default('x', true) }}", "x None x"},
        {"{{ d|tojson }} {{ s|tojson }} {{ 'q\"\\n\\u0001'|tojson }} {{ [1.0, none, true]|tojson }}",
         "{\"a\": 1, \"b\": [1, 2], \"c\": null} \"h\xc3\xa9llo w\xc3\xb6rld\" \"q\\\"\\n\\u0001\" [1.0, null, true]"},
        {"{{ d|tojson(indent=2) }}", "{\n  \"a\": 1,\n  \"b\": [\n    1,\n    2\n  ],\n  \"c\": null\n}"},
        {"{{ s|tojson(ensure_ascii=true) }} {{ {'b': 1, 'a': 2}|tojson(sort_keys=true, separators=(',', ':')) }}",
         "\"h\\u00e9llo w\\u00f6rld\" {\"a\":2,\"b\":1}"},
        {"{{ msgs|selectattr('role', 'equalto', 'user')|list|length }} {{ msgs|rejectattr('role', 'eq', 'user')|map(attribute='content')|join }}",
         "1 SA"},
        {"{{ xs|select('odd')|list }} {{ xs|reject('odd')|list }} {{ [3, 1, 2]|sort }} {{ [1, 2, 1]|unique|list }} {{ xs|sum }}",
         "[1, 3] [2] [1, 2, 3] [1, 2] 6"},
        {"{{ '42'|int }} {{ '3.9'|int }} {{ 'x'|int(7) }} {{ '2.5'|float }} {{ xs|string }} {{ xs|reverse|list }}", "42 3 7 2.5 [1, 2, 3] [3, 2, 1]"},
        {"{{ d|items|list }} {{ d|dictsort|first }}", "[('a', 1), ('b', [1, 2]), ('c', None)] ('a', 1)"},
        {"{{ xs is iterable }} {{ 1 is iterable }} {{ d is mapping }} {{ s is string }} {{ 1 is number }} {{ f is float }}",
         "True False True True True True"},
        {"{{ 3 is odd }} {{ 9 is divisibleby 3 }} {{ nothing is defined }} {{ nothing is undefined }} {{ n is none }}",
         "True True False True True"},
        {"{{ 1 is eq 1 }} {{ 2 is gt 1 }} {{ 'upper' is filter }} {{ true is true }} {{ 1 is true }}", "True True True True False"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

static void test_statements(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"{% set a = 1 %}{% set b, c = 2, 3 %}{{ a }}{{ b }}{{ c }}", "123"},
        {"{% set x %}cap {{ 1 }}{% endset %}[{{ x }}]{% set y | upper %}up{% endset %}{{ y }}", "[cap 1]UP"},
        {"{% set ns = namespace(t=0) %}{% for i in xs %}{% set ns.t = ns.t + i %}{% endfor %}{{ ns.t }}", "6"},
        {"{% set x = 5 %}{% for i in xs %}{{ x }}{% set x = i %}{{ x }}{% endfor %}{{ x }}", "5152535"}, /* loop scope */
        {"{% if true %}{% set y = 3 %}{% endif %}{{ y }}", "3"},                                          /* if: no scope */
        {"{% if false %}a{% elif n %}b{% elif xs %}c{% else %}d{% endif %}", "c"},
        {"{% for i in xs %}{{ loop.index }}{{ loop.index0 }}{{ loop.revindex }}{{ loop.first }}{{ loop.last }}{{ loop.length }};{% endfor %}",
         "103TrueFalse3;212FalseFalse3;321FalseTrue3;"},
        {"{% for i in xs %}{{ loop.previtem }}/{{ loop.nextitem }}/{{ loop.cycle('a', 'b') }};{% endfor %}", "/2/a;1/3/b;2//a;"},
        {"{% for i in xs if i != 2 %}{{ i }}{{ loop.length }}{% else %}none{% endfor %}{% for i in [] %}x{% else %}none{% endfor %}", "1232none"},
        {"{% for i in range(10) %}{% if i == 2 %}{% continue %}{% endif %}{% if i == 5 %}{% break %}{% endif %}{{ i }}{% endfor %}", "0134"},
        {"{{ range(3)|list }} {{ range(1, 7, 2)|list }} {{ range(3, 0, -1)|list }}", "[0, 1, 2] [1, 3, 5] [3, 2, 1]"},
        {"{% macro g(n, p='!') %}hi {{ n }}{{ p }}{% endmacro %}{{ g('a') }} {{ g('b', '?') }} {{ g(p='.', n='c') }}", "hi a! hi b? hi c."},
        {"{% macro fact(n) %}{% if n <= 1 %}1{% else %}{{ n * fact(n - 1)|int }}{% endif %}{% endmacro %}{{ fact(5) }}", "120"},
        {"{% filter upper %}up {{ 'x' }}{% endfilter %}", "UP X"},
        {"{% generation %}gen{% endgeneration %}", "gen"},
        {"{{ dict(a=1) }} {{ namespace(a=2).a }}", "{'a': 1} 2"},
        {"{{ strftime_now('%Y-%m-%d') }}", "1971-01-01"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

typedef struct {
    const char *tmpl, *want_in_error;
} ecase;

static void run_errors(const ecase *cases, size_t n, const wm_jinja_limits *lim) {
    for (size_t i = 0; i < n; i++) {
        wm_error err;
        char *out = render_lim(cases[i].tmpl, lim, &err);
        if (out) fail_msg("template %.80s: expected an error, got [%.200s]", cases[i].tmpl, out);
        if (!strstr(err.msg, cases[i].want_in_error))
            fail_msg("template %.80s: error [%s] lacks [%s]", cases[i].tmpl, err.msg, cases[i].want_in_error);
        assert_true(err.status != WM_OK);
    }
}

static void test_errors_name_line_and_column(void **state) {
    (void)state;
    static const ecase cases[] = {
        {"a\nb {{ x.y }}", "line 2 col 7: 'x' is undefined"},
        {"{{ -xs|length }}", "line 1 col 4: bad operand type for unary -: 'list'"}, /* (-xs)|length, as jinja2 */
        {"{{ 1 + 'a' }}", "line 1 col 6: unsupported operand types for +: 'int' and 'str'"},
        {"\n\n  {{ xs|frob }}", "line 3 col 9: no filter named 'frob'"},
        {"{{ xs is frob }}", "line 1 col 10: no test named 'frob'"},
        {"{{ xs|groupby('a') }}", "the 'groupby' filter is not supported"},
        {"x\n{% for i in xs %}", "line 2 col 18: unexpected end of template: the 'for' tag opened at line 2 col 4 is not closed (expected 'endfor')"},
        {"{% if true %}{% endfor %}", "unknown tag 'endfor'"},
        {"{{ 'abc }}", "line 1 col 4: unterminated string literal"},
        {"ab {# open", "line 1 col 4: missing end of comment tag"},
        {"{{ x ", "unexpected end of template: missing '}}'"},
        {"{{ 1 ! 2 }}", "line 1 col 6: unexpected character '!'"},
        {"{% include 'a' %}", "line 1 col 4: the 'include' tag is not supported"},
        {"{% break %}", "line 1 col 4: 'break' outside of a loop"},
        {"{{ raise_exception('bad ' ~ 1) }}", "line 1 col 19: raise_exception: bad 1"},
        {"{{ xs.append(4) }}", "immutable sandbox"},
        {"{{ 1 / 0 }}", "division by zero"},
        {"{{ range(100001)|length }}", "range() of more than 100000 items"},
        {"{% set ns = namespace(_a=1) %}", "starting with '_'"},
        {"{% set d.a = 1 %}", "not a namespace"},
        {"{% for a, b in xs %}{% endfor %}", "not iterable"},
        {"{{ 9223372036854775807 + 1 }}", "integer overflow"},
        {"{{ 99999999999999999999 }}", "64-bit"},
        {"{{ (1 }}", "line 1 col 7: unexpected '}'"},
        {"{{ ) }}", "unexpected ')'"},
        {"{{ '%s %s' % ('one',) }}", "not enough arguments for format string"},
        {"{{ 'none' % 5 }}", "not all arguments converted"},
    };
    run_errors(cases, sizeof cases / sizeof cases[0], NULL);
}

static void test_limits(void **state) {
    (void)state;
    wm_jinja_limits lim;
    wm_jinja_limits_default(&lim);
    lim.max_output = 100;
    static const ecase out_cases[] = {{"{% for i in range(200) %}x{% endfor %}", "output limit (100 bytes) exceeded"}};
    run_errors(out_cases, 1, &lim);
    wm_jinja_limits_default(&lim);
    lim.max_steps = 1000;
    static const ecase step_cases[] = {{"{% for i in range(5000) %}{% endfor %}", "evaluation step limit (1000) exceeded"}};
    run_errors(step_cases, 1, &lim);
    wm_jinja_limits_default(&lim);
    lim.max_iterations = 10;
    static const ecase it_cases[] = {{"{% for i in range(5) %}{% for j in range(5) %}{% endfor %}{% endfor %}", "loop iteration limit (10)"}};
    run_errors(it_cases, 1, &lim);
    wm_jinja_limits_default(&lim);
    lim.max_depth = 5;
    static const ecase depth_cases[] = {
        {"{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}{% if 1 %}x{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}{% endif %}", "nesting deeper than 5"},
        {"{{ ((((((((1)))))))) }}", "nesting deeper than 5"},
        {"{% macro f() %}{{ f() }}{% endmacro %}{{ f() }}", "deeper than 5"},
        {"{{ 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 + 1 }}",
         "expression nested deeper than 40"},
    };
    run_errors(depth_cases, sizeof depth_cases / sizeof depth_cases[0], &lim);
    wm_jinja_limits_default(&lim);
    lim.max_memory = 1u << 20;
    static const ecase mem_cases[] = {{"{{ ('x' * 100000) * 100 }}", "limit"},
                                      {"{% set ns = namespace(s='ab') %}{% for i in range(40) %}{% set ns.s = ns.s ~ ns.s %}{% endfor %}", "limit"}};
    run_errors(mem_cases, 2, &lim);
    wm_jinja_limits_default(&lim);
    lim.max_template = 10;
    static const ecase tmpl_cases[] = {{"0123456789012", "more than the limit of 10"}};
    run_errors(tmpl_cases, 1, &lim);
}

static void test_ctx_reuse_and_json_rules(void **state) {
    (void)state;
    wm_error err = {0};
    wm_jinja *t = NULL;
    wm_jinja_ctx *c = NULL;
    const char *src = "{% set ns = namespace(k=0) %}{% for i in v %}{% set ns.k = ns.k + 1 %}{% endfor %}{{ ns.k }} {{ v }} {{ w }}";
    assert_int_equal(wm_jinja_compile(src, strlen(src), NULL, &t, &err), WM_OK);
    assert_int_equal(wm_jinja_ctx_new(NULL, 0, &c, &err), WM_OK);
    const char *v = "{\"a\": 1, \"b\": 2.0, \"a\": 3}"; /* duplicate key: first position, last value */
    assert_int_equal(wm_jinja_ctx_set_json(c, "v", v, strlen(v), &err), WM_OK);
    assert_int_equal(wm_jinja_ctx_set_str(c, "w", "W", &err), WM_OK);
    for (int k = 0; k < 2; k++) { /* a context renders the same twice: namespaces are per render */
        char *out;
        size_t n;
        assert_int_equal(wm_jinja_render(t, c, &out, &n, &err), WM_OK);
        assert_string_equal(out, "2 {'a': 3, 'b': 2.0} W");
        assert_int_equal(n, strlen(out));
        free(out);
    }
    const char *bad[] = {"[1, 2", "{\"a\" 1}", "[1,]", "\"\\x\"", "tru", "[\"\x01\"]", "[1] x", "\"\xff\""};
    for (size_t i = 0; i < sizeof bad / sizeof bad[0]; i++) {
        memset(&err, 0, sizeof err);
        assert_int_not_equal(wm_jinja_ctx_set_json(c, "z", bad[i], strlen(bad[i]), &err), WM_OK);
        assert_non_null(strstr(err.msg, "JSON offset"));
    }
    char deep[1000];
    memset(deep, '[', sizeof deep);
    memset(&err, 0, sizeof err);
    assert_int_not_equal(wm_jinja_ctx_set_json(c, "z", deep, sizeof deep, &err), WM_OK);
    assert_non_null(strstr(err.msg, "nesting deeper than 128"));
    wm_jinja_ctx_free(c);
    wm_jinja_free(t);
}


static double cpu_seconds(void) { return (double)clock() / CLOCKS_PER_SEC; }

/* Work in proportion to the operands' size is charged as steps, so the step limit caps the total work:
 * each case repeats one operation on a 100,000-byte string 1000 times (at least 1.5 million steps of 64
 * bytes); under a limit of 200,000 steps every one must stop with the step error. These used to run to the
 * end, charged one step each (length, ==, <, startswith, join, tojson, ~, isdigit ...). */
static void test_work_is_charged_by_size(void **state) {
    (void)state;
    static const char *const ops[] = {
        "s|length > 0", "s == t", "s != t", "s < t", "s.startswith(t)", "s.endswith(t)", "[s]|join", "[s, s]|join(s)",
        "s|tojson", "(s ~ '')|length", "s.isdigit()", "s|wordcount", "s.removeprefix(t)", "s.rfind('b')",
        "s.count('b')", "'b' in s", "s.find('b')", "s.replace('a', 'c')", "s|upper", "s[1:]", "s[::-1]",
        "s.split('b')", "s.rsplit('b')", "s|trim", "s.center(100010)", "[s] == [t]", "{'k': s} == {'k': t}",
        "[s] in [[t]]", "s * 1", "[s, t]|sort", "[s, t]|unique|list", "s|int", "s|reverse",
        "s.partition('b')", "s.rpartition('b')", "'%s' % s", "s|e",
    };
    wm_jinja_limits lim;
    wm_jinja_limits_default(&lim);
    lim.max_steps = 200000;
    for (size_t i = 0; i < sizeof ops / sizeof ops[0]; i++) {
        char src[512];
        snprintf(src, sizeof src,
                 "{%% set s = 'a' * 100000 %%}{%% set t = 'a' * 100000 %%}"
                 "{%% for i in range(1000) %%}{%% if %s %%}{%% endif %%}{%% endfor %%}",
                 ops[i]);
        ecase c = {src, "evaluation step limit (200000) exceeded"};
        run_errors(&c, 1, &lim);
    }
}

/* `in` over a long string was a naive search: 'a' * 100000 ~ 'b' in 'a' * 4000000 compared about 4e11
 * bytes (minutes) under a charge of 250,000 steps. Now linear: it answers at once. */
static void test_in_long_string_linear(void **state) {
    (void)state;
    wm_jinja_limits lim;
    wm_jinja_limits_default(&lim);
    lim.max_steps = 2000000;
    wm_error err;
    double t0 = cpu_seconds();
    char *out = render_lim("{% set h = 'a' * 4000000 %}{% set n = 'a' * 100000 ~ 'b' %}{{ n in h }} {{ h.find(n) }} "
                           "{{ h.count(n) }} {{ (h ~ 'b').rfind('ab') }}",
                           &lim, &err);
    double dt = cpu_seconds() - t0;
    if (!out) fail_msg("error: %s", err.msg);
    assert_string_equal(out, "False -1 0 3999999");
    free(out);
    if (dt > 5) fail_msg("took %.1f s of CPU", dt);
}

/* Comparing values nested a million deep recursed a million C frames (a stack overflow); now an error
 * naming the depth, as Python's RecursionError. */
static void test_deep_comparison_bounded(void **state) {
    (void)state;
    static const ecase cases[] = {
        {"{% set ns = namespace(x=[]) %}{% for j in range(9) %}{% for i in range(100000) %}{% set ns.x = [ns.x] %}"
         "{% endfor %}{% endfor %}{{ ns.x == ns.x }}",
         "comparison of values nested deeper than 800"},
        {"{% set ns = namespace(x=[]) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}"
         "{{ ns.x < [ns.x] }}",
         "nested deeper than 800"},
        {"{% set ns = namespace(x=[]) %}{% for i in range(2000) %}{% set ns.x = [ns.x] %}{% endfor %}"
         "{{ ns.x in [1, ns.x] }}",
         "nested deeper than 800"},
    };
    run_errors(cases, sizeof cases / sizeof cases[0], NULL);
}

/* Slices with extreme steps and bounds, as Python (a step of INT64_MIN negated itself: UBSan). */
static void test_slice_extremes(void **state) {
    (void)state;
    static const tcase cases[] = {
        {"{{ 'abc'[::-9223372036854775807 - 1] }}", "c"},
        {"{{ [1, 2, 3][::-9223372036854775807 - 1] }}", "[3]"},
        {"{{ 'abc'[::9223372036854775807] }}", "a"},
        {"{{ [1, 2, 3][::9223372036854775807] }}", "[1]"},
        {"{{ 'abc'[-9223372036854775807 - 1:9223372036854775807] }}", "abc"},
        {"{{ 'abc'[9223372036854775807:-9223372036854775807 - 1:-1] }}", "cba"},
        {"{{ [1, 2, 3, 4, 5][-9223372036854775807 - 1::2] }}", "[1, 3, 5]"},
        {"{{ 'h\u00e9llo'[::-2] }}", "olh"},
        {"{{ 'h\u00e9llo'[3::-3] }}", "lh"},
        {"{{ 'h\u00e9llo'[1:4] }}", "\u00e9ll"},
        {"{{ 'h\u00e9llo'[-4] }}", "\u00e9"},
        {"{{ ''[::-1] }}|{{ 'abc'[5:] }}|{{ 'abc'[2:1] }}", "||"},
    };
    run_cases(cases, sizeof cases / sizeof cases[0]);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_output_and_literals),       cmocka_unit_test(test_whitespace_control),
        cmocka_unit_test(test_operators),                 cmocka_unit_test(test_access_and_methods),
        cmocka_unit_test(test_filters_and_tests),         cmocka_unit_test(test_statements),
        cmocka_unit_test(test_errors_name_line_and_column), cmocka_unit_test(test_limits),
        cmocka_unit_test(test_ctx_reuse_and_json_rules),
        cmocka_unit_test(test_work_is_charged_by_size), cmocka_unit_test(test_in_long_string_linear),
        cmocka_unit_test(test_deep_comparison_bounded), cmocka_unit_test(test_slice_extremes),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
