/*
 * test_ops_scatter.c - ScatterElements and ScatterND with every reduction
 * and duplicate (and negative) indices against naive sequential
 * references; out-of-range indices are refused with the node named.
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

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next_u64(void) {
    rng ^= rng << 13;
    rng ^= rng >> 7;
    rng ^= rng << 17;
    return rng;
}

static const char *reds[] = {"none", "add", "mul", "max", "min"};

static double red_f(int r, double a, double b) {
    switch (r) {
    case 1: return a + b;
    case 2: return a * b;
    case 3: return a > b ? a : b;
    case 4: return a < b ? a : b;
    default: return b;
    }
}

/* data [4, 5, 3], indices/updates [6, 5, 2] along axis (indices with many duplicates, some negative) */
static void scatter_el_case(int32_t dt, int red, int axis) {
    int64_t dd[] = {4, 5, 3}, id[] = {6, 5, 2};
    if (axis == 1) id[1] = 7, id[0] = 3;
    if (axis == 2) id[2] = 5, id[0] = 3;
    uint64_t nd = 60, ni = (uint64_t)(id[0] * id[1] * id[2]);
    float *df = malloc(nd * 4), *uf = malloc(ni * 4), *ref = malloc(nd * 4);
    int32_t *di = malloc(nd * 4), *ui = malloc(ni * 4), *refi = malloc(nd * 4);
    int64_t *ix = malloc(ni * 8);
    for (uint64_t i = 0; i < nd; i++) df[i] = (float)((int)(next_u64() % 9) - 4) * 0.5f, di[i] = (int32_t)(next_u64() % 9) - 4;
    for (uint64_t i = 0; i < ni; i++) uf[i] = (float)((int)(next_u64() % 9) - 4) * 0.25f, ui[i] = (int32_t)(next_u64() % 7) - 3;
    int64_t dim = dd[axis];
    for (uint64_t i = 0; i < ni; i++) ix[i] = (int64_t)(next_u64() % 2) - (next_u64() % 2 ? dim : 0); /* 0, 1, -dim, 1-dim */
    memcpy(ref, df, nd * 4);
    memcpy(refi, di, nd * 4);
    for (int64_t a = 0; a < id[0]; a++)
        for (int64_t b = 0; b < id[1]; b++)
            for (int64_t c = 0; c < id[2]; c++) {
                uint64_t u = (uint64_t)((a * id[1] + b) * id[2] + c);
                int64_t p[3] = {a, b, c}, j = ix[u] < 0 ? ix[u] + dim : ix[u];
                p[axis] = j;
                uint64_t o = (uint64_t)((p[0] * 5 + p[1]) * 3 + p[2]);
                ref[o] = (float)red_f(red, ref[o], uf[u]);
                refi[o] = (int32_t)red_f(red, refi[o], ui[u]);
            }
    ut_model m;
    ut_begin(&m, 18);
    ut_input(&m, "d", dt, 3);
    ut_input(&m, "i", WM_DT_INT64, 3);
    ut_input(&m, "u", dt, 3);
    ut_node(&m, "ScatterElements", (const char *[]){"d", "i", "u"}, 3, (const char *[]){"y"}, 1);
    ut_attr_int(&m, "axis", axis - 3 * (axis == 2)); /* axis 2 given as -1 */
    ut_attr_string(&m, "reduction", reds[red]);
    wm_error e = {0};
    assert_int_equal(ut_session(&m, 1, &e), WM_OK);
    int fl = dt == WM_DT_FLOAT;
    wm_tensor in[3] = {ut_tensor(dt, dd, 3, fl ? (void *)df : (void *)di), ut_tensor(WM_DT_INT64, id, 3, ix),
                       ut_tensor(dt, id, 3, fl ? (void *)uf : (void *)ui)},
              out;
    if (wm_session_run(m.s, in, 3, &out, 1, &e)) fail_msg("%s", e.msg);
    for (uint64_t i = 0; i < nd; i++) {
        if (fl) assert_true(((float *)out.data)[i] == ref[i]);
        else assert_int_equal(((int32_t *)out.data)[i], refi[i]);
    }
    ut_free(&m);
    free(df), free(uf), free(ref), free(di), free(ui), free(refi), free(ix);
}

static void test_scatter_elements(void **state) {
    (void)state;
    for (int red = 0; red < 5; red++)
        for (int axis = 0; axis < 3; axis++) {
            scatter_el_case(WM_DT_FLOAT, red, axis);
            scatter_el_case(WM_DT_INT32, red, axis);
        }
}

