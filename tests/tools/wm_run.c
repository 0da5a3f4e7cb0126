/*
 * wm_run - runs an ONNX model in the engine on inputs from a safetensors
 * file (tensors named as the graph inputs) and writes the outputs to a
 * safetensors file. Used by the oracle tests to compare with onnxruntime.
 *
 *   wm_run MODEL.onnx IN.safetensors OUT.safetensors [--threads N]
 *          [--repeat N] [--no-fold] [--no-optimize] [--stats]
 * --repeat runs N times and fails (exit 1) unless every run's outputs are
 * bit-identical to the first; --no-optimize runs the graph as written (no
 * session-time fusions); --stats prints session statistics as JSON on stdout.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "hf/safetensors.h"
#include "winml/runtime.h"

static wm_st_dtype st_of(int32_t dt) {
    for (int d = 1; d < WM_ST_DTYPE_COUNT; d++)
        if (wm_st_dtype_onnx((wm_st_dtype)d) == dt) return (wm_st_dtype)d;
    return WM_ST_INVALID;
}

int main(int argc, char **argv) {
    if (argc < 4) {
        fprintf(stderr, "usage: wm_run MODEL IN.safetensors OUT.safetensors [--threads N] [--repeat N] [--no-fold] [--no-optimize] [--stats]\n");
        return 2;
    }
    wm_session_opts o = {0};
    int repeat = 1, stats = 0;
    for (int i = 4; i < argc; i++) {
        if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--repeat") && i + 1 < argc) repeat = atoi(argv[++i]);
        else if (!strcmp(argv[i], "--no-fold")) o.no_fold = 1;
        else if (!strcmp(argv[i], "--no-optimize")) o.no_optimize = 1;
        else if (!strcmp(argv[i], "--stats")) stats = 1;
        else {
            fprintf(stderr, "wm_run: unknown option %s\n", argv[i]);
            return 2;
        }
    }
    wm_error err = {0};
    wm_session *s = NULL;
    wm_st_file *f = NULL;
    int rc = 2;
    size_t ni = 0, no = 0;
    wm_tensor *in = NULL, *out = NULL, *first = NULL;
    void **bufs = NULL;
    wm_st_tensor *st = NULL;
    if (wm_session_new(argv[1], &o, &s, &err)) goto fail;
    if (wm_st_open(argv[2], NULL, &f, &err)) goto fail;
    ni = wm_session_n_inputs(s), no = wm_session_n_outputs(s);
    in = calloc(ni + 1, sizeof *in), out = calloc(no + 1, sizeof *out), first = calloc(no + 1, sizeof *first);
    bufs = calloc(ni + no + 1, sizeof *bufs);
    if (!in || !out || !first || !bufs) {
        fprintf(stderr, "wm_run: out of memory\n");
        goto fail_quiet;
    }
    for (size_t i = 0; i < ni; i++) {
        const wm_io_info *io = wm_session_input(s, i);
        const wm_st_tensor *t = wm_st_find(f, io->name);
        if (!t) {
            fprintf(stderr, "wm_run: %s has no tensor '%s'\n", argv[2], io->name);
            goto fail_quiet;
        }
        in[i].dtype = wm_st_dtype_onnx(t->dtype);
        in[i].rank = (int32_t)t->rank;
        for (size_t d = 0; d < t->rank && d < WM_MAX_RANK; d++) in[i].dims[d] = t->shape[d];
        bufs[i] = aligned_alloc(64, (t->nbytes + 64) & ~(uint64_t)63);
        if (t->nbytes) memcpy(bufs[i], t->data, t->nbytes);
        in[i].data = bufs[i];
    }
    for (int r = 0; r < repeat; r++) {
        if (wm_session_run(s, in, ni, out, no, &err)) goto fail;
        for (size_t k = 0; k < no; k++) {
            uint64_t nb = wm_tensor_nbytes(&out[k]);
            if (r == 0) {
                first[k] = out[k];
                bufs[ni + k] = malloc(nb + 1);
                memcpy(bufs[ni + k], out[k].data, nb);
                first[k].data = bufs[ni + k];
            } else if (nb != wm_tensor_nbytes(&first[k]) || memcmp(first[k].data, out[k].data, nb)) {
                fprintf(stderr, "wm_run: run %d: output '%s' differs from run 0\n", r, wm_session_output(s, k)->name);
                rc = 1;
                goto fail_quiet;
            }
        }
    }
    st = calloc(no + 1, sizeof *st);
    for (size_t k = 0; k < no && st; k++) {
        st[k].name = wm_session_output(s, k)->name;
        st[k].dtype = st_of(first[k].dtype);
        st[k].rank = (size_t)first[k].rank;
        st[k].shape = first[k].dims;
        st[k].data = first[k].data;
        st[k].nbytes = wm_tensor_nbytes(&first[k]);
        st[k].numel = wm_tensor_numel(&first[k]);
    }
    if (!st || wm_st_write(argv[3], st, no, NULL, 0, &err)) goto fail;
    if (stats) {
        wm_session_stats ss;
        wm_session_get_stats(s, &ss);
        printf("{\"nodes\": %zu, \"folded\": %zu, \"run_nodes\": %zu, \"plans\": %zu, \"arena_bytes\": %llu, "
               "\"naive_bytes\": %llu, \"run_allocs\": %llu, \"eager\": %d, \"threads\": %d, \"packed_bytes\": %llu}\n",
               ss.n_nodes, ss.n_folded, ss.n_run_nodes, ss.n_plans, (unsigned long long)ss.arena_bytes,
               (unsigned long long)ss.naive_bytes, (unsigned long long)ss.run_allocs, ss.eager, wm_session_threads(s),
               (unsigned long long)ss.packed_bytes);
    }
    rc = 0;
    goto done;
fail:
    fprintf(stderr, "wm_run: %s\n", err.msg[0] ? err.msg : "out of memory");
fail_quiet:
done:
    for (size_t i = 0; bufs && i < ni + no; i++) free(bufs[i]);
    free(bufs);
    free(in);
    free(out);
    free(first);
    free(st);
    wm_st_close(f);
    wm_session_free(s);
    return rc;
}
