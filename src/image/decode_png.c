/* decode_png.c - PNG to RGB8 with libpng (see image.h); errors longjmp back here, never exit. */
#include <png.h>
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "image/image_impl.h"

typedef struct png_src {
    const uint8_t *data;
    size_t n, pos;
    char msg[200];
} png_src;

static void on_error(png_structp png, png_const_charp msg) {
    png_src *s = png_get_error_ptr(png);
    snprintf(s->msg, sizeof s->msg, "%s", msg);
    png_longjmp(png, 1);
}

static void on_warning(png_structp png, png_const_charp msg) { (void)png, (void)msg; }

static void on_read(png_structp png, png_bytep out, size_t len) {
    png_src *s = png_get_io_ptr(png);
    if (len > s->n - s->pos) png_error(png, "truncated file (the data ends inside a chunk)");
    memcpy(out, s->data + s->pos, len);
    s->pos += len;
}

wm_status wm_image_decode_png(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                              int *orientation, wm_error *err) {
    /* the budget from IHDR before libpng reads on: a header alone is enough to be refused for its size */
    if (n >= 24 && !memcmp(data + 12, "IHDR", 4)) {
        uint64_t w0 = (uint64_t)data[16] << 24 | (uint64_t)data[17] << 16 | (uint64_t)data[18] << 8 | data[19];
        uint64_t h0 = (uint64_t)data[20] << 24 | (uint64_t)data[21] << 16 | (uint64_t)data[22] << 8 | data[23];
        wm_status st0 = w0 && h0 ? wm_image_check_size(name, w0, h0, max_pixels, err) : WM_OK;
        if (st0) return st0;
    }
    png_src src = {data, n, 0, {0}};
    png_structp png = png_create_read_struct(PNG_LIBPNG_VER_STRING, &src, on_error, on_warning);
    png_infop info = png ? png_create_info_struct(png) : NULL;
    if (!info) {
        png_destroy_read_struct(&png, NULL, NULL);
        return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", name);
    }
    /* set before setjmp and only read after a longjmp: volatile so the jump does not lose them */
    uint8_t *volatile rgb = NULL;
    png_bytep *volatile rows = NULL;
    wm_status st = WM_OK;
    if (setjmp(png_jmpbuf(png))) {
        st = wm_err(err, WM_ERR_INPUT, "%s: not a valid PNG image: %s", name, src.msg);
        goto done;
    }
    png_set_read_fn(png, &src, on_read);
    png_set_user_limits(png, 1u << 24, 1u << 24);
    png_set_chunk_malloc_max(png, 16u << 20); /* text, ICC and eXIf chunks: not a memory bomb */
    png_set_chunk_cache_max(png, 1000);
    png_read_info(png, info);
    png_uint_32 w = png_get_image_width(png, info), h = png_get_image_height(png, info);
    if ((st = wm_image_check_size(name, w, h, max_pixels, err))) goto done;
    int ct = png_get_color_type(png, info), bd = png_get_bit_depth(png, info);
    png_set_palette_to_rgb(png); /* a palette's transparency (tRNS) is not turned into alpha: dropped */
    if (ct == PNG_COLOR_TYPE_GRAY && bd < 8) png_set_expand_gray_1_2_4_to_8(png);
    if (bd == 16) png_set_strip_16(png); /* the high byte, as PIL's 16-bit unpackers */
    /* the palette expansion turns tRNS into alpha (for every color type): dropped with the alpha channel */
    if ((ct & PNG_COLOR_MASK_ALPHA) || png_get_valid(png, info, PNG_INFO_tRNS)) png_set_strip_alpha(png);
    if (!(ct & PNG_COLOR_MASK_COLOR)) png_set_gray_to_rgb(png);
    png_set_interlace_handling(png);
    png_read_update_info(png, info);
    if (png_get_rowbytes(png, info) != (size_t)w * 3) {
        snprintf(src.msg, sizeof src.msg, "unexpected row layout (color type %d, bit depth %d)", ct, bd);
        st = wm_err(err, WM_ERR_INPUT, "%s: not a valid PNG image: %s", name, src.msg);
        goto done;
    }
    rgb = malloc((size_t)w * h * 3);
    rows = malloc(sizeof(png_bytep) * h);
    if (!rgb || !rows) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory for a %ux%u image", name, (unsigned)w, (unsigned)h);
        goto done;
    }
    for (png_uint_32 y = 0; y < h; y++) rows[y] = rgb + (size_t)y * w * 3;
    png_read_image(png, rows);
    png_read_end(png, info); /* checks the IDAT stream's end; eXIf may come after the pixels */
    *orientation = 1;
    png_uint_32 ne = 0;
    png_bytep exif = NULL;
    if (png_get_eXIf_1(png, info, &ne, &exif) && exif) *orientation = wm_exif_orientation(exif, ne);
    out->w = (int)w, out->h = (int)h, out->rgb = rgb;
    rgb = NULL;
done:
    free(rows);
    free(rgb);
    png_destroy_read_struct(&png, &info, NULL);
    return st;
}
