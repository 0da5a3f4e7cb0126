/*
 * test_ops_index.c - TopK, NonZero, Unique, Compress against naive
 * references: ties, largest/smallest, NaN, wide integers, the heap and the
 * sort paths, k given as a graph input (eager plan) or a constant, thread
 * counts, empty inputs.
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

static uint64_t rng = 88172645463325252ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

/* ---------------------------------------------------------------- TopK */

/* a goes before b in TopK order (largest: greater first; NaN greatest; ties: lower position). */
static int better(double a, double b, int ia, int ib, int largest) {
    int na = isnan(a), nb = isnan(b);
    int c = na || nb ? na - nb : (a > b) - (a < b);
    if (!largest) c = -c;
    return c > 0 || (c == 0 && ia < ib);
}

static void topk_case(const int64_t *dims, int rank, int axis, int64_t k, int largest, int k_input, int threads,
                      int with_nan) {
    uint64_t total = 1;
    for (int i = 0; i < rank; i++) total *= (uint64_t)dims[i];
    float *x = malloc(total * sizeof *x);
    for (uint64_t i = 0; i < total; i++) x[i] = (float)(next_u64() % 7) - 3; /* many ties */
    if (with_nan)
        for (uint64_t i = 0; i < total; i += 5) x[i] = NAN;
    ut_model u;
    ut_begin(&u, 11);
    ut_input(&u, "x", WM_DT_FLOAT, rank);
    int64_t kd = 1;
    if (k_input) ut_input(&u, "k", WM_DT_INT64, 1);
    else ut_const(&u, "k", WM_DT_INT64, &kd, 1, &k);
    ut_node(&u, "TopK", (const char *[]){"x", "k"}, 2, (const char *[]){"v", "i"}, 2);
    ut_attr_int(&u, "axis", axis);
    ut_attr_int(&u, "largest", largest);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, threads, &e), WM_OK);
    wm_tensor in[2] = {ut_tensor(WM_DT_FLOAT, dims, rank, x), ut_tensor(WM_DT_INT64, &kd, 1, &k)};
    wm_tensor out[2];
    if (wm_session_run(u.s, in, k_input ? 2 : 1, out, 2, &e)) fail_msg("%s", e.msg);
    int a = axis < 0 ? axis + rank : axis;
    uint64_t outer = 1, inner = 1;
    for (int d = 0; d < a; d++) outer *= (uint64_t)dims[d];
    for (int d = a + 1; d < rank; d++) inner *= (uint64_t)dims[d];
    int64_t len = dims[a];
    assert_int_equal(out[0].dims[a], k);
    assert_int_equal(out[1].dtype, WM_DT_INT64);
    const float *v = out[0].data;
    const int64_t *ix = out[1].data;
    char *used = malloc((size_t)len);
    for (uint64_t o = 0; o < outer; o++)
        for (uint64_t i = 0; i < inner; i++) {
            memset(used, 0, (size_t)len);
            for (int64_t j = 0; j < k; j++) { /* selection: the best unused element */
                int best = -1;
                for (int q = 0; q < len; q++) {
                    if (used[q]) continue;
                    double xv = x[(o * (uint64_t)len + (uint64_t)q) * inner + i];
                    if (best < 0 || better(xv, x[(o * (uint64_t)len + (uint64_t)best) * inner + i], q, best, largest)) best = q;
                }
                used[best] = 1;
                uint64_t p = (o * (uint64_t)k + (uint64_t)j) * inner + i;
                assert_int_equal(ix[p], best);
                float want = x[(o * (uint64_t)len + (uint64_t)best) * inner + i];
                if (isnan(want)) assert_true(isnan(v[p]));
                else assert_true(v[p] == want);
            }
        }
    free(used);
    ut_free(&u);
    free(x);
}

