/*
 * test_steady.c - steady inputs (wm_session_steady_inputs, runtime/steady.c):
 * the values computed from a steady input and constants alone are computed
 * once and kept; later runs skip their nodes until the input comes in another
 * buffer or with other dims, or is declared again.
 *
 * Graph: x (steady), y -> xh = Cast(x, float16) -> xr = Reshape(xh, [-1]) ->
 * xf = Cast(xr, float) -> z = xf + y; w = x * y. Kept: the two Casts and the
 * Reshape (a view of a kept value); not kept: Add (reads y) and Mul (reads y,
 * and x itself is the caller's).
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <stdlib.h>
#include <string.h>

#include "core/half.h"
#include "ops_test_util.h"

#define N 37

static void add(ut_model *u, const char *op, const char *const *in, size_t n_in, const char *out) {
    wm_error e = {0};
    u->node = wm_graph_add_node(u->g, op, NULL, out, in, n_in, &out, 1, &e);
    if (!u->node) fail_msg("node %s: %s", op, e.msg);
}

static void build(ut_model *u) {
    ut_begin(u, 17);
    ut_input(u, "x", WM_DT_FLOAT, 1);
    ut_input(u, "y", WM_DT_FLOAT, 1);
    int64_t one = 1, minus1 = -1;
    ut_const(u, "shape", WM_DT_INT64, &one, 1, &minus1);
    add(u, "Cast", (const char *[]){"x"}, 1, "xh");
    ut_attr_int(u, "to", WM_DT_FLOAT16);
    add(u, "Reshape", (const char *[]){"xh", "shape"}, 2, "xr");
    add(u, "Cast", (const char *[]){"xr"}, 1, "xf");
    ut_attr_int(u, "to", WM_DT_FLOAT);
    add(u, "Add", (const char *[]){"xf", "y"}, 2, "z");
    add(u, "Mul", (const char *[]){"x", "y"}, 2, "w");
    wm_error e = {0};
    if (wm_graph_add_output(u->g, "z", WM_DT_FLOAT, NULL, 0, &e) || wm_graph_add_output(u->g, "w", WM_DT_FLOAT, NULL, 0, &e))
        fail_msg("output: %s", e.msg);
    wm_graph_free(u->g);
    u->g = NULL;
    wm_session_opts o = {.threads = 1, .no_optimize = 1}; /* the nodes as written: the counts below are theirs */
    wm_onnx_model *m = u->m;
    u->m = NULL;
    if (wm_session_new_model(m, &o, &u->s, &e)) fail_msg("session: %s", e.msg);
}

static float half_round(float v) { return wm_f16_to_f32(wm_f32_to_f16(v)); }

/* Runs on x[0..n), y[0..n); checks z = half(xk) + y and w = x * y, xk the x the kept values came from; returns the
   nodes the run skipped. */
static size_t run_check(ut_model *u, const float *x, const float *xk, const float *y, int64_t n) {
    wm_tensor in[2] = {ut_tensor(WM_DT_FLOAT, &n, 1, x), ut_tensor(WM_DT_FLOAT, &n, 1, y)}, out[2];
    wm_error e = {0};
    if (wm_session_run(u->s, in, 2, out, 2, &e)) fail_msg("run: %s", e.msg);
    assert_int_equal(out[0].dims[0], n);
    for (int64_t i = 0; i < n; i++) {
        float z = ((float *)out[0].data)[i], w = ((float *)out[1].data)[i];
        if (z != half_round(xk[i]) + y[i] || w != x[i] * y[i])
            fail_msg("element %lld: z %g (want %g), w %g (want %g)", (long long)i, z, half_round(xk[i]) + y[i], w,
                     x[i] * y[i]);
    }
    wm_session_stats st;
    wm_session_get_stats(u->s, &st);
    return st.n_steady_skipped;
}

static void test_steady_inputs(void **state) {
    (void)state;
    ut_model u;
    build(&u);
    float *x = malloc(N * sizeof *x), *x2 = malloc(N * sizeof *x2), *old = malloc(N * sizeof *old), y[N];
    assert_non_null(x);
    assert_non_null(x2);
    assert_non_null(old);
    for (int i = 0; i < N; i++) x[i] = 0.1f * (float)i + 1.0f / 3.0f, y[i] = (float)(i % 5) - 2.0f;
    assert_int_equal(run_check(&u, x, x, y, N), 0); /* nothing steady: every node runs */

    wm_error e = {0};
    const char *names[1] = {"x"};
    assert_int_equal(wm_session_steady_inputs(u.s, names, 1, &e), WM_OK);
    assert_int_equal(run_check(&u, x, x, y, N), 0); /* computes and keeps them */
    y[3] = 11.0f;
    assert_int_equal(run_check(&u, x, x, y, N), 3); /* Cast, Reshape, Cast skipped; Add, Mul run */
    memcpy(old, x, N * sizeof *x);
    for (int i = 0; i < N; i++) x[i] += 2.5f; /* changed in place, not declared: the kept values stay */
    assert_int_equal(run_check(&u, x, old, y, N), 3);
    memcpy(x2, x, N * sizeof *x);
    assert_int_equal(run_check(&u, x2, x2, y, N), 0); /* another buffer: computed again */
    assert_int_equal(run_check(&u, x2, x2, y, N), 3);
    assert_int_equal(run_check(&u, x2, x2, y, N - 4), 0); /* other dims (a new plan): computed again */
    assert_int_equal(run_check(&u, x2, x2, y, N - 4), 3);
    assert_int_equal(run_check(&u, x2, x2, y, N), 0); /* back to the first plan: the kept values are stale */
    x2[7] = -9.0f;
    assert_int_equal(wm_session_steady_inputs(u.s, names, 1, &e), WM_OK); /* declared again: dropped */
    assert_int_equal(run_check(&u, x2, x2, y, N), 0);
    assert_int_equal(run_check(&u, x2, x2, y, N), 3);

    const char *bad[2] = {"x", "nope"};
    assert_int_equal(wm_session_steady_inputs(u.s, bad, 2, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "'nope'"));
    assert_int_equal(run_check(&u, x2, x2, y, N), 3); /* a refused call changes nothing */

    assert_int_equal(wm_session_steady_inputs(u.s, NULL, 0, &e), WM_OK); /* nothing steady any more */
    x2[0] = 42.0f;
    assert_int_equal(run_check(&u, x2, x2, y, N), 0);
    assert_int_equal(run_check(&u, x2, x2, y, N), 0);
    free(x);
    free(x2);
    free(old);
    ut_free(&u);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_steady_inputs)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
