/* quant_impl.h - what the quantization modules share (internal). */
#ifndef WM_OPT_QUANT_IMPL_H
#define WM_OPT_QUANT_IMPL_H

#include <math.h>

#include "opt/opt_util.h"
#include "opt/quant.h"
#include "opt/shape.h"
#include "onnx/onnx_model.h"

enum { WM_QJOB_NBITS = 1, WM_QJOB_TO_F16, WM_QJOB_INT8W, WM_QJOB_CARRY };

/*
 * One deferred computation: reads src, produces the bytes of dst[0..n_dst).
 *  NBITS:  dst = packed weights, scales, [zero points]   (K, N, bs, bits, sym, scale_dtype)
 *  TO_F16: dst = src converted to float16 (clamped to +-65504)
 *  INT8W:  dst = quantized weight, scale(s), [zero point(s)] (K, N, per_channel, sym, qtype, trans; t_out:
 *          the codes of src [K, N] written as [N, K], so a Gemm transB weight feeds MatMulInteger)
 *  CARRY:  dst = packed codes, scales, [zero points: uint8 packed, or float [N, nblk]] from carry's rows, checked
 *          against src's float values (K, N, bs, bits, trans: src stored [N, K])
 */
typedef struct wm_qjob {
    int kind;
    const wm_onnx_model *m;   /* owner of src's mapping (pages released while reading) */
    const wm_onnx_tensor *src;
    wm_onnx_tensor *dst[3];
    size_t n_dst;
    int64_t K, N, bs;
    int bits, sym, per_channel, trans, reduce;
    int32_t scale_dtype, qtype;
    int half_scales; /* NBITS with float32 scales: wm_quant_config.half_scales */
    int t_out;       /* INT8W: codes transposed (above) */
    int search;      /* NBITS: wm_quant_config.scale_search */
    const wm_quant_carry *carry; /* CARRY: the entry (bits, block, zp and rows) */
    const wm_quant_hessian *hess; /* NBITS: GPTQ with these statistics (NULL: RTN / the search) */
    double damp;                  /* NBITS with hess: wm_quant_config.gptq_damp (resolved) */
    const wm_quant_hessian *imp;  /* NBITS: importance h [2K] weighting the search (implies it; with hess, 4-bit:
                                     the search picks each block's scale / zero point, GPTQ the codes) */
    int float_zp; /* NBITS, asymmetric, no hess: float zero points [N, nblk] of the scales' type (wm_nbits_fit_fzp) */
    int act_order; /* NBITS with hess: wm_quant_config.gptq_act_order */
} wm_qjob;

struct wm_quant_plan {
    wm_qjob *jobs;
    size_t n, cap;
};

/* The sizes (bytes) of job j's outputs into sz[0..n_dst). */
void wm_qjob_sizes(const wm_qjob *j, uint64_t *sz);

/*
 * Runs job j: out[i] receive malloc'ed buffers of wm_qjob_sizes bytes
 * (caller frees). src bytes may be released from memory as they are read
 * (release != 0: madvise on mapped file ranges).
 */
wm_status wm_qjob_run(const wm_qjob *j, uint8_t **out, int release, wm_error *err);

/*
 * Adds the job's output tensors as initializers (names, dtypes, dims given)
 * and either runs the job now (plan NULL: bytes copied into the arena) or
 * records it in plan (tensors left without bytes until wm_quant_save).
 */
typedef struct wm_qout {
    const char *name;
    int32_t dtype;
    int64_t dims[4];
    size_t rank;
} wm_qout;
wm_status wm_qjob_submit(wm_graph *g, wm_quant_plan *plan, wm_qjob *j, const wm_qout *outs, wm_error *err);

/* 1 when node n is selected by c (op type listed, not excluded by name). */
int wm_quant_selected(const wm_quant_config *c, const wm_onnx_node *n, const char *const *dflt, size_t n_dflt);
/* 1 when name is listed in v[0..n). */
int wm_quant_listed(const char *const *v, size_t n, const char *name);