static void test_topk_ties(void **state) {
    (void)state;
    int64_t d1[] = {3, 37, 5};
    for (int largest = 0; largest <= 1; largest++)
        for (int64_t k = 0; k <= 37; k += (k < 5 ? 1 : 8)) { /* k < 5: heap path; larger: full sort */
            topk_case(d1, 3, 1, k, largest, 0, 1, 0);
            topk_case(d1, 3, -2, k, largest, 1, 1, 0);
        }
    int64_t d2[] = {11};
    topk_case(d2, 1, 0, 11, 1, 0, 1, 0);
    topk_case(d2, 1, -1, 3, 0, 0, 1, 0);
}

static void test_topk_nan_and_threads(void **state) {
    (void)state;
    int64_t d[] = {40, 1000}; /* large enough to split over threads */
    for (int largest = 0; largest <= 1; largest++) {
        topk_case(d, 2, 1, 7, largest, 0, 2, 1);
        topk_case(d, 2, 1, 300, largest, 1, 2, 1);
        topk_case(d, 2, 0, 5, largest, 0, 2, 1);
    }
}

static void test_topk_wide_ints(void **state) {
    (void)state;
    /* uint64 above 2^63 and int64 values that differ below double precision */
    uint64_t xu[] = {1ull << 63, 5, (1ull << 63) + 1, 0xffffffffffffffffull, 7};
    int64_t xs[] = {(1ll << 60) + 1, (1ll << 60), -(1ll << 62), (1ll << 60) + 3, 0};
    for (int t = 0; t < 2; t++) {
        ut_model u;
        ut_begin(&u, 11);
        int32_t dt = t ? WM_DT_INT64 : WM_DT_UINT64;
        ut_input(&u, "x", dt, 1);
        int64_t k = 3, kd = 1, d = 5;
        ut_const(&u, "k", WM_DT_INT64, &kd, 1, &k);
        ut_node(&u, "TopK", (const char *[]){"x", "k"}, 2, (const char *[]){"v", "i"}, 2);
        wm_error e = {0};
        assert_int_equal(ut_session(&u, 1, &e), WM_OK);
        wm_tensor in = ut_tensor(dt, &d, 1, t ? (const void *)xs : (const void *)xu), out[2];
        assert_int_equal(wm_session_run(u.s, &in, 1, out, 2, &e), WM_OK);
        const int64_t *ix = out[1].data;
        static const int64_t want_u[] = {3, 2, 0}, want_s[] = {3, 0, 1};
        for (int j = 0; j < 3; j++) assert_int_equal(ix[j], t ? want_s[j] : want_u[j]);
        ut_free(&u);
    }
}

static void test_topk_bad_k(void **state) {
    (void)state;
    ut_model u;
    ut_begin(&u, 11);
    ut_input(&u, "x", WM_DT_FLOAT, 1);
    ut_input(&u, "k", WM_DT_INT64, 1);
    ut_node(&u, "TopK", (const char *[]){"x", "k"}, 2, (const char *[]){"v", "i"}, 2);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    float x[4] = {1, 2, 3, 4};
    int64_t d = 4, kd = 1, k = 5;
    wm_tensor in[2] = {ut_tensor(WM_DT_FLOAT, &d, 1, x), ut_tensor(WM_DT_INT64, &kd, 1, &k)}, out[2];
    assert_int_equal(wm_session_run(u.s, in, 2, out, 2, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "TopK"));
    ut_free(&u);
}

/* ---------------------------------------------------------------- NonZero */

