/*
 * preprocess.h - an image processor's preprocessor_config.json, applied as transformers' PIL-backend image
 * processors apply it: resize (size {"shortest_edge"} keeping the aspect ratio, or {"height", "width"}; for
 * ConvNext, crop_pct: a shortest_edge under 384 resizes the short side to int(shortest_edge / crop_pct) and
 * centre-crops a square of shortest_edge), with the PIL filter named by "resample" (image.h); centre crop to
 * crop_size (zero padding where the image is smaller); rescale (uint8 * rescale_factor in double, then float32);
 * normalize ((x - mean) / std in float32). Output: float32 [3, H, W], the pixel_values of one image.
 *
 * Fields absent or null take the defaults of the class named by image_processor_type (the "Fast" and "Pil"
 * suffixes ignored): ViTImageProcessor, DeiTImageProcessor, CLIPImageProcessor, BitImageProcessor (DINOv2),
 * ConvNextImageProcessor (ResNet), SiglipImageProcessor. Another type is refused (WM_ERR_UNSUPPORTED) naming it.
 */
#ifndef WM_IMAGE_PREPROCESS_H
#define WM_IMAGE_PREPROCESS_H

#include "image/image.h"

typedef struct wm_img_prep {
    char type[64]; /* the processor class, without "Fast" / "Pil" */
    int do_resize, do_center_crop, do_rescale, do_normalize;
    int shortest_edge;     /* > 0: size {"shortest_edge"} */
    int size_h, size_w;    /* size {"height", "width"} when shortest_edge is 0 */
    int crop_h, crop_w;    /* crop_size */
    int resample;          /* PIL code */
    int crop_pct_resize;   /* ConvNext's resize (crop_pct) */
    double crop_pct;
    double rescale_factor;
    float mean[3], std[3];
    uint64_t max_pixels; /* the budget of a resized image (0: WM_IMAGE_MAX_PIXELS_DEFAULT); set by the caller */
} wm_img_prep;

/* Reads path (a preprocessor_config.json); errors name the file and the field. */
wm_status wm_img_prep_load(const char *path, wm_img_prep *p, wm_error *err);
/* The same from JSON text (label names it in messages). */
wm_status wm_img_prep_parse(const char *text, size_t n, const char *label, wm_img_prep *p, wm_error *err);

/*
 * The uint8 image after the resize and centre-crop steps (what PIL produced before the float steps); *out is the
 * caller's (wm_image_free). name names the image in messages.
 */
wm_status wm_img_prep_geometry(const wm_img_prep *p, const wm_image *im, const char *name, wm_image *out,
                               wm_error *err);

/*
 * The full preprocessing: *out (malloc'd, the caller's to free) receives 3 * *h * *w floats, channels first.
 */
wm_status wm_img_prep_run(const wm_img_prep *p, const wm_image *im, const char *name, float **out, int *h, int *w,
                          wm_error *err);

#endif