/* Passes */
wm_status wm_quant_fp16(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                        wm_error *err);
wm_status wm_quant_int8(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                        wm_error *err);
wm_status wm_quant_nbits(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan *plan,
                         wm_error *err);
/* The QMoE constants of expert stack name: codes [E, N, row_bytes] (uint8, copied from codes, nq bytes) and scales
   [E, N, n_scales] (rank_s 2: [E, N], one per row; ns floats) as initializers *q and *s named after it; *bytes grows
   by their size. Errors leave *q / *s NULL. */
wm_status wm_quant_moe_consts(wm_graph *g, const char *name, int bits, int64_t E, int64_t N, int64_t row_bytes,
                              int64_t n_scales, int rank_s, const uint8_t *codes, size_t nq, const float *scales,
                              size_t ns, const char **q, const char **s, uint64_t *bytes, wm_error *err);
/* int4 / int8 RTN: MoE nodes with float32 constant fc1 / fc2 experts -> QMoE (quant_moe.c); others left as they are */
wm_status wm_quant_moe(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_error *err);
/* MoE node n (float fc1 / fc2 constants [E, N, K], no fc3) -> QMoE on codes q1 / q2 and scales s1 / s2 (initializers
   in QMoE's layout) of bits and block (0: a scale per row) at accuracy (blocked experts), keeping n's attributes;
   unnormalized routing is scaled back in plain ops (quant_moe.c) */
wm_status wm_quant_moe_replace(wm_graph *g, wm_onnx_node *n, const char *q1, const char *s1, const char *q2,
                               const char *s2, int bits, int64_t block, int accuracy, wm_error *err);
/* WM_QUANT_CARRY: MoE nodes whose fc1 / fc2 have carry entries of one symmetric form -> QMoE on the carried blocks,
   checked value by value; the others stay MoE with the reason noted (quant_moe_carry.c) */
wm_status wm_quant_moe_carry(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_error *err);
/* Records what was done to carry-entry weight w (wm_quant_carry_note; quant_nbits.c) */
wm_status wm_quant_carry_note_add(wm_quant_report *r, const char *w, const wm_quant_carry *cy, const char *op,
                                  const char *result, int bits, int64_t block, int zp, const char *reason,
                                  wm_error *err);

/* WM_QUANT_CARRY: the entry naming weight w; NULL when none. */
const wm_quant_carry *wm_quant_carry_find(const wm_quant_config *c, const char *w);
/* ---- MatMulNBits block arithmetic (quant_nbits.c), shared with GPTQ (quant_gptq.c) */

#define WM_SCALE_HALF_EXACT (-1) /* scale rounding: float32 storage, half-exact values (wm_quant_config.half_scales) */

/* The stored scale: rounded to scale_dtype (float16, bfloat16, WM_SCALE_HALF_EXACT; float32: as it is). */
float wm_nbits_round_scale(float s, int32_t scale_dtype);
/* RTN's scale (stored-rounded) and zero point of a block whose values lie in [lo, hi] (quant_nbits.c's header). */
void wm_nbits_params(float lo, float hi, int bits, int sym, int32_t scale_dtype, float *scale, int *zp);
/* Zero point z of column n, block kb, into the packed zero points [N, ceil(nblk * bits / 8)]. */
void wm_nbits_put_zp(uint8_t *zp, int64_t n, int64_t kb, int64_t nblk, int bits, int z);

/* Code of v at scale reciprocal r and zero point z (RTN's arithmetic; NaN: the zero point). */
static inline int wm_nbits_code(float v, float r, int z, int kmax) {
    float x = roundf(v * r + (float)z);
    return x != x ? z : x < 0.0f ? 0 : x > (float)kmax ? kmax : (int)x;
}

