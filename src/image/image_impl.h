/* image_impl.h - shared by the decoders of src/image (not for other modules). */
#ifndef WM_IMAGE_IMPL_H
#define WM_IMAGE_IMPL_H

#include "image/image.h"

/* The decoders: *out filled on success (owned by the caller), *orientation the EXIF orientation (1: none). */
wm_status wm_image_decode_png(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                              int *orientation, wm_error *err);
wm_status wm_image_decode_jpeg(const uint8_t *data, size_t n, const char *name, uint64_t max_pixels, wm_image *out,
                               int *orientation, wm_error *err);

#endif
