/*
 * libFuzzer target for the engine's ops: the bytes are decoded into a small
 * graph of 1 to 4 nodes drawn from every op the engine registers
 * (ops/registry.c, wm_op_at), with random attributes, element types and
 * small shapes; their inputs are run-time inputs, constants or earlier
 * nodes' outputs, filled with extreme values (0, +-1, the type's minimum and
 * maximum, NaN, +-inf, denormals, huge). The optimizer's basic passes (its
 * constant folding and shape values) may run first; a session is made of the
 * graph (its folding of constants on or off) and run twice.
 * Findings: a crash, undefined behaviour (UBSan, built with WM_SANITIZE), a
 * leak, an output whose bytes are not all addressable, or a case over 1 s of
 * CPU. A single allocation over 64 MiB fails (ASan returns NULL, see
 * __asan_default_options) and must come back as an error, not a crash.
 *
 * Layout of the bytes (a read past the end gives 0):
 *   [flags] (bits 0-2, 5: the opset; 3: no folding at session creation; 4: no optimizer passes; 7: two
 *   threads) [nodes] then per node: [op lo][op hi][n_in][n_out][n_attr] (op: an index into the registry, or
 *     0xffff followed by a NUL-terminated name, "Div" or "com.microsoft:Attention", as the seeds write it),
 *     per input:  [kind] (0 run-time input, 1 constant, 2 an earlier output, 3 omitted)
 *                 for a new tensor: [dtype][rank][dims...] then per element [value]
 *     per attr:   [name][kind][count][values...]
 * Seeds: tests/fuzz/seeds/engine_ops (tests/fuzz/seeds/make_engine_ops.py).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "onnx/graph.h"
#include "onnx/onnx_model.h"
#include "onnx/pb.h"
#include "ops/op.h"
#include "opt/opt.h"
#include "winml/runtime.h"

#define MAX_NODES 4
#define MAX_IN 8
#define MAX_OUT 3
#define MAX_ELEMS 64
#define MAX_VALS (MAX_NODES * MAX_IN)

/* Big allocations fail instead of aborting: the engine must report them (an output over 64 MiB is the model's
 * request, not a finding; a crash on the NULL is). 64, not more: a legitimate large output filled element by
 * element under ASan takes seconds, which would read as a runaway. */
const char *__asan_default_options(void);
const char *__asan_default_options(void) { return "allocator_may_return_null=1:max_allocation_size_mb=64"; }

/* The engine's memory bound, where it has one ($WM_MAX_MEMORY, runtime/budget.c on the main line): a case may ask for
 * any size, the session must refuse past 256 MiB (without it, a folded Tile by INT32_MAX maps and fills 16 GiB). */
int LLVMFuzzerInitialize(int *argc, char ***argv);
int LLVMFuzzerInitialize(int *argc, char ***argv) {
    (void)argc, (void)argv;
    setenv("WM_MAX_MEMORY", "256M", 0);
    return 0;
}

typedef struct rd {
    const uint8_t *p;
    size_t n;
} rd;

static uint8_t u8(rd *r) {
    if (!r->n) return 0;
    r->n--;
    return *r->p++;
}

static const int32_t DTYPES[] = {WM_DT_FLOAT, WM_DT_INT64, WM_DT_INT32, WM_DT_FLOAT16, WM_DT_BFLOAT16,
                                 WM_DT_DOUBLE, WM_DT_INT8, WM_DT_UINT8, WM_DT_INT16, WM_DT_UINT16,
                                 WM_DT_UINT32, WM_DT_UINT64, WM_DT_BOOL, WM_DT_INT64, WM_DT_FLOAT, WM_DT_INT32};
#define N_DTYPES (sizeof DTYPES / sizeof DTYPES[0])

/* ---------------------------------------------------------------- extreme values */

static int64_t int_min(int32_t dt) {
    switch (dt) {
    case WM_DT_INT8: return INT8_MIN;
    case WM_DT_INT16: return INT16_MIN;
    case WM_DT_INT32: return INT32_MIN;
    case WM_DT_INT64: return INT64_MIN;
    default: return 0;
    }
}

