/* image.c - format dispatch, the pixel budget, EXIF orientation (see image.h). */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "image/image_impl.h"

wm_status wm_image_budget(uint64_t flag, uint64_t *out, wm_error *err) {
    const char *v = getenv("WM_MAX_IMAGE_PIXELS");
    *out = WM_IMAGE_MAX_PIXELS_DEFAULT;
    if (flag) *out = flag;
    else if (v && *v) {
        char *end;
        errno = 0;
        unsigned long long x = strtoull(v, &end, 10);
        if (*end || errno || x < 1 || *v == '-')
            return wm_err(err, WM_ERR_USAGE, "WM_MAX_IMAGE_PIXELS: '%s' is not a count >= 1", v);
        *out = x;
    }
    return WM_OK;
}

wm_status wm_image_check_size(const char *name, uint64_t w, uint64_t h, uint64_t max_pixels, wm_error *err) {
    uint64_t budget = max_pixels ? max_pixels : WM_IMAGE_MAX_PIXELS_DEFAULT;
    if (!w || !h) return wm_err(err, WM_ERR_INPUT, "%s: the image is empty (%llux%llu)", name,
                                (unsigned long long)w, (unsigned long long)h);
    if (w > budget || h > budget || w * h > budget)
        return wm_err(err, WM_ERR_INPUT, "%s: the image is %llux%llu = %llu pixels, over the budget of %llu "
                      "(--max-image-pixels, WM_MAX_IMAGE_PIXELS)", name, (unsigned long long)w, (unsigned long long)h,
                      (unsigned long long)(w * h), (unsigned long long)budget);
    return WM_OK;
}

wm_status wm_image_decode(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                          wm_error *err) {
    memset(out, 0, sizeof *out);
    static const uint8_t png_sig[8] = {0x89, 'P', 'N', 'G', '\r', '\n', 0x1a, '\n'};
    int orientation = 1;
    wm_status st;
    if (n >= 8 && !memcmp(data, png_sig, 8)) st = wm_image_decode_png(data, n, name, max_pixels, out, &orientation, err);
    else if (n >= 3 && data[0] == 0xff && data[1] == 0xd8 && data[2] == 0xff)
        st = wm_image_decode_jpeg(data, n, name, max_pixels, out, &orientation, err);
    else {
        const char *what = n >= 6 && (!memcmp(data, "GIF87a", 6) || !memcmp(data, "GIF89a", 6)) ? " (a GIF)"
                           : n >= 12 && !memcmp(data, "RIFF", 4) && !memcmp(data + 8, "WEBP", 4) ? " (a WebP)"
                           : n >= 2 && !memcmp(data, "BM", 2) ? " (a BMP?)"
                           : "";
        return wm_err(err, WM_ERR_UNSUPPORTED, "%s: not a PNG or JPEG image%s (%zu bytes)", name, what, n);
    }
    if (!st && orientation != 1) st = wm_image_orient(out, orientation, err);
    if (st) wm_image_free(out);
    return st;
}

wm_status wm_image_load(const char *path, uint64_t max_pixels, wm_image *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    wm_map m;
    wm_status st = wm_map_file(path, 0, &m, err);
    if (st) return st;
    static const uint8_t none[1] = {0};
    st = wm_image_decode(m.data ? m.data : none, m.size, path, max_pixels, out, err);
    wm_unmap(&m);
    return st;
}

void wm_image_free(wm_image *im) {
    if (!im) return;
    free(im->rgb);
    memset(im, 0, sizeof *im);
}

static uint32_t rd(const uint8_t *p, int n, int big) {
    uint32_t v = 0;
    for (int i = 0; i < n; i++) v |= (uint32_t)p[big ? i : n - 1 - i] << (8 * (n - 1 - i));
    return v;
}

int wm_exif_orientation(const uint8_t *d, size_t n) {
    if (!d || n < 8) return 1;
    int big;
    if (!memcmp(d, "II*\0", 4)) big = 0;
    else if (!memcmp(d, "MM\0*", 4)) big = 1;
    else return 1;
    uint64_t ifd = rd(d + 4, 4, big);
    if (ifd > n || n - ifd < 2) return 1;
    uint64_t count = rd(d + ifd, 2, big);
    for (uint64_t i = 0; i < count; i++) {
        uint64_t e = ifd + 2 + 12 * i;
        if (e > n || n - e < 12) return 1;
        if (rd(d + e, 2, big) != 0x0112) continue;
        uint32_t type = rd(d + e + 2, 2, big), cnt = rd(d + e + 4, 4, big);
        if (type != 3 || cnt < 1) return 1; /* Orientation is one SHORT, held in the entry itself */
        uint32_t v = rd(d + e + 8, 2, big);
        return v >= 1 && v <= 8 ? (int)v : 1;
    }
    return 1;
}

wm_status wm_image_orient(wm_image *im, int o, wm_error *err) {
    if (o < 2 || o > 8) return WM_OK;
    int W = im->w, H = im->h, swap = o >= 5;
    int ow = swap ? H : W, oh = swap ? W : H;
    uint8_t *dst = malloc((size_t)W * H * 3);
    if (!dst) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (int y = 0; y < oh; y++)
        for (int x = 0; x < ow; x++) {
            int r, c; /* the source row and column of output (x, y) */
            switch (o) {
            case 2: r = y, c = W - 1 - x; break;
            case 3: r = H - 1 - y, c = W - 1 - x; break;
            case 4: r = H - 1 - y, c = x; break;
            case 5: r = x, c = y; break;
            case 6: r = H - 1 - x, c = y; break;
            case 7: r = H - 1 - x, c = W - 1 - y; break;
            default: r = x, c = W - 1 - y; break; /* 8 */
            }
            memcpy(dst + ((size_t)y * ow + x) * 3, im->rgb + ((size_t)r * W + c) * 3, 3);
        }
    free(im->rgb);
    im->rgb = dst, im->w = ow, im->h = oh;
    return WM_OK;
}
