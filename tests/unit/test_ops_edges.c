/*
 * test_ops_edges.c - integer ops at their edges and index arithmetic with
 * extreme values (ops/int_math.h): every integer element type (int8..int64,
 * uint8..uint64) through Add, Sub, Mul, Div, Mod (fmod 0 and 1), Pow, Max,
 * Min, BitShift, Abs, Neg, Sign against a reference computed independently
 * in 128-bit arithmetic, three ways each: run by the engine, folded by the
 * session at creation (constant inputs), and folded by the optimizer's
 * evaluator (src/opt/fold.c), which must all agree. Then Cast of NaN, inf
 * and out-of-range floats (onnxruntime 1.32's x86 results), Pow with a
 * float exponent, and Slice, Pad, Range, Tile, Split, DepthToSpace, Conv,
 * CumSum, the reductions, OneHot, empty tensors with huge dims and the
 * optimizer's shape values with INT64_MIN / INT64_MAX / NaN / 1e60 inputs:
 * defined results or an error naming the node, never a trap or UB.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops_test_util.h"
#include "opt/fold.h"
#include "opt/opt_util.h"

typedef unsigned __int128 u128;
typedef __int128 i128;

typedef struct ity {
    int32_t dt;
    int bits, uns;
} ity;

static const ity TYPES[] = {{WM_DT_INT8, 8, 0},   {WM_DT_UINT8, 8, 1},   {WM_DT_INT16, 16, 0}, {WM_DT_UINT16, 16, 1},
                            {WM_DT_INT32, 32, 0}, {WM_DT_UINT32, 32, 1}, {WM_DT_INT64, 64, 0}, {WM_DT_UINT64, 64, 1}};
#define N_TYPES (sizeof TYPES / sizeof TYPES[0])

/* v kept to the type's width: signed types sign-extended, unsigned zero-extended (uint64 as its bits). */
static int64_t wrap(const ity *t, u128 v) {
    uint64_t b = (uint64_t)v;
    if (t->bits < 64) {
        uint64_t mask = (1ull << t->bits) - 1;
        b &= mask;
        if (!t->uns && (b >> (t->bits - 1))) b |= ~mask;
    }
    return (int64_t)b;
}

/* The mathematical value of an element (x as loaded): signed, or unsigned for unsigned types. */
static i128 val(const ity *t, int64_t x) { return t->uns ? (i128)(uint64_t)x : (i128)x; }

static int64_t load(const ity *t, const void *p, size_t i) {
    switch (t->bits) {
    case 8: return wrap(t, ((const uint8_t *)p)[i]);
    case 16: return wrap(t, ((const uint16_t *)p)[i]);
    case 32: return wrap(t, ((const uint32_t *)p)[i]);
    default: return ((const int64_t *)p)[i];
    }
}