static int64_t int_max(int32_t dt) {
    switch (dt) {
    case WM_DT_INT8: return INT8_MAX;
    case WM_DT_UINT8: return UINT8_MAX;
    case WM_DT_INT16: return INT16_MAX;
    case WM_DT_UINT16: return UINT16_MAX;
    case WM_DT_INT32: return INT32_MAX;
    case WM_DT_UINT32: return UINT32_MAX;
    case WM_DT_INT64: return INT64_MAX;
    case WM_DT_UINT64: return -1; /* all ones */
    default: return 1;
    }
}

/* An integer of type dt from class c: small values most often (indices, axes, counts), then the edges. */
static int64_t int_value(int32_t dt, uint8_t c) {
    int64_t mn = int_min(dt), mx = int_max(dt);
    switch (c % 32) {
    case 0: return 0;
    case 1: return 1;
    case 2: return -1;
    case 3: return 2;
    case 4: return 3;
    case 5: return -2;
    case 6: return mn;
    case 7: return mx;
    case 8: return (int64_t)((uint64_t)mn + 1);
    case 9: return (int64_t)((uint64_t)mx - 1);
    case 10: return 4;
    case 11: return 5;
    case 12: return INT32_MIN;
    case 13: return INT32_MAX;
    case 14: return (int64_t)1 << 31;
    case 15: return (int64_t)1 << 62;
    case 16: return -((int64_t)1 << 62);
    case 17: return 7;
    case 18: return -7;
    case 19: return 64;
    case 20: return 8;
    case 21: return -3;
    case 22: return 1000;
    case 24: return 9; /* 9..13, 16: the other ONNX element type codes (Cast's to) */
    case 25: return 10;
    case 26: return 11;
    case 27: return 12;
    case 28: return 13;
    case 29: return 16;
    case 30: return -8;
    case 31: return 100;
    default: return 6;
    }
}

static double float_value(uint8_t c) {
    static const double V[] = {0.0, 1.0, -1.0, 0.5, 2.0, NAN, INFINITY, -INFINITY, -0.0, 1e-45, -1e-45, FLT_MAX,
                               -FLT_MAX, 1e30, -1e30, 1e-30, 3.0, 1e60, -1e60, 5e-324, 65504.0, 2147483648.0,
                               9223372036854775808.0, -9223372036854775808.0, 1.8446744073709552e19, 300.7,
                               -300.7, 1e-8, 0.25, -2.0, 7.0, 1e300};
    return V[c % (sizeof V / sizeof V[0])];
}

static void put_elem(int32_t dt, uint8_t *p, size_t i, rd *r) {
    uint8_t c = u8(r);
    if (c >= 240) { /* raw bits */
        size_t es = wm_dtype_size(dt);
        for (size_t k = 0; k < es; k++) p[i * es + k] = u8(r);
        return;
    }
    double f = float_value(c);
    int64_t v = int_value(dt, c);
    switch (dt) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)f; break; /* 1e60 -> inf, as intended */
    case WM_DT_DOUBLE: ((double *)p)[i] = f; break;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)f); break;
    case WM_DT_BFLOAT16: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)f); break;
    case WM_DT_BOOL: p[i] = c & 1; break;
    case WM_DT_INT8: case WM_DT_UINT8: p[i] = (uint8_t)v; break;
    case WM_DT_INT16: case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)v; break;
    case WM_DT_INT32: case WM_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)v; break;
    default: ((int64_t *)p)[i] = v; break;
    }
}

/* ---------------------------------------------------------------- attributes */

enum { A_INT, A_FLOAT, A_INTS, A_FLOATS, A_STRING, A_TENSOR };

