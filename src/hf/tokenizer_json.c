/*
 * tokenizer_json.c - tokenizer.json loading: a nesting-depth pre-scan
 * before cJSON sees the text, typed field helpers with one-line errors,
 * the top-level object (version, truncation, padding, added_tokens and the
 * components), and the tokenizer's lifetime.
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/file.h"
#include "hf/tokenizer_impl.h"

#define WM_TOK_MAX_FILE (2ull << 30)

/*
 * Checks what cJSON would mishandle or what could exhaust the stack: nesting
 * deeper than WM_TOK_MAX_JSON_DEPTH, raw control bytes in strings, and the
 * \u0000 escape (cJSON keeps strings NUL-terminated and would cut them).
 */
static wm_status json_prescan(const char *s, size_t n, const char *name, wm_error *err) {
    int depth = 0, in_str = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)s[i];
        if (in_str) {
            if (c == '\\') {
                if (i + 5 < n && s[i + 1] == 'u' && !memcmp(s + i + 2, "0000", 4))
                    return wm_err(err, WM_ERR_UNSUPPORTED, "%s: byte %zu: \\u0000 in a string is not supported", name, i);
                i++;
            } else if (c == '"')
                in_str = 0;
            else if (c < 0x20)
                return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: control character inside a string", name, i);
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '[' || c == '{') {
            if (++depth > WM_TOK_MAX_JSON_DEPTH)
                return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: JSON nested deeper than %d levels", name, i,
                              WM_TOK_MAX_JSON_DEPTH);
        } else if (c == ']' || c == '}')
            depth--;
        else if (c == 0)
            return wm_err(err, WM_ERR_INPUT, "%s: byte %zu: NUL byte", name, i);
    }
    return WM_OK;
}

const char *wm_tjson_type(const cJSON *o) {
    const cJSON *t = cJSON_GetObjectItemCaseSensitive(o, "type");
    return cJSON_IsString(t) ? t->valuestring : NULL;
}

wm_status wm_tjson_str(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int required,
                       const char **out, size_t *len, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = NULL;
    if (len) *len = 0;
    if (!v || cJSON_IsNull(v)) {
        if (required) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: missing", t->name, path, key);
        return WM_OK;
    }
    if (!cJSON_IsString(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected a string", t->name, path, key);
    size_t n = strlen(v->valuestring);
    if (!wm_u8_valid(v->valuestring, n))
        return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: not valid UTF-8", t->name, path, key);
    char *c = wm_arena_strndup(&t->arena, v->valuestring, n);
    if (!c) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
    *out = c;
    if (len) *len = n;
    return WM_OK;
}

wm_status wm_tjson_bool(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int def, int *out,
                        wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    if (!cJSON_IsBool(v)) return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected true or false", t->name, path, key);
    *out = cJSON_IsTrue(v);
    return WM_OK;
}

static int int_value(const cJSON *v, int64_t *out) {
    if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble)) return 0;
    double d = v->valuedouble;
    if (d != floor(d) || d < -9.0e15 || d > 9.0e15) return 0;
    *out = (int64_t)d;
    return 1;
}

wm_status wm_tjson_int(wm_tokenizer *t, const cJSON *o, const char *key, const char *path, int64_t def, int64_t lo,
                       int64_t hi, int64_t *out, wm_error *err) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(o, key);
    *out = def;
    if (!v || cJSON_IsNull(v)) return WM_OK;
    int64_t x;
    if (!int_value(v, &x) || x < lo || x > hi)
        return wm_err(err, WM_ERR_INPUT, "%s: %s.%s: expected an integer in [%lld, %lld]", t->name, path, key,
                      (long long)lo, (long long)hi);
    *out = x;
    return WM_OK;
}

