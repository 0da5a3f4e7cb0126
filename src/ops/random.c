/*
 * random.c - RandomUniform, RandomNormal, RandomUniformLike,
 * RandomNormalLike (1..), Bernoulli (15..), Multinomial (7..).
 *
 * Each node owns a xoshiro256** stream, seeded at session creation from
 * its `seed` attribute (through splitmix64, so a given seed gives the same
 * sequence in every session) or, without one, from a hash of the node's
 * name (ONNX lets the runtime pick the seed; picking it from the name keeps
 * the engine reproducible: a fresh session replays the same draws). Every
 * run continues the node's stream: successive runs draw new values. ONNX
 * leaves the generator to the runtime, so values never match another
 * runtime's draws; shapes, types and distributions do. The ops are
 * WM_OP_NOFOLD: never folded or evaluated ahead. Draws are sequential (one
 * stream), so they do not depend on the thread count.
 */
#include <string.h>

#include "ops/scalar.h"

typedef struct rng_state {
    uint64_t s[4];
} rng_state;

static uint64_t splitmix64(uint64_t *x) {
    uint64_t z = (*x += 0x9e3779b97f4a7c15ull);
    z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
    z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
    return z ^ (z >> 31);
}

static uint64_t rotl(uint64_t x, int k) { return (x << k) | (x >> (64 - k)); }

static uint64_t next64(rng_state *r) {
    uint64_t *s = r->s, res = rotl(s[1] * 5, 7) * 9, t = s[1] << 17;
    s[2] ^= s[0];
    s[3] ^= s[1];
    s[1] ^= s[2];
    s[0] ^= s[3];
    s[2] ^= t;
    s[3] = rotl(s[3], 45);
    return res;
}

/* Uniform in [0, 1) with 53 random bits. */
static double uniform01(rng_state *r) { return (double)(next64(r) >> 11) * 0x1.0p-53; }

/* Standard normal (Box-Muller; one value per pair of uniforms, no state besides the stream). */
static double normal01(rng_state *r) {
    double u = 1.0 - uniform01(r), v = uniform01(r); /* u in (0, 1] */
    return sqrt(-2.0 * log(u)) * cos(2.0 * M_PI * v);
}

static const int32_t float_types[] = {WM_DT_FLOAT, WM_DT_FLOAT16, WM_DT_BFLOAT16, WM_DT_DOUBLE, 0};

static int in_list(int32_t dt, const int32_t *l) {
    for (; *l; l++)
        if (*l == dt) return 1;
    return 0;
}

/* Seeds the node's stream; state goes to n->state. */
static wm_status rng_init(wm_node *n, wm_error *err) {
    rng_state *r = wm_node_alloc(n, sizeof *r);
    if (!r) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    n->state = r;
    uint64_t x;
    const wm_onnx_attr *a = wm_attr(n, "seed");
    if (a) {
        union { float f; uint32_t u; } v = {.f = a->f};
        x = v.u; /* the float's bits: every distinct seed its own stream */
    } else { /* FNV-1a of the node's name */
        x = 1469598103934665603ull;
        for (const char *p = wm_node_label(n); *p; p++) x = (x ^ (uint8_t)*p) * 1099511628211ull;
    }
    for (int i = 0; i < 4; i++) r->s[i] = splitmix64(&x);
    return WM_OK;
}

/* ---------------------------------------------------------------- RandomUniform / RandomNormal (+Like) */

static wm_status random_init(wm_node *n, wm_error *err) {
    int like = strstr(n->proto->op_type, "Like") != NULL;
    int32_t dt = (int32_t)wm_attr_int(n, "dtype", like ? 0 : WM_DT_FLOAT);
    if (like) {
        wm_status st = wm_check_type(n, 0, wm_types_all, err);
        if (st) return st;
        if (!dt) dt = n->in_dtype[0];
    }
    if (!in_list(dt, float_types))
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "dtype %s is not a float type%s", wm_dtype_name(dt),
                           like ? " (set the dtype attribute for a non-float input)" : "");
    n->out_dtype[0] = dt;
    return rng_init(n, err);
}

static wm_status random_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (wm_has_in(n, 0)) { /* the *Like ops */
        wm_set_shape(out[0], in[0]->rank, in[0]->dims);
        return WM_OK;
    }
    size_t k;
    const int64_t *shape = wm_attr_ints(n, "shape", &k);
    if (!shape) return wm_node_err(n, err, WM_ERR_INPUT, "shape attribute missing");
    if (k > WM_MAX_RANK) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "rank %zu over %d", k, WM_MAX_RANK);
    for (size_t i = 0; i < k; i++)
        if (shape[i] < 0) return wm_node_err(n, err, WM_ERR_INPUT, "negative dim in shape");
    wm_set_shape(out[0], (int)k, shape);
    return WM_OK;
}

static wm_status random_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    (void)in, (void)x;
    rng_state *r = n->state;
    int normal = strstr(n->proto->op_type, "Normal") != NULL;
    double a = wm_attr_float(n, normal ? "mean" : "low", 0.0f);
    double b = wm_attr_float(n, normal ? "scale" : "high", 1.0f);
    uint64_t total = wm_tensor_numel(out[0]);
    for (uint64_t i = 0; i < total; i++)
        wm_store_f64(out[0]->dtype, out[0]->data, i, normal ? a + b * normal01(r) : a + (b - a) * uniform01(r));
    return WM_OK;
}

