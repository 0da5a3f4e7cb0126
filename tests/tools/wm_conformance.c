/*
 * wm_conformance - runs ONNX backend node-test cases in the engine.
 *
 *   wm_conformance [-v] [--tolerances FILE] [--prefix P] [--only NAME] DIR...
 * Each DIR holds case folders (model.onnx + test_data_set_N/input_K.pb,
 * output_K.pb). Every case is loaded, run on each data set and its outputs
 * compared with rtol = atol = 1e-5 (NaN equals NaN), or with the per-case
 * tolerance of the tolerances file ("case_prefix rtol atol # reason").
 * Prints one line per case ("pass|fail|unsupported P/NAME: reason") and
 * ends with "conformance: N passed, M failed, K unsupported".
 * Exit 0 when it ran (the verdict is judged by scripts/conformance.sh).
 */
#include <dirent.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/arena.h"
#include "core/file.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_proto.h"
#include "onnx/pb.h"
#include "winml/runtime.h"

typedef struct tol {
    char prefix[128];
    double rtol, atol;
} tol;

static tol *tols;
static size_t n_tols;

static void load_tolerances(const char *path) {
    FILE *f = fopen(path, "r");
    if (!f) {
        fprintf(stderr, "wm_conformance: cannot open %s\n", path);
        exit(2);
    }
    char line[512];
    while (fgets(line, sizeof line, f)) {
        char *h = strchr(line, '#');
        if (h) *h = 0;
        tol t;
        if (sscanf(line, "%127s %lf %lf", t.prefix, &t.rtol, &t.atol) == 3) {
            tols = realloc(tols, (n_tols + 1) * sizeof *tols);
            tols[n_tols++] = t;
        }
    }
    fclose(f);
}

static void tolerance_of(const char *name, double *rtol, double *atol) {
    *rtol = *atol = 1e-5;
    size_t best = 0;
    for (size_t i = 0; i < n_tols; i++) {
        size_t k = strlen(tols[i].prefix);
        if (k > best && !strncmp(name, tols[i].prefix, k)) {
            best = k;
            *rtol = tols[i].rtol;
            *atol = tols[i].atol;
        }
    }
}

/* Decodes a TensorProto file into t (data owned by the arena). */
static int read_pb(const char *path, wm_arena *a, wm_tensor *t, char *why, size_t nwhy) {
    wm_map m = {0};
    wm_error err = {0};
    if (wm_map_file(path, 0, &m, &err)) {
        snprintf(why, nwhy, "%s", err.msg);
        return -1;
    }
    wm_onnx_tensor *pt = NULL;
    int rc = -1;
    if (wm_pb_decode(a, &wm_onnx_tensor_desc, m.data, m.size, (void **)&pt, &err)) {
        snprintf(why, nwhy, "%s: %s", path, err.msg);
        goto done;
    }
    size_t es = wm_dtype_bits(pt->data_type) / 8;
    if (!es || pt->n_dims > WM_MAX_RANK || pt->data_type == WM_DT_STRING) {
        snprintf(why, nwhy, "test data of type %s", wm_dtype_name(pt->data_type));
        rc = -2;
        goto done;
    }
    uint64_t numel = 1;
    t->dtype = pt->data_type;
    t->rank = (int32_t)pt->n_dims;
    for (size_t i = 0; i < pt->n_dims; i++) t->dims[i] = pt->dims[i], numel *= (uint64_t)pt->dims[i];
    uint8_t *d = wm_arena_alloc(a, numel * es + 8);
    wm_bytes b = wm_onnx_tensor_bytes(pt);
    if (b.p && b.n == numel * es) memcpy(d, b.p, b.n);
    else if (pt->n_int32_data == numel)
        for (uint64_t i = 0; i < numel; i++) {
            if (es == 1) d[i] = (uint8_t)pt->int32_data[i];
            else if (es == 2) ((uint16_t *)d)[i] = (uint16_t)pt->int32_data[i];
            else ((int32_t *)d)[i] = pt->int32_data[i];
        }
    else if (pt->n_uint64_data == numel && es == 4)
        for (uint64_t i = 0; i < numel; i++) ((uint32_t *)d)[i] = (uint32_t)pt->uint64_data[i];
    else if (numel) {
        snprintf(why, nwhy, "%s: data does not match shape", path);
        goto done;
    }
    t->data = d;
    rc = 0;
done:
    wm_unmap(&m);
    return rc;
}

