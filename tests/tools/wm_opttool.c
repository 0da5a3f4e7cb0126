/*
 * wm_opttool - drives the calibrators for the oracle tests.
 *
 *   wm_opttool calib minmax|percentile|entropy [--bins N] [--qbins N] [--percentile P] [--symmetric 0|1]
 *                    NAME FILE.f32 [NAME FILE.f32 ...]
 *       feeds each raw float32 file as one batch of value NAME (in order) and prints
 *       {"NAME": [min, max], ...} with the calibrated ranges.
 *   wm_opttool gptq K N BS BITS SYM DAMP W.f32 H.f64 OUT
 *       GPTQ (wm_quant_gptq) of the raw float32 W [K, N] with the raw float64 H [K, K]; writes OUT.q (codes,
 *       MatMulNBits layout), OUT.scales (float32 [N, nblk]) and, asymmetric, OUT.zp.
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "onnx/dtype.h"
#include "opt/quant.h"
#include "opt/quant_calib.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_opttool: error: %s\n", e->msg);
    return 2;
}

static int calib(int argc, char **argv) {
    wm_error e = {0};
    int m = wm_calib_method_parse(argv[2]);
    if (m < 0) {
        fprintf(stderr, "wm_opttool: error: unknown method '%s'\n", argv[2]);
        return 2;
    }
    wm_calib_opts o;
    wm_calib_opts_default(&o, (wm_calib_method)m);
    int i = 3;
    for (; i + 1 < argc && !strncmp(argv[i], "--", 2); i += 2) {
        if (!strcmp(argv[i], "--bins")) o.num_bins = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--qbins")) o.num_quantized_bins = atoi(argv[i + 1]);
        else if (!strcmp(argv[i], "--percentile")) o.percentile = atof(argv[i + 1]);
        else if (!strcmp(argv[i], "--symmetric")) o.symmetric = atoi(argv[i + 1]);
        else {
            fprintf(stderr, "wm_opttool: error: unknown option '%s'\n", argv[i]);
            return 2;
        }
    }
    wm_calib *c = NULL;
    if (wm_calib_new(&o, &c, &e)) return fail(&e);
    int rc = 0;
    for (; i + 1 < argc && !rc; i += 2) {
        wm_map map;
        if (wm_map_file(argv[i + 1], 0, &map, &e)) {
            rc = fail(&e);
            break;
        }
        size_t n = map.size / 4;
        float *buf = malloc((n ? n : 1) * sizeof *buf);
        if (buf && n) memcpy(buf, map.data, n * 4);
        if (!buf || wm_calib_observe(c, argv[i], buf, n, &e)) rc = buf ? fail(&e) : 2;
        free(buf);
        wm_unmap(&map);
    }
    wm_calib_ranges r = {0};
    if (!rc && wm_calib_result(c, &r, &e)) rc = fail(&e);
    if (!rc) {
        printf("{");
        for (size_t k = 0; k < r.n; k++)
            printf("%s\"%s\": [%.17g, %.17g]", k ? ", " : "", r.v[k].name, (double)r.v[k].lo, (double)r.v[k].hi);
        printf("}\n");
    }
    wm_calib_ranges_free(&r);
    wm_calib_free(c);
    return rc;
}

static int put(const char *base, const char *ext, const void *p, size_t n) {
    char path[4096];
    snprintf(path, sizeof path, "%s%s", base, ext);
    FILE *f = fopen(path, "wb");
    int ok = f && fwrite(p, 1, n, f) == n;
    if (f && fclose(f)) ok = 0;
    if (!ok) fprintf(stderr, "wm_opttool: error: cannot write %s\n", path);
    return ok ? 0 : 2;
}

static int gptq(char **argv) {
    wm_error e = {0};
    int64_t K = atoll(argv[2]), N = atoll(argv[3]), bs = atoll(argv[4]);
    int bits = atoi(argv[5]), sym = atoi(argv[6]);
    double damp = atof(argv[7]);
    wm_map mw, mh;
    if (wm_map_file(argv[8], 0, &mw, &e)) return fail(&e);
    if (wm_map_file(argv[9], 0, &mh, &e)) {
        wm_unmap(&mw);
        return fail(&e);
    }
    int rc = 0;
    if (K <= 0 || N <= 0 || bs <= 0 || mw.size != (size_t)(K * N) * 4 || mh.size != (size_t)(K * K) * 8) {
        fprintf(stderr, "wm_opttool: error: W or H is not the size K and N say\n");
        rc = 2;
    }
    int64_t nblk = rc ? 0 : (K + bs - 1) / bs;
    size_t nq = (size_t)(N * nblk * bs * bits / 8), ns = (size_t)(N * nblk), nz = (size_t)(N * ((nblk * bits + 7) / 8));
    float *w = rc ? NULL : malloc((size_t)(K * N) * 4), *sc = malloc(ns ? ns * 4 : 1);
    double *h = rc ? NULL : malloc((size_t)(K * K) * 8);
    uint8_t *q = malloc(nq ? nq : 1), *zp = malloc(nz ? nz : 1);
    if (!rc && (!w || !h || !sc || !q || !zp)) rc = 2;
    if (!rc) {
        memcpy(w, mw.data, (size_t)(K * N) * 4);
        memcpy(h, mh.data, (size_t)(K * K) * 8);
        if (wm_quant_gptq(w, K, N, h, damp, 0, bs, bits, sym, WM_DT_FLOAT, q, sc, sym ? NULL : zp, &e)) rc = fail(&e);
    }
    if (!rc) rc = put(argv[10], ".q", q, nq) || put(argv[10], ".scales", sc, ns * 4) || (!sym && put(argv[10], ".zp", zp, nz));
    free(w), free(h), free(sc), free(q), free(zp);
    wm_unmap(&mw), wm_unmap(&mh);
    return rc;
}

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "calib")) return calib(argc, argv);
    if (argc == 11 && !strcmp(argv[1], "gptq")) return gptq(argv);
    fprintf(stderr, "usage: wm_opttool calib METHOD [options] NAME FILE.f32 ...\n"
                    "       wm_opttool gptq K N BS BITS SYM DAMP W.f32 H.f64 OUT\n");
    return 2;
}