/* ---------------------------------------------------------------- Bernoulli */

static wm_status bernoulli_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, float_types, err);
    if (st) return st;
    int32_t dt = (int32_t)wm_attr_int(n, "dtype", n->in_dtype[0]);
    if (!in_list(dt, wm_types_all)) return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "dtype %s is not supported", wm_dtype_name(dt));
    n->out_dtype[0] = dt;
    return rng_init(n, err);
}

static wm_status same_shape_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    (void)n, (void)err;
    wm_set_shape(out[0], in[0]->rank, in[0]->dims);
    return WM_OK;
}

static wm_status bernoulli_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    rng_state *r = n->state;
    uint64_t total = wm_tensor_numel(out[0]);
    for (uint64_t i = 0; i < total; i++) {
        double p = wm_tensor_get_f64(in[0], i);
        if (!(p >= 0 && p <= 1))
            return wm_node_err(n, x->err, WM_ERR_INPUT, "probability %g at %llu is outside [0, 1]", p, (unsigned long long)i);
        wm_store_f64(out[0]->dtype, out[0]->data, i, uniform01(r) < p ? 1.0 : 0.0);
    }
    return WM_OK;
}

/* ---------------------------------------------------------------- Multinomial */

static wm_status multinomial_init(wm_node *n, wm_error *err) {
    wm_status st = wm_check_type(n, 0, float_types, err);
    if (st) return st;
    int32_t dt = (int32_t)wm_attr_int(n, "dtype", WM_DT_INT32);
    if (dt != WM_DT_INT32 && dt != WM_DT_INT64)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "dtype %s is not int32 or int64", wm_dtype_name(dt));
    if (wm_attr_int(n, "sample_size", 1) < 1) return wm_node_err(n, err, WM_ERR_INPUT, "sample_size must be positive");
    n->out_dtype[0] = dt;
    return rng_init(n, err);
}

static wm_status multinomial_infer(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_error *err) {
    if (in[0]->rank != 2) return wm_node_err(n, err, WM_ERR_INPUT, "input must be [batch_size, class_size]");
    out[0]->rank = 2;
    out[0]->dims[0] = in[0]->dims[0];
    out[0]->dims[1] = wm_attr_int(n, "sample_size", 1);
    return WM_OK;
}

static wm_status multinomial_run(wm_node *n, wm_tensor *const *in, wm_tensor *const *out, wm_exec *x) {
    rng_state *r = n->state;
    int64_t B = in[0]->dims[0], C = in[0]->dims[1], S = out[0]->dims[1];
    for (int64_t b = 0; b < B; b++) {
        /* the input holds unnormalized log-probabilities: p_c ~ exp(x_c - max) */
        double m = -INFINITY, total = 0;
        for (int64_t c = 0; c < C; c++) {
            double v = wm_tensor_get_f64(in[0], (uint64_t)(b * C + c));
            if (v > m) m = v;
        }
        for (int64_t c = 0; c < C; c++) total += exp(wm_tensor_get_f64(in[0], (uint64_t)(b * C + c)) - m);
        if (!(total > 0) || !isfinite(total))
            return wm_node_err(n, x->err, WM_ERR_INPUT, "row %lld has no finite probability mass", (long long)b);
        for (int64_t s = 0; s < S; s++) {
            double u = uniform01(r) * total, acc = 0;
            int64_t pick = C - 1;
            for (int64_t c = 0; c < C; c++) {
                acc += exp(wm_tensor_get_f64(in[0], (uint64_t)(b * C + c)) - m);
                if (u < acc) {
                    pick = c;
                    break;
                }
            }
            wm_store_int(out[0]->dtype, out[0]->data, (uint64_t)(b * S + s), pick);
        }
    }
    return WM_OK;
}

static const wm_op ops[] = {
    {"", "RandomUniform", 1, 0, random_init, random_infer, random_run, NULL, WM_OP_NOFOLD | WM_OP_NO_INPUT0, 0},
    {"", "RandomNormal", 1, 0, random_init, random_infer, random_run, NULL, WM_OP_NOFOLD | WM_OP_NO_INPUT0, 0},
    {"", "RandomUniformLike", 1, 0, random_init, random_infer, random_run, NULL, WM_OP_NOFOLD | WM_OP_DIMS_ONLY, 0},
    {"", "RandomNormalLike", 1, 0, random_init, random_infer, random_run, NULL, WM_OP_NOFOLD | WM_OP_DIMS_ONLY, 0},
    {"", "Bernoulli", 15, 0, bernoulli_init, same_shape_infer, bernoulli_run, NULL, WM_OP_NOFOLD, 0},
    {"", "Multinomial", 7, 0, multinomial_init, multinomial_infer, multinomial_run, NULL, WM_OP_NOFOLD, 0},
};

const wm_op_table wm_ops_random = {ops, sizeof ops / sizeof ops[0]};