static void nonzero_case(const int64_t *dims, int rank, int zero_pct) {
    uint64_t total = 1;
    for (int i = 0; i < rank; i++) total *= (uint64_t)dims[i];
    int32_t *x = malloc((total ? total : 1) * sizeof *x);
    for (uint64_t i = 0; i < total; i++) x[i] = (int)(next_u64() % 100) < zero_pct ? 0 : (int32_t)(next_u64() % 9) - 4;
    ut_model u;
    ut_begin(&u, 13);
    ut_input(&u, "x", WM_DT_INT32, rank);
    ut_node(&u, "NonZero", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    wm_tensor in = ut_tensor(WM_DT_INT32, dims, rank, x), out;
    if (wm_session_run(u.s, &in, 1, &out, 1, &e)) fail_msg("%s", e.msg);
    uint64_t nz = 0;
    for (uint64_t i = 0; i < total; i++) nz += x[i] != 0;
    assert_int_equal(out.rank, 2);
    assert_int_equal(out.dims[0], rank ? rank : 1);
    assert_int_equal(out.dims[1], (int64_t)nz);
    const int64_t *o = out.data;
    uint64_t q = 0;
    for (uint64_t i = 0; i < total; i++) {
        if (!x[i]) continue;
        uint64_t rem = i;
        for (int d = rank - 1; d >= 0; d--) {
            assert_int_equal(o[(uint64_t)d * nz + q], (int64_t)(rem % (uint64_t)dims[d]));
            rem /= (uint64_t)dims[d];
        }
        q++;
    }
    ut_free(&u);
    free(x);
}

static void test_nonzero(void **state) {
    (void)state;
    nonzero_case((int64_t[]){3, 7, 5}, 3, 50);
    nonzero_case((int64_t[]){0, 3}, 2, 50);  /* empty input */
    nonzero_case((int64_t[]){4, 4}, 2, 100); /* all zero */
    nonzero_case((int64_t[]){1}, 0, 0);      /* scalar */
}

/* ---------------------------------------------------------------- Unique */

/* Rows of m columns; naive: distinct rows by first occurrence, then (sorted) lexicographic order. */
static void unique_case(const int64_t *dims, int rank, int axis, int sorted, int range) {
    uint64_t total = 1;
    for (int i = 0; i < rank; i++) total *= (uint64_t)dims[i];
    float *x = malloc((total ? total : 1) * sizeof *x);
    for (uint64_t i = 0; i < total; i++) x[i] = (float)(int)(next_u64() % (uint64_t)range) - range / 2;
    ut_model u;
    ut_begin(&u, 11);
    ut_input(&u, "x", WM_DT_FLOAT, rank);
    ut_node(&u, "Unique", (const char *[]){"x"}, 1, (const char *[]){"y", "idx", "inv", "cnt"}, 4);
    if (axis != 99) ut_attr_int(&u, "axis", axis);
    ut_attr_int(&u, "sorted", sorted);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    wm_tensor in = ut_tensor(WM_DT_FLOAT, dims, rank, x), out[4];
    if (wm_session_run(u.s, &in, 1, out, 4, &e)) fail_msg("%s", e.msg);
    /* slices: count len, each of outer x inner elements */
    uint64_t outer = 1, inner = 1, len = total;
    if (axis != 99) {
        int a = axis < 0 ? axis + rank : axis;
        outer = inner = 1;
        for (int d = 0; d < a; d++) outer *= (uint64_t)dims[d];
        for (int d = a + 1; d < rank; d++) inner *= (uint64_t)dims[d];
        len = (uint64_t)dims[a];
    }
#define EL(s, o, i) x[((o) * len + (s)) * inner + (i)]
    int64_t *first = malloc((len ? len : 1) * sizeof *first), nu = 0;
    for (uint64_t s = 0; s < len; s++) {
        int dup = 0;
        for (int64_t g = 0; g < nu && !dup; g++) {
            int eq = 1;
            for (uint64_t o = 0; o < outer && eq; o++)
                for (uint64_t i = 0; i < inner && eq; i++) eq = EL(s, o, i) == EL((uint64_t)first[g], o, i);
            dup = eq;
        }
        if (!dup) first[nu++] = (int64_t)s;
    }
    if (sorted) /* insertion sort of the groups by their slice */
        for (int64_t a = 1; a < nu; a++)
            for (int64_t b = a; b > 0; b--) {
                int c = 0;
                for (uint64_t o = 0; o < outer && !c; o++)
                    for (uint64_t i = 0; i < inner && !c; i++) {
                        float p = EL((uint64_t)first[b - 1], o, i), q = EL((uint64_t)first[b], o, i);
                        c = (p > q) - (p < q);
                    }
                if (c <= 0) break;
                int64_t t = first[b];
                first[b] = first[b - 1];
                first[b - 1] = t;
            }
    assert_int_equal(out[1].dims[0], nu);
    assert_int_equal(out[2].dims[0], (int64_t)len);
    assert_int_equal(out[3].dims[0], nu);
    const int64_t *oi = out[1].data, *inv = out[2].data, *cnt = out[3].data;
    const float *y = out[0].data;
    for (int64_t g = 0; g < nu; g++) {
        assert_int_equal(oi[g], first[g]);
        int64_t c = 0;
        for (uint64_t s = 0; s < len; s++) c += inv[s] == g;
        assert_int_equal(cnt[g], c);
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t i = 0; i < inner; i++)
                assert_true(y[(o * (uint64_t)nu + (uint64_t)g) * inner + i] == EL((uint64_t)first[g], o, i));
    }
    for (uint64_t s = 0; s < len; s++) { /* each slice maps to a group with equal content */
        assert_true(inv[s] >= 0 && inv[s] < nu);
        for (uint64_t o = 0; o < outer; o++)
            for (uint64_t i = 0; i < inner; i++) assert_true(EL(s, o, i) == EL((uint64_t)first[inv[s]], o, i));
    }
#undef EL
    free(first);
    ut_free(&u);
    free(x);
}

