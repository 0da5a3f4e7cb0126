/*
 * onnx.h - loading and saving ONNX models.
 *
 * wm_onnx_load maps the file and decodes every message; weight bytes
 * (raw_data, external data) are never copied: they stay in read-only
 * mappings owned by the model. wm_onnx_save writes a model, choosing
 * external data by size (see wm_onnx_save_opts) and committing model.onnx
 * last, so a failure leaves no partial output.
 */
#ifndef WINML_ONNX_H
#define WINML_ONNX_H

#include "winml/winml.h"

#ifdef __cplusplus
extern "C" {
#endif

typedef struct wm_onnx_model wm_onnx_model;

typedef enum wm_extdata_policy {
    WM_EXTDATA_AUTO = 0, /* external when the model passes threshold or nears 2^31-1 bytes */
    WM_EXTDATA_ALWAYS,
    WM_EXTDATA_NEVER
} wm_extdata_policy;

typedef struct wm_onnx_save_opts {
    wm_extdata_policy external;
    uint64_t threshold_bytes;  /* AUTO: go external at this serialized size (default 100 MiB) */
    uint64_t min_tensor_bytes; /* only tensors of at least this many bytes move out (default 1 KiB) */
    uint32_t align;            /* offset alignment inside the data file (default 4096) */
    const char *data_name;     /* data file name beside the model (default "<model file>.data") */
    int keep_data;             /* 1: m was loaded from path's folder and its data file is the one being written:
                                  tensors stored there stay in place and new ones are appended, so unchanged
                                  weights are not copied (a full rewrite instead when over 1/8 of the file
                                  would be bytes no tensor references any more) */
} wm_onnx_save_opts;

void wm_onnx_save_opts_default(wm_onnx_save_opts *o);

/*
 * Loads path. External data locations are validated and resolved against
 * the model's folder; the returned model owns all mappings. *out is NULL on
 * error. Free with wm_onnx_free.
 */
wm_status wm_onnx_load(const char *path, wm_onnx_model **out, wm_error *err);

/*
 * Decodes a model held in memory (buf must outlive the model). External
 * data references are validated but not resolved (there is no folder).
 */
wm_status wm_onnx_load_buffer(const void *buf, size_t n, wm_onnx_model **out, wm_error *err);

/* Writes m to path (and its data file when external); see wm_onnx_save_opts. */
wm_status wm_onnx_save(wm_onnx_model *m, const char *path, const wm_onnx_save_opts *opts, wm_error *err);

void wm_onnx_free(wm_onnx_model *m);

#ifdef __cplusplus
}
#endif
#endif
