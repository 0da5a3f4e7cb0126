/*
 * wm_opttool - drives the calibrators for the oracle tests.
 *
 *   wm_opttool calib minmax|percentile|entropy [--bins N] [--qbins N] [--percentile P] [--symmetric 0|1]
 *                    NAME FILE.f32 [NAME FILE.f32 ...]
 *       feeds each raw float32 file as one batch of value NAME (in order) and prints
 *       {"NAME": [min, max], ...} with the calibrated ranges.
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
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

int main(int argc, char **argv) {
    if (argc >= 3 && !strcmp(argv[1], "calib")) return calib(argc, argv);
    fprintf(stderr, "usage: wm_opttool calib METHOD [options] NAME FILE.f32 ...\n");
    return 2;
}