static void store(const ity *t, void *p, size_t i, int64_t v) {
    switch (t->bits) {
    case 8: ((uint8_t *)p)[i] = (uint8_t)v; break;
    case 16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case 32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

/* Edge values of the type: 0, +-1, +-2, +-7, 3, MIN, MIN + 1, MAX, MAX - 1 (wrapped for unsigned types). */
static size_t edges(const ity *t, int64_t *v) {
    u128 min = t->uns ? 0 : ~(u128)0 << (t->bits - 1);
    u128 max = t->uns ? ((u128)1 << t->bits) - 1 : ((u128)1 << (t->bits - 1)) - 1;
    const u128 e[] = {0, 1, 2, 3, 7, (u128)-1, (u128)-2, (u128)-7, min, min + 1, max, max - 1};
    for (size_t i = 0; i < sizeof e / sizeof e[0]; i++) v[i] = wrap(t, e[i]);
    return sizeof e / sizeof e[0];
}

/* ---------------------------------------------------------------- the reference (128-bit, written apart) */

enum { OP_ADD, OP_SUB, OP_MUL, OP_DIV, OP_MOD, OP_FMOD, OP_POW, OP_MAX, OP_MIN, OP_SHL, OP_SHR, OP_COUNT };
static const char *const OPNAME[] = {"Add", "Sub", "Mul", "Div", "Mod", "Mod", "Pow", "Max", "Min", "BitShift", "BitShift"};

/* x^y mod 2^64, left-to-right binary exponentiation (y >= 0). */
static u128 ref_pow(u128 x, uint64_t y) {
    u128 r = 1;
    for (int b = 63; b >= 0; b--) {
        r = (uint64_t)(r * r);
        if ((y >> b) & 1) r = (uint64_t)(r * x);
    }
    return r;
}

static int64_t ref(int op, const ity *t, int64_t xs, int64_t ys) {
    i128 x = val(t, xs), y = val(t, ys);
    switch (op) {
    case OP_ADD: return wrap(t, (u128)x + (u128)y);
    case OP_SUB: return wrap(t, (u128)x - (u128)y);
    case OP_MUL: return wrap(t, (u128)x * (u128)y);
    case OP_DIV: return y == 0 ? 0 : wrap(t, (u128)(x / y)); /* MIN / -1 = 2^(w-1): wraps to MIN */
    case OP_MOD: case OP_FMOD: {
        if (y == 0) return 0;
        i128 r = x % y;
        if (op == OP_MOD && r != 0 && (r < 0) != (y < 0)) r += y;
        return wrap(t, (u128)r);
    }
    case OP_POW:
        if (y < 0) return x == 1 ? 1 : x == -1 ? ((y & 1) ? wrap(t, (u128)-1) : 1) : 0;
        return wrap(t, ref_pow((u128)x, (uint64_t)y));
    case OP_MAX: return x > y ? xs : ys;
    case OP_MIN: return x < y ? xs : ys;
    case OP_SHL: return (u128)y >= (u128)t->bits ? 0 : wrap(t, (u128)x << (int)y);
    case OP_SHR:
        if (!t->uns) return wrap(t, (u128)(x >> ((u128)y >= (u128)t->bits ? t->bits - 1 : (int)y)));
        return (u128)y >= (u128)t->bits ? 0 : wrap(t, (u128)(x >> (int)y));
    default: return 0;
    }
}

/* ---------------------------------------------------------------- running a binary op three ways */

enum { M_RUN, M_SESSION_FOLD, M_OPT_FOLD };

static void set_op_attrs(ut_model *u, int op) {
    if (op == OP_MOD) ut_attr_int(u, "fmod", 0);
    if (op == OP_FMOD) ut_attr_int(u, "fmod", 1);
    if (op == OP_SHL) ut_attr_string(u, "direction", "LEFT");
    if (op == OP_SHR) ut_attr_string(u, "direction", "RIGHT");
}

static void ct_of(wm_ct *c, int32_t dt, const void *p, int64_t n) {
    wm_error e = {0};
    assert_int_equal(wm_ct_alloc(c, dt, &n, 1, &e), WM_OK);
    if (n) memcpy(c->data, p, (size_t)n * wm_dtype_size(dt));
}

/* out = op(x, y) over n elements (x of type tx, y of ty; output type tx), computed in mode m. */
static void run_bin(const char *opname, int op, int32_t tx, int32_t ty, const void *x, const void *y, int64_t n, int m,
                    void *out) {
    ut_model u;
    ut_begin(&u, 18);
    wm_error e = {0};
    if (m == M_RUN) {
        ut_input(&u, "x", tx, 1);
        ut_input(&u, "y", ty, 1);
    } else {
        ut_const(&u, "x", tx, &n, 1, x);
        ut_const(&u, "y", ty, &n, 1, y);
    }
    ut_node(&u, opname, (const char *[]){"x", "y"}, 2, (const char *[]){"z"}, 1);
    set_op_attrs(&u, op);
    size_t nb = (size_t)n * wm_dtype_size(tx);
    if (m == M_OPT_FOLD) { /* the optimizer's evaluator, straight */
        wm_ct in[2], o;
        ct_of(&in[0], tx, x, n);
        ct_of(&in[1], ty, y, n);
        if (wm_fold_eval(u.node, 18, in, 2, &o, 1, 0, &e)) fail_msg("fold %s: %s", opname, e.msg);
        assert_int_equal(o.dtype, tx);
        assert_int_equal((int)o.n, (int)n);
        memcpy(out, o.data, nb);
        wm_ct_free(&in[0]), wm_ct_free(&in[1]), wm_ct_free(&o);
        ut_free(&u);
        return;
    }
    wm_graph_free(u.g);
    u.g = NULL;
    wm_session_opts o = {.threads = 1, .no_optimize = 1}; /* M_SESSION_FOLD: the engine op evaluated at creation */
    wm_onnx_model *mm = u.m;
    u.m = NULL;
    if (wm_session_new_model(mm, &o, &u.s, &e)) fail_msg("session %s: %s", opname, e.msg);
    if (m == M_SESSION_FOLD) {
        wm_session_stats st;
        wm_session_get_stats(u.s, &st);
        assert_int_equal((int)st.n_folded, 1);
    }
    wm_tensor in[2] = {ut_tensor(tx, &n, 1, x), ut_tensor(ty, &n, 1, y)}, res;
    if (wm_session_run(u.s, in, m == M_RUN ? 2 : 0, &res, 1, &e)) fail_msg("run %s: %s", opname, e.msg);
    assert_int_equal(res.dtype, tx);
    assert_int_equal((int)res.dims[0], (int)n);
    memcpy(out, res.data, nb);
    ut_free(&u);
}

/* Every pair of edge values of every integer type, for op, the three ways against the reference. */
static void check_op(int op) {
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const ity *t = &TYPES[ti];
        int64_t ev[16];
        size_t ne = edges(t, ev), n = ne * ne;
        uint8_t *x = calloc(n, 8), *y = calloc(n, 8), *o = calloc(n, 8);
        for (size_t i = 0; i < n; i++) store(t, x, i, ev[i / ne]), store(t, y, i, ev[i % ne]);
        for (int m = M_RUN; m <= M_OPT_FOLD; m++) {
            if (m == M_OPT_FOLD && (op == OP_SHL || op == OP_SHR)) continue; /* not a folded op */
            memset(o, 0xa5, n * 8);
            run_bin(OPNAME[op], op, t->dt, t->dt, x, y, (int64_t)n, m, o);
            for (size_t i = 0; i < n; i++) {
                int64_t a = load(t, x, i), b = load(t, y, i), want = ref(op, t, a, b), got = load(t, o, i);
                if (got != want)
                    fail_msg("%s%s type %d mode %d: %lld, %lld -> %lld, want %lld", OPNAME[op],
                             op == OP_FMOD ? "(fmod)" : op == OP_SHR ? "(right)" : "", (int)t->dt, m, (long long)a,
                             (long long)b, (long long)got, (long long)want);
            }
        }
        free(x), free(y), free(o);
    }
}

static void test_add(void **st) { (void)st, check_op(OP_ADD); }
static void test_sub(void **st) { (void)st, check_op(OP_SUB); }
static void test_mul(void **st) { (void)st, check_op(OP_MUL); }
static void test_div(void **st) { (void)st, check_op(OP_DIV); } /* MIN / -1: SIGFPE before */
static void test_mod(void **st) { (void)st, check_op(OP_MOD); }
static void test_fmod(void **st) { (void)st, check_op(OP_FMOD); }
static void test_pow(void **st) { (void)st, check_op(OP_POW); }
static void test_max_min(void **st) { (void)st, check_op(OP_MAX), check_op(OP_MIN); }
static void test_bitshift(void **st) { (void)st, check_op(OP_SHL), check_op(OP_SHR); }

/* ---------------------------------------------------------------- unary */

static void run_unary(const char *opname, const ity *t, const void *x, int64_t n, int fold, void *out) {
    ut_model u;
    ut_begin(&u, 18);
    wm_error e = {0};
    if (fold) ut_const(&u, "x", t->dt, &n, 1, x);
    else ut_input(&u, "x", t->dt, 1);
    ut_node(&u, opname, (const char *[]){"x"}, 1, (const char *[]){"z"}, 1);
    size_t nb = (size_t)n * wm_dtype_size(t->dt);
    if (fold == 2) {
        wm_ct in, o;
        ct_of(&in, t->dt, x, n);
        if (wm_fold_eval(u.node, 18, &in, 1, &o, 1, 0, &e)) fail_msg("fold %s: %s", opname, e.msg);
        memcpy(out, o.data, nb);
        wm_ct_free(&in), wm_ct_free(&o);
        ut_free(&u);
        return;
    }
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    wm_tensor in = ut_tensor(t->dt, &n, 1, x), res;
    if (wm_session_run(u.s, &in, fold ? 0 : 1, &res, 1, &e)) fail_msg("run %s: %s", opname, e.msg);
    memcpy(out, res.data, nb);
    ut_free(&u);
}

static void test_unary(void **st) {
    (void)st;
    static const char *const ops[] = {"Abs", "Neg", "Sign", "Relu"};
    for (size_t ti = 0; ti < N_TYPES; ti++) {
        const ity *t = &TYPES[ti];
        int64_t ev[16];
        size_t n = edges(t, ev);
        uint8_t x[16 * 8], o[16 * 8];
        for (size_t i = 0; i < n; i++) store(t, x, i, ev[i]);
        for (size_t k = 0; k < 4; k++)
            for (int fold = 0; fold <= (k < 2 ? 2 : 1); fold++) { /* Abs, Neg: the optimizer folds them too */
                if (!strcmp(ops[k], "Relu") && t->uns) continue; /* Relu takes signed and float types only */
                run_unary(ops[k], t, x, (int64_t)n, fold, o);
                for (size_t i = 0; i < n; i++) {
                    i128 v = val(t, ev[i]);
                    int64_t want = k == 0 ? (v < 0 ? wrap(t, (u128)-v) : ev[i]) /* Abs(MIN) = MIN */
                                 : k == 1 ? wrap(t, (u128)-v)
                                 : k == 2 ? (v > 0 ? 1 : v < 0 ? wrap(t, (u128)-1) : 0)
                                          : (v > 0 ? ev[i] : 0);
                    if (load(t, o, i) != want)
                        fail_msg("%s type %d fold %d: %lld -> %lld, want %lld", ops[k], (int)t->dt, fold,
                                 (long long)ev[i], (long long)load(t, o, i), (long long)want);
                }
            }
    }
}

/* ---------------------------------------------------------------- Cast of NaN, inf, out of range */

/* Sources and the results onnxruntime 1.32 gives on x86 for them (float64 and float32 sources alike, except
 * 4294967301, which float32 rounds to 4294967296). */
static const double CAST_SRC[] = {NAN, INFINITY, -INFINITY, 1e20, -1e20, 3e9, -3e9, 300.7, -300.7, 70000.5, -70000.5,
                                  5e9, -5e9, 1.9e19, -1.0, -0.5, 9223372036854775808.0, 18446744073709551616.0};
#define N_CAST (sizeof CAST_SRC / sizeof CAST_SRC[0])
#define I32MIN INT32_MIN
#define I64MIN INT64_MIN
#define B31 2147483648ll
#define B63 0x8000000000000000ull
static const struct {
    int32_t to;
    int64_t want[N_CAST];
} CAST_WANT[] = {
    {WM_DT_INT8, {0, 0, 0, 0, 0, 0, 0, 44, -44, 112, -112, 0, 0, 0, -1, 0, 0, 0}},
    {WM_DT_UINT8, {0, 0, 0, 0, 0, 0, 0, 44, 212, 112, 144, 0, 0, 0, 255, 0, 0, 0}},
    {WM_DT_INT16, {0, 0, 0, 0, 0, 0, 0, 300, -300, 4464, -4464, 0, 0, 0, -1, 0, 0, 0}},
    {WM_DT_UINT16, {0, 0, 0, 0, 0, 0, 0, 300, 65236, 4464, 61072, 0, 0, 0, 65535, 0, 0, 0}},
    {WM_DT_INT32, {I32MIN, I32MIN, I32MIN, I32MIN, I32MIN, I32MIN, I32MIN, 300, -300, 70000, -70000, I32MIN, I32MIN,
                   I32MIN, -1, 0, I32MIN, I32MIN}},
    {WM_DT_UINT32, {B31, 0, B31, 0, B31, 3000000000ll, B31, 300, 4294966996ll, 70000, 4294897296ll, 0, B31, 0,
                    4294967295ll, 0, 0, 0}},
    {WM_DT_INT64, {I64MIN, I64MIN, I64MIN, I64MIN, I64MIN, 3000000000ll, -3000000000ll, 300, -300, 70000, -70000,
                   5000000000ll, -5000000000ll, I64MIN, -1, 0, I64MIN, I64MIN}},
    {WM_DT_UINT64, {(int64_t)B63, 0, (int64_t)B63, 0, (int64_t)B63, 3000000000ll, -3000000000ll, 300, -300, 70000,
                    -70000, 5000000000ll, -5000000000ll, 0, -1, 0, (int64_t)B63, 0}},
    {WM_DT_BOOL, {1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1, 1}},
};

static const ity *type_of(int32_t dt) {
    for (size_t i = 0; i < N_TYPES; i++)
        if (TYPES[i].dt == dt) return &TYPES[i];
    return NULL;
}

static void test_cast_special(void **st) {
    (void)st;
    int64_t n = (int64_t)N_CAST;
    float f32[N_CAST];
    for (size_t i = 0; i < N_CAST; i++) f32[i] = (float)CAST_SRC[i];
    for (size_t c = 0; c < sizeof CAST_WANT / sizeof CAST_WANT[0]; c++)
        for (int src = 0; src < 2; src++)
            for (int mode = 0; mode < 3; mode++) { /* run, folded by the session, folded by the optimizer */
                int32_t from = src ? WM_DT_FLOAT : WM_DT_DOUBLE, to = CAST_WANT[c].to;
                const void *x = src ? (const void *)f32 : (const void *)CAST_SRC;
                ut_model u;
                ut_begin(&u, 18);
                wm_error e = {0};
                if (mode) ut_const(&u, "x", from, &n, 1, x);
                else ut_input(&u, "x", from, 1);
                ut_node(&u, "Cast", (const char *[]){"x"}, 1, (const char *[]){"z"}, 1);
                ut_attr_int(&u, "to", to);
                uint8_t o[N_CAST * 8];
                size_t es = wm_dtype_size(to);
                if (mode == 2) {
                    wm_ct in, r;
                    ct_of(&in, from, x, n);
                    if (wm_fold_eval(u.node, 18, &in, 1, &r, 1, 0, &e)) fail_msg("fold Cast: %s", e.msg);
                    memcpy(o, r.data, N_CAST * es);
                    wm_ct_free(&in), wm_ct_free(&r);
                    ut_free(&u);
                } else {
                    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
                    wm_tensor in = ut_tensor(from, &n, 1, x), res;
                    if (wm_session_run(u.s, &in, mode ? 0 : 1, &res, 1, &e)) fail_msg("Cast: %s", e.msg);
                    memcpy(o, res.data, N_CAST * es);
                    ut_free(&u);
                }
                const ity *t = type_of(to);
                for (size_t i = 0; i < N_CAST; i++) {
                    int64_t got = t ? load(t, o, i) : o[i];
                    if (got != CAST_WANT[c].want[i])
                        fail_msg("Cast %s %g -> type %d (mode %d): %lld, want %lld", src ? "float" : "double",
                                 CAST_SRC[i], (int)to, mode, (long long)got, (long long)CAST_WANT[c].want[i]);
                }
            }
}

/* Pow of an integer base with a float exponent converts as Cast: 7^0.5 = 2, 2^100 and 0^-1 (inf) the indefinite */
static void test_pow_float_exponent(void **st) {
    (void)st;
    const int32_t b[] = {7, 2, 0, -8, 3};
    const float ex[] = {0.5f, 100.0f, -1.0f, 1.0f / 3.0f, NAN};
    const int32_t want[] = {2, INT32_MIN, INT32_MIN, INT32_MIN /* pow(-8, 1/3) is NaN */, INT32_MIN};
    uint8_t o[5 * 4];
    for (int m = M_RUN; m <= M_OPT_FOLD; m++) {
        run_bin("Pow", OP_POW, WM_DT_INT32, WM_DT_FLOAT, b, ex, 5, m, o);
        for (int i = 0; i < 5; i++) assert_int_equal(((int32_t *)o)[i], want[i]);
    }
}

/* ---------------------------------------------------------------- index arithmetic with extreme values */

/* Runs a one-node graph whose inputs are all constants (optimizer off: the engine's op), expecting status want. */
static wm_status run_consts(ut_model *u, wm_tensor *res, wm_error *e) {
    wm_status s = ut_session(u, 1, e);
    if (s) return s;
    return wm_session_run(u->s, NULL, 0, res, 1, e);
}

static void expect_error(ut_model *u, const char *needle) {
    wm_error e = {0};
    wm_tensor res;
    wm_status s = run_consts(u, &res, &e);
    if (s != WM_ERR_INPUT) fail_msg("status %d (%s), want an input error", (int)s, e.msg);
    if (!strstr(e.msg, "'n'")) fail_msg("message does not name the node: %s", e.msg);
    if (needle && !strstr(e.msg, needle)) fail_msg("message lacks '%s': %s", needle, e.msg);
    ut_free(u);
}

static void slice_case(int64_t st, int64_t en, int64_t step, const int64_t *want, int nw) {
    int64_t data[10], one = 1, ten = 10;
    for (int i = 0; i < 10; i++) data[i] = i;
    ut_model u;
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_INT64, &ten, 1, data);
    ut_const(&u, "s", WM_DT_INT64, &one, 1, &st);
    ut_const(&u, "e", WM_DT_INT64, &one, 1, &en);
    int64_t zero = 0;
    ut_const(&u, "a", WM_DT_INT64, &one, 1, &zero);
    ut_const(&u, "p", WM_DT_INT64, &one, 1, &step);
    ut_node(&u, "Slice", (const char *[]){"x", "s", "e", "a", "p"}, 5, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("Slice %lld:%lld:%lld: %s", (long long)st, (long long)en, (long long)step, e.msg);
    assert_int_equal(res.dims[0], nw);
    for (int i = 0; i < nw; i++) assert_int_equal(((int64_t *)res.data)[i], want[i]);
    ut_free(&u);
}

static void test_slice_extremes(void **st) {
    (void)st;
    const int64_t all[] = {0, 1, 2, 3, 4, 5, 6, 7, 8, 9}, rev[] = {9, 8, 7, 6, 5, 4, 3, 2, 1, 0};
    slice_case(INT64_MIN, INT64_MAX, 1, all, 10);
    slice_case(INT64_MAX, INT64_MIN, -1, rev, 10);
    slice_case(0, 10, INT64_MAX, (const int64_t[]){0}, 1);            /* (e - b + step - 1) overflowed */
    slice_case(INT64_MAX, INT64_MIN, INT64_MIN, (const int64_t[]){9}, 1); /* -step overflowed */
    slice_case(-1, INT64_MIN, -3, (const int64_t[]){9, 6, 3, 0}, 4);
    slice_case(2, INT64_MAX, 3, (const int64_t[]){2, 5, 8}, 3);
    slice_case(INT64_MIN, INT64_MIN, 1, NULL, 0);
    slice_case(INT64_MAX, INT64_MAX, INT64_MIN, NULL, 0);
}

static void pad_case(int64_t pb, int64_t pe, const char *needle) {
    int64_t two = 2, np = 2;
    const float x[2] = {1, 2};
    int64_t pads[2] = {pb, pe};
    ut_model u;
    ut_begin(&u, 18);
    ut_const(&u, "x", WM_DT_FLOAT, &two, 1, x);
    ut_const(&u, "p", WM_DT_INT64, &np, 1, pads);
    ut_node(&u, "Pad", (const char *[]){"x", "p"}, 2, (const char *[]){"y"}, 1);
    expect_error(&u, needle);
}

static void test_pad_extremes(void **st) {
    (void)st;
    pad_case(INT64_MAX, INT64_MAX, "too large"); /* d + pb + pe overflowed */
    pad_case(INT64_MIN, INT64_MAX, "crop more");  /* a valid-looking sum, positions minus pads overflowed */
    pad_case(INT64_MAX, INT64_MIN + 5, "crop more");
    pad_case(INT64_MIN, 0, "crop more");
    pad_case(-3, 5, "crop more");
    /* still fine: crop exactly the axis, pad a little */
    int64_t two = 2, np = 2, pads[2] = {-2, 3};
    const float x[2] = {1, 2};
    ut_model u;
    ut_begin(&u, 18);
    ut_const(&u, "x", WM_DT_FLOAT, &two, 1, x);
    ut_const(&u, "p", WM_DT_INT64, &np, 1, pads);
    ut_node(&u, "Pad", (const char *[]){"x", "p"}, 2, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    assert_int_equal(run_consts(&u, &res, &e), WM_OK);
    assert_int_equal(res.dims[0], 3);
    ut_free(&u);
}

static void range_float_case(double a, double b, double d) {
    int64_t one = 1;
    ut_model u;
    ut_begin(&u, 18);
    ut_const(&u, "a", WM_DT_DOUBLE, &one, 0, &a);
    ut_const(&u, "b", WM_DT_DOUBLE, &one, 0, &b);
    ut_const(&u, "d", WM_DT_DOUBLE, &one, 0, &d);
    ut_node(&u, "Range", (const char *[]){"a", "b", "d"}, 3, (const char *[]){"y"}, 1);
    expect_error(&u, "Range");
}

static void range_int_case(int64_t a, int64_t b, int64_t d, const int64_t *want, int nw) {
    int64_t one = 1;
    ut_model u;
    ut_begin(&u, 18);
    ut_const(&u, "a", WM_DT_INT64, &one, 0, &a);
    ut_const(&u, "b", WM_DT_INT64, &one, 0, &b);
    ut_const(&u, "d", WM_DT_INT64, &one, 0, &d);
    ut_node(&u, "Range", (const char *[]){"a", "b", "d"}, 3, (const char *[]){"y"}, 1);
    if (nw < 0) {
        expect_error(&u, "elements");
        return;
    }
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("Range: %s", e.msg);
    assert_int_equal(res.dims[0], nw);
    for (int i = 0; i < nw; i++) assert_int_equal(((int64_t *)res.data)[i], want[i]);
    ut_free(&u);
}

static void test_range_extremes(void **st) {
    (void)st;
    range_float_case(0, 1e60, 1);      /* (int64_t)1e60 was UB */
    range_float_case(-1e60, 1e60, 1e-60);
    range_float_case(0, INFINITY, 1);
    range_float_case(0, 1, NAN);
    range_float_case(-1e308, 1e308, 1e-300); /* the count itself is inf */
    range_int_case(INT64_MIN, INT64_MAX, 1, NULL, -1); /* b - a overflowed */
    range_int_case(INT64_MIN, INT64_MAX, INT64_MAX, (const int64_t[]){INT64_MIN, -1, INT64_MAX - 1}, 3);
    range_int_case(INT64_MAX, INT64_MIN, INT64_MIN, (const int64_t[]){INT64_MAX, -1}, 2);
    range_int_case(5, INT64_MIN, 1, NULL, 0);
}

static void test_tile_split_d2s(void **st) {
    (void)st;
    int64_t two = 2, one = 1;
    const float x[2] = {1, 2};
    ut_model u;
    /* Tile: repeats INT64_MAX (dims * repeat overflowed) */
    int64_t rep = INT64_MAX;
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_FLOAT, &two, 1, x);
    ut_const(&u, "r", WM_DT_INT64, &one, 1, &rep);
    ut_node(&u, "Tile", (const char *[]){"x", "r"}, 2, (const char *[]){"y"}, 1);
    expect_error(&u, "repeats");
    /* Split: sizes summing past INT64_MAX (the sum overflowed) */
    int64_t sp[3] = {INT64_MAX, INT64_MAX, 4}, three = 3;
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_FLOAT, &two, 1, x);
    ut_const(&u, "s", WM_DT_INT64, &three, 1, sp);
    ut_node(&u, "Split", (const char *[]){"x", "s"}, 2, (const char *[]){"a", "b", "c"}, 3);
    expect_error(&u, "splits");
    /* DepthToSpace: blocksize^2 overflowed */
    int64_t d4[4] = {1, 1, 1, 1};
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_FLOAT, d4, 4, x);
    ut_node(&u, "DepthToSpace", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    ut_attr_int(&u, "blocksize", (int64_t)1 << 32);
    expect_error(&u, "blocksize");
    /* MaxPool: kernel 2^40 dilated by 2^40 (the window's extent overflowed) */
    int64_t ks[2] = {1, (int64_t)1 << 40}, dl[2] = {1, (int64_t)1 << 40};
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_FLOAT, d4, 4, x);
    ut_node(&u, "MaxPool", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    ut_attr_ints(&u, "kernel_shape", ks, 2);
    ut_attr_ints(&u, "dilations", dl, 2);
    expect_error(&u, "too large");
}

