/*
 * test_ops_cast_narrow.c - the 8-bit float conversions: every code decodes to the
 * value its bit fields define (an independent decoder here) and encodes
 * back to itself; float32 values (random, halfway points, out of range,
 * subnormal, inf, NaN) encode to the nearest code by brute force over all
 * 256 codes with ties to the even code, with the saturate rules; and a
 * Cast node float32 -> e4m3fn -> float32 through a session; the packed
 * sub-byte types (int4, uint4, int2, uint2, float4e2m1) through Cast and
 * back for odd element counts against naive truncation / nearest-even.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/cast_narrow.h"
#include "ops_test_util.h"

typedef struct fmt {
    int32_t dt;
    int ebits, bias, kind; /* kind 0: e4m3fn, 1: fnuz, 2: e5m2 */
    double max;
} fmt;

static const fmt fmts[] = {
    {WM_DT_FLOAT8E4M3FN, 4, 7, 0, 448},
    {WM_DT_FLOAT8E4M3FNUZ, 4, 8, 1, 240},
    {WM_DT_FLOAT8E5M2, 5, 15, 2, 57344},
    {WM_DT_FLOAT8E5M2FNUZ, 5, 16, 1, 57344},
};

static double ref_decode(const fmt *f, int v) {
    int mb = 7 - f->ebits, e = (v >> mb) & ((1 << f->ebits) - 1), m = v & ((1 << mb) - 1);
    if (f->kind == 1 && v == 0x80) return NAN;
    if (f->kind == 0 && (v & 0x7f) == 0x7f) return NAN;
    if (f->kind == 2 && e == (1 << f->ebits) - 1) return m ? NAN : (v & 0x80 ? -INFINITY : INFINITY);
    double a = e ? (1 + m / (double)(1 << mb)) * pow(2, e - f->bias) : m * pow(2, 1 - f->bias - mb);
    return v & 0x80 ? -a : a;
}

static void test_decode_roundtrip(void **state) {
    (void)state;
    for (size_t k = 0; k < 4; k++)
        for (int v = 0; v < 256; v++) {
            double want = ref_decode(&fmts[k], v), got = wm_narrow_decode(fmts[k].dt, (uint8_t)v);
            if (isnan(want)) {
                assert_true(isnan(got));
                continue;
            }
            assert_true(got == want);
            if (fmts[k].kind == 1 && v == 0) continue;
            uint8_t back = wm_narrow_encode(fmts[k].dt, want, 0, 0);
            if (back != v) fail_msg("%s code 0x%02x -> %g -> 0x%02x", wm_dtype_name(fmts[k].dt), v, want, back);
        }
    /* e8m0: 2^(v - 127), 0xff NaN */
    for (int v = 0; v < 255; v++) assert_true(wm_narrow_decode(WM_DT_FLOAT8E8M0, (uint8_t)v) == ldexp(1, v - 127));
    assert_true(isnan(wm_narrow_decode(WM_DT_FLOAT8E8M0, 0xff)));
}

/* Nearest finite code to x by brute force (ties: even code), then the saturate rules. */
static double ref_encode(const fmt *f, double x, int saturate) {
    if (isnan(x)) return NAN;
    double best = NAN, bd = INFINITY;
    int bc = -1;
    for (int v = 0; v < 256; v++) {
        double d = ref_decode(f, v);
        if (isnan(d) || isinf(d)) continue;
        double dist = fabs(d - x);
        if (dist < bd || (dist == bd && (v & 1) == 0 && (bc & 1))) bd = dist, best = d, bc = v;
    }
    /* beyond the largest finite value: rounded up past it when closer to the next step of the same spacing */
    double top = f->max, step = f->max - ref_decode(f, (int)(f->kind == 0 ? 0x7d : f->kind == 2 ? 0x7a : 0x7e));
    if (fabs(x) >= top + step / 2 || isinf(x)) {
        int at_half = fabs(x) == top + step / 2;
        /* a tie at top + step/2 goes to the even neighbour: top's code is even for e4m3fn/e5m2 (0x7e, 0x7b is odd) */
        int max_code = f->kind == 0 ? 0x7e : f->kind == 2 ? 0x7b : 0x7f;
        if (!at_half || (max_code & 1) || isinf(x)) {
            if (saturate) return x > 0 ? top : -top;
            if (f->kind == 2) return x > 0 ? INFINITY : -INFINITY;
            return NAN;
        }
    }
    return best;
}

