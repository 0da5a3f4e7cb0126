/* arch_impl.h - the table types behind arch.h (internal to src/builder). */
#ifndef WM_BUILDER_ARCH_IMPL_H
#define WM_BUILDER_ARCH_IMPL_H

#include "builder/arch.h"

/* symbolic dims of module shapes */
enum { D_0, D_V, D_H, D_E, D_I, D_I2, D_Q, D_KV, D_QKV, D_P, D_T, D_HD, D_L, D_2 };

typedef struct wm_modpat {
    uint8_t mod, kind, d_out, d_in; /* wm_mod, wm_mod_kind, D_* */
    const char *pat;                /* '$' = model prefix, %d = layer; + ".weight" / ".bias" */
} wm_modpat;

typedef struct wm_scheme {
    const char *name;
    wm_family_kind kind;
    wm_norm_kind norm;
    int post_norm;
    wm_pos_kind pos;
    int gated;                  /* MLP gated by default (no weights to tell) */
    const char *prefixes[5];    /* candidates, tried after the family's own */
    const wm_modpat *mods;
    size_t n_mods;
    const char *default_family; /* defaults for a model_type the family table does not list */
} wm_scheme;

enum { WM_HEAD_NONE = -1, WM_HEAD_POOLER_TANH, WM_HEAD_DENSE_TANH, WM_HEAD_DENSE_GELU, WM_HEAD_PRE_RELU };

typedef struct wm_head_def {
    const char *first;
    wm_act act;
    const char *second;
} wm_head_def;

typedef struct wm_family {
    wm_family_kind kind;
    const char *model_type, *class_stem, *lm_suffix, *scheme, *prefix, *act;
    double eps;
    int64_t inter_mult;  /* intermediate = mult * hidden when the config omits it (0: required) */
    int tied, qkv_bias, o_bias, mlp_bias, qk_norm, fused_qkv, fused_gate_up;
    int sliding;         /* honours sliding_window / use_sliding_window / layer_types */
    wm_posid_kind posid;
    int64_t type_vocab;  /* default type_vocab_size */
    int cls_head;        /* WM_HEAD_* */
} wm_family;

typedef struct wm_denied_type {
    const char *model_type, *why;
} wm_denied_type;

enum { WM_DENY_NONE, WM_DENY_TRUE, WM_DENY_SET, WM_DENY_NOT_ABSOLUTE, WM_DENY_TRUE_ENCODER };
typedef struct wm_denied_key {
    const char *key;
    int how;
} wm_denied_key;

typedef struct wm_act_name_row {
    const char *name;
    wm_act act;
} wm_act_name_row;

typedef struct wm_arch_suffix {
    const char *suffix;
    wm_task task;
} wm_arch_suffix;

extern const wm_scheme wm_schemes[];
extern const size_t wm_n_schemes;
extern const wm_family wm_families[];
extern const size_t wm_n_families;
extern const wm_head_def wm_cls_heads[];
extern const char *const wm_head_prefixes[];
extern const char *const wm_buffer_suffixes[];
extern const wm_denied_type wm_denied_types[];
extern const wm_denied_key wm_denied_keys[];
extern const wm_act_name_row wm_act_names[];
extern const wm_arch_suffix wm_arch_suffixes[];
extern const char *const wm_task_class_suffix[WM_TASK_COUNT];

/* RoPE inverse frequencies for the config's rope type (arch_rope.c). */
wm_status wm_arch_rope_init(wm_arch *a, wm_error *err);

#endif