/* An initializer with no elements but huge other dims: refused (ops stride over every dim). */
static void test_empty_huge_dims(void **st) {
    (void)st;
    int64_t dims[3] = {0, (int64_t)1 << 62, (int64_t)1 << 62};
    ut_model u;
    ut_begin(&u, 13);
    const float none = 0;
    ut_const(&u, "x", WM_DT_FLOAT, dims, 3, &none); /* no bytes copied */
    ut_node(&u, "Transpose", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_status s = ut_session(&u, 1, &e);
    assert_int_equal(s, WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "dims out of range"));
    ut_free(&u);
}

static void reduce_case(const char *op, int32_t dt, const void *x, int64_t n, int64_t want) {
    ut_model u;
    ut_begin(&u, 18);
    ut_const(&u, "x", dt, &n, 1, x);
    ut_node(&u, op, (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    ut_attr_int(&u, "keepdims", 0);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("%s: %s", op, e.msg);
    const ity *t = type_of(dt);
    int64_t got = load(t, res.data, 0);
    if (got != want) fail_msg("%s type %d: %lld, want %lld", op, (int)dt, (long long)got, (long long)want);
    ut_free(&u);
}

static void test_reduce_int(void **st) {
    (void)st;
    const int64_t a[2] = {INT64_MAX, 1}, b[2] = {((int64_t)1 << 53), ((int64_t)1 << 53) + 1}, c[1] = {INT64_MIN};
    const int32_t d[2] = {65536, 65536};
    const uint64_t u[2] = {1, 0x8000000000000000ull};
    reduce_case("ReduceSum", WM_DT_INT64, a, 2, INT64_MIN);           /* wraps (was signed overflow) */
    reduce_case("ReduceProd", WM_DT_INT32, d, 2, 0);                  /* 2^32 wraps to 0 in int32 */
    reduce_case("ReduceMax", WM_DT_INT64, b, 2, ((int64_t)1 << 53) + 1); /* exact, not through double */
    reduce_case("ReduceMax", WM_DT_UINT64, u, 2, (int64_t)0x8000000000000000ull); /* unsigned order */
    reduce_case("ReduceMin", WM_DT_UINT64, u, 2, 1);
    reduce_case("ReduceL1", WM_DT_INT64, c, 1, INT64_MIN);            /* |MIN| wraps */
    reduce_case("ReduceSumSquare", WM_DT_INT64, a, 2, 2);             /* MAX^2 + 1 mod 2^64 */
    reduce_case("ReduceMean", WM_DT_INT64, a, 2, INT64_MIN / 2);      /* the wrapped sum / 2, truncated */
}

static void test_cumsum_wraps(void **st) {
    (void)st;
    const int64_t x[3] = {INT64_MAX, 1, 1};
    int64_t three = 3, one = 1, zero = 0;
    ut_model u;
    ut_begin(&u, 14);
    ut_const(&u, "x", WM_DT_INT64, &three, 1, x);
    ut_const(&u, "a", WM_DT_INT64, &one, 0, &zero);
    ut_node(&u, "CumSum", (const char *[]){"x", "a"}, 2, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("CumSum: %s", e.msg);
    const int64_t *y = res.data;
    assert_true(y[0] == INT64_MAX && y[1] == INT64_MIN && y[2] == INT64_MIN + 1);
    ut_free(&u);
}

static void test_onehot_nan_index(void **st) {
    (void)st;
    const float idx[3] = {NAN, INFINITY, 1};
    const float vals[2] = {0, 1};
    int64_t three = 3, two = 2, one = 1, depth = 2;
    ut_model u;
    ut_begin(&u, 11);
    ut_const(&u, "i", WM_DT_FLOAT, &three, 1, idx);
    ut_const(&u, "d", WM_DT_INT64, &one, 1, &depth);
    ut_const(&u, "v", WM_DT_FLOAT, &two, 1, vals);
    ut_node(&u, "OneHot", (const char *[]){"i", "d", "v"}, 3, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("OneHot: %s", e.msg);
    const float *y = res.data, want[6] = {0, 0, 0, 0, 0, 1}; /* NaN and inf: no class */
    for (int i = 0; i < 6; i++) assert_true(y[i] == want[i]);
    ut_free(&u);
}

static void test_mean_int_refused(void **st) {
    (void)st;
    int64_t n = 2;
    const int32_t x[2] = {1, 2};
    ut_model u;
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_INT32, &n, 1, x);
    ut_const(&u, "y", WM_DT_INT32, &n, 1, x);
    ut_node(&u, "Mean", (const char *[]){"x", "y"}, 2, (const char *[]){"z"}, 1);
    wm_error e = {0};
    assert_int_not_equal(ut_session(&u, 1, &e), WM_OK); /* was: the sum, undivided */
    ut_free(&u);
}

/* The optimizer's shape values: Concat(Shape(x), [-7], [MIN]) / [2, 2, -1] folded as the engine divides
 * (truncating; MIN / -1 = MIN). It trapped (SIGFPE) and floored -7 / 2 to -4 before. */
static void test_shape_value_division(void **st) {
    (void)st;
    for (int opt = 0; opt < 2; opt++) {
        ut_model u;
        ut_begin(&u, 18);
        int64_t three = 3, one = 1;
        wm_error e = {0};
        int64_t xd = 3;
        if (wm_graph_add_input(u.g, "x", WM_DT_FLOAT, &xd, 1, &e)) fail_msg("%s", e.msg);
        const int64_t m7 = -7, mn = INT64_MIN, dv[3] = {2, 2, -1};
        ut_const(&u, "a", WM_DT_INT64, &one, 1, &m7);
        ut_const(&u, "b", WM_DT_INT64, &one, 1, &mn);
        ut_const(&u, "d", WM_DT_INT64, &three, 1, dv);
        /* only y is a graph output: the optimizer may replace the others by the values it tracks */
        assert_non_null(wm_graph_add_node(u.g, "Shape", NULL, "sh", (const char *[]){"x"}, 1, (const char *[]){"s"}, 1, &e));
        wm_onnx_node *cc = wm_graph_add_node(u.g, "Concat", NULL, "cat", (const char *[]){"s", "a", "b"}, 3,
                                             (const char *[]){"c"}, 1, &e);
        assert_non_null(cc);
        assert_int_equal(wm_graph_set_attr_int(u.g, cc, "axis", 0, &e), WM_OK);
        assert_non_null(wm_graph_add_node(u.g, "Div", NULL, "div", (const char *[]){"c", "d"}, 2, (const char *[]){"q"}, 1, &e));
        ut_node(&u, "Identity", (const char *[]){"q"}, 1, (const char *[]){"y"}, 1);
        wm_graph_free(u.g);
        u.g = NULL;
        wm_session_opts o = {.threads = 1, .no_optimize = !opt};
        wm_onnx_model *mm = u.m;
        u.m = NULL;
        if (wm_session_new_model(mm, &o, &u.s, &e)) fail_msg("session: %s", e.msg);
        const float x[3] = {0};
        wm_tensor in = ut_tensor(WM_DT_FLOAT, &xd, 1, x), res[5];
        size_t no = wm_session_n_outputs(u.s);
        if (wm_session_run(u.s, &in, 1, res, no, &e)) fail_msg("run: %s", e.msg);
        const wm_tensor *y = &res[no - 1];
        assert_int_equal(y->dims[0], 3);
        const int64_t *v = y->data;
        if (v[0] != 1 || v[1] != -3 || v[2] != INT64_MIN)
            fail_msg("optimizer %d: %lld %lld %lld", opt, (long long)v[0], (long long)v[1], (long long)v[2]);
        ut_free(&u);
    }
}

/* Inputs holding fewer elements than the op reads (found by fuzz_engine_ops): an error naming the node, not a read
 * past the tensor. Slice's axes shorter than its starts; Trilu's k and CumSum's axis empty; LayerNormalization's
 * beta and SkipLayerNormalization's skip shorter than a row; Abs given extra inputs (only Dropout reads input 2). */
static void test_short_inputs(void **st) {
    (void)st;
    int64_t four = 4, two = 2, zero = 0, one = 1;
    const int64_t x[4] = {1, 2, 3, 4}, se[2] = {0, 1}, ax[1] = {0};
    ut_model u;
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_INT64, &four, 1, x);
    ut_const(&u, "s", WM_DT_INT64, &two, 1, se);
    ut_const(&u, "e", WM_DT_INT64, &two, 1, se);
    ut_const(&u, "a", WM_DT_INT64, &one, 1, ax);
    ut_node(&u, "Slice", (const char *[]){"x", "s", "e", "a"}, 4, (const char *[]){"y"}, 1);
    expect_error(&u, "axes/steps");
    const int64_t m4[4] = {1, 2, 3, 4};
    int64_t d22[2] = {2, 2};
    ut_begin(&u, 14);
    ut_const(&u, "x", WM_DT_INT64, d22, 2, m4);
    ut_const(&u, "k", WM_DT_INT64, &zero, 1, m4);
    ut_node(&u, "Trilu", (const char *[]){"x", "k"}, 2, (const char *[]){"y"}, 1);
    expect_error(&u, "k must hold one value");
    ut_begin(&u, 14);
    ut_const(&u, "x", WM_DT_INT64, &four, 1, x);
    ut_const(&u, "a", WM_DT_INT64, &zero, 1, x);
    ut_node(&u, "CumSum", (const char *[]){"x", "a"}, 2, (const char *[]){"y"}, 1);
    expect_error(&u, "axis must hold one value");
    /* LayerNormalization's beta, SkipLayerNormalization's skip shorter than a row */
    const float f4[4] = {1, 2, 3, 4};
    ut_begin(&u, 17);
    ut_const(&u, "x", WM_DT_FLOAT, d22, 2, f4);
    ut_const(&u, "g", WM_DT_FLOAT, &two, 1, f4);
    ut_const(&u, "b", WM_DT_FLOAT, &one, 1, f4);
    ut_node(&u, "LayerNormalization", (const char *[]){"x", "g", "b"}, 3, (const char *[]){"y"}, 1);
    expect_error(&u, "bias (beta) has 1 elements");
    ut_begin(&u, 17);
    ut_opset(u.m, "com.microsoft", 1);
    ut_const(&u, "x", WM_DT_FLOAT, d22, 2, f4);
    ut_const(&u, "s", WM_DT_FLOAT, &one, 1, f4);
    ut_const(&u, "g", WM_DT_FLOAT, &two, 1, f4);
    wm_error e0 = {0};
    u.node = wm_graph_add_node(u.g, "SkipLayerNormalization", "com.microsoft", "n", (const char *[]){"x", "s", "g"}, 3,
                               (const char *[]){"y"}, 1, &e0);
    assert_non_null(u.node);
    assert_int_equal(wm_graph_add_output(u.g, "y", WM_DT_FLOAT, NULL, 0, &e0), WM_OK);
    expect_error(&u, "skip does not broadcast");
    ut_begin(&u, 13);
    ut_const(&u, "x", WM_DT_INT64, &four, 1, x);
    ut_const(&u, "b", WM_DT_INT64, &zero, 1, x);
    ut_node(&u, "Abs", (const char *[]){"x", "b", "b"}, 3, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("Abs: %s", e.msg);
    assert_int_equal(((int64_t *)res.data)[3], 4);
    ut_free(&u);
}

/* Resize with tf_crop_and_resize and an roi of NaN / 1e300: source coordinates converted to integers were UB. */
static void test_resize_roi_extremes(void **st) {
    (void)st;
    const char *const modes[] = {"nearest", "linear", "cubic"};
    for (int m = 0; m < 3; m++) {
        int64_t four = 4, two = 2, one = 1;
        const float x[4] = {1, 2, 3, 4}, roi[2] = {NAN, 1e30f}, sc[1] = {1.5f};
        ut_model u;
        ut_begin(&u, 13);
        ut_const(&u, "x", WM_DT_FLOAT, &four, 1, x);
        ut_const(&u, "r", WM_DT_FLOAT, &two, 1, roi);
        ut_const(&u, "s", WM_DT_FLOAT, &one, 1, sc);
        ut_node(&u, "Resize", (const char *[]){"x", "r", "s"}, 3, (const char *[]){"y"}, 1);
        ut_attr_string(&u, "coordinate_transformation_mode", "tf_crop_and_resize");
        ut_attr_string(&u, "mode", modes[m]);
        ut_attr_float(&u, "extrapolation_value", -5.0f);
        wm_error e = {0};
        wm_tensor res;
        if (run_consts(&u, &res, &e)) fail_msg("Resize %s: %s", modes[m], e.msg);
        assert_int_equal(res.dims[0], 6);
        for (int i = 0; i < 6; i++) assert_true(isfinite(((float *)res.data)[i]));
        ut_free(&u);
    }
}

/* Attributes at the int64 edges: EyeLike's k (i + k overflowed), Conv's and ConvTranspose's group with an empty X
 * (W * group overflowed: X's channels divisible by any group when there are none). */
static void test_attr_extremes(void **st) {
    (void)st;
    const float z[4] = {0};
    int64_t d22[2] = {2, 2};
    const int64_t ks[2] = {INT64_MAX, INT64_MIN};
    for (int i = 0; i < 2; i++) {
        ut_model u;
        ut_begin(&u, 13);
        ut_const(&u, "x", WM_DT_FLOAT, d22, 2, z);
        ut_node(&u, "EyeLike", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
        ut_attr_int(&u, "k", ks[i]);
        wm_error e = {0};
        wm_tensor res;
        if (run_consts(&u, &res, &e)) fail_msg("EyeLike: %s", e.msg);
        for (int j = 0; j < 4; j++) assert_true(((float *)res.data)[j] == 0);
        ut_free(&u);
    }
    const char *const ops[] = {"Conv", "ConvTranspose"};
    for (int i = 0; i < 2; i++) {
        int64_t xd[3] = {1, 0, 2}, wd[3] = {i ? 0 : 1, 2, 1};
        ut_model u;
        ut_begin(&u, 13);
        ut_const(&u, "x", WM_DT_FLOAT, xd, 3, z);
        ut_const(&u, "w", WM_DT_FLOAT, wd, 3, z);
        ut_node(&u, ops[i], (const char *[]){"x", "w"}, 2, (const char *[]){"y"}, 1);
        ut_attr_int(&u, "group", INT64_MAX);
        expect_error(&u, "group");
    }
}

/* Integer MatMul and Gemm wrap like integer Mul and Add (int64 products of MIN overflowed; found by the fuzz target),
 * and integer Gemm applies alpha and beta (it ignored alpha). */
static void test_matmul_gemm_int(void **st) {
    (void)st;
    const int64_t a[2] = {INT64_MIN, 3}, b[2] = {INT64_MIN, 5}; /* [1,2] x [2,1] */
    int64_t da[2] = {1, 2}, db[2] = {2, 1}, one = 1;
    ut_model u;
    ut_begin(&u, 13);
    ut_const(&u, "a", WM_DT_INT64, da, 2, a);
    ut_const(&u, "b", WM_DT_INT64, db, 2, b);
    ut_node(&u, "MatMul", (const char *[]){"a", "b"}, 2, (const char *[]){"y"}, 1);
    wm_error e = {0};
    wm_tensor res;
    if (run_consts(&u, &res, &e)) fail_msg("MatMul: %s", e.msg);
    assert_int_equal(((int64_t *)res.data)[0], 15); /* MIN * MIN = 2^126 wraps to 0, + 15 */
    ut_free(&u);
    const int32_t a32[2] = {INT32_MAX, 2}, b32[2] = {2, 3}, c32[1] = {7};
    ut_begin(&u, 13);
    ut_const(&u, "a", WM_DT_INT32, da, 2, a32);
    ut_const(&u, "b", WM_DT_INT32, db, 2, b32);
    ut_const(&u, "c", WM_DT_INT32, &one, 1, c32);
    ut_node(&u, "Gemm", (const char *[]){"a", "b", "c"}, 3, (const char *[]){"y"}, 1);
    ut_attr_float(&u, "alpha", 2.0f);
    ut_attr_float(&u, "beta", 3.0f);
    if (run_consts(&u, &res, &e)) fail_msg("Gemm: %s", e.msg);
    /* 2 * (2 * INT32_MAX + 6) + 3 * 7, kept to 32 bits */
    assert_int_equal(((int32_t *)res.data)[0], (int32_t)(uint32_t)(2u * (2u * (uint32_t)INT32_MAX + 6u) + 21u));
    ut_free(&u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_add),          cmocka_unit_test(test_sub),
        cmocka_unit_test(test_mul),          cmocka_unit_test(test_div),
        cmocka_unit_test(test_mod),          cmocka_unit_test(test_fmod),
        cmocka_unit_test(test_pow),          cmocka_unit_test(test_max_min),
        cmocka_unit_test(test_bitshift),     cmocka_unit_test(test_unary),
        cmocka_unit_test(test_cast_special), cmocka_unit_test(test_pow_float_exponent),
        cmocka_unit_test(test_slice_extremes), cmocka_unit_test(test_pad_extremes),
        cmocka_unit_test(test_range_extremes), cmocka_unit_test(test_tile_split_d2s),
        cmocka_unit_test(test_empty_huge_dims), cmocka_unit_test(test_reduce_int),
        cmocka_unit_test(test_cumsum_wraps), cmocka_unit_test(test_onehot_nan_index),
        cmocka_unit_test(test_mean_int_refused), cmocka_unit_test(test_shape_value_division),
        cmocka_unit_test(test_short_inputs),     cmocka_unit_test(test_resize_roi_extremes),
        cmocka_unit_test(test_attr_extremes),    cmocka_unit_test(test_matmul_gemm_int),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