static const struct {
    const char *name;
    int kind;
} ATTRS[] = {
    {"axis", A_INT},           {"axes", A_INTS},          {"keepdims", A_INT},        {"k", A_INT},
    {"perm", A_INTS},          {"pads", A_INTS},          {"starts", A_INTS},         {"ends", A_INTS},
    {"mode", A_STRING},        {"to", A_INT},             {"direction", A_STRING},    {"fmod", A_INT},
    {"upper", A_INT},          {"exclusive", A_INT},      {"reverse", A_INT},         {"blocksize", A_INT},
    {"kernel_shape", A_INTS},  {"strides", A_INTS},       {"dilations", A_INTS},      {"group", A_INT},
    {"alpha", A_FLOAT},        {"beta", A_FLOAT},         {"gamma", A_FLOAT},         {"epsilon", A_FLOAT},
    {"num_heads", A_INT},      {"largest", A_INT},        {"sorted", A_INT},          {"select_last_index", A_INT},
    {"noop_with_empty_axes", A_INT}, {"allowzero", A_INT}, {"batch_dims", A_INT},     {"value", A_TENSOR},
    {"split", A_INTS},         {"num_outputs", A_INT},    {"ceil_mode", A_INT},       {"auto_pad", A_STRING},
    {"count_include_pad", A_INT}, {"p", A_INT},           {"transA", A_INT},          {"transB", A_INT},
    {"output_padding", A_INTS}, {"output_shape", A_INTS}, {"coordinate_transformation_mode", A_STRING},
    {"nearest_mode", A_STRING}, {"cubic_coeff_a", A_FLOAT}, {"exclude_outside", A_INT},
    {"extrapolation_value", A_FLOAT}, {"scales", A_FLOATS}, {"sizes", A_INTS},     {"dtype", A_INT},
    {"seed", A_FLOAT},         {"high", A_FLOAT},         {"low", A_FLOAT},           {"shape", A_INTS},
    {"time_axis", A_INT},      {"batch_axis", A_INT},     {"lambd", A_FLOAT},         {"bias", A_FLOAT},
    {"saturate", A_INT},       {"block_size", A_INT},     {"bits", A_INT},            {"K", A_INT},
    {"N", A_INT},              {"kv_num_heads", A_INT},   {"interleaved", A_INT},     {"scale", A_FLOAT},
    {"output_datatype", A_INT}, {"periodic", A_INT},      {"onesided", A_INT},        {"inverse", A_INT},
    {"equation", A_STRING},    {"reduction", A_STRING},   {"ignore_index", A_INT},    {"spatial_scale", A_FLOAT},
    {"sampling_ratio", A_INT}, {"output_height", A_INT},  {"output_width", A_INT},    {"align_corners", A_INT},
    {"padding_mode", A_STRING}, {"approximate", A_STRING}, {"size", A_INT},           {"detect_positive", A_INT},
    {"detect_negative", A_INT}, {"value_int", A_INT},     {"value_float", A_FLOAT},   {"value_ints", A_INTS},
    {"min", A_FLOAT},          {"max", A_FLOAT},          {"paddings", A_INTS},       {"sample_size", A_INT},
    {"center_point_box", A_INT}, {"stash_type", A_INT},   {"rotary_embedding_dim", A_INT}, {"do_rotary", A_INT},
    {"unidirectional", A_INT}, {"softcap", A_FLOAT},      {"is_causal", A_INT},       {"q_num_heads", A_INT},
    {"axis_w", A_INT},         {"transBatchA", A_INT},    {"activation", A_STRING},   {"training_mode", A_INT},
    {"activation_type", A_STRING}, {"normalize_routing_weights", A_INT}, {"swiglu_limit", A_FLOAT},
    {"swiglu_fusion", A_INT},  {"expert_weight_bits", A_INT},
};
#define N_ATTRS (sizeof ATTRS / sizeof ATTRS[0])

static const char *const STRINGS[] = {
    "",          "constant",   "reflect",      "edge",      "wrap",       "LEFT",          "RIGHT",
    "nearest",   "linear",     "cubic",        "DCR",       "CRD",        "SAME_UPPER",    "SAME_LOWER",
    "VALID",     "NOTSET",     "tanh",         "none",      "half_pixel", "asymmetric",    "align_corners",
    "floor",     "ceil",       "ij,jk->ik",    "ii->i",     "...i->...",  "add",           "mul",
    "max",       "min",        "not_larger",   "stretch",   "zeros",      "border",        "reflection",
    "bilinear",  "round_prefer_floor", "pytorch_half_pixel", "tf_crop_and_resize", "i,i->", "Relu", "mean",
    "swiglu",    "silu",       "gelu",
};
#define N_STRINGS (sizeof STRINGS / sizeof STRINGS[0])