static void test_unique(void **state) {
    (void)state;
    for (int sorted = 0; sorted <= 1; sorted++) {
        unique_case((int64_t[]){41}, 1, 99, sorted, 9);
        unique_case((int64_t[]){6, 7}, 2, 99, sorted, 5);
        unique_case((int64_t[]){5, 3}, 2, 0, sorted, 2); /* rows */
        unique_case((int64_t[]){2, 9, 2}, 3, 1, sorted, 2);
        unique_case((int64_t[]){2, 9, 2}, 3, -1, sorted, 2);
        unique_case((int64_t[]){0}, 1, 99, sorted, 3);     /* empty */
        unique_case((int64_t[]){3, 0}, 2, 0, sorted, 3);   /* empty slices: all equal */
        unique_case((int64_t[]){0, 4}, 2, 0, sorted, 3);   /* no slices */
    }
}

/* ---------------------------------------------------------------- Compress */

static void test_compress(void **state) {
    (void)state;
    int64_t dims[] = {3, 4}, cd = 4;
    float x[12];
    for (int i = 0; i < 12; i++) x[i] = (float)i;
    uint8_t cond[4] = {0, 1, 1, 0};
    ut_model u;
    ut_begin(&u, 11);
    ut_input(&u, "x", WM_DT_FLOAT, 2);
    ut_input(&u, "c", WM_DT_BOOL, 1);
    ut_node(&u, "Compress", (const char *[]){"x", "c"}, 2, (const char *[]){"y"}, 1);
    ut_attr_int(&u, "axis", -1);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    wm_tensor in[2] = {ut_tensor(WM_DT_FLOAT, dims, 2, x), ut_tensor(WM_DT_BOOL, &cd, 1, cond)}, out;
    assert_int_equal(wm_session_run(u.s, in, 2, &out, 1, &e), WM_OK);
    assert_int_equal(out.dims[0], 3);
    assert_int_equal(out.dims[1], 2);
    for (int r = 0; r < 3; r++) {
        assert_true(((float *)out.data)[r * 2] == x[r * 4 + 1]);
        assert_true(((float *)out.data)[r * 2 + 1] == x[r * 4 + 2]);
    }
    memset(cond, 0, sizeof cond); /* nothing selected: an empty output */
    assert_int_equal(wm_session_run(u.s, in, 2, &out, 1, &e), WM_OK);
    assert_int_equal(out.dims[1], 0);
    ut_free(&u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_topk_ties),   cmocka_unit_test(test_topk_nan_and_threads),
        cmocka_unit_test(test_topk_wide_ints), cmocka_unit_test(test_topk_bad_k),
        cmocka_unit_test(test_nonzero),     cmocka_unit_test(test_unique),
        cmocka_unit_test(test_compress),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
