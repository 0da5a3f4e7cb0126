/*
 * quant.h - precision conversion: fp16, int8 (dynamic MatMulInteger, static
 * QDQ with given activation ranges, w8a16) and int4/int8 weight-only RTN
 * (MatMulNBits, com.microsoft), with a streaming save for large models.
 *
 * wm_quant_run rewrites a graph in place. New weight tensors are either
 * computed at once into the model arena (plan == NULL), or deferred: the
 * graph then references tensors whose bytes are produced one at a time by
 * wm_quant_save, which writes them straight to the data file, so a model
 * whose weights are mmap'd quantizes within a small resident set.
 *
 * Calibration for static QDQ is separate (quant_calib.h): ranges come in
 * as (value name, min, max) pairs from whatever ran the model (our engine:
 * quant_calib_run.h, shared by winml build and winml quantize).
 */
#ifndef WM_OPT_QUANT_H
#define WM_OPT_QUANT_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/graph.h"

/* The largest block of a weight-only (MatMulNBits / GatherBlockQuantized) quantization: a block is padded to its
   size, so N columns of K rows take N * max(K, block) codes; 65536 is past any model's K (blocks past K only pad)
   and keeps the block's byte size (block * bits / 8) far from overflow. */
#define WM_QUANT_MAX_BLOCK 65536

typedef enum wm_quant_mode {
    WM_QUANT_FP16 = 1,      /* weights and compute in float16 */
    WM_QUANT_INT8_DYNAMIC,  /* DynamicQuantizeLinear + MatMulInteger, int8 weights */
    WM_QUANT_INT8_STATIC,   /* QDQ: uint8/int8 activations from calibrated ranges, int8 weights */
    WM_QUANT_W8A16,         /* QDQ: uint16 activations, int8 weights (NPUs) */
    WM_QUANT_INT4,          /* weight-only RTN blocks -> MatMulNBits */
    WM_QUANT_CARRY,         /* blocks given ready (wm_quant_carry, a GGUF's) -> MatMulNBits, not requantized */
    WM_QUANT_W16A16         /* QDQ: uint16 activations, uint16 asymmetric weights (the reference's -p int16) */
} wm_quant_mode;

/* Static QDQ modes (INT8_STATIC, W8A16, W16A16): their activation ranges come from calibration. */
int wm_quant_mode_static(wm_quant_mode m);

/*
 * A weight whose blocks come ready from its source (a GGUF's quantized tensor): WM_QUANT_CARRY re-encodes them as
 * MatMulNBits / GatherBlockQuantized blocks without requantizing. The weight has N rows of K values (a MatMul
 * weight [K, N]: its columns; a Gemm transB weight or a Gather table [N, K]: its rows); row(ctx, r, ...) gives row r
 * as K codes (one byte each, 0 .. 2^bits - 1), K / block scales and K / block zero points, (code - zp) * scale
 * being its value. Weights no entry names stay float in that mode.
 */
typedef struct wm_quant_carry {
    const char *weight;    /* the initializer's name */
    const char *source;    /* what the source block format is ("Q4_K"), for the report; static */
    int64_t N, K;
    int stored_t;          /* 1: the initializer is stored [K, N] (a MatMul weight); 0: [N, K] (Gemm transB, Gather) */
    int bits;              /* 4 or 8; 0: not carried (reason says why; requant_bits: RTN at that many bits, else float) */
    int64_t block;         /* 16 or 32 */
    int zp;                /* 0: implicit 2^(bits-1) everywhere, 1: uint8 zero points, 2: float zero points */
    int requant_bits;      /* bits 0: 4 or 8 = requantized by RTN (asymmetric, block 32) from the float values */
    const char *reason;    /* bits 0: why (static) */
    void (*row)(const void *ctx, int64_t r, uint8_t *codes, float *scales, float *zp);
    const void *ctx;
} wm_quant_carry;

typedef struct wm_quant_range {
    const char *name; /* a value of the graph */
    float lo, hi;
} wm_quant_range;

/* GPTQ's calibration statistics of one MatMul input value: H = sum over calibration rows x of x x^T. */
typedef struct wm_quant_hessian {
    const char *value; /* the value MatMul reads as its input A */
    int64_t K;         /* its last dimension */
    const double *h;   /* [K, K], symmetric; in wm_quant_config.importance [2K]: sum x_k^2, then sum x_k */
    uint64_t rows;     /* calibration rows summed */
} wm_quant_hessian;

