/*
 * libFuzzer target for image decoding (image/image.h): arbitrary bytes decoded as PNG or JPEG under a small pixel
 * budget (2^18 pixels: under 1 megapixel a 657-byte progressive JPEG of 19x31244 pixels, seed
 * progressive_19x31244.jpg, took 10 s of the unoptimized ASan build, a timeout of the fuzz run; 0.16 s in the release
 * build), then resized with the input's first byte choosing the filter, the preprocessing steps of a CLIP processor,
 * and the EXIF parser on the raw bytes. Everything must fail cleanly (a status and a message,
 * nothing allocated) or give an image of the documented shape.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "image/image.h"
#include "image/preprocess.h"

#define MAX_PIXELS (1u << 18)

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    int o = wm_exif_orientation(data, size);
    if (o < 1 || o > 8) abort();
    wm_image im;
    wm_status st = wm_image_decode(data, size, "fuzz", MAX_PIXELS, &im, &err);
    if (st) {
        if (im.rgb || !err.msg[0]) abort();
        return 0;
    }
    if (im.w < 1 || im.h < 1 || (uint64_t)im.w * (uint64_t)im.h > MAX_PIXELS) abort();
    wm_image r;
    int filter = size ? data[size - 1] % 6 : 3;
    if (!wm_image_resize(&im, 1 + im.w % 37, 1 + im.h % 23, filter, &r, &err)) wm_image_free(&r);
    static const char cfg[] = "{\"image_processor_type\": \"CLIPImageProcessor\", \"size\": {\"shortest_edge\": 16}, "
                              "\"crop_size\": {\"height\": 16, \"width\": 16}}";
    wm_img_prep p;
    if (wm_img_prep_parse(cfg, sizeof cfg - 1, "cfg", &p, &err)) abort();
    p.max_pixels = MAX_PIXELS;
    float *x = NULL;
    int h, w;
    if (!wm_img_prep_run(&p, &im, "fuzz", &x, &h, &w, &err) && (h != 16 || w != 16)) abort();
    free(x);
    wm_image_free(&im);
    return 0;
}