wm_status wm_tjson_id(const wm_tokenizer *t, const cJSON *v, const char *what, int32_t *out, wm_error *err) {
    int64_t x;
    if (!int_value(v, &x) || x < 0 || x > INT32_MAX)
        return wm_err(err, WM_ERR_INPUT, "%s: %s: id must be an integer in [0, 2^31-1]", t->name, what);
    *out = (int32_t)x;
    return WM_OK;
}

/* ------------------------------------------------------ serde_json floats */

static const double POW10[309] = {
#define P(e) 1e##e
    P(0),   P(1),   P(2),   P(3),   P(4),   P(5),   P(6),   P(7),   P(8),   P(9),   P(10),  P(11),  P(12),  P(13),
    P(14),  P(15),  P(16),  P(17),  P(18),  P(19),  P(20),  P(21),  P(22),  P(23),  P(24),  P(25),  P(26),  P(27),
    P(28),  P(29),  P(30),  P(31),  P(32),  P(33),  P(34),  P(35),  P(36),  P(37),  P(38),  P(39),  P(40),  P(41),
    P(42),  P(43),  P(44),  P(45),  P(46),  P(47),  P(48),  P(49),  P(50),  P(51),  P(52),  P(53),  P(54),  P(55),
    P(56),  P(57),  P(58),  P(59),  P(60),  P(61),  P(62),  P(63),  P(64),  P(65),  P(66),  P(67),  P(68),  P(69),
    P(70),  P(71),  P(72),  P(73),  P(74),  P(75),  P(76),  P(77),  P(78),  P(79),  P(80),  P(81),  P(82),  P(83),
    P(84),  P(85),  P(86),  P(87),  P(88),  P(89),  P(90),  P(91),  P(92),  P(93),  P(94),  P(95),  P(96),  P(97),
    P(98),  P(99),  P(100), P(101), P(102), P(103), P(104), P(105), P(106), P(107), P(108), P(109), P(110), P(111),
    P(112), P(113), P(114), P(115), P(116), P(117), P(118), P(119), P(120), P(121), P(122), P(123), P(124), P(125),
    P(126), P(127), P(128), P(129), P(130), P(131), P(132), P(133), P(134), P(135), P(136), P(137), P(138), P(139),
    P(140), P(141), P(142), P(143), P(144), P(145), P(146), P(147), P(148), P(149), P(150), P(151), P(152), P(153),
    P(154), P(155), P(156), P(157), P(158), P(159), P(160), P(161), P(162), P(163), P(164), P(165), P(166), P(167),
    P(168), P(169), P(170), P(171), P(172), P(173), P(174), P(175), P(176), P(177), P(178), P(179), P(180), P(181),
    P(182), P(183), P(184), P(185), P(186), P(187), P(188), P(189), P(190), P(191), P(192), P(193), P(194), P(195),
    P(196), P(197), P(198), P(199), P(200), P(201), P(202), P(203), P(204), P(205), P(206), P(207), P(208), P(209),
    P(210), P(211), P(212), P(213), P(214), P(215), P(216), P(217), P(218), P(219), P(220), P(221), P(222), P(223),
    P(224), P(225), P(226), P(227), P(228), P(229), P(230), P(231), P(232), P(233), P(234), P(235), P(236), P(237),
    P(238), P(239), P(240), P(241), P(242), P(243), P(244), P(245), P(246), P(247), P(248), P(249), P(250), P(251),
    P(252), P(253), P(254), P(255), P(256), P(257), P(258), P(259), P(260), P(261), P(262), P(263), P(264), P(265),
    P(266), P(267), P(268), P(269), P(270), P(271), P(272), P(273), P(274), P(275), P(276), P(277), P(278), P(279),
    P(280), P(281), P(282), P(283), P(284), P(285), P(286), P(287), P(288), P(289), P(290), P(291), P(292), P(293),
    P(294), P(295), P(296), P(297), P(298), P(299), P(300), P(301), P(302), P(303), P(304), P(305), P(306), P(307),
    P(308)
#undef P
};

