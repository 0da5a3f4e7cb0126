/*
 * image.h - images for the vision tasks: PNG and JPEG decoded to RGB8 (libpng, libjpeg-turbo), the EXIF
 * orientation applied, and PIL's resampling filters.
 *
 * Decoding gives what transformers' pipelines give after load_image (PIL: open, ImageOps.exif_transpose,
 * convert("RGB")): grayscale replicated, alpha dropped (not composited), palettes expanded, 16-bit samples
 * reduced to their high byte (PIL does so for RGB, RGBA and gray+alpha; for 16-bit gray without alpha PIL clips
 * to 255 instead, which we do not copy), CMYK JPEGs converted as PIL converts them. Every file is untrusted: a
 * pixel budget bounds what is allocated, and a truncated or corrupt file is an error naming it (WM_ERR_INPUT),
 * never a partial image.
 */
#ifndef WM_IMAGE_IMAGE_H
#define WM_IMAGE_IMAGE_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

/* The default pixel budget of one image (width * height): about 89.5 megapixels, PIL's MAX_IMAGE_PIXELS. */
#define WM_IMAGE_MAX_PIXELS_DEFAULT 89478485ULL

/* An RGB8 image, rows top to bottom, pixels interleaved R, G, B. */
typedef struct wm_image {
    int w, h;
    uint8_t *rgb; /* owned: wm_image_free */
} wm_image;

/*
 * Decodes a PNG or JPEG held in data[0..n) (the format from its signature). name is the file name for messages.
 * max_pixels: the budget (0: WM_IMAGE_MAX_PIXELS_DEFAULT); an image over it is refused, naming its size and the
 * budget, before its pixels are allocated. *out (zeroed on error) is the caller's: wm_image_free.
 */
wm_status wm_image_decode(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                          wm_error *err);
/* Reads and decodes the file at path (wm_map_file: the usual input checks). */
wm_status wm_image_load(const char *path, uint64_t max_pixels, wm_image *out, wm_error *err);
void wm_image_free(wm_image *im);

/*
 * The pixel budget in force: flag when nonzero (--max-image-pixels), else $WM_MAX_IMAGE_PIXELS when set (a
 * count >= 1; WM_ERR_USAGE otherwise), else WM_IMAGE_MAX_PIXELS_DEFAULT.
 */
wm_status wm_image_budget(uint64_t flag, uint64_t *out, wm_error *err);

/* WM_ERR_INPUT naming name, its size and the budget when w x h is empty or over max_pixels (0: the default). */
wm_status wm_image_check_size(const char *name, uint64_t w, uint64_t h, uint64_t max_pixels, wm_error *err);

/*
 * The Orientation tag (0x0112) of IFD0 of an Exif block: data starts at the TIFF header ("II*\0" or "MM\0*"),
 * as in a JPEG APP1 segment after "Exif\0\0" or a PNG eXIf chunk. Returns 1..8, or 1 when absent or malformed
 * (every offset is checked against n).
 */
int wm_exif_orientation(const uint8_t *data, size_t n);

/*
 * Applies EXIF orientation o (1..8) as PIL's ImageOps.exif_transpose does (2 mirror, 3 rotate 180, 4 flip,
 * 5 transpose, 6 rotate 90 clockwise, 7 transverse, 8 rotate 90 counter-clockwise). im->rgb is replaced.
 */
wm_status wm_image_orient(wm_image *im, int o, wm_error *err);

/* PIL's resampling filters by their PIL codes. */
enum { WM_RESAMPLE_NEAREST = 0, WM_RESAMPLE_LANCZOS = 1, WM_RESAMPLE_BILINEAR = 2, WM_RESAMPLE_BICUBIC = 3,
       WM_RESAMPLE_BOX = 4, WM_RESAMPLE_HAMMING = 5 };

/*
 * Resizes in to out_w x out_h as PIL's Image.resize does on an RGB image (no box, no reducing_gap): nearest
 * picks the pixel under each output pixel's centre; the others convolve in two passes, horizontal then vertical,
 * each rounding to uint8, with the filter's support scaled by the downscale factor (antialiasing) and 22-bit
 * fixed-point weights. *out is the caller's (wm_image_free). WM_ERR_USAGE for a size < 1 or an unknown filter.
 */
wm_status wm_image_resize(const wm_image *in, int out_w, int out_h, int filter, wm_image *out, wm_error *err);

/* The filter's name ("bicubic"), or NULL for a code that is not one. */
const char *wm_resample_name(int filter);

#endif