/* data [5, 4, 3], indices [7, 2, k]: k = 1 (rows of 12), 2 (rows of 3), 3 (elements) */
static void scatter_nd_case(int red, int k) {
    int64_t dd[] = {5, 4, 3}, id[] = {7, 2, k}, ud[4];
    int ur = 2 + 3 - k;
    ud[0] = 7, ud[1] = 2;
    for (int i = 0; i < 3 - k; i++) ud[2 + i] = dd[k + i];
    uint64_t slice = 1;
    for (int i = k; i < 3; i++) slice *= (uint64_t)dd[i];
    uint64_t nq = 14, nd = 60;
    double *d = malloc(nd * 8), *upd = malloc(nq * slice * 8), *ref = malloc(nd * 8);
    int64_t *ix = malloc(nq * (uint64_t)k * 8);
    for (uint64_t i = 0; i < nd; i++) d[i] = (double)((int)(next_u64() % 9) - 4) / 3;
    for (uint64_t i = 0; i < nq * slice; i++) upd[i] = (double)((int)(next_u64() % 9) - 4) / 7;
    for (uint64_t q = 0; q < nq; q++)
        for (int j = 0; j < k; j++) ix[q * (uint64_t)k + (uint64_t)j] = (int64_t)(next_u64() % 2) - (next_u64() % 2 ? dd[j] : 0);
    memcpy(ref, d, nd * 8);
    for (uint64_t q = 0; q < nq; q++) {
        uint64_t off = 0, st[3] = {12, 3, 1};
        for (int j = 0; j < k; j++) {
            int64_t v = ix[q * (uint64_t)k + (uint64_t)j];
            off += (uint64_t)(v < 0 ? v + dd[j] : v) * st[j];
        }
        for (uint64_t e = 0; e < slice; e++) ref[off + e] = red_f(red, ref[off + e], upd[q * slice + e]);
    }
    ut_model m;
    ut_begin(&m, 18);
    ut_input(&m, "d", WM_DT_DOUBLE, 3);
    ut_input(&m, "i", WM_DT_INT64, 3);
    ut_input(&m, "u", WM_DT_DOUBLE, ur);
    ut_node(&m, "ScatterND", (const char *[]){"d", "i", "u"}, 3, (const char *[]){"y"}, 1);
    ut_attr_string(&m, "reduction", reds[red]);
    wm_error e = {0};
    assert_int_equal(ut_session(&m, 1, &e), WM_OK);
    wm_tensor in[3] = {ut_tensor(WM_DT_DOUBLE, dd, 3, d), ut_tensor(WM_DT_INT64, id, 3, ix), ut_tensor(WM_DT_DOUBLE, ud, ur, upd)},
              out;
    if (wm_session_run(m.s, in, 3, &out, 1, &e)) fail_msg("%s", e.msg);
    for (uint64_t i = 0; i < nd; i++) assert_true(((double *)out.data)[i] == ref[i]);
    /* an index out of range is an input error naming the node */
    ix[0] = dd[0];
    assert_int_equal(wm_session_run(m.s, in, 3, &out, 1, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "ScatterND"));
    ut_free(&m);
    free(d), free(upd), free(ref), free(ix);
}

static void test_scatter_nd(void **state) {
    (void)state;
    for (int red = 0; red < 5; red++)
        for (int k = 1; k <= 3; k++) scatter_nd_case(red, k);
}

static void test_scatter_reduction_opset(void **state) {
    (void)state;
    /* max arrived in opset 18: at opset 16 it is refused at session creation */
    ut_model m;
    ut_begin(&m, 16);
    ut_input(&m, "d", WM_DT_FLOAT, 1);
    ut_input(&m, "i", WM_DT_INT64, 1);
    ut_input(&m, "u", WM_DT_FLOAT, 1);
    ut_node(&m, "ScatterElements", (const char *[]){"d", "i", "u"}, 3, (const char *[]){"y"}, 1);
    ut_attr_string(&m, "reduction", "max");
    wm_error e = {0};
    assert_int_equal(ut_session(&m, 1, &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "reduction"));
    ut_free(&m);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_scatter_elements),
        cmocka_unit_test(test_scatter_nd),
        cmocka_unit_test(test_scatter_reduction_opset),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