static double get(const wm_tensor *t, uint64_t i) {
    const void *d = t->data;
    switch (t->dtype) {
    case WM_DT_FLOAT: return ((const float *)d)[i];
    case WM_DT_DOUBLE: return ((const double *)d)[i];
    case WM_DT_FLOAT16: {
        uint16_t h = ((const uint16_t *)d)[i];
        uint32_t s = (uint32_t)(h & 0x8000) << 16, e = (h >> 10) & 0x1f, mnt = h & 0x3ff;
        double v = e == 0 ? ldexp(mnt, -24) : e == 31 ? (mnt ? NAN : INFINITY) : ldexp(mnt | 0x400, (int)e - 25);
        return s ? -v : v;
    }
    case WM_DT_BFLOAT16: {
        union { uint32_t u; float f; } v = {.u = (uint32_t)((const uint16_t *)d)[i] << 16};
        return v.f;
    }
    case WM_DT_INT8: return ((const int8_t *)d)[i];
    case WM_DT_UINT8: case WM_DT_BOOL: return ((const uint8_t *)d)[i];
    case WM_DT_INT16: return ((const int16_t *)d)[i];
    case WM_DT_UINT16: return ((const uint16_t *)d)[i];
    case WM_DT_INT32: return ((const int32_t *)d)[i];
    case WM_DT_UINT32: return ((const uint32_t *)d)[i];
    case WM_DT_INT64: return (double)((const int64_t *)d)[i];
    case WM_DT_UINT64: return (double)((const uint64_t *)d)[i];
    default: return NAN;
    }
}

static int compare(const char *name, int k, const wm_tensor *got, const wm_tensor *want, char *why, size_t nwhy) {
    if (got->dtype != want->dtype) {
        snprintf(why, nwhy, "output %d: type %s, expected %s", k, wm_dtype_name(got->dtype), wm_dtype_name(want->dtype));
        return -1;
    }
    if (got->rank != want->rank) {
        snprintf(why, nwhy, "output %d: rank %d, expected %d", k, got->rank, want->rank);
        return -1;
    }
    for (int d = 0; d < got->rank; d++)
        if (got->dims[d] != want->dims[d]) {
            snprintf(why, nwhy, "output %d: dim %d is %lld, expected %lld", k, d, (long long)got->dims[d],
                     (long long)want->dims[d]);
            return -1;
        }
    double rtol, atol;
    tolerance_of(name, &rtol, &atol);
    /* half types keep 11 (float16) or 8 (bfloat16) significant bits: one unit of the last place */
    if (got->dtype == WM_DT_FLOAT16 && rtol < 1e-3) rtol = 1e-3, atol = atol < 1e-3 ? 1e-3 : atol;
    if (got->dtype == WM_DT_BFLOAT16 && rtol < 8e-3) rtol = 8e-3, atol = atol < 8e-3 ? 8e-3 : atol;
    uint64_t n = wm_tensor_numel(got);
    int exact = !(got->dtype == WM_DT_FLOAT || got->dtype == WM_DT_DOUBLE || got->dtype == WM_DT_FLOAT16 ||
                  got->dtype == WM_DT_BFLOAT16);
    if (exact && (got->dtype == WM_DT_INT64 || got->dtype == WM_DT_UINT64)) {
        if (memcmp(got->data, want->data, n * 8)) {
            for (uint64_t i = 0; i < n; i++)
                if (((const int64_t *)got->data)[i] != ((const int64_t *)want->data)[i]) {
                    snprintf(why, nwhy, "output %d: element %llu is %lld, expected %lld", k, (unsigned long long)i,
                             (long long)((const int64_t *)got->data)[i], (long long)((const int64_t *)want->data)[i]);
                    return -1;
                }
        }
        return 0;
    }
    for (uint64_t i = 0; i < n; i++) {
        double g = get(got, i), w = get(want, i);
        if (isnan(w) && isnan(g)) continue;
        if (isinf(w) && g == w) continue;
        if (exact ? g != w : !(fabs(g - w) <= atol + rtol * fabs(w))) {
            snprintf(why, nwhy, "output %d: element %llu is %.9g, expected %.9g", k, (unsigned long long)i, g, w);
            return -1;
        }
    }
    return 0;
}

static int has_file(const char *p) {
    struct stat st;
    return stat(p, &st) == 0;
}

