/*
 * vision.h - running an image model's build folder on image files: each file is decoded (image/image.h),
 * preprocessed as the folder's preprocessor_config.json says (image/preprocess.h) and fed as pixel_values
 * [1, 3, H, W]; the result is the class logits (image-classification: the output "logits", labels from
 * config.json's id2label) or an embedding (image-feature-extraction: the output "image_embeds", else
 * "pooler_output", else the first output, as it is).
 *
 * The task is the folder's winml_build_config.json loader.task when there is one, else
 * zero-shot-image-classification for a model taking input_ids and pixel_values (CLIPModel: the folder's tokenizer
 * encodes "This is a photo of {label}." for each candidate label, padded to the longest with the pad token, and
 * the output logits_per_image [1, labels] is read, as transformers' zero-shot pipeline does; SigLIP, which that
 * pipeline scores with a sigmoid over 64-token texts, is refused), image-classification
 * for a model with an output "logits", and image-feature-extraction otherwise. Used by `winml run --image`.
 */
#ifndef WM_TASKS_VISION_H
#define WM_TASKS_VISION_H

#include "image/preprocess.h"
#include "winml/runtime.h"

typedef struct wm_vision wm_vision;

#define WM_VISION_NEEDS "a build folder with model.onnx and preprocessor_config.json, or an .onnx file in one"

/*
 * Opens FOLDER (or FOLDER/MODEL.onnx) with session options so (NULL: defaults); max_pixels: the pixel budget of
 * one image, decoded or resized (0: $WM_MAX_IMAGE_PIXELS, else the default; wm_image_budget). *out: wm_vision_free.
 */
wm_status wm_vision_open(const char *model, const wm_session_opts *so, uint64_t max_pixels, wm_vision **out,
                         wm_error *err);
void wm_vision_free(wm_vision *v);

/* "image-classification", "image-feature-extraction", "zero-shot-image-classification" or "keypoint-detection"
   (an output "heatmaps" [1, keypoints, h, w]; labels from config.json's id2label). */
const char *wm_vision_task(const wm_vision *v);
/* id2label of config.json: label i, or NULL. */
const char *wm_vision_label(const wm_vision *v, size_t i);
const wm_img_prep *wm_vision_prep(const wm_vision *v);

/* The result of one image: n floats owned by v (valid until the next run), from output `output` of shape dims. */
typedef struct wm_vision_out {
    const float *y;
    size_t n;
    const char *output;
    int rank;
    int64_t dims[8];
} wm_vision_out;

/*
 * The pixel_values of one image file without a model: decoded and preprocessed as FOLDER/preprocessor_config.json
 * says. *out (malloc'd, the caller's to free) receives 3 * *h * *w floats, channels first. (winml perf --image)
 */
wm_status wm_vision_pixels(const char *folder, const char *path, uint64_t max_pixels, float **out, int *h, int *w,
                           wm_error *err);
/* The same for an encoded PNG / JPEG held in memory, n bytes at data (a table's image.bytes cell); name names it. */
wm_status wm_vision_pixels_bytes(const char *folder, const char *name, const uint8_t *data, size_t n,
                                 uint64_t max_pixels, float **out, int *h, int *w, wm_error *err);

/*
 * The pixel_values of the n image files at paths as one batch: *out (malloc'd, the caller's) [n, 3, *h, *w]. An
 * image preprocessed to another size than the first is an error naming it. (winml run / generate --image on an
 * image encoder-decoder)
 */
wm_status wm_vision_pixel_batch(const char *folder, const char *const *paths, size_t n, uint64_t max_pixels,
                                float **out, int *h, int *w, wm_error *err);

/*
 * Decodes, preprocesses and runs the image file at path. A zero-shot model needs the candidate labels (n_labels
 * >= 1; *out: their logits in order); the other tasks take none (labels NULL, n_labels 0).
 */
wm_status wm_vision_run(wm_vision *v, const char *path, const char *const *labels, size_t n_labels,
                        wm_vision_out *out, wm_error *err);
/* wm_vision_run (no labels) on an encoded PNG / JPEG held in memory, n bytes at data (a table's image.bytes cell);
   name names it in errors. */
wm_status wm_vision_run_bytes(wm_vision *v, const char *name, const uint8_t *data, size_t n, wm_vision_out *out,
                              wm_error *err);

/*
 * Image-text similarity of a zero-shot (CLIP-style) model: the n_img files run as one pixel_values batch with the
 * n_text texts as they are (no prompt), each cut to wm_vision_max_tokens tokens as CLIPProcessor's truncation=True
 * does; *out: logits_per_image [n_img, n_text] (exp(logit_scale) * cosine), owned by v.
 */
wm_status wm_vision_similarity(wm_vision *v, const char *const *paths, size_t n_img, const char *const *texts,
                               size_t n_text, wm_vision_out *out, wm_error *err);
/* The most images one wm_vision_similarity call takes (1 when pixel_values' batch is fixed at 1; 0: any). */
size_t wm_vision_max_images(const wm_vision *v);
/* The tokens a text is cut to (0: not cut; see wm_vision_similarity). */
size_t wm_vision_max_tokens(const wm_vision *v);

#endif
