/*
 * test_ops_einsum.c - Einsum against a naive reference that loops over
 * every label combination: matmul forms, batch, broadcasting ellipsis,
 * repeated labels (diagonals), sums, outer products, implicit outputs,
 * three operands, float32 (the GEMM path), float64, int32, float16, and
 * thread counts. The reference gets each equation with the ellipsis
 * written out as letters (size-1 dims broadcast by clamping the index).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "ops/op.h"
#include "ops_test_util.h"

static uint64_t rng = 0x2545f4914f6cdd1dull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

typedef struct ecase {
    const char *eq;     /* for the op */
    const char *ref;    /* explicit letters, explicit output */
    int n_in;
    int rank[3];
    int64_t dims[3][6];
} ecase;

/* Naive: out[o] = sum over all other labels of prod_t in_t[...]. */
static void reference(const ecase *c, double *const *x, double *out, int64_t *odims, int *orank) {
    char terms[4][16];
    int nt = 0;
    const char *p = c->ref;
    while (*p) {
        int k = 0;
        while (*p && *p != ',' && *p != '-') terms[nt][k++] = *p++;
        terms[nt++][k] = 0;
        if (*p == ',') p++;
        else if (*p == '-') p += 2;
    }
    if (p[-1] == '>') terms[nt++][0] = 0; /* "->" with an empty output */
    const char *ot = terms[nt - 1];
    int64_t size[128] = {0};
    uint8_t present[128] = {0};
    for (int t = 0; t < c->n_in; t++)
        for (int i = 0; terms[t][i]; i++) {
            int64_t d = c->dims[t][i];
            present[(int)terms[t][i]] = 1;
            if (size[(int)terms[t][i]] < d) size[(int)terms[t][i]] = d;
        }
    char labels[64];
    int nl = 0;
    for (int i = 0; ot[i]; i++) labels[nl++] = ot[i];
    *orank = nl;
    for (int i = 0; i < nl; i++) odims[i] = size[(int)labels[i]];
    for (int ch = 0; ch < 128; ch++)
        if (present[ch] && !strchr(ot, ch)) labels[nl++] = (char)ch;
    uint64_t on = 1, total = 1;
    for (int i = 0; i < *orank; i++) on *= (uint64_t)odims[i];
    for (int i = 0; i < nl; i++) total *= (uint64_t)size[(int)labels[i]];
    memset(out, 0, on * sizeof *out);
    int64_t idx[128] = {0};
    for (uint64_t q = 0; q < total; q++) {
        uint64_t rem = q;
        for (int i = nl - 1; i >= 0; i--) {
            idx[(int)labels[i]] = (int64_t)(rem % (uint64_t)size[(int)labels[i]]);
            rem /= (uint64_t)size[(int)labels[i]];
        }
        double prod = 1;
        for (int t = 0; t < c->n_in; t++) {
            uint64_t off = 0;
            for (int i = 0; terms[t][i]; i++) {
                int64_t d = c->dims[t][i], v = d == 1 ? 0 : idx[(int)terms[t][i]];
                off = off * (uint64_t)d + (uint64_t)v;
            }
            prod *= x[t][off];
        }
        uint64_t o = 0;
        for (int i = 0; i < *orank; i++) o = o * (uint64_t)odims[i] + (uint64_t)idx[(int)ot[i]];
        out[o] += prod;
    }
}

static void run_case(const ecase *c, int32_t dt, int threads) {
    double *x[3];
    void *raw[3];
    uint64_t n[3];
    for (int t = 0; t < c->n_in; t++) {
        n[t] = 1;
        for (int i = 0; i < c->rank[t]; i++) n[t] *= (uint64_t)c->dims[t][i];
        x[t] = malloc((n[t] + 1) * 8);
        raw[t] = malloc((n[t] + 1) * 8);
        for (uint64_t i = 0; i < n[t]; i++) {
            x[t][i] = dt == WM_DT_INT32 ? (double)((int)(next_u64() % 7) - 3) : (double)((int)(next_u64() % 2001) - 1000) / 1000;
            if (dt == WM_DT_FLOAT16) x[t][i] = wm_f16_to_f32(wm_f32_to_f16((float)x[t][i]));
        }
        wm_convert(WM_DT_DOUBLE, x[t], dt, raw[t], n[t]);
    }
    double *want = malloc(4096 * 8);
    int64_t odims[8];
    int orank;
    reference(c, x, want, odims, &orank);
    ut_model m;
    ut_begin(&m, 12);
    const char *names[3] = {"a", "b", "c"};
    for (int t = 0; t < c->n_in; t++) ut_input(&m, names[t], dt, c->rank[t]);
    ut_node(&m, "Einsum", names, (size_t)c->n_in, (const char *[]){"y"}, 1);
    ut_attr_string(&m, "equation", c->eq);
    wm_error e = {0};
    if (ut_session(&m, threads, &e)) fail_msg("%s: %s", c->eq, e.msg);
    wm_tensor in[3], out;
    for (int t = 0; t < c->n_in; t++) in[t] = ut_tensor(dt, c->dims[t], c->rank[t], raw[t]);
    if (wm_session_run(m.s, in, (size_t)c->n_in, &out, 1, &e)) fail_msg("%s: %s", c->eq, e.msg);
    if (out.rank != orank) fail_msg("%s: rank %d, want %d", c->eq, out.rank, orank);
    uint64_t on = 1;
    for (int i = 0; i < orank; i++) {
        if (out.dims[i] != odims[i]) fail_msg("%s: dim %d is %lld, want %lld", c->eq, i, (long long)out.dims[i], (long long)odims[i]);
        on *= (uint64_t)odims[i];
    }
    double *got = malloc((on + 1) * 8);
    wm_convert(dt, out.data, WM_DT_DOUBLE, got, on);
    double tol = dt == WM_DT_DOUBLE ? 1e-12 : dt == WM_DT_FLOAT ? 1e-5 : dt == WM_DT_FLOAT16 ? 2e-2 : 0;
    for (uint64_t i = 0; i < on; i++)
        if (!(fabs(got[i] - want[i]) <= tol * (1 + fabs(want[i]))))
            fail_msg("%s (%s): element %llu is %.9g, want %.9g", c->eq, wm_dtype_name(dt), (unsigned long long)i, got[i], want[i]);
    free(got);
    free(want);
    for (int t = 0; t < c->n_in; t++) free(x[t]), free(raw[t]);
    ut_free(&m);
}