static void test_encode_nearest(void **state) {
    (void)state;
    uint64_t r = 12345;
    for (size_t k = 0; k < 4; k++) {
        const fmt *f = &fmts[k];
        for (int it = 0; it < 20000; it++) {
            r ^= r << 13, r ^= r >> 7, r ^= r << 17;
            double x;
            if (it < 512) { /* midpoints between neighbouring codes: the ties */
                double a = ref_decode(f, it & 0x7f), b = ref_decode(f, (it & 0x7f) + 1);
                if (isnan(a) || isnan(b) || isinf(b)) continue;
                x = (a + b) / 2 * (it & 0x100 ? -1 : 1);
            } else {
                x = ldexp((double)(r % 1000000) / 1000000.0 + 0.5, (int)(r >> 40) % 40 - 24) * ((r >> 63) ? -1 : 1);
            }
            x = (float)x;
            for (int sat = 0; sat <= 1; sat++) {
                double want = ref_encode(f, x, sat), got = wm_narrow_decode(f->dt, wm_narrow_encode(f->dt, x, sat, 0));
                if (isnan(want) ? !isnan(got) : got != want)
                    fail_msg("%s saturate %d: %.9g -> %.9g, want %.9g", wm_dtype_name(f->dt), sat, x, got, want);
            }
        }
        for (int sat = 0; sat <= 1; sat++) {
            double specials[] = {INFINITY, -INFINITY, 1e10, -1e10, 0.0, -0.0};
            for (int s = 0; s < 6; s++) {
                double want = ref_encode(f, specials[s], sat), got = wm_narrow_decode(f->dt, wm_narrow_encode(f->dt, specials[s], sat, 0));
                if (isnan(want) ? !isnan(got) : got != want) fail_msg("%s sat %d special %g -> %g", wm_dtype_name(f->dt), sat, specials[s], got);
            }
        }
        assert_true(isnan(wm_narrow_decode(f->dt, wm_narrow_encode(f->dt, NAN, 1, 0))));
        /* -0 keeps its sign where the type has one */
        assert_int_equal(wm_narrow_encode(f->dt, -0.0, 1, 0), f->kind == 1 ? 0x00 : 0x80);
    }
}

static void test_cast_node(void **state) {
    (void)state;
    float x[6] = {0.1f, -3.3f, 500.0f, 1e-9f, -INFINITY, 17.0f};
    ut_model u;
    ut_begin(&u, 21);
    ut_input(&u, "x", WM_DT_FLOAT, 1);
    wm_error e = {0};
    u.node = wm_graph_add_node(u.g, "Cast", NULL, "c1", (const char *[]){"x"}, 1, (const char *[]){"q"}, 1, &e);
    assert_non_null(u.node);
    ut_attr_int(&u, "to", WM_DT_FLOAT8E4M3FN);
    ut_node(&u, "Cast", (const char *[]){"q"}, 1, (const char *[]){"y"}, 1);
    ut_attr_int(&u, "to", WM_DT_FLOAT);
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    int64_t d = 6;
    wm_tensor in = ut_tensor(WM_DT_FLOAT, &d, 1, x), out;
    assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK);
    const float *y = out.data;
    for (int i = 0; i < 6; i++) assert_true(y[i] == (float)ref_encode(&fmts[0], x[i], 1));
    ut_free(&u);
}

/* Cast float32 -> t -> float32 for the sub-byte types, odd element counts (a padding element). */
static void test_sub_byte(void **state) {
    (void)state;
    static const int32_t types[] = {WM_DT_INT4, WM_DT_UINT4, WM_DT_INT2, WM_DT_UINT2, WM_DT_FLOAT4E2M1};
    static const double e2m1[8] = {0, 0.5, 1, 1.5, 2, 3, 4, 6};
    float x[13] = {-9.0f, -8.5f, 7.9f, 200.0f, -3.5f, 0.25f, 0.75f, 2.5f, 5.0f, 1e9f, -0.0f, NAN, 1.25f};
    for (size_t k = 0; k < 5; k++) {
        int32_t t = types[k];
        for (int n = 1; n <= 13; n += 4) {
            ut_model u;
            ut_begin(&u, 25);
            ut_input(&u, "x", WM_DT_FLOAT, 1);
            wm_error e = {0};
            u.node = wm_graph_add_node(u.g, "Cast", NULL, "c1", (const char *[]){"x"}, 1, (const char *[]){"q"}, 1, &e);
            ut_attr_int(&u, "to", t);
            ut_node(&u, "Cast", (const char *[]){"q"}, 1, (const char *[]){"y"}, 1);
            ut_attr_int(&u, "to", WM_DT_FLOAT);
            if (ut_session(&u, 1, &e)) fail_msg("%s", e.msg);
            int64_t d = n;
            wm_tensor in = ut_tensor(WM_DT_FLOAT, &d, 1, x), out;
            if (wm_session_run(u.s, &in, 1, &out, 1, &e)) fail_msg("%s", e.msg);
            for (int i = 0; i < n; i++) {
                double want;
                if (t == WM_DT_FLOAT4E2M1) { /* nearest of the 8 magnitudes, ties to the even code, saturating, NaN -> -0 */
                    double a = fabs(x[i]);
                    int best = 0;
                    for (int c = 1; c < 8; c++) {
                        double dc = fabs(e2m1[c] - a), db = fabs(e2m1[best] - a);
                        if (dc < db || (dc == db && (c & 1) == 0)) best = c;
                    }
                    want = isnan(x[i]) ? -0.0 : signbit(x[i]) ? -e2m1[best] : e2m1[best];
                } else { /* truncate, keep the low bits, sign-extend the signed types */
                    int bits = t == WM_DT_INT4 || t == WM_DT_UINT4 ? 4 : 2;
                    int64_t v = isnan(x[i]) ? 0 : (int64_t)x[i];
                    int64_t low = v & ((1 << bits) - 1);
                    if ((t == WM_DT_INT4 || t == WM_DT_INT2) && low >= (1 << (bits - 1))) low -= 1 << bits;
                    want = (double)low;
                }
                float got = ((float *)out.data)[i];
                if (got != want || !signbit(got) != !signbit(want))
                    fail_msg("%s element %d: %g -> %g, want %g", wm_dtype_name(t), i, x[i], got, want);
            }
            ut_free(&u);
        }
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_decode_roundtrip),
        cmocka_unit_test(test_encode_nearest),
        cmocka_unit_test(test_cast_node),
        cmocka_unit_test(test_sub_byte),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