static void set_attr(wm_graph *g, wm_onnx_node *nd, rd *r) {
    uint8_t a = u8(r), kb = u8(r);
    const char *name = ATTRS[a % N_ATTRS].name;
    int kind = kb >= 224 ? kb % 6 : ATTRS[a % N_ATTRS].kind; /* sometimes the wrong kind */
    int cnt = u8(r) % 9;
    wm_error e = {0};
    int64_t iv[8];
    float fv[8];
    for (int i = 0; i < cnt; i++) {
        uint8_t c = u8(r);
        iv[i] = int_value(WM_DT_INT64, c);
        fv[i] = (float)float_value(c);
    }
    switch (kind) {
    case A_INT: wm_graph_set_attr_int(g, nd, name, cnt ? iv[0] : int_value(WM_DT_INT64, u8(r)), &e); break;
    case A_FLOAT: wm_graph_set_attr_float(g, nd, name, cnt ? fv[0] : (float)float_value(u8(r)), &e); break;
    case A_INTS: wm_graph_set_attr_ints(g, nd, name, iv, (size_t)cnt, &e); break;
    case A_FLOATS: wm_graph_set_attr_floats(g, nd, name, fv, (size_t)cnt, &e); break;
    case A_STRING: wm_graph_set_attr_string(g, nd, name, STRINGS[u8(r) % N_STRINGS], &e); break;
    default: { /* a one-element tensor (ConstantOfShape's value, Constant's value) */
        int32_t dt = DTYPES[u8(r) % N_DTYPES];
        size_t es = wm_dtype_size(dt);
        uint8_t *buf = wm_arena_alloc(&wm_graph_model(g)->arena, es);
        if (!buf) return;
        put_elem(dt, buf, 0, r);
        int64_t one = 1;
        wm_onnx_tensor *t = wm_graph_make_tensor(g, NULL, dt, &one, (size_t)(u8(r) & 1), (wm_bytes){buf, es}, &e);
        if (t) wm_graph_set_attr_tensor(g, nd, name, t, &e);
    }
    }
}

/* ---------------------------------------------------------------- tensors */

typedef struct tin {
    char name[16];
    wm_tensor t;
    uint8_t *data;
} tin;

/* A tensor of a random element type and small shape (at most MAX_ELEMS elements), filled from the bytes. */
static int make_tensor(rd *r, wm_tensor *t, uint8_t **data) {
    memset(t, 0, sizeof *t);
    t->dtype = DTYPES[u8(r) % N_DTYPES];
    t->rank = u8(r) % 5;
    static const int64_t D[] = {1, 2, 3, 0, 4, 1, 2, 5};
    uint64_t numel = 1;
    for (int d = 0; d < t->rank; d++) {
        t->dims[d] = D[u8(r) % 8];
        if (numel * (uint64_t)t->dims[d] > MAX_ELEMS) t->dims[d] = 1;
        numel *= (uint64_t)t->dims[d];
    }
    size_t es = wm_dtype_size(t->dtype);
    *data = malloc(numel * es + 1);
    if (!*data) return -1;
    for (uint64_t i = 0; i < numel; i++) put_elem(t->dtype, *data, i, r);
    t->data = *data;
    return 0;
}

/* ---------------------------------------------------------------- the case */

/* The op named by the NUL-terminated string that follows ("Name" or "domain:Name"); NULL when none has it. */
static const wm_op *op_named(rd *r) {
    char buf[64];
    size_t k = 0;
    for (uint8_t c; (c = u8(r)) != 0 && k < sizeof buf - 1;) buf[k++] = (char)c;
    buf[k] = 0;
    const char *colon = strchr(buf, ':'), *name = colon ? colon + 1 : buf;
    for (size_t i = 0; wm_op_at(i); i++) {
        const wm_op *op = wm_op_at(i);
        if (!strcmp(op->name, name) && (colon ? !strncmp(op->domain, buf, (size_t)(colon - buf)) && !op->domain[colon - buf]
                                              : !*op->domain))
            return op;
    }
    return NULL;
}