static const ecase cases[] = {
    {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{7, 13}, {13, 5}}},
    {"ij,jk", "ij,jk->ik", 2, {2, 2}, {{3, 4}, {4, 6}}},             /* implicit output */
    {"ba", "ba->ab", 1, {2}, {{3, 5}}},                              /* implicit: alphabetical */
    {"bij, bjk -> bik", "bij,bjk->bik", 2, {3, 3}, {{4, 3, 17}, {4, 17, 6}}},
    {"...ij,...jk->...ik", "xyij,yjk->xyik", 2, {4, 3}, {{2, 1, 3, 4}, {5, 4, 2}}}, /* broadcast ellipsis */
    {"...ii->...i", "xii->xi", 1, {3}, {{3, 5, 5}}},
    {"iij->j", "iij->j", 1, {3}, {{4, 4, 3}}},
    {"ii", "ii->", 1, {2}, {{6, 6}}},                                 /* trace, implicit scalar */
    {"ij,ij->", "ij,ij->", 2, {2, 2}, {{5, 7}, {5, 7}}},
    {"i,j->ij", "i,j->ij", 2, {1, 1}, {{4}, {3}}},
    {"ij->", "ij->", 1, {2}, {{3, 4}}},
    {"abc,cd,de->abe", "abc,cd,de->abe", 3, {3, 2, 2}, {{2, 3, 4}, {4, 5}, {5, 2}}},
    {"ijk,ikl->jl", "ijk,ikl->jl", 2, {3, 3}, {{3, 4, 5}, {3, 5, 2}}},
    {"bhqd,bhkd->bhqk", "bhqd,bhkd->bhqk", 2, {4, 4}, {{2, 3, 5, 8}, {2, 3, 7, 8}}},
    {"i...,i...->...", "ixy,ixy->xy", 2, {3, 3}, {{4, 2, 3}, {4, 2, 3}}},
    {"...,...", "xy,y->xy", 2, {2, 1}, {{3, 4}, {4}}},                /* implicit with ellipsis */
    {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{3, 0}, {0, 4}}},          /* empty contraction: zeros */
};

static void test_einsum_float(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) run_case(&cases[i], WM_DT_FLOAT, 1);
}

static void test_einsum_double_int_half(void **state) {
    (void)state;
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) {
        run_case(&cases[i], WM_DT_DOUBLE, 1);
        run_case(&cases[i], WM_DT_INT32, 1);
        run_case(&cases[i], WM_DT_FLOAT16, 1);
    }
}

static void test_einsum_threads(void **state) {
    (void)state;
    static const ecase big[] = {
        {"bij,bjk->bik", "bij,bjk->bik", 2, {3, 3}, {{6, 20, 30}, {6, 30, 10}}},
        {"ij,jk->ik", "ij,jk->ik", 2, {2, 2}, {{40, 64}, {64, 50}}},
    };
    for (size_t i = 0; i < 2; i++) {
        run_case(&big[i], WM_DT_FLOAT, 2);
        run_case(&big[i], WM_DT_DOUBLE, 2);
    }
}

static void test_einsum_bad(void **state) {
    (void)state;
    static const char *bad[] = {"ij,jk->iz", "ij->ii", "i.j", "ij,jk,kl->il"};
    for (size_t i = 0; i < 4; i++) {
        ut_model m;
        ut_begin(&m, 12);
        ut_input(&m, "a", WM_DT_FLOAT, 2);
        ut_input(&m, "b", WM_DT_FLOAT, 2);
        ut_node(&m, "Einsum", (const char *[]){"a", "b"}, i == 1 || i == 2 ? 1 : 2, (const char *[]){"y"}, 1);
        ut_attr_string(&m, "equation", bad[i]);
        wm_error e = {0};
        assert_int_not_equal(ut_session(&m, 1, &e), WM_OK);
        assert_non_null(strstr(e.msg, "Einsum"));
        ut_free(&m);
    }
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_einsum_float),
        cmocka_unit_test(test_einsum_double_int_half),
        cmocka_unit_test(test_einsum_threads),
        cmocka_unit_test(test_einsum_bad),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