/* serde_json's f64_from_parts (no float_roundtrip): 0 when out of range. */
static int f64_from_parts(int positive, uint64_t significand, long exponent, double *out) {
    double f = (double)significand;
    for (;;) {
        unsigned long a = exponent < 0 ? (unsigned long)-exponent : (unsigned long)exponent;
        if (a < 309) {
            if (exponent >= 0) {
                f *= POW10[a];
                if (isinf(f)) return 0;
            } else
                f /= POW10[a];
            break;
        }
        if (f == 0.0) break;
        if (exponent >= 0) return 0;
        f /= 1e308;
        exponent += 308;
    }
    *out = positive ? f : -f;
    return 1;
}

/* Parses the JSON number text s[0..n) the way serde_json 1.0 does; 0 when it cannot. */
static int serde_f64(const char *s, size_t n, double *out) {
    size_t i = 0;
    int positive = 1;
    if (i < n && s[i] == '-') positive = 0, i++;
    uint64_t sig = 0;
    long exp = 0;
    if (i >= n || s[i] < '0' || s[i] > '9') return 0;
    if (s[i] == '0') i++;
    else
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (sig > (UINT64_MAX - d) / 10) exp++; /* parse_long_integer: drop the digit, scale */
            else sig = sig * 10 + d;
        }
    if (i < n && s[i] == '.') {
        i++;
        size_t start = i;
        int overflow = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            unsigned d = (unsigned)(s[i] - '0');
            if (overflow || sig > (UINT64_MAX - d) / 10) overflow = 1; /* parse_decimal_overflow: ignore the rest */
            else sig = sig * 10 + d, exp--;
        }
        if (i == start) return 0;
    }
    if (i < n && (s[i] == 'e' || s[i] == 'E')) {
        i++;
        int pos = 1;
        if (i < n && (s[i] == '+' || s[i] == '-')) pos = s[i] == '+', i++;
        if (i >= n || s[i] < '0' || s[i] > '9') return 0;
        long e = 0;
        for (; i < n && s[i] >= '0' && s[i] <= '9'; i++) {
            if (e > (INT32_MAX - (s[i] - '0')) / 10) { /* parse_exponent_overflow */
                if (sig && pos) return 0;
                *out = positive ? 0.0 : -0.0;
                return 1;
            }
            e = e * 10 + (s[i] - '0');
        }
        exp = pos ? exp + e : exp - e;
    }
    return i == n && f64_from_parts(positive, sig, exp, out);
}

/* Pre-order index of node v among the number nodes under root, or -1. */
static long number_index(const cJSON *root, const cJSON *v, long *count) {
    if (root == v) return *count;
    if (cJSON_IsNumber(root)) {
        (*count)++;
        return -1;
    }
    const cJSON *c;
    for (c = root->child; c; c = c->next) {
        long r = number_index(c, v, count);
        if (r >= 0) return r;
    }
    return -1;
}

int wm_tjson_serde_scores(const wm_tokenizer *t, const cJSON *first, size_t n, double *out) {
    if (!t->src || !t->src_root) return 0;
    long count = 0, k = number_index(t->src_root, first, &count);
    if (k < 0) return 0;
    const char *s = t->src;
    size_t len = t->src_len, got = 0;
    int in_str = 0;
    long seen = 0;
    for (size_t i = 0; i < len && got < n; i++) {
        char c = s[i];
        if (in_str) {
            if (c == '\\') i++;
            else if (c == '"') in_str = 0;
            continue;
        }
        if (c == '"') in_str = 1;
        else if (c == '-' || (c >= '0' && c <= '9')) {
            size_t j = i;
            while (j < len && (s[j] == '-' || s[j] == '+' || s[j] == '.' || s[j] == 'e' || s[j] == 'E' ||
                               (s[j] >= '0' && s[j] <= '9')))
                j++;
            if (seen++ >= k) {
                double d;
                if (!serde_f64(s + i, j - i, &d)) return 0;
                out[got++] = d;
            }
            i = j - 1;
        }
    }
    return got == n;
}