typedef struct wm_quant_config {
    wm_quant_mode mode;
    /* selection */
    const char *const *op_types; size_t n_op_types; /* ops to quantize (default MatMul, and Gemm for int8) */
    const char *const *exclude; size_t n_exclude;   /* node names left as they are */
    /* fp16 */
    int keep_io_types;                              /* float32 graph inputs/outputs stay float32 */
    const char *const *op_block; size_t n_op_block; /* ops kept in float32 */
    int op_block_given;                             /* 1: op_block replaces the default list */
    /* int8 */
    int per_channel;        /* weight scales per output column */
    int symmetric;          /* symmetric weights (int8 zero point 0; int4 no zero points) */
    int act_symmetric;      /* static: symmetric activations (int8) */
    int reduce_range;       /* 7-bit weights ([-64, 64], uint8 [0, 127]): 1 always, 0 never, -1 (default) for int8
                               weights that integer kernels multiply with 8-bit activations (dynamic, and static
                               with uint8/int8 activations): onnxruntime's u8s8 kernels on x86 without VNNI add
                               pairs of u8 x s8 products in int16 (vpmaddubsw), which full-range weights overflow
                               (255 * 127 * 2 > 32767), giving wrong outputs; 7 bits cannot (255 * 64 * 2) */
    int32_t weight_type;    /* WM_DT_INT8 (default), WM_DT_UINT8; static QDQ also WM_DT_UINT16 (w16a16's default),
                               WM_DT_INT16 */
    int32_t activation_type;/* static: WM_DT_UINT8 (default), WM_DT_INT8, WM_DT_UINT16 (w8a16), WM_DT_INT16 */
    const wm_quant_range *ranges; size_t n_ranges;  /* static: activation ranges by value */
    /* int4 RTN */
    int bits;               /* 4 (default) or 8 */
    int64_t block_size;     /* power of two in [16, WM_QUANT_MAX_BLOCK] (default 32) */
    int64_t accuracy_level; /* MatMulNBits accuracy_level attribute; 0: omitted */
    int half_scales;        /* float32 scales rounded to the nearest normal half (codes computed with it), so an
                               engine may stream them as 2 bytes; 0 (default): onnxruntime's quantizer's values */
    int float_zp;           /* asymmetric 4-bit MatMulNBits: float zero points of the scales' type (a float offset
                               per block, v = scale * (q - zp), as Q4_1 / Q4_K's mins), each block's scale and
                               offset fitted by wm_nbits_fit_fzp's weighted search; 0 (default): uint8 zero points.
                               Not for a table a Gather shares (GatherBlockQuantized takes uint8 ones) nor GPTQ */
    int scale_search;       /* 1: each block's scale (and zero point) searched for the least weighted error, never
                               more than RTN's (wm_quant_blocks_search); 0 (default): RTN, onnxruntime's values */
    const char *const *int8_nodes; size_t n_int8_nodes; /* MatMul / Gather node names (or weight names) kept at 8 bits */
    /* carry */
    const wm_quant_carry *carry; size_t n_carry; /* WM_QUANT_CARRY: the weights whose blocks come ready */
    /* mixed precision as a table (llama.cpp's Q4_K_M keeps some tensors at more bits): a weight whose initializer
       name contains one of int8_weights is kept at 8 bits; one containing one of int8_layer_weights is, in the
       layers where llama.cpp's Q4_K_M gives more bits: layer i of n with i < n/8, i >= 7n/8, or (i - n/8) % 3 == 2
       (i: the first all-digit dot-separated part of the name, "model.layers.7.mlp..." -> 7; n: one more than the
       largest such index among the graph's initializers) */
    const char *const *int8_weights; size_t n_int8_weights;
    const char *const *int8_layer_weights; size_t n_int8_layer_weights;
    /* GPTQ (int4/int8 RTN modes): a MatMul (or bias-free Gemm whose table no Gather shares) whose input A is listed
       here is quantized by wm_quant_gptq instead of RTN (its block's scale search is then not used) */
    const wm_quant_hessian *hessians; size_t n_hessians;
    double gptq_damp;       /* fraction of mean diag(H) added to H's diagonal; 0: 0.01 */
    int gptq_tied;          /* 1: a tied lm_head (its codes shared with the token table's GatherBlockQuantized) is
                               quantized by GPTQ too, for the head's inputs; 0 (default): RTN / the search */
    int gptq_act_order;     /* 1: rows by decreasing diag(H), each block's scale / zero point fixed first from the
                               float rows (static groups); 0 (default): rows in order, each block's from its rows
                               as updated */
    /* importance-weighted fitting (int4/int8 RTN, not GPTQ): a MatMul (or bias-free Gemm) whose input A is listed
       here (h [2K]: sums over calibration rows of x_k^2, then of x_k) has every 4-bit block searched (8-bit ones
       stay RTN; scale_search's fit, whatever scale_search says) for the least output error: weights the columns'
       variances and, uint8 zero points, the columns' means as a second term (quant_fzp.c's header;
       wm_nbits_importance) -- llama.cpp's imatrix idea, with the means that a zero point's shift meets */
    const wm_quant_hessian *importance; size_t n_importance;
    /* blocks per kind of tensor (0: block_size): int8_block_size for the weights kept at 8 bits (8-bit codes need
       fewer scales: a larger block costs little error and saves a scale and zero point per block; a weight whose K
       it does not divide takes the largest power of two >= 16 below it that does, as a table does), table_block_size
       for the embedding table a Gather reads and a tied lm_head sharing its codes (either bits) */
    int64_t int8_block_size, table_block_size;
    /* mixed precision by measured sensitivity (int4 RTN with importance statistics; 0: off): of the 4-bit MatMul /
       Gemm weights with importance (not a table a Gather shares, not already at 8 bits by the lists above), the ones
       whose 4-bit RTN copy has the largest relative output error per weight on the calibration activations are kept
       at 8 bits, up to int8_percent of those weights' elements (quant_sens.c) */
    int int8_percent;
} wm_quant_config;