/* Writes code v at row r of a column's block (dst: its first byte). */
static inline void wm_nbits_put_code(uint8_t *dst, int64_t r, int bits, int v) {
    if (bits == 8) dst[r] = (uint8_t)v;
    else if (r % 2 == 0) dst[r / 2] = (uint8_t)((dst[r / 2] & 0xf0) | v);
    else dst[r / 2] = (uint8_t)((dst[r / 2] & 0x0f) | (v << 4));
}

/* ---- float zero points (quant_fzp.c) */

/* z rounded to its stored float type (float16 / bfloat16; float32: as it is). */
float wm_nbits_round_zp(float z, int32_t zp_dtype);
/* The fit's weights of block x[0..n): w_i = x_i^2 + mean(x^2) / 8 (the larger values matter more). */
void wm_nbits_fzp_weights(const float *x, int64_t n, float *w);
/* The fit's weights: imp[i] (the importance of the block's row i: its input column's variance); imp NULL:
 * wm_nbits_fzp_weights. */
void wm_nbits_fit_weights(const float *x, const float *imp, int64_t n, float *w);
/*
 * Scale *scale and float zero point *zp (as stored in scale_dtype / zp_dtype) and codes q[0..n) in [0, kmax] of
 * block x[0..n) (finite values) of least weighted error sum_i w_i (x_i - s (q_i - z))^2 found by quant_fzp.c's
 * search; never more than the plain min/max fit's. tq: n bytes of scratch.
 */
void wm_nbits_fit_fzp(const float *x, const float *w, int64_t n, int kmax, int32_t scale_dtype, int32_t zp_dtype,
                      uint8_t *q, uint8_t *tq, float *scale, float *zp);

/*
 * Scale *scale and integer zero point *zp in [0, kmax] (uint8 zero points: onnxruntime's fast MatMulNBits path)
 * and codes q[0..n) of block x[0..n) of least weighted error among: the caller's choice on entry (*scale, *zp and
 * its codes: RTN's), and wm_nbits_fit_fzp's candidate ranges with the zero point rounded down and up, the scale
 * refitted by weighted least squares for the codes (quant_fzp.c's header). Never more error than the choice on
 * entry. A block with a NaN or infinity keeps the entry's choice and codes (q as the caller filled it). tq: n
 * bytes of scratch. mu (NULL: none) adds (sum_i mu_i d_i)^2 to the error (d_i = x_i - s (q_i - z): an importance's
 * column means, quant_fzp.c's header).
 */
void wm_nbits_fit_izp(const float *x, const float *w, const float *mu, int64_t n, int kmax, int32_t scale_dtype,
                      uint8_t *q, uint8_t *tq, float *scale, int *zp);

/* Float32 view of a constant weight, row-major, as floats (decoded from f32/f16/bf16/f64); caller frees. */
float *wm_quant_weight_f32(const wm_onnx_model *m, const wm_onnx_tensor *t, int release, wm_error *err);

/* A 4-bit matrix candidate for 8 bits by sensitivity (quant_sens.c): its weight, read as K x N (trans: t stored
   [N, K]), and its input's importance statistics (h [2K]: sums of x_k^2, then of x_k; rows). */
typedef struct wm_sens_cand {
    const char *weight;
    const wm_onnx_tensor *t;
    int64_t K, N;
    int trans;
    const wm_quant_hessian *imp;
    double rel, score; /* out: relative output error at 4 bits; it per weight (the greedy order) */
    int eight;         /* out: 1 when chosen for 8 bits */
} wm_sens_cand;

/* Measures each candidate's relative output error at 4 bits (asymmetric RTN in blocks of bs), sorts v by it per
   weight (largest first) and marks the ones kept at 8 bits within percent of the candidates' weights. Reads the
   weights (not released); errors: out of memory or an unreadable weight. */
wm_status wm_quant_sensitive(const wm_onnx_model *m, wm_sens_cand *v, size_t n, int64_t bs, int percent,
                             wm_error *err);

#endif
