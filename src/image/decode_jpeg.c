/*
 * decode_jpeg.c - JPEG to RGB8 with libjpeg-turbo (see image.h). libjpeg's error_exit longjmps back here (its
 * default calls exit()); a premature end of data, which libjpeg only warns about and fills with gray, is an error
 * as in PIL. Decoding settings are libjpeg's defaults, as PIL uses them: the accurate integer IDCT and fancy
 * upsampling, YCbCr converted to RGB by the library. CMYK/YCCK files are refused.
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
    if (d.jpeg_color_space == JCS_CMYK || d.jpeg_color_space == JCS_YCCK) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: a CMYK JPEG (only grayscale and color JPEGs are read)", name);
        goto done;
    }
    *orientation = exif_of(&d);
    d.out_color_space = JCS_RGB;
    jpeg_start_decompress(&d);
    if (d.output_components != 3) {
        snprintf(je.msg, sizeof je.msg, "%d components after color conversion", d.output_components);
        st = wm_err(err, WM_ERR_INPUT, "%s: not a valid JPEG image: %s", name, je.msg);
        goto done;
    }
    size_t w = d.output_width, h = d.output_height;
    rgb = malloc(w * h * 3);
    if (!rgb) {
        st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory for a %zux%zu image", name, w, h);
        goto done;
    }
    while (d.output_scanline < d.output_height) {
        JSAMPROW row = rgb + (size_t)d.output_scanline * w * 3;
        jpeg_read_scanlines(&d, &row, 1);
    }
    jpeg_finish_decompress(&d);
    out->w = (int)w, out->h = (int)h, out->rgb = rgb;
    rgb = NULL;
done:
    free(rgb);
    jpeg_destroy_decompress(&d);
    return st;
}
