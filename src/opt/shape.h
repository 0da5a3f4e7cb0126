/*
 * shape.h - light type and shape inference for the optimizer (internal).
 *
 * For every value of a graph: its element type, rank and dims, where a dim
 * is a static size, a symbol (a graph input's dim_param, or one made for an
 * unknown size so equal sizes can be told apart) or unknown. Small integer
 * tensors (up to WM_SH_MAXV elements, rank <= 1: shapes, indices, sizes)
 * also carry their values symbolically, so Shape -> Gather -> Concat ->
 * Reshape chains resolve into known output dims even with dynamic inputs,
 * and chains whose values are all static can be folded to constants.
 *
 * Inference walks the nodes in order (call after a topological sort) and
 * never fails: what it cannot derive stays unknown.
 */
#ifndef WM_OPT_SHAPE_H
#define WM_OPT_SHAPE_H

#include <stdint.h>

#include "onnx/graph.h"

#define WM_SH_MAXR 8 /* ranks above this are "unknown rank" */
#define WM_SH_MAXV 8 /* symbolic values tracked for tensors up to this many elements */

enum { WM_SD_UNK = 0, WM_SD_CONST = 1, WM_SD_SYM = 2 };

/* A dim or a tracked value: a constant, a symbol id, or unknown. */
typedef struct wm_sdim {
    int64_t v;
    uint8_t k; /* WM_SD_* */
} wm_sdim;

typedef struct wm_tinfo {
    int32_t dtype;             /* wm_dtype; 0 unknown */
    int32_t rank;              /* -1 unknown */
    wm_sdim dim[WM_SH_MAXR];
    int32_t nval;              /* -1: values not tracked; else element count (<= WM_SH_MAXV) */
    wm_sdim val[WM_SH_MAXV];
} wm_tinfo;

typedef struct wm_shapes wm_shapes;

/* Runs inference over g; *out is a new table (free with wm_shapes_free). WM_ERR_NOMEM only. */
wm_status wm_shapes_infer(wm_graph *g, wm_shapes **out, wm_error *err);
void wm_shapes_free(wm_shapes *s);

/* The info of name, or NULL when the value is unknown to the table. */
const wm_tinfo *wm_shapes_get(const wm_shapes *s, const char *name);

/* dtype of name, 0 when unknown. */
int32_t wm_shapes_dtype(const wm_shapes *s, const char *name);
/* rank of name, -1 when unknown. */
int wm_shapes_rank(const wm_shapes *s, const char *name);
/* dim i of name (negative i counts from the end) when static, else -1. */
int64_t wm_shapes_dim(const wm_shapes *s, const char *name, int i);
/* 1 when every dim of name is static; the count of elements into *numel. */
int wm_shapes_static(const wm_shapes *s, const char *name, uint64_t *numel);
/* 1 when every tracked value of name is a constant (the tensor's values are known). */
int wm_shapes_values_known(const wm_shapes *s, const char *name);

/* 1 when a and b have the same known rank and symbolically equal dims. */
int wm_shapes_same(const wm_shapes *s, const char *a, const char *b);

/* 1 when two sdims are known equal (same constant or same symbol). */
int wm_sdim_eq(wm_sdim a, wm_sdim b);

/* The info of an output as an op rule derived it, for tests: NULL when not found. */
const char *wm_shapes_symbol_name(const wm_shapes *s, int64_t id);

#endif