static void touch_outputs(wm_session *s, wm_tensor *outs, size_t n) {
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < n; i++) {
        uint64_t nb = wm_tensor_nbytes(&outs[i]);
        const uint8_t *p = outs[i].data;
        if (!p) continue;
        for (uint64_t k = 0; k < nb; k++) sink ^= p[k]; /* ASan: every byte of an output is addressable */
    }
    (void)s, (void)sink;
}

static int trace; /* WM_FUZZ_TRACE=1: each case's graph and outcome on stderr (to check what a seed decodes to) */

static void run_case(const uint8_t *data, size_t size) {
    rd r = {data, size};
    static size_t n_ops;
    if (!n_ops)
        while (wm_op_at(n_ops)) n_ops++;
    uint8_t flags = u8(&r);
    static const int OPSETS[] = {21, 13, 18, 17, 11, 9, 7, 22, 23, 14, 19, 20, 12, 10, 8, 15};
    int opset = OPSETS[(flags & 7) | ((flags >> 2) & 8)]; /* bits 0-2 and 5 */
    wm_onnx_model *m = wm_onnx_model_new();
    if (!m) return;
    m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "fuzz");
    const char *domains[] = {"", "com.microsoft", "ai.winml"};
    for (int d = 0; d < 3; d++) {
        wm_onnx_opset *o = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
        o->domain = wm_arena_strdup(&m->arena, domains[d]);
        o->version = d ? 1 : opset;
        *(wm_onnx_opset **)wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof o) = o;
    }
    wm_graph *g = NULL;
    wm_error e = {0};
    tin ins[MAX_VALS];
    size_t n_ins = 0;
    uint8_t *bufs[MAX_VALS];
    size_t n_bufs = 0;
    char vals[MAX_NODES * MAX_OUT][16];
    size_t n_vals = 0;
    if (wm_graph_open(m, m->proto->graph, &g, &e)) goto done;
    int nn = 1 + u8(&r) % MAX_NODES;
    for (int k = 0; k < nn; k++) {
        size_t oi = (size_t)u8(&r);
        oi |= (size_t)u8(&r) << 8;
        const wm_op *op = oi == 0xffff ? op_named(&r) : wm_op_at(oi % n_ops);
        if (!op) goto done;
        int n_in = u8(&r) % (MAX_IN + 1), n_out = 1 + u8(&r) % MAX_OUT, n_attr = u8(&r) % 5;
        if (trace) fprintf(stderr, "node %d: %s%s%s, %d inputs, %d outputs, %d attributes\n", k, op->domain,
                           *op->domain ? ":" : "", op->name, n_in, n_out, n_attr);
        char in_names[MAX_IN][16];
        const char *in_ptr[MAX_IN];
        for (int i = 0; i < n_in; i++) {
            uint8_t kind = u8(&r) % 4;
            in_ptr[i] = in_names[i];
            if (kind == 2 && n_vals) {
                snprintf(in_names[i], sizeof in_names[i], "%s", vals[u8(&r) % n_vals]);
                continue;
            }
            if (kind == 3) {
                in_ptr[i] = "";
                continue;
            }
            wm_tensor t;
            uint8_t *buf;
            if (make_tensor(&r, &t, &buf)) goto done;
            bufs[n_bufs++] = buf;
            if (kind == 1) { /* a constant */
                snprintf(in_names[i], sizeof in_names[i], "c%d_%d", k, i);
                uint64_t nb = wm_tensor_nbytes(&t);
                void *copy = wm_arena_alloc(&m->arena, nb ? nb : 1);
                if (!copy) goto done;
                memcpy(copy, buf, nb);
                if (wm_graph_add_initializer(g, in_names[i], t.dtype, t.dims, (size_t)t.rank, (wm_bytes){copy, nb},
                                             NULL, &e))
                    goto done;
            } else { /* a run-time input, its dims declared or left symbolic */
                tin *x = &ins[n_ins++];
                snprintf(x->name, sizeof x->name, "x%d_%d", k, i);
                snprintf(in_names[i], sizeof in_names[i], "%s", x->name);
                x->t = t;
                int64_t decl[WM_MAX_RANK];
                for (int d = 0; d < t.rank; d++) decl[d] = u8(&r) & 1 ? t.dims[d] : -1;
                if (wm_graph_add_input(g, x->name, t.dtype, decl, (size_t)t.rank, &e)) goto done;
            }
        }
        char out_names[MAX_OUT][16];
        const char *out_ptr[MAX_OUT];
        for (int i = 0; i < n_out; i++) {
            snprintf(out_names[i], sizeof out_names[i], "o%d_%d", k, i);
            out_ptr[i] = out_names[i];
        }
        wm_onnx_node *nd = wm_graph_add_node(g, op->name, *op->domain ? op->domain : NULL, NULL, in_ptr,
                                             (size_t)n_in, out_ptr, (size_t)n_out, &e);
        if (!nd) goto done;
        for (int a = 0; a < n_attr; a++) set_attr(g, nd, &r);
        for (int i = 0; i < n_out; i++) {
            if (wm_graph_add_output(g, out_names[i], WM_DT_FLOAT, NULL, 0, &e)) goto done;
            snprintf(vals[n_vals++], sizeof vals[0], "%s", out_names[i]);
        }
    }
    if (!((flags >> 4) & 1) && !wm_graph_check(g, &e) && !wm_graph_topo_sort(g, &e)) {
        /* the optimizer's basic passes: constant folding (opt/fold.c) and shape values (opt/shape.c), the
         * evaluators that must agree with the ops; its fusions are fuzz_opt's */
        wm_opt_config c;
        wm_opt_config_default(&c);
        c.level = WM_OPT_BASIC;
        c.fold_max_bytes = 1 << 16;
        c.max_rounds = 2;
        wm_opt_run(g, &c, NULL, &e);
    }
    wm_graph_free(g);
    g = NULL;
    wm_session_opts o = {.threads = 1 + (flags >> 7), .no_fold = (flags >> 3) & 1, .no_optimize = 1};
    wm_session *s = NULL;
    wm_onnx_model *mm = m;
    m = NULL;
    wm_status st = wm_session_new_model(mm, &o, &s, &e);
    if (trace) fprintf(stderr, "opset %d, session: %s\n", opset, st ? e.msg : "ok");
    if (st == WM_OK) {
        size_t ni = wm_session_n_inputs(s), no = wm_session_n_outputs(s);
        wm_tensor feed[MAX_VALS], outs[MAX_NODES * MAX_OUT];
        int ok = ni <= MAX_VALS && no <= MAX_NODES * MAX_OUT;
        for (size_t i = 0; ok && i < ni; i++) {
            const char *nm = wm_session_input(s, i)->name;
            ok = 0;
            for (size_t j = 0; j < n_ins; j++)
                if (!strcmp(ins[j].name, nm)) feed[i] = ins[j].t, ok = 1;
        }
        for (int rep = 0; ok && rep < 2; rep++) /* twice: the second run reuses the plan */
            if (wm_session_run(s, feed, ni, outs, no, &e) == WM_OK) {
                touch_outputs(s, outs, no);
                if (trace && !rep) fprintf(stderr, "run: ok\n");
            } else if (trace && !rep)
                fprintf(stderr, "run: %s\n", e.msg);
        wm_session_free(s);
    }
done:
    wm_graph_free(g);
    if (m) wm_onnx_free(m);
    for (size_t i = 0; i < n_bufs; i++) free(bufs[i]);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    trace = getenv("WM_FUZZ_TRACE") != NULL;
    clock_t t0 = clock();
    run_case(data, size);
    double cpu = (double)(clock() - t0) / CLOCKS_PER_SEC;
    if (cpu > 1.0) { /* a runaway: small tensors never need this long */
        fprintf(stderr, "fuzz_engine_ops: case took %.2f s of CPU (limit 1 s)\n", cpu);
        abort();
    }
    return 0;
}
