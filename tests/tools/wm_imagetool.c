/*
 * wm_imagetool - drives libwinml's image decoding, resampling and preprocessing for the oracle tests.
 *
 *   wm_imagetool decode FILE OUT [MAX_PIXELS]     decoded RGB8 (EXIF orientation applied)
 *   wm_imagetool resize IN W H FILTER OUT         IN: a FILE to decode or a .raw written by this tool
 *   wm_imagetool geometry CONFIG FILE OUT         resize + centre crop of a preprocessor_config.json (uint8)
 *   wm_imagetool prep CONFIG FILE OUT             pixel_values: int32 h, int32 w, then 3*h*w float32 (C, H, W)
 * .raw: int32 width, int32 height (little-endian), then width*height*3 bytes R, G, B.
 * Exit codes: 0 ok, 2 error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "image/image.h"
#include "image/preprocess.h"

static int fail(const wm_error *e) {
    fprintf(stderr, "wm_imagetool: error: %s\n", e->msg);
    return 2;
}

static int put(const char *path, const void *hdr, size_t hn, const void *p, size_t n) {
    FILE *f = fopen(path, "wb");
    if (!f || fwrite(hdr, 1, hn, f) != hn || fwrite(p, 1, n, f) != n) {
        fprintf(stderr, "wm_imagetool: error: cannot write %s\n", path);
        if (f) fclose(f);
        return 2;
    }
    return fclose(f) ? 2 : 0;
}

static int put_image(const char *path, const wm_image *im) {
    int32_t hdr[2] = {im->w, im->h};
    return put(path, hdr, sizeof hdr, im->rgb, (size_t)im->w * im->h * 3);
}

static wm_status get_image(const char *path, uint64_t max_pixels, wm_image *im, wm_error *e) {
    size_t l = strlen(path);
    if (l < 4 || strcmp(path + l - 4, ".raw")) return wm_image_load(path, max_pixels, im, e);
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, e);
    if (st) return st;
    int32_t hdr[2] = {0, 0};
    if (m.size >= 8) memcpy(hdr, m.data, 8);
    if (m.size < 8 || hdr[0] < 1 || hdr[1] < 1 || (m.size - 8) / 3 / (size_t)hdr[0] != (size_t)hdr[1]) {
        wm_unmap(&m);
        return wm_err(e, WM_ERR_INPUT, "%s: not a .raw image", path);
    }
    im->w = hdr[0], im->h = hdr[1], im->rgb = malloc(m.size - 8);
    if (im->rgb) memcpy(im->rgb, m.data + 8, m.size - 8);
    wm_unmap(&m);
    return im->rgb ? WM_OK : wm_err(e, WM_ERR_NOMEM, "out of memory");
}

int main(int argc, char **argv) {
    wm_error e = {0};
    wm_image im = {0}, out = {0};
    int rc = 0;
    if (argc >= 4 && !strcmp(argv[1], "decode")) {
        if (get_image(argv[2], argc > 4 ? strtoull(argv[4], NULL, 10) : 0, &im, &e)) return fail(&e);
        rc = put_image(argv[3], &im);
    } else if (argc == 7 && !strcmp(argv[1], "resize")) {
        if (get_image(argv[2], 0, &im, &e) || wm_image_resize(&im, atoi(argv[3]), atoi(argv[4]), atoi(argv[5]), &out, &e))
            rc = fail(&e);
        else rc = put_image(argv[6], &out);
    } else if (argc == 5 && (!strcmp(argv[1], "geometry") || !strcmp(argv[1], "prep"))) {
        wm_img_prep p;
        if (wm_img_prep_load(argv[2], &p, &e) || get_image(argv[3], 0, &im, &e)) rc = fail(&e);
        else if (!strcmp(argv[1], "geometry")) {
            if (wm_img_prep_geometry(&p, &im, argv[3], &out, &e)) rc = fail(&e);
            else rc = put_image(argv[4], &out);
        } else {
            float *x;
            int32_t hw[2];
            if (wm_img_prep_run(&p, &im, argv[3], &x, &hw[0], &hw[1], &e)) rc = fail(&e);
            else {
                rc = put(argv[4], hw, sizeof hw, x, sizeof *x * 3 * (size_t)hw[0] * hw[1]);
                free(x);
            }
        }
    } else {
        fprintf(stderr, "usage: wm_imagetool decode FILE OUT [MAX_PIXELS] | resize IN W H FILTER OUT | "
                        "geometry CONFIG FILE OUT | prep CONFIG FILE OUT\n");
        rc = 2;
    }
    wm_image_free(&im);
    wm_image_free(&out);
    return rc;
}
