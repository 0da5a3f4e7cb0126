/*
 * test_ops_random.c - the random ops: shapes and types, distribution
 * moments against their closed forms (uniform mean/variance over [low,
 * high), normal mean/scale, Bernoulli frequencies, Multinomial class
 * frequencies against softmax probabilities) at a 5-sigma bound,
 * Bernoulli with p = 0 / 1 exactly, reproducibility of a seeded node in two
 * sessions, new draws on the next run, and no folding of a random node.
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

/* A session of op with no inputs (shape attribute) or one float input; runs it once into out. */
static void make(ut_model *u, const char *op, int opset, int with_input, float seed, int seeded) {
    ut_begin(u, opset);
    if (with_input) ut_input(u, "x", WM_DT_FLOAT, 2);
    ut_node(u, op, (const char *[]){"x"}, with_input ? 1 : 0, (const char *[]){"y"}, 1);
    if (seeded) ut_attr_float(u, "seed", seed);
}

static void moments(const wm_tensor *t, double *mean, double *var) {
    uint64_t n = wm_tensor_numel(t);
    double s = 0, q = 0;
    for (uint64_t i = 0; i < n; i++) {
        double v = t->dtype == WM_DT_DOUBLE ? ((double *)t->data)[i] : ((float *)t->data)[i];
        s += v;
        q += v * v;
    }
    *mean = s / (double)n;
    *var = q / (double)n - *mean * *mean;
}

static void test_uniform_normal(void **state) {
    (void)state;
    const int64_t shape[] = {200, 250};
    for (int normal = 0; normal <= 1; normal++) {
        ut_model u;
        make(&u, normal ? "RandomNormal" : "RandomUniform", 17, 0, 3, 1);
        ut_attr_ints(&u, "shape", shape, 2);
        ut_attr_float(&u, normal ? "mean" : "low", normal ? 2.0f : -1.0f);
        ut_attr_float(&u, normal ? "scale" : "high", normal ? 0.5f : 3.0f);
        ut_attr_int(&u, "dtype", WM_DT_DOUBLE);
        wm_error e = {0};
        assert_int_equal(ut_session(&u, 1, &e), WM_OK);
        wm_session_stats st;
        wm_session_get_stats(u.s, &st);
        assert_int_equal(st.n_folded, 0); /* never folded to a constant */
        wm_tensor out;
        assert_int_equal(wm_session_run(u.s, NULL, 0, &out, 1, &e), WM_OK);
        assert_int_equal(out.dtype, WM_DT_DOUBLE);
        assert_int_equal(out.rank, 2);
        assert_int_equal(out.dims[0], 200);
        double m, v, n = 50000;
        moments(&out, &m, &v);
        double want_m = normal ? 2.0 : 1.0, want_v = normal ? 0.25 : 16.0 / 12.0;
        /* 5 sigma: sd of the mean sqrt(var/n); sd of the variance ~ var * sqrt(2/n) (normal), smaller for uniform */
        assert_true(fabs(m - want_m) < 5 * sqrt(want_v / n));
        assert_true(fabs(v - want_v) < 5 * want_v * sqrt(2 / n));
        if (!normal)
            for (uint64_t i = 0; i < 50000; i++) assert_true(((double *)out.data)[i] >= -1 && ((double *)out.data)[i] < 3);
        ut_free(&u);
    }
}