/* ------------------------------------------------- truncation / padding */

static wm_status load_truncation(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    if (!j || cJSON_IsNull(j)) return WM_OK;
    if (!cJSON_IsObject(j)) return wm_err(err, WM_ERR_INPUT, "%s: truncation: expected an object or null", t->name);
    int64_t v;
    wm_status st;
    if ((st = wm_tjson_int(t, j, "max_length", "truncation", -1, 0, INT32_MAX, &v, err))) return st;
    if (v < 0) return wm_err(err, WM_ERR_INPUT, "%s: truncation.max_length: missing", t->name);
    t->trunc.max_length = (size_t)v;
    if ((st = wm_tjson_int(t, j, "stride", "truncation", 0, 0, INT32_MAX, &v, err))) return st;
    t->trunc.stride = (size_t)v;
    const char *s;
    if ((st = wm_tjson_str(t, j, "strategy", "truncation", 0, &s, NULL, err))) return st;
    if (!s || !strcmp(s, "LongestFirst")) t->trunc.strategy = WM_TOK_TRUNC_LONGEST_FIRST;
    else if (!strcmp(s, "OnlyFirst")) t->trunc.strategy = WM_TOK_TRUNC_ONLY_FIRST;
    else if (!strcmp(s, "OnlySecond")) t->trunc.strategy = WM_TOK_TRUNC_ONLY_SECOND;
    else return wm_err(err, WM_ERR_INPUT, "%s: truncation.strategy: unknown '%s'", t->name, s);
    if ((st = wm_tjson_str(t, j, "direction", "truncation", 0, &s, NULL, err))) return st;
    if (s && strcmp(s, "Left") && strcmp(s, "Right"))
        return wm_err(err, WM_ERR_INPUT, "%s: truncation.direction: unknown '%s'", t->name, s);
    t->trunc.left = s && !strcmp(s, "Left");
    t->trunc.enabled = 1;
    return WM_OK;
}