/* 0 pass, 1 fail, 2 unsupported */
static int run_case(const char *dir, const char *name, char *why, size_t nwhy) {
    char path[4096];
    snprintf(path, sizeof path, "%s/model.onnx", dir);
    wm_error err = {0};
    wm_session *s = NULL;
    wm_session_opts o = {.threads = 1};
    if (wm_session_new(path, &o, &s, &err)) {
        snprintf(why, nwhy, "%s", err.msg);
        return err.status == WM_ERR_UNSUPPORTED ? 2 : 1;
    }
    int rc = 0;
    for (int ds = 0; rc == 0; ds++) {
        snprintf(path, sizeof path, "%s/test_data_set_%d", dir, ds);
        if (!has_file(path)) break;
        wm_arena a;
        wm_arena_init(&a);
        size_t ni = wm_session_n_inputs(s), no = wm_session_n_outputs(s);
        wm_tensor in[WM_MAX_RANK * 8] = {{0}}, want[64] = {{0}}, got[64];
        size_t nin = 0, nout = 0;
        for (;; nin++) {
            snprintf(path, sizeof path, "%s/test_data_set_%d/input_%zu.pb", dir, ds, nin);
            if (!has_file(path) || nin >= 64) break;
            int r = read_pb(path, &a, &in[nin], why, nwhy);
            if (r) {
                rc = r == -2 ? 2 : 1;
                break;
            }
        }
        for (; rc == 0; nout++) {
            snprintf(path, sizeof path, "%s/test_data_set_%d/output_%zu.pb", dir, ds, nout);
            if (!has_file(path) || nout >= 64) break;
            int r = read_pb(path, &a, &want[nout], why, nwhy);
            if (r) rc = r == -2 ? 2 : 1;
        }
        for (size_t k = 0; k < nin && k < ni; k++) /* old suites store bfloat16 data as uint16 */
            if (in[k].dtype == WM_DT_UINT16 && wm_session_input(s, k)->dtype == WM_DT_BFLOAT16) in[k].dtype = WM_DT_BFLOAT16;
        for (size_t k = 0; k < nout && k < no; k++)
            if (want[k].dtype == WM_DT_UINT16 && wm_session_output(s, k)->dtype == WM_DT_BFLOAT16) want[k].dtype = WM_DT_BFLOAT16;
        if (rc == 0 && (nin != ni || nout != no)) {
            snprintf(why, nwhy, "data set has %zu inputs / %zu outputs, the model %zu / %zu", nin, nout, ni, no);
            rc = 1;
        }
        if (rc == 0 && wm_session_run(s, in, ni, got, no, &err)) {
            snprintf(why, nwhy, "run: %s", err.msg);
            rc = err.status == WM_ERR_UNSUPPORTED ? 2 : 1;
        }
        for (size_t k = 0; rc == 0 && k < no; k++)
            if (compare(name, (int)k, &got[k], &want[k], why, nwhy)) rc = 1;
        wm_arena_free(&a);
        (void)name;
    }
    wm_session_free(s);
    return rc;
}

static int cmpstr(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

int main(int argc, char **argv) {
    int verbose = 0, npass = 0, nfail = 0, nunsup = 0;
    const char *prefix = NULL, *only = NULL;
    for (int i = 1; i < argc; i++) {
        if (!strcmp(argv[i], "-v")) verbose = 1;
        else if (!strcmp(argv[i], "--tolerances") && i + 1 < argc) load_tolerances(argv[++i]);
        else if (!strcmp(argv[i], "--prefix") && i + 1 < argc) prefix = argv[++i];
        else if (!strcmp(argv[i], "--only") && i + 1 < argc) only = argv[++i];
        else {
            DIR *d = opendir(argv[i]);
            if (!d) {
                fprintf(stderr, "wm_conformance: cannot open %s\n", argv[i]);
                return 2;
            }
            char **names = NULL;
            size_t n = 0;
            struct dirent *e;
            while ((e = readdir(d)))
                if (!strncmp(e->d_name, "test_", 5)) {
                    names = realloc(names, (n + 1) * sizeof *names);
                    names[n++] = strdup(e->d_name);
                }
            closedir(d);
            qsort(names, n, sizeof *names, cmpstr);
            const char *p = prefix ? prefix : argv[i];
            for (size_t k = 0; k < n; k++) {
                if (only && strcmp(names[k], only)) continue;
                char dir[4096], why[1200] = "";
                snprintf(dir, sizeof dir, "%s/%s", argv[i], names[k]);
                int r = run_case(dir, names[k], why, sizeof why);
                const char *verdict = r == 0 ? "pass" : r == 1 ? "fail" : "unsupported";
                if (r == 0) npass++;
                else if (r == 1) nfail++;
                else nunsup++;
                if (verbose || r == 1) printf("%s %s/%s%s%s\n", verdict, p, names[k], r ? ": " : "", r ? why : "");
                else printf("%s %s/%s\n", verdict, p, names[k]);
                fflush(stdout);
                free(names[k]);
            }
            free(names);
        }
    }
    printf("conformance: %d passed, %d failed, %d unsupported\n", npass, nfail, nunsup);
    return 0;
}
