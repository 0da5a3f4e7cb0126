/* shape_impl.h - what shape.c and shape_ops.c share (internal to the inference). */
#ifndef WM_OPT_SHAPE_IMPL_H
#define WM_OPT_SHAPE_IMPL_H

#include "opt/opt_util.h"
#include "opt/shape.h"

#include <string.h>

typedef struct sh_slot {
    const char *key; /* NULL: empty */
    size_t idx;
} sh_slot;

struct wm_shapes {
    wm_graph *g;
    sh_slot *slot;
    size_t cap, n;
    wm_tinfo *info;      /* by idx */
    size_t n_info, cap_info;
    char **sym;          /* symbol names (malloc'ed) by id */
    size_t n_sym, cap_sym;
    int64_t opset;       /* default-domain opset */
    int oom;
};

/* The info record of name, created (unknown) when missing; NULL on OOM. */
wm_tinfo *sh_put(wm_shapes *s, const char *name);
/* A symbol id for name (interned); -1 on OOM. */
int64_t sh_symbol(wm_shapes *s, const char *name);
/* A fresh anonymous symbol. */
wm_sdim sh_fresh(wm_shapes *s);
/* a op b on sdims (op one of + - * /): constants fold, symbols become interned expressions. */
wm_sdim sh_arith(wm_shapes *s, char op, wm_sdim a, wm_sdim b);

/* Infers the outputs of node n (inputs already known). */
void sh_node(wm_shapes *s, const wm_onnx_node *n);

/* Helpers over tinfo */
static inline wm_sdim sd_c(int64_t v) { return (wm_sdim){v, WM_SD_CONST}; }
static inline wm_sdim sd_u(void) { return (wm_sdim){0, WM_SD_UNK}; }
void ti_unknown(wm_tinfo *t);

extern const wm_tinfo wm_sh_unknown; /* an unknown value: no type, no rank */

/* One node being inferred. */
typedef struct ctx {
    wm_shapes *s;
    const wm_onnx_node *n;
} ctx;


static inline const wm_tinfo *IN(const ctx *c, size_t i) {
    const char *nm = wm_opt_in(c->n, i);
    const wm_tinfo *t = nm ? wm_shapes_get(c->s, nm) : NULL;
    return t ? t : &wm_sh_unknown;
}

static inline int HAS(const ctx *c, size_t i) { return wm_opt_in(c->n, i) != NULL; }

static inline wm_tinfo *OUT(const ctx *c, size_t i) {
    const char *nm = wm_opt_out(c->n, i);
    if (!nm) return NULL;
    wm_tinfo *t = sh_put(c->s, nm);
    if (t) ti_unknown(t);
    return t;
}

/* Copies type and shape (not values). */
static inline void same(wm_tinfo *o, const wm_tinfo *a) {
    if (!o) return;
    o->dtype = a->dtype;
    o->rank = a->rank;
    memcpy(o->dim, a->dim, sizeof o->dim);
}

/* Rules shared between the rule files */
void sh_matmul(const ctx *c, int32_t dt);
/* Output 0 of a windowed op (Conv when conv, pools; Global* pools when global) from X, W and its attributes. */
void sh_window(const ctx *c, int conv, int global);
void sh_microsoft(const ctx *c);
/* o (output 0, from OUT) gets Gather's dims (data input 0, indices input 1, the axis attribute named); 0 when
 * unknown. */
int sh_gather_dims(const ctx *c, wm_tinfo *o, const char *axis_attr);

#endif