static wm_status load_padding(wm_tokenizer *t, const cJSON *j, wm_error *err) {
    if (!j || cJSON_IsNull(j)) return WM_OK;
    if (!cJSON_IsObject(j)) return wm_err(err, WM_ERR_INPUT, "%s: padding: expected an object or null", t->name);
    wm_status st;
    const cJSON *s = cJSON_GetObjectItemCaseSensitive(j, "strategy");
    if (cJSON_IsObject(s) && cJSON_GetObjectItemCaseSensitive(s, "Fixed")) {
        int64_t v;
        if ((st = wm_tjson_int(t, s, "Fixed", "padding.strategy", 0, 0, INT32_MAX, &v, err))) return st;
        t->pad.length = (size_t)v;
    } else if (!(cJSON_IsString(s) && !strcmp(s->valuestring, "BatchLongest")))
        return wm_err(err, WM_ERR_INPUT, "%s: padding.strategy: expected \"BatchLongest\" or {\"Fixed\": N}", t->name);
    const char *d;
    if ((st = wm_tjson_str(t, j, "direction", "padding", 0, &d, NULL, err))) return st;
    t->pad.left = d && !strcmp(d, "Left");
    int64_t v;
    if ((st = wm_tjson_int(t, j, "pad_to_multiple_of", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.multiple = (size_t)v;
    if ((st = wm_tjson_int(t, j, "pad_id", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.pad_id = (int32_t)v;
    if ((st = wm_tjson_int(t, j, "pad_type_id", "padding", 0, 0, INT32_MAX, &v, err))) return st;
    t->pad.pad_type_id = (int32_t)v;
    const char *tok;
    size_t tl;
    if ((st = wm_tjson_str(t, j, "pad_token", "padding", 0, &tok, &tl, err))) return st;
    if (tok && tl >= sizeof t->pad.pad_token)
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: padding.pad_token: longer than %zu bytes", t->name,
                      sizeof t->pad.pad_token - 1);
    snprintf(t->pad.pad_token, sizeof t->pad.pad_token, "%s", tok ? tok : "[PAD]");
    t->pad.enabled = 1;
    return WM_OK;
}

/* --------------------------------------------------------- added tokens */

static wm_status load_added(wm_tokenizer *t, const cJSON *arr, wm_error *err) {
    if (!arr || cJSON_IsNull(arr)) return WM_OK;
    if (!cJSON_IsArray(arr)) return wm_err(err, WM_ERR_INPUT, "%s: added_tokens: expected an array", t->name);
    size_t n = (size_t)cJSON_GetArraySize(arr), i = 0;
    wm_tadded *toks = n ? calloc(n, sizeof *toks) : NULL;
    if (n && !toks) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", t->name);
    wm_status st = WM_OK;
    const cJSON *e;
    cJSON_ArrayForEach(e, arr) {
        char path[64];
        snprintf(path, sizeof path, "added_tokens[%zu]", i);
        if (!cJSON_IsObject(e)) {
            st = wm_err(err, WM_ERR_INPUT, "%s: %s: expected an object", t->name, path);
            break;
        }
        wm_tadded *a = &toks[i++];
        int sw, ls, rs, no, sp;
        const cJSON *idv = cJSON_GetObjectItemCaseSensitive(e, "id");
        if (idv && (st = wm_tjson_id(t, idv, path, &a->id, err))) break;
        if ((st = wm_tjson_str(t, e, "content", path, 1, &a->content, &a->len, err)) ||
            (st = wm_tjson_bool(t, e, "single_word", path, 0, &sw, err)) ||
            (st = wm_tjson_bool(t, e, "lstrip", path, 0, &ls, err)) ||
            (st = wm_tjson_bool(t, e, "rstrip", path, 0, &rs, err)) ||
            (st = wm_tjson_bool(t, e, "special", path, 0, &sp, err)) ||
            (st = wm_tjson_bool(t, e, "normalized", path, !sp, &no, err)))
            break;
        a->single_word = (uint8_t)sw;
        a->lstrip = (uint8_t)ls;
        a->rstrip = (uint8_t)rs;
        a->normalized = (uint8_t)no;
        a->special = (uint8_t)sp;
    }
    if (!st) st = wm_tadded_add_batch(t, toks, i, err);
    free(toks);
    return st;
}

/* -------------------------------------------------------------- top level */

wm_status wm_tjson_tokenizer(wm_tokenizer *t, const cJSON *root, wm_error *err) {
    if (!cJSON_IsObject(root)) return wm_err(err, WM_ERR_INPUT, "%s: expected a JSON object", t->name);
    const cJSON *ver = cJSON_GetObjectItemCaseSensitive(root, "version");
    if (ver && !(cJSON_IsString(ver) && !strcmp(ver->valuestring, "1.0")))
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: version: unknown tokenizer version (expected \"1.0\")", t->name);
    const cJSON *model = cJSON_GetObjectItemCaseSensitive(root, "model");
    if (!cJSON_IsObject(model)) return wm_err(err, WM_ERR_INPUT, "%s: model: missing or not an object", t->name);
    wm_status st;
    if ((st = wm_tjson_model(t, model, err))) return st;
    const cJSON *j;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "normalizer")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_normalizer(t, j, "normalizer", &t->norm, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "pre_tokenizer")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_pretok(t, j, "pre_tokenizer", &t->pre, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "post_processor")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_post(t, j, "post_processor", &t->post, 0, err)))
        return st;
    if ((j = cJSON_GetObjectItemCaseSensitive(root, "decoder")) && !cJSON_IsNull(j) &&
        (st = wm_tjson_decoder(t, j, "decoder", &t->dec, 0, err)))
        return st;
    if ((st = load_truncation(t, cJSON_GetObjectItemCaseSensitive(root, "truncation"), err))) return st;
    if ((st = load_padding(t, cJSON_GetObjectItemCaseSensitive(root, "padding"), err))) return st;
    if ((st = load_added(t, cJSON_GetObjectItemCaseSensitive(root, "added_tokens"), err))) return st;
    if ((st = wm_tpre_flatten(t, err))) return st;
    return wm_tadded_finish(t, err);
}

wm_tokenizer *wm_tokenizer_new(const char *name) {
    wm_tokenizer *t = calloc(1, sizeof *t);
    if (!t) return NULL;
    wm_arena_init(&t->arena);
    snprintf(t->name, sizeof t->name, "%s", name ? name : "tokenizer");
    t->model.v.max_id = -1;
    t->model.unk_id = -1;
    for (int i = 0; i < 7; i++) t->roles[i] = -1;
    return t;
}

wm_status wm_tokenizer_load_json(const char *text, size_t len, const char *name, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    wm_tokenizer *t = wm_tokenizer_new(name);
    if (!t) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", name ? name : "tokenizer.json");
    wm_status st = json_prescan(text, len, t->name, err);
    cJSON *root = NULL;
    if (!st) {
        root = cJSON_ParseWithLength(text, len);
        if (!root) {
            const char *ep = cJSON_GetErrorPtr();
            size_t at = ep && ep >= text && ep <= text + len ? (size_t)(ep - text) : 0;
            st = wm_err(err, WM_ERR_INPUT, "%s: byte %zu: not valid JSON", t->name, at);
        }
    }
    t->src = text;
    t->src_len = len;
    t->src_root = root;
    if (!st) st = wm_tjson_tokenizer(t, root, err);
    t->src = NULL;
    t->src_len = 0;
    t->src_root = NULL;
    cJSON_Delete(root);
    if (!st) wm_tokenizer_finish_roles(t);
    if (st) {
        wm_tokenizer_free(t);
        return st;
    }
    *out = t;
    return WM_OK;
}

wm_status wm_tokenizer_load_file(const char *path, wm_tokenizer **out, wm_error *err) {
    *out = NULL;
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    if (m.size > WM_TOK_MAX_FILE) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: larger than 2 GiB", path);
    }
    st = wm_tokenizer_load_json((const char *)(m.data ? m.data : (const uint8_t *)""), m.size, path, out, err);
    wm_unmap(&m);
    if (st) return st;
    char dir[4096];
    wm_path_dirname(path, dir, sizeof dir);
    if ((st = wm_tok_check_configs(dir, err))) {
        wm_tokenizer_free(*out);
        *out = NULL;
        return st;
    }
    wm_tokenizer_read_config(*out, dir);
    wm_tokenizer_finish_roles(*out);
    return WM_OK;
}

wm_status wm_tokenizer_load(const char *path, wm_tokenizer **out, wm_error *err) {
    struct stat sb;
    if (stat(path, &sb) != 0) return wm_err(err, WM_ERR_IO, "%s: no such file or folder", path);
    return S_ISDIR(sb.st_mode) ? wm_tokenizer_load_dir(path, out, err) : wm_tokenizer_load_file(path, out, err);
}

void wm_tokenizer_free(wm_tokenizer *t) {
    if (!t) return;
    wm_tmodel_free(&t->model);
    wm_tnorm_free(t->norm);
    wm_tpre_free(t->pre);
    wm_tpost_free(t->post);
    wm_tdec_free(t->dec);
    free(t->added);
    wm_tmap_free(&t->added_map);
    wm_u64map_free(&t->added_by_id);
    wm_tmap_free(&t->special_set);
    wm_ttrie_free(&t->trie_raw);
    wm_ttrie_free(&t->trie_norm);
    wm_arena_free(&t->arena);
    free(t);
}
