/*
 * ep_rules.h - execution-provider rule sets (data/ep_rules/<ep>.json, schema in
 * data/ep_rules/SCHEMA.md): which (domain, op_type, opset range) an EP takes on
 * which device, at which support level, under which constraints.
 *
 * A wm_ep_rules owns all of its memory (one arena); free it with
 * wm_ep_rules_free. Loading validates the whole file: any error names the
 * file, the rule index and the field (WM_ERR_INPUT).
 */
#ifndef WM_ANALYZE_EP_RULES_H
#define WM_ANALYZE_EP_RULES_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "winml/winml.h"

/* Support levels, in order of severity (a group takes its worst member's). */
typedef enum wm_level { WM_LEVEL_SUPPORTED = 0, WM_LEVEL_PARTIAL, WM_LEVEL_UNKNOWN, WM_LEVEL_UNSUPPORTED } wm_level;

const char *wm_level_name(wm_level l);

/* Device bits. */
enum { WM_DEV_CPU = 1, WM_DEV_GPU = 2, WM_DEV_NPU = 4 };
#define WM_DEV_ALL (WM_DEV_CPU | WM_DEV_GPU | WM_DEV_NPU)

/* Parses "cpu"/"gpu"/"npu" to its bit; 0 for anything else. */
unsigned wm_device_bit(const char *name);
const char *wm_device_name(unsigned bit);

/* How an EP treats a dtype that needs care (int64 on NPUs, float16 on CPU). */
typedef enum wm_dtype_policy { WM_POLICY_NATIVE = 0, WM_POLICY_CAST, WM_POLICY_UNSUPPORTED } wm_dtype_policy;

typedef struct wm_ep_checks {
    int static_shapes;       /* the EP needs every dim known */
    wm_dtype_policy int64;   /* int64 tensors */
    wm_dtype_policy float16; /* cast: a float16 dtype miss becomes partial (the runtime inserts Casts) */
    int control_flow;        /* If/Loop/Scan allowed */
    int64_t max_opset;       /* highest ai.onnx opset the EP takes; -1: no limit recorded */
} wm_ep_checks;

typedef struct wm_rule_dtypes {
    int32_t input;             /* input index */
    int32_t *dtypes; size_t n; /* allowed wm_dtype values */
} wm_rule_dtypes;

typedef struct wm_rule_attr {
    char *name;
    int64_t *ints; size_t n_ints;  /* allowed integer values */
    char **strs; size_t n_strs;    /* allowed string values */
} wm_rule_attr;

typedef struct wm_rule {
    const char *domain;  /* "" for ai.onnx */
    const char *op_type;
    int64_t since;       /* first opset version covered */
    int64_t until;       /* last one, -1: open */
    unsigned devices;    /* device bits; the rule set's devices when absent */
    wm_level level;
    wm_rule_dtypes *dtypes; size_t n_dtypes;
    int32_t max_rank;    /* -1: no limit */
    int static_shapes;
    int32_t *const_inputs; size_t n_const_inputs;
    wm_rule_attr *attrs; size_t n_attrs;
    const char *reason;  /* never NULL ("" when the file has none) */
} wm_rule;

typedef struct wm_ep_rules {
    wm_arena arena;
    const char *path;
    const char *ep;
    const char *source;
    unsigned devices;
    wm_ep_checks checks;
    wm_ep_checks device_checks[3]; /* indexed cpu, gpu, npu: checks merged with device_checks overrides */
    wm_rule *rules; size_t n_rules;
} wm_ep_rules;

/*
 * Loads and validates the rule file at path. *out receives a new rule set
 * owned by the caller (wm_ep_rules_free), NULL on error: WM_ERR_IO when the
 * file cannot be read, WM_ERR_INPUT naming file, rule index and field.
 */
wm_status wm_ep_rules_load(const char *path, wm_ep_rules **out, wm_error *err);

/* Parses rule JSON text (name is used in messages); same contract as load. */
wm_status wm_ep_rules_parse(const char *text, const char *name, wm_ep_rules **out, wm_error *err);

void wm_ep_rules_free(wm_ep_rules *r);

/* The checks for one device bit (model_checks with device_checks applied). */
const wm_ep_checks *wm_ep_rules_checks(const wm_ep_rules *r, unsigned device);

/*
 * The first rule for (domain, op_type) on device whose [since, until] holds
 * version (version < 0: the domain is not imported, any range matches).
 * NULL when none; then *op_known (may be NULL) tells whether some rule for
 * the op exists on that device at another opset version.
 */
const wm_rule *wm_ep_rules_find(const wm_ep_rules *r, const char *domain, const char *op_type, int64_t version,
                                unsigned device, int *op_known);

#endif