/*
 * An embedding table's block (int4/int8 RTN): GatherBlockQuantized needs a block that divides the table's width,
 * so a table (and the tied Gemm sharing its codes) gets the largest power of two >= 16 and <= the configured
 * block that does; block 0: none does, the table stays float32.
 */
/* The block c asks for a weight of these bits (table: an embedding table or the tied head sharing it). */
int64_t wm_quant_block_of(const wm_quant_config *c, int bits, int table);

typedef struct wm_quant_table_note {
    char *tensor;    /* the weight's initializer name (owned) */
    const char *op;  /* "GatherBlockQuantized", "MatMulNBits" (a tied Gemm), or "Gather" (kept float32) */
    int64_t width;   /* the quantized axis' length (the table's width) */
    int64_t block;   /* the block used; 0: not quantized */
    int64_t want;    /* the block the config asks for this table (wm_quant_block_of) */
} wm_quant_table_note;

/* What WM_QUANT_CARRY did to one weight with a carry entry (in graph order; a tied table appears twice). */
typedef struct wm_quant_carry_note {
    char *tensor;          /* the initializer (owned) */
    const char *source;    /* the entry's source ("Q4_K") */
    const char *op;        /* "MatMulNBits", "GatherBlockQuantized", or the op left float ("Gather", "MatMul") */
    const char *result;    /* "carried", "requantized" or "float" */
    int bits;              /* carried / requantized: 4 or 8 */
    int64_t block;
    const char *zero_points; /* "none" (implicit), "uint8", "float" */
    const char *reason;    /* requantized / float: why (static) */
} wm_quant_carry_note;

typedef struct wm_quant_report {
    size_t nodes_before, nodes_after;
    size_t quantized;       /* nodes converted */
    size_t skipped;         /* candidates left as they are (no constant weight, excluded, ...) */
    size_t casts;           /* Cast nodes added (fp16) */
    size_t n_qmoe;          /* int4 / int8: MoE nodes turned QMoE (their experts quantized; counted in quantized) */
    uint64_t qmoe_bytes;    /* the bytes of those experts' codes and scales */
    uint64_t weight_bytes_before, weight_bytes_after;
    wm_quant_table_note *tables; /* the embedding tables' blocks, in graph order (owned: wm_quant_report_free) */
    size_t n_tables;
    wm_quant_carry_note *carried; /* WM_QUANT_CARRY: each carry-entry weight's outcome (owned: wm_quant_report_free) */
    size_t n_carried;
    char **sensitive8;      /* int8_percent: the weights it kept at 8 bits, most sensitive first (owned) */
    size_t n_sensitive8;
    size_t attention_unpacked; /* Attention nodes given back as MatMuls + MultiHeadAttention (wm_quant_unpack_attention) */
} wm_quant_report;

