/*
 * test_ops_arity.c - every op the engine registers (ops/registry.c), at
 * its first opset and 21, given too few inputs or outputs, omitted ("")
 * required ones, float32 or int64 inputs at two ranks, constant or given at
 * run time: the session refuses the node or the run with a message, or
 * runs, but never reads an input or output the node does not have (a crash,
 * or an ASan/UBSan report in the sanitizer build). Each op runs in a child
 * process, so one crash names its op and case and the others still run.
 */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/wait.h>
#include <unistd.h>

#include "ops/op.h"
#include "ops_test_util.h"

static char *last_case; /* shared with the parent: the case a child was running */

/* One node of op with n_in inputs of dtype dt and rank r (slot `gap` omitted, -1: none), n_out outputs. */
static void one_case(const wm_op *op, int opset, int n_in, int n_out, int32_t dt, int rank, int gap, int consts) {
    snprintf(last_case, 256, "%s%s%s opset %d: %d inputs (%s, rank %d, slot %d omitted, %s), %d outputs",
             op->domain, *op->domain ? "." : "", op->name, opset, n_in, wm_dtype_name(dt), rank, gap,
             consts ? "constants" : "run-time", n_out);
    ut_model u;
    ut_begin(&u, opset);
    if (*op->domain) ut_opset(u.m, op->domain, 1);
    static const char *const names[] = {"a", "b", "c", "d", "e", "f", "g", "h"};
    const char *in[8];
    int64_t dims[4] = {2, 1, 2, 2};
    uint8_t data[64] = {0};
    data[0] = 1;
    wm_tensor feed[8];
    int nf = 0;
    for (int i = 0; i < n_in; i++) {
        in[i] = i == gap ? "" : names[i];
        if (i == gap) continue;
        if (consts) ut_const(&u, names[i], dt, dims, rank, data);
        else {
            ut_input(&u, names[i], dt, rank);
            feed[nf++] = ut_tensor(dt, dims, rank, data);
        }
    }
    static const char *const outs[] = {"y0", "y1", "y2"};
    wm_error e = {0};
    u.node = wm_graph_add_node(u.g, op->name, *op->domain ? op->domain : NULL, "n", in, (size_t)n_in, outs,
                               (size_t)n_out, &e);
    assert_non_null(u.node);
    for (int i = 0; i < n_out; i++) assert_int_equal(wm_graph_add_output(u.g, outs[i], WM_DT_FLOAT, NULL, 0, &e), WM_OK);
    if (ut_session(&u, 1, &e) == WM_OK) {
        wm_tensor res[3];
        size_t no = wm_session_n_outputs(u.s);
        if (wm_session_run(u.s, feed, (size_t)nf, res, no, &e) != WM_OK) assert_true(e.msg[0] != 0);
    } else
        assert_true(e.msg[0] != 0);
    ut_free(&u);
}

static void op_cases(const wm_op *op) {
    const int opsets[] = {op->since, 21};
    for (size_t o = 0; o < sizeof opsets / sizeof opsets[0]; o++) {
        int v = opsets[o];
        if (o && (v <= op->since || (op->until && v > op->until) || *op->domain)) continue;
        for (int n_in = 0; n_in <= 4; n_in++) {
            one_case(op, v, n_in, 1, WM_DT_FLOAT, 2, -1, 1);
            one_case(op, v, n_in, 3, WM_DT_FLOAT, 2, -1, 1);
            one_case(op, v, n_in, 1, WM_DT_INT64, 2, -1, 1);
            one_case(op, v, n_in, 1, WM_DT_FLOAT, 4, -1, 0);
            for (int gap = 0; gap < n_in; gap++) one_case(op, v, n_in, 1, WM_DT_FLOAT, 2, gap, 1);
        }
    }
}

static void test_every_op(void **state) {
    (void)state;
    last_case = mmap(NULL, 256, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0);
    assert_true(last_case != MAP_FAILED);
    int failures = 0;
    for (size_t i = 0; wm_op_at(i); i++) {
        const wm_op *op = wm_op_at(i);
        last_case[0] = 0;
        fflush(NULL);
        pid_t pid = fork();
        assert_true(pid >= 0);
        if (pid == 0) {
            op_cases(op);
            _exit(0);
        }
        int status = 0;
        waitpid(pid, &status, 0);
        if (!WIFEXITED(status) || WEXITSTATUS(status)) {
            fprintf(stderr, "FAILED %s (%s %d)\n", last_case, WIFSIGNALED(status) ? "signal" : "exit",
                    WIFSIGNALED(status) ? WTERMSIG(status) : WEXITSTATUS(status));
            failures++;
        }
    }
    munmap(last_case, 256);
    assert_int_equal(failures, 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_every_op),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
