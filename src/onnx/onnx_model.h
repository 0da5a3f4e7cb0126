/*
 * onnx_model.h - the loaded model (internal): the decoded ModelProto, its
 * arena and the file mappings its tensors point into; tensor helpers.
 */
#ifndef WM_ONNX_MODEL_H
#define WM_ONNX_MODEL_H

#include "core/arena.h"
#include "core/file.h"
#include "onnx/onnx_proto.h"
#include "winml/onnx.h"

typedef struct wm_onnx_extfile {
    char *location; /* as written in the model */
    char *path;     /* resolved real path */
    wm_map map;
} wm_onnx_extfile;

struct wm_onnx_model {
    wm_arena arena;
    wm_onnx_modelproto *proto;
    wm_map file;     /* the model file (empty when loaded from a buffer) */
    char *path;      /* NULL when loaded from a buffer */
    char *dir;       /* folder external locations are relative to */
    wm_onnx_extfile *ext; size_t n_ext;
};

/* Creates an empty model (ir_version 10, no graph) owning a fresh arena. */
wm_onnx_model *wm_onnx_model_new(void);

/* numel of t from its dims; 0 on a negative dim or overflow (err filled). */
wm_status wm_onnx_tensor_numel(const wm_onnx_tensor *t, uint64_t *numel, wm_error *err);

/*
 * The tensor's bytes in raw little-endian layout when it has them as one
 * span: raw_data, resolved external data, or a typed field whose element
 * layout equals the dtype (float_data for float32 ...). p = NULL otherwise.
 */
wm_bytes wm_onnx_tensor_bytes(const wm_onnx_tensor *t);

/* Calls fn on every TensorProto of the model (initializers, sparse parts,
 * attribute tensors, subgraphs, functions, training graphs); stops on error. */
typedef wm_status (*wm_onnx_tensor_fn)(void *ctx, wm_onnx_tensor *t, const char *where);
wm_status wm_onnx_visit_tensors(wm_onnx_modelproto *mp, wm_onnx_tensor_fn fn, void *ctx);

#endif