/* Frees what a report owns (its tables); the report may be zeroed or filled by wm_quant_run. */
void wm_quant_report_free(wm_quant_report *r);

/*
 * When the config's op types list "Attention" (onnxruntime's op_types_to_quantize name; list MatMul too, which then
 * quantizes the projections), each com.microsoft Attention with a packed QKV weight (the node not excluded, a mode
 * that quantizes weights, the form MultiHeadAttention takes: no
 * mask_index, past or rotary, not causal) becomes three MatMuls + MultiHeadAttention, the same function. Run before
 * calibration (its MatMul inputs are then calibrated) and by wm_quant_run; idempotent. *n_unpacked (may be NULL)
 * gets the count.
 */
wm_status wm_quant_unpack_attention(wm_graph *g, const wm_quant_config *c, size_t *n_unpacked, wm_error *err);

/* The largest power of two in [16, block] that divides width; 0 when none does. */
int64_t wm_quant_table_block(int64_t width, int64_t block);

typedef struct wm_quant_plan wm_quant_plan;

/* Defaults for mode (block 32, symmetric int8 weights, uint8 activations, ...). */
void wm_quant_config_default(wm_quant_config *c, wm_quant_mode mode);

/*
 * Quantizes g as c says. plan NULL: new tensors are computed now (model
 * arena). plan non-NULL: *plan receives the deferred work (free with
 * wm_quant_plan_free after wm_quant_save). r may be NULL; it is reset first
 * (call wm_quant_report_free on it afterwards, on success or failure).
 */
wm_status wm_quant_run(wm_graph *g, const wm_quant_config *c, wm_quant_report *r, wm_quant_plan **plan,
                       wm_error *err);

/*
 * Writes g's model to path with every tensor of at least 1 KiB in its data file, computing deferred tensors
 * one at a time and releasing the source pages of mmap'd weights as they are read. data_name NULL: the data
 * file's name alternates between "<file>.data" and "<file>.1.data" so that the pair replaces an existing output
 * in one step (onnx/onnx_out.h); a name given is written as it is (a private staging folder).
 * Temporary names, renamed on success. plan may be NULL. The model must not be used afterwards except to free
 * it (its tensors now reference the new data file).
 */
wm_status wm_quant_save(wm_graph *g, wm_quant_plan *plan, const char *path, const char *data_name, wm_error *err);

void wm_quant_plan_free(wm_quant_plan *p);

/* "fp16", "int8"/"int8-static"/"w8a8"/"static"/"qdq" (static QDQ: the reference's int8), "int8-dynamic"/"dynamic",
   "w8a16", "int16"/"w16a16", "int4"/"rtn", "gguf" (carry) -> mode; 0 when unknown. */
wm_quant_mode wm_quant_mode_parse(const char *s);
const char *wm_quant_mode_name(wm_quant_mode m);

/*
 * The op types a config may list for mode (wm_quant_config.op_types; onnxruntime's op_types_to_quantize): the ones
 * that mode's quantizer acts on, spelled as ONNX spells them. 4-bit / 8-bit blocks (int4, gguf): MatMul, Gemm,
 * Gather (embedding tables), Attention (unpacked first, wm_quant_unpack_attention); the int8 QDQ and dynamic modes:
 * MatMul, Gemm, Attention; fp16 takes none (its list is op_block). An empty name, or one the mode would never quantize
 * (an unknown or misspelled op, "matmul"), is a WM_ERR_USAGE naming where (e.g. "--op-types", or the recipe file and
 * field) and the names accepted, instead of a model written with nothing quantized.
 */
wm_status wm_quant_check_op_types(wm_quant_mode mode, const char *const *ops, size_t n, const char *where,
                                  wm_error *err);

/* ------------------------------------------------------------ block quantization (MatMulNBits layout) */

