/*
 * wm_cputime - CPU time of one forward pass in the engine, for benchmarks on
 * a shared machine (bench/bench_vision.py --cpu-time): wall time there
 * measures the neighbours as much as the engine; the process CPU time of a
 * single-threaded run does not.
 *
 *   wm_cputime MODEL.onnx IN.safetensors [--iterations N] [--threads T]
 * Inputs are the safetensors tensors named as the graph inputs (as wm_run).
 * Runs once to plan and warm up, then N times (default 20); prints one JSON
 * line {"min_ms", "median_ms", "iterations", "threads"} of process CPU time
 * per run (with T > 1 that sums the threads, spinning included).
 * Exit 0 ok, 2 usage or input error.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "hf/safetensors.h"
#include "winml/runtime.h"

static double cpu_ms(void) {
    struct timespec t;
    clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

static int cmp_d(const void *a, const void *b) {
    double x = *(const double *)a, y = *(const double *)b;
    return x < y ? -1 : x > y;
}

int main(int argc, char **argv) {
    if (argc < 3) {
        fprintf(stderr, "usage: wm_cputime MODEL IN.safetensors [--iterations N] [--threads T]\n");
        return 2;
    }
    wm_session_opts o = {.threads = 1};
    int iters = 20;
    for (int i = 3; i < argc; i++) {
        if (!strcmp(argv[i], "--iterations") && i + 1 < argc) iters = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else {
            fprintf(stderr, "wm_cputime: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    if (iters < 1 || iters > 100000) {
        fprintf(stderr, "wm_cputime: --iterations must be 1..100000\n");
        return 2;
    }
    wm_error err = {0};
    wm_session *s = NULL;
    wm_st_file *f = NULL;
    wm_tensor *in = NULL, *out = NULL;
    double *t = NULL;
    void **bufs = NULL;
    int rc = 2;
    if (wm_session_new(argv[1], &o, &s, &err) || wm_st_open(argv[2], NULL, &f, &err)) goto fail;
    size_t ni = wm_session_n_inputs(s), no = wm_session_n_outputs(s);
    in = calloc(ni + 1, sizeof *in);
    out = calloc(no + 1, sizeof *out);
    t = calloc((size_t)iters, sizeof *t);
    bufs = calloc(ni + 1, sizeof *bufs);
    if (!in || !out || !t || !bufs) {
        fprintf(stderr, "wm_cputime: out of memory\n");
        goto done;
    }
    for (size_t i = 0; i < ni; i++) {
        const wm_io_info *io = wm_session_input(s, i);
        const wm_st_tensor *st = wm_st_find(f, io->name);
        if (!st) {
            fprintf(stderr, "wm_cputime: %s has no tensor '%s'\n", argv[2], io->name);
            goto done;
        }
        in[i].dtype = wm_st_dtype_onnx(st->dtype);
        in[i].rank = (int32_t)st->rank;
        for (size_t d = 0; d < st->rank && d < WM_MAX_RANK; d++) in[i].dims[d] = st->shape[d];
        bufs[i] = aligned_alloc(64, (st->nbytes + 64) & ~(uint64_t)63); /* the engine's inputs, 64-byte aligned like wm_run's */
        if (!bufs[i]) {
            fprintf(stderr, "wm_cputime: out of memory\n");
            goto done;
        }
        if (st->nbytes) memcpy(bufs[i], st->data, st->nbytes);
        in[i].data = bufs[i];
    }
    if (wm_session_run(s, in, ni, out, no, &err)) goto fail;
    for (int r = 0; r < iters; r++) {
        double a = cpu_ms();
        if (wm_session_run(s, in, ni, out, no, &err)) goto fail;
        t[r] = cpu_ms() - a;
    }
    qsort(t, (size_t)iters, sizeof *t, cmp_d);
    printf("{\"min_ms\": %.4f, \"median_ms\": %.4f, \"iterations\": %d, \"threads\": %d}\n", t[0], t[iters / 2], iters,
           wm_session_threads(s));
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "wm_cputime: %s\n", err.msg);
done:
    for (size_t i = 0; bufs && in && i < wm_session_n_inputs(s); i++) free(bufs[i]);
    free(bufs);
    free(in);
    free(out);
    free(t);
    wm_st_close(f);
    wm_session_free(s);
    return rc;
}