static void test_like_and_reproducible(void **state) {
    (void)state;
    float x[6] = {0};
    int64_t d[2] = {2, 3};
    float first[6], again[6];
    for (int rep = 0; rep < 2; rep++) { /* two sessions, same seed: same draws */
        ut_model u;
        make(&u, "RandomUniformLike", 17, 1, 42, 1);
        wm_error e = {0};
        assert_int_equal(ut_session(&u, 1, &e), WM_OK);
        wm_tensor in = ut_tensor(WM_DT_FLOAT, d, 2, x), out;
        assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK);
        assert_int_equal(out.dtype, WM_DT_FLOAT);
        assert_int_equal(out.dims[1], 3);
        memcpy(rep ? again : first, out.data, sizeof first);
        if (rep) {
            assert_memory_equal(first, again, sizeof first);
            assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK); /* the next run draws anew */
            assert_memory_not_equal(first, out.data, sizeof first);
        }
        ut_free(&u);
    }
    /* another seed, another stream */
    ut_model u;
    make(&u, "RandomUniformLike", 17, 1, 43, 1);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    wm_tensor in = ut_tensor(WM_DT_FLOAT, d, 2, x), out;
    assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK);
    assert_memory_not_equal(first, out.data, sizeof first);
    ut_free(&u);
    /* an int input without dtype has no float type to produce: refused at creation */
    ut_begin(&u, 17);
    ut_input(&u, "x", WM_DT_INT32, 1);
    ut_node(&u, "RandomNormalLike", (const char *[]){"x"}, 1, (const char *[]){"y"}, 1);
    assert_int_equal(ut_session(&u, 1, &e), WM_ERR_UNSUPPORTED);
    assert_non_null(strstr(e.msg, "RandomNormalLike"));
    ut_free(&u);
}

static void test_bernoulli(void **state) {
    (void)state;
    enum { N = 40000 };
    float *p = malloc(N * sizeof *p);
    for (int i = 0; i < N; i++) p[i] = i % 4 == 0 ? 0.0f : i % 4 == 1 ? 1.0f : i % 4 == 2 ? 0.3f : 0.8f;
    ut_model u;
    make(&u, "Bernoulli", 15, 1, 0, 0);
    ut_attr_int(&u, "dtype", WM_DT_INT32);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    int64_t d[2] = {N / 4, 4};
    wm_tensor in = ut_tensor(WM_DT_FLOAT, d, 2, p), out;
    assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK);
    assert_int_equal(out.dtype, WM_DT_INT32);
    const int32_t *y = out.data;
    int c3 = 0, c8 = 0;
    for (int i = 0; i < N; i++) {
        assert_true(y[i] == 0 || y[i] == 1);
        if (i % 4 == 0) assert_int_equal(y[i], 0);
        if (i % 4 == 1) assert_int_equal(y[i], 1);
        if (i % 4 == 2) c3 += y[i];
        if (i % 4 == 3) c8 += y[i];
    }
    double n = N / 4;
    assert_true(fabs(c3 / n - 0.3) < 5 * sqrt(0.3 * 0.7 / n));
    assert_true(fabs(c8 / n - 0.8) < 5 * sqrt(0.8 * 0.2 / n));
    p[0] = 1.5f; /* not a probability */
    assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_ERR_INPUT);
    ut_free(&u);
    free(p);
}

static void test_multinomial(void **state) {
    (void)state;
    float logits[2][4] = {{0, 1, 2, -30}, {5, 5, 5, 5}};
    ut_model u;
    make(&u, "Multinomial", 7, 1, 7, 1);
    ut_attr_int(&u, "sample_size", 20000);
    ut_attr_int(&u, "dtype", WM_DT_INT64);
    wm_error e = {0};
    assert_int_equal(ut_session(&u, 1, &e), WM_OK);
    int64_t d[2] = {2, 4};
    wm_tensor in = ut_tensor(WM_DT_FLOAT, d, 2, logits), out;
    assert_int_equal(wm_session_run(u.s, &in, 1, &out, 1, &e), WM_OK);
    assert_int_equal(out.dims[1], 20000);
    const int64_t *y = out.data;
    for (int b = 0; b < 2; b++) {
        double z = 0, cnt[4] = {0};
        for (int c = 0; c < 4; c++) z += exp(logits[b][c]);
        for (int s = 0; s < 20000; s++) {
            assert_true(y[b * 20000 + s] >= 0 && y[b * 20000 + s] < 4);
            cnt[y[b * 20000 + s]]++;
        }
        for (int c = 0; c < 4; c++) {
            double pc = exp(logits[b][c]) / z;
            assert_true(fabs(cnt[c] / 20000 - pc) < 5 * sqrt(pc * (1 - pc) / 20000) + 1e-9);
        }
    }
    ut_free(&u);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_uniform_normal),
        cmocka_unit_test(test_like_and_reproducible),
        cmocka_unit_test(test_bernoulli),
        cmocka_unit_test(test_multinomial),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
