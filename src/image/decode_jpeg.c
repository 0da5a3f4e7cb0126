/*
 * decode_jpeg.c - JPEG to RGB8 with libjpeg-turbo (see image.h). libjpeg's error_exit longjmps back here (its
 * default calls exit()); a premature end of data, which libjpeg only warns about and fills with gray, is an error
 * as in PIL. Decoding settings are libjpeg's defaults, as PIL uses them: the accurate integer IDCT and fancy
 * upsampling, YCbCr converted to RGB by the library. CMYK (and YCCK, which libjpeg turns into CMYK) is read as
 * PIL reads it: the stored samples are taken as inverted (Adobe's convention, PIL's "CMYK;I"), so that
 * R = C' * K' / 255 rounded, C' and K' the stored samples, and likewise for G and B.
 */
#include <setjmp.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include <jpeglib.h>
#include <jerror.h>

#include "core/error.h"
#include "image/image_impl.h"

/* More scans than any encoder writes (libjpeg-turbo's own tools stop at 500): a progressive bomb is refused. */
#define WM_JPEG_MAX_SCANS 1000

typedef struct jerr {
    struct jpeg_error_mgr pub;
    jmp_buf jb;
    char msg[JMSG_LENGTH_MAX + 64];
} jerr;

static void on_error_exit(j_common_ptr c) {
    jerr *e = (jerr *)c->err;
    c->err->format_message(c, e->msg);
    longjmp(e->jb, 1);
}

static void on_emit(j_common_ptr c, int level) {
    jerr *e = (jerr *)c->err;
    if (level < 0 && c->err->msg_code == JWRN_JPEG_EOF) { /* truncated: an error, not gray rows */
        snprintf(e->msg, sizeof e->msg, "truncated file (the data ends before the image does)");
        longjmp(e->jb, 1);
    }
}

static void on_progress(j_common_ptr c) {
    if (!c->is_decompressor) return;
    j_decompress_ptr d = (j_decompress_ptr)c;
    if (d->input_scan_number > WM_JPEG_MAX_SCANS) {
        jerr *e = (jerr *)c->err;
        snprintf(e->msg, sizeof e->msg, "more than %d scans", WM_JPEG_MAX_SCANS);
        longjmp(e->jb, 1);
    }
}

/* The Orientation of the first APP1 "Exif\0\0" segment (1 when none). */
static int exif_of(j_decompress_ptr d) {
    for (jpeg_saved_marker_ptr m = d->marker_list; m; m = m->next)
        if (m->marker == JPEG_APP0 + 1 && m->data_length >= 6 && !memcmp(m->data, "Exif\0\0", 6))
            return wm_exif_orientation(m->data + 6, m->data_length - 6);
    return 1;
}

wm_status wm_image_decode_jpeg(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                               int *orientation, wm_error *err) {
    struct jpeg_decompress_struct d;
    struct jpeg_progress_mgr prog = {.progress_monitor = on_progress};
    jerr je;
    memset(&je, 0, sizeof je);
    d.err = jpeg_std_error(&je.pub);
    je.pub.error_exit = on_error_exit;
    je.pub.emit_message = on_emit;
    uint8_t *volatile rgb = NULL;
    wm_status st = WM_OK;
    if (setjmp(je.jb)) {
        st = wm_err(err, WM_ERR_INPUT, "%s: not a valid JPEG image: %s", name, je.msg);
        goto done;
    }
    jpeg_create_decompress(&d);
    d.progress = &prog;
    jpeg_mem_src(&d, data, (unsigned long)n);
    jpeg_save_markers(&d, JPEG_APP0 + 1, 0xFFFF);
    jpeg_read_header(&d, TRUE);
    if ((st = wm_image_check_size(name, d.image_width, d.image_height, max_pixels, err))) goto done;
    int cmyk = d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK;
    *orientation = exif_of(&d);
    d.out_color_space = cmyk ? JCS_CMYK : JCS_RGB;
    jpeg_start_decompress(&d);
    if (d.output_components != (cmyk ? 4 : 3)) {
        snprintf(je.msg, sizeof je.msg, "%d components after color conversion", d.output_components);
        st = wm_err(err, WM_ERR_INPUT, "%s: not a valid JPEG image: %s", name, je.msg);
        goto done;
    }
    size_t w = d.output_width, h = d.output_height;
    rgb = malloc(w * h * 3 + (cmyk ? w * 4 : 0)); /* CMYK: one row of 4 samples after the image */
    if (!rgb) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory for a %zux%zu image", name, w, h);
        goto done;
    }
    while (d.output_scanline < d.output_height) {
        uint8_t *dst = rgb + (size_t)d.output_scanline * w * 3;
        JSAMPROW row = cmyk ? rgb + w * h * 3 : dst;
        jpeg_read_scanlines(&d, &row, 1);
        for (size_t x = 0; cmyk && x < w; x++)
            for (int c = 0; c < 3; c++) {
                unsigned t = (unsigned)row[x * 4 + c] * row[x * 4 + 3] + 128;
                dst[x * 3 + c] = (uint8_t)((t + (t >> 8)) >> 8);
            }
    }
    jpeg_finish_decompress(&d);
    out->w = (int)w, out->h = (int)h, out->rgb = rgb;
    rgb = NULL;
done:
    free(rgb);
    jpeg_destroy_decompress(&d);
    return st;
}