/*
 * Quantizes w [K, N] (row-major floats, column n = output n) in blocks of
 * bs rows per column, the way onnxruntime's MatMulNBits expects:
 * q [N, ceil(K/bs), bs*bits/8] packed low nibble first, scales [N, ceil(K/bs)],
 * zero points [N, ceil(ceil(K/bs)*bits/8)] packed (asymmetric only; NULL for
 * symmetric, whose implicit zero point is 2^(bits-1)). Padding rows quantize
 * to the zero point. bits 4 or 8.
 */
void wm_quant_blocks(const float *w, int64_t K, int64_t N, int64_t bs, int bits, int symmetric, uint8_t *q,
                     float *scales, uint8_t *zp);

/*
 * wm_quant_blocks' layout and outputs, with each block's scale (and zero point, asymmetric) searched: candidates
 * around RTN's, each refit by least squares for its codes, keeping the least weighted error
 *     E = sum_i w_i (v_i - scale * (q_i - zp))^2,   w_i = v_i^2 + mean over the block of v^2 / 8
 * over the block's rows within K. RTN's choice is a candidate, so E never exceeds RTN's; blocks holding NaN or
 * infinity keep RTN.
 */
void wm_quant_blocks_search(const float *w, int64_t K, int64_t N, int64_t bs, int bits, int symmetric, uint8_t *q,
                            float *scales, uint8_t *zp);
/* wm_quant_blocks_search with the importance's fit: row k's errors weighted by imp[k] (> 0) instead of the values'
 * squares, and, asymmetric, the mean term of mu [K] (NULL: none) (wm_nbits_importance's two halves). */
void wm_quant_blocks_imp(const float *w, const float *imp, const float *mu, int64_t K, int64_t N, int64_t bs, int bits,
                         int symmetric, uint8_t *q, float *scales, uint8_t *zp);
/* The fit's statistics of K input columns from h [2K] (sums over rows of x_k^2, then of x_k): [K] weights, each
 * column's variance over the mean of E[x^2] (floored at 1e-3; all 1 when every column is 0), then [K] means over
 * the square root of that mean. Returns malloc'ed [2K] floats (caller frees); NULL: out of memory. */
float *wm_nbits_importance(const double *h, int64_t K, uint64_t rows);

/*
 * Asymmetric block quantization with float zero points (wm_quant_config.float_zp), wm_quant_blocks' layout for
 * q and scales, zp [N, ceil(K/bs)] floats: each block fitted by the weighted search of quant_fzp.c. bs <= 256.
 */
void wm_quant_blocks_fzp(const float *w, int64_t K, int64_t N, int64_t bs, int bits, uint8_t *q, float *scales,
                         float *zp);

/*
 * GPTQ (quant_gptq.c): wm_quant_blocks' layout and outputs for w [K, N], the rows quantized in order with each
 * row's rounding error fed forward into the later rows through the calibration inputs' H = X^T X [K, K] (read,
 * not changed), so that X W moves least. damp: the fraction of H's mean diagonal added to its diagonal (0.01 is
 * customary). act_order: the rows taken by decreasing H diagonal (GPTQ's act-order) with every block's scale and
 * zero point fixed first from w as given (static groups: a block's rows are then not quantized together). scale_dtype: how scales are rounded before use (WM_DT_FLOAT: not at all; WM_DT_FLOAT16,
 * WM_DT_BFLOAT16). WM_ERR_INPUT naming the element when w or H holds NaN or infinity, or when H plus damping is
 * not positive definite; WM_ERR_USAGE on a bad shape; outputs undefined on error.
 */
wm_status wm_quant_gptq(const float *w, int64_t K, int64_t N, const double *H, double damp, int act_order,
                        int64_t bs, int bits, int symmetric, int32_t scale_dtype, uint8_t *q, float *scales,
                        uint8_t *zp, wm_error *err);

/*
 * GPTQ with every block's scale and zero point given (static groups chosen elsewhere, e.g. by the importance's
 * search): scales [N, nblk] and zp (MatMulNBits' packed zero points; NULL: symmetric, zero point 2^(bits-1)) are
 * read, not changed; the codes q are GPTQ's for those parameters (act_order as wm_quant_gptq's). Errors as
 * wm_quant_gptq's.
 */
wm_status wm_quant_gptq_given(const float *w, int64_t K, int64_t N, const double *H, double damp, int act_order,
                              int64_t bs, int bits, uint8_t *q, const float *scales, const uint8_t *zp,
                              wm_error *err);

#endif
