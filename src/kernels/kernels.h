/*
 * kernels.h - the numeric kernels of the CPU engine, behind one dispatch table.
 *
 * MLAS-platform style: wm_kernels_get() returns a table of function pointers
 * filled once (thread-safe) from wm_cpu_detect: the generic C table first,
 * then AVX2 + FMA + F16C upgrades when the CPU has all three. The environment
 * variable WM_KERNELS=generic forces the generic table. Only *_avx2.c files are
 * compiled with ISA flags. Every fast kernel has a naive reference in
 * kernels_ref.h that the unit tests compare it with.
 *
 * Conventions
 * - Matrices are row-major with a leading dimension (elements between rows);
 *   the column stride is always 1. Sizes are int64_t; any size may be 0.
 * - Threaded kernels take (args, ith, nth) and do share ith of nth; they are
 *   meant to be called as wm_pool_run(pool, fn, ctx, nth) with
 *   fn = ctx->K->sgemm(&ctx->args, ith, nth). The split is over output tiles
 *   only (never over K) and every output element is reduced in the same order
 *   whatever nth is, so results are bit-identical run to run AND for any nth
 *   (not between the generic and the AVX2 table).
 *   (args, 0, 1) is the single-thread entry point: use it per (batch, head)
 *   inside your own parallel loop, each thread with its own workspace.
 * - Kernels never allocate. Scratch comes from args->work, a caller buffer of
 *   at least wm_<family>_workspace_size(args, nth) bytes (any alignment; the
 *   size does not depend on the table, only on the shapes and nth). Share ith
 *   uses its own slice, so one buffer serves all shares of one call.
 * - No alignment is required of any pointer beyond the element type's own.
 * - Argument structs: zero-initialize them (= {0}) and set what you need;
 *   fields may be added at the end later, never changed or removed.
 * - IEEE half and bfloat16 values are carried as uint16_t bit patterns.
 */
#ifndef WM_KERNELS_KERNELS_H
#define WM_KERNELS_KERNELS_H

#include <stddef.h>
#include <stdint.h>

/* ---------------------------------------------------------------- epilogue */

/* Elementwise activation fused after a GEMM (and available on arrays: vact). */
typedef enum wm_act {
    WM_ACT_NONE = 0,
    WM_ACT_RELU,       /* max(x, 0) */
    WM_ACT_GELU_ERF,   /* 0.5 x (1 + erf(x / sqrt 2)) */
    WM_ACT_GELU_TANH,  /* 0.5 x (1 + tanh(sqrt(2/pi) (x + 0.044715 x^3))) */
    WM_ACT_SILU,       /* x * sigmoid(x) */
    WM_ACT_SIGMOID,    /* 1 / (1 + exp(-x)) */
    WM_ACT_TANH,
    WM_ACT_CLIP,       /* min(max(x, act_a), act_b)  (Relu6: 0, 6) */
    WM_ACT_LEAKY_RELU, /* x >= 0 ? x : act_a * x */
    WM_ACT_QUICK_GELU, /* x * sigmoid(act_a * x)  (QuickGelu: act_a 1.702; 1 is SiLU) */
    WM_ACT_COUNT
} wm_act;

/*
 * What happens to each output element v = alpha * sum_k op(A)[m,k] op(B)[k,n]
 * (+ beta * C[m,n]) after the full K reduction, in this order:
 *   v += bias[n];  v += bias_m[m];  v = act(v);  v += residual[m * ld_residual + n]
 */
typedef struct wm_epilogue {
    const float *bias;     /* [N] broadcast over rows, or NULL */
    const float *bias_m;   /* [M] broadcast over columns (conv as W @ im2col), or NULL */
    wm_act act;
    float act_a, act_b;    /* parameters of CLIP / LEAKY_RELU / QUICK_GELU */
    const float *residual; /* [M, ld_residual] added last, or NULL; must not overlap C (C += A@B: beta = 1) */
    int64_t ld_residual;
    int residual_first;    /* the residual is added before the activation instead (a convolution's Z) */
} wm_epilogue;

/* ------------------------------------------------------------------- sgemm */

/*
 * C[M,N] = epilogue(alpha * op(A) @ op(B) + beta * C)
 *   op(A) = A [M,K] (lda >= K), or A^T with A stored [K,M] (lda >= M) when trans_a
 *   op(B) = B [K,N] (ldb >= N), or B^T with B stored [N,K] (ldb >= K) when trans_b
 *   or packed_b from wm_sgemm_pack_b (then B, ldb, trans_b are ignored).
 * beta == 0: C is write-only (NaN/garbage in C is ignored). C must not overlap A or B.
 */
typedef struct wm_sgemm_args {
    int64_t M, N, K;
    float alpha, beta;
    const float *A;
    int64_t lda;
    int trans_a;
    const float *B;
    int64_t ldb;
    int trans_b;
    const float *packed_b; /* prepacked B (constant weights), or NULL */
    int64_t kc;            /* B's k-block: that of packed_b when packed with wm_sgemm_pack_b_kc; 0: wm_sgemm_kc(K) */
    float *C;
    int64_t ldc;
    wm_epilogue ep;
    void *work; /* wm_sgemm_workspace_size(this, nth) bytes, share ith using its ith slice; or with work_own, */
    int work_own; /* this share's own wm_sgemm_workspace_size(this, 1) bytes (the slice of the thread running it) */
    /* Indirect A (an implicit GEMM: a convolution's taps read where they lie, no im2col copy), used instead of
       A, lda and trans_a when not NULL: op(A)[m][k] = ind[(k / seg) * ldi + m][k % seg]. Each pointer is a run
       of seg floats (a tap's channels, or a zero run for padding); ldi >= M. sgemm only (not sgemm_batch). */
    const float *const *ind;
    int64_t ldi, seg;
} wm_sgemm_args;

/* Two-level batch over the same GEMM shape (e.g. [batch][head] in attention):
 * matrix (i, j) uses A + i*stride_a[0] + j*stride_a[1] (elements), same for
 * B (or packed_b), C and ep.residual (with stride_c). Stride 0 broadcasts. */
typedef struct wm_gemm_batch {
    int64_t count[2]; /* outer, inner; 0 counts as 1 */
    int64_t stride_a[2], stride_b[2], stride_c[2];
} wm_gemm_batch;

/* Bytes of a prepacked B for op(B) of shape [K,N] (ISA independent layout). */
size_t wm_sgemm_pack_b_size(int64_t K, int64_t N);
/* Packs op(B) (B [K,N] or, with trans_b, [N,K]) into packed (pack_b_size bytes). Single-threaded. */
void wm_sgemm_pack_b(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, float *packed);
/* The same in k-blocks of kc rows (wm_sgemm_args.kc must then be kc; 0: the default), same size. A whole-K
 * block (kc = K) lets a tile run its whole reduction at once: one store per tile instead of one per block. */
void wm_sgemm_pack_b_kc(int trans_b, int64_t K, int64_t N, const float *B, int64_t ldb, int64_t kc, float *packed);
/* Same from IEEE half weights (fp16 MatMul initializers, large-M path of hgemm). */
void wm_sgemm_pack_b_f16(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, float *packed);
/* Workspace bytes for sgemm / sgemm_batch with nth shares (0 when none is needed). They depend on M, N, K, kc,
 * packed_b and A's form: ind and trans_a as run, lda as run or 0 (0 sizes for any plain A). */
size_t wm_sgemm_workspace_size(const wm_sgemm_args *a, int nth);
/* How many shares pay off for a GEMM of this size (>= 1; the caller caps it by its pool size).
 * Valid for every GEMM/GEMV family below. */
int wm_sgemm_tasks(int64_t M, int64_t N, int64_t K);

/* ------------------------------------------------- fp16-weight GEMM / GEMV */

/*
 * C[M,N] = epilogue(A[M,K] @ op(B)) with B in IEEE half: [K,N] row-major
 * (ldb >= N, an ONNX MatMul initializer) or, with trans_b, [N,K] (ldb >= K).
 * Memory-bound GEMV for small M (reads half weights directly); for large M it
 * converts panels to fp32 in the workspace (or prepack with wm_sgemm_pack_b_f16
 * and call sgemm).
 */
typedef struct wm_hgemm_args {
    int64_t M, N, K;
    const float *A;
    int64_t lda;
    const uint16_t *B;
    int64_t ldb;
    int trans_b;
    float *C;
    int64_t ldc;
    wm_epilogue ep;
    void *work; /* wm_hgemm_workspace_size(this, nth) bytes */
    const uint16_t *packed_b; /* wm_hgemm_pack_b of op(B), or NULL (then B, ldb and trans_b are not read) */
} wm_hgemm_args;

size_t wm_hgemm_workspace_size(const wm_hgemm_args *a, int nth);
/* Below this many rows hgemm is a GEMV: no workspace, and any share count gives the same bits (each column is one
 * FMA chain over k in order), so callers may split it into more shares than threads. */
#define WM_HGEMM_BIG_M 8
/* Half weights in 64-column panels, made once per constant weight: panel p holds op(B)[k][64p .. 64p+63] for
 * k = 0 .. K-1 at p*K*64 + k*64 (columns past N zero). The GEMV then reads each panel as one sequential stream
 * and keeps its 64 sums in registers. Size in bytes; pack writes it. */
size_t wm_hgemm_pack_b_size(int64_t K, int64_t N);
void wm_hgemm_pack_b(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *packed);
/* The panels of share ith of nth (every share together: wm_hgemm_pack_b). */
void wm_hgemm_pack_b_share(int trans_b, int64_t K, int64_t N, const uint16_t *B, int64_t ldb, uint16_t *packed,
                           int ith, int nth);

/* ------------------------------- MatMulNBits: block-quantized weights (2..8 bit) */

/*
 * onnxruntime com.microsoft MatMulNBits: C[M,N] = epilogue(A[M,K] @ dequant(B)^T)
 *   B:      uint8 [N][k_blocks][block_size * bits / 8], k_blocks = ceil(K / block_size),
 *           codes packed low bits first along K (4 bit: element 2i in the low
 *           nibble of byte i, 2i+1 in the high nibble).
 *   scales: fp32 [N][k_blocks] (convert fp16 scales once at session creation).
 *   zero points: packed uint8 [N][ceil(k_blocks * bits / 8)] (same bit packing
 *           as B), or float [N][k_blocks] (zero_points_f), or neither: 2^(bits-1).
 *   w = (code - zero_point) * scale.
 * accuracy_level 4 allows int8 activations: for small M (decode) A is
 * quantized per block (block_size values) to int8 with one fp32 scale
 * (amax / 127, round to nearest even) and the block dot products are integer
 * (what wm_ref_nbits_q8 computes); for large M the kernel may use the more
 * accurate fp32 path instead. accuracy_level 2 and 3 (float16 / bfloat16 compute allowed) below 8 rows
 * (WM_NBITS_BIG_M), 4-bit codes in blocks of 32..256 and 8-bit codes in blocks of 16..256: 15-bit activations
 * (wm_nbits_use_i15, what wm_ref_nbits_i15 computes): A quantized per block to integers in [-16383, 16383]
 * (amax / 16383, round to nearest even), exact integer block dots, 1e-5..1e-4 relative error where int8's is
 * 1e-3..1e-2. Otherwise fp32 math (dequantize on the fly).
 * bits: 2, 4 or 8 (4 and 8 have AVX2 paths).
 */
#define WM_NBITS_I15_MAX 16383
typedef struct wm_nbits_args {
    int64_t M, N, K;
    int bits;       /* 2, 4 or 8 */
    int block_size; /* power of two >= 16 */
    int accuracy_level;
    const float *A;
    int64_t lda;
    const uint8_t *B;
    const float *scales;
    const uint16_t *scales_h;    /* optional: the same scales as IEEE halves (each exactly equal); a kernel that
                                    streams weights may read these instead (half the scale bytes per token) */
    const uint8_t *zero_points;  /* packed, or NULL */
    const float *zero_points_f;  /* unpacked float, or NULL (used when zero_points is NULL) */
    int has_zero_points;         /* zero points come with the call even where the pointers are not bound yet
                                    (workspace sizing before a run): every choice of kernel path must see them;
                                    2: float ones (not the packed layout's: wm_nbits_vnni_ok) */
    float *C;
    int64_t ldc;
    wm_epilogue ep;
    void *work; /* wm_nbits_workspace_size(this, nth) bytes */
    const uint8_t *packed; /* optional: B and the scales in the table's nbits_pack layout (then B, scales and
                              scales_h are not read); made once per weight at session creation */
    int shared_prep; /* A is prepared (quantized or copied) once, by a call with ith = -1 before the shares run,
                        into share 0's slice of work (wm_nbits_workspace_size(this, 1) bytes suffice), and every
                        share reads it there */
    int64_t prep_m0, prep_m1; /* with prep_m1 > 0, a call with ith = -1 prepares only rows [prep_m0, prep_m1):
                                 calls on disjoint ranges may run at the same time (prefill) */
} wm_nbits_args;

size_t wm_nbits_workspace_size(const wm_nbits_args *a, int nth);

/* ------------------------------------- MatMulInteger: 8-bit integer GEMM */

/*
 * C[M,N] (int32) = sum_k (A[m,k] - a_zp[m]) * (B[k,n] - b_zp[n])   (exact, no saturation)
 *   A: uint8 or int8 [M,K] (lda >= K); B: uint8 or int8 [K,N] (ldb >= N), or packed_b.
 *   a_zp[m] = a_zero_points ? a_zero_points[m] : a_zero_point  (per tensor or per row)
 *   b_zp[n] = b_zero_points ? b_zero_points[n] : b_zero_point  (per tensor or per column)
 * Optional float output instead of / besides C (MatMulIntegerToFloat, DynamicQuantizeMatMul):
 *   Cf[m,n] = epilogue(a_scale * b_scale[b_scale_count == 1 ? 0 : n] * acc)
 */
typedef struct wm_igemm_args {
    int64_t M, N, K;
    const void *A;
    int64_t lda;
    int a_signed;
    const void *B;
    int64_t ldb;
    int b_signed;
    const void *packed_b; /* from wm_igemm_pack_b (B's zero points inside), or NULL */
    int32_t a_zero_point, b_zero_point;
    const int32_t *a_zero_points; /* [M] or NULL */
    const int32_t *b_zero_points; /* [N] or NULL (ignored with packed_b) */
    int32_t *C;                   /* int32 output, or NULL */
    int64_t ldc;
    float *Cf; /* float output, or NULL */
    int64_t ldcf;
    float a_scale;
    const float *b_scale;
    int64_t b_scale_count; /* 1 or N */
    wm_epilogue ep;        /* applies to Cf only */
    void *work;            /* wm_igemm_workspace_size(this, nth) bytes */
} wm_igemm_args;

/* B [K,N] and its zero points in the kernels' packed layout (B's bytes, one per weight, and an int32 zero point
   per column) in wm_igemm_pack_b_size bytes; the args that use it still give b_signed. */
size_t wm_igemm_pack_b_size(int64_t K, int64_t N);
void wm_igemm_pack_b(int64_t K, int64_t N, const void *B, int64_t ldb, int32_t b_zero_point,
                     const int32_t *b_zero_points, void *packed);
size_t wm_igemm_workspace_size(const wm_igemm_args *a, int nth);

/* ---------------------------------------------------- packed attention keys */

/* Key panels of attn_qk_packed: n keys of d floats (rows ldk apart) as panels of WM_ATTN_KPANEL keys, panel p
   holding element c of its key i at p*d*WM_ATTN_KPANEL + c*WM_ATTN_KPANEL + i; keys past n in the last panel
   are 0. wm_attn_pack_k_floats(n, d) floats (the caller owns them); one layout for every table. */
#define WM_ATTN_KPANEL 16
size_t wm_attn_pack_k_floats(int64_t n, int64_t d);
void wm_attn_pack_k(int64_t n, int64_t d, const float *k, int64_t ldk, float *dst);

/* ------------------------------------------------------- the dispatch table */

typedef struct wm_kernels {
    const char *name; /* "generic", "avx2" or "avx512" */
    int isa;          /* 0 generic, 1 AVX2+FMA+F16C, 2 that and AVX-512 F/BW/VL/VNNI */

    /* GEMM families (see the argument structs above) */
    void (*sgemm)(const wm_sgemm_args *a, int ith, int nth);
    void (*sgemm_batch)(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth);
    /* 1: sgemm packs plain A into row panels itself when its rows are a multiple of 4 KiB apart (rows that would
       share L1 sets), so a caller need not copy such A to a padded stride first */
    int sgemm_packs_aliased;
    /* most rows of a k-block of B (wm_sgemm_kc: the packed B layout of every fp32 GEMM while this table is the one
       selected) */
    int sgemm_kc;
    void (*hgemm)(const wm_hgemm_args *a, int ith, int nth);
    void (*nbits_gemm)(const wm_nbits_args *a, int ith, int nth);
    int (*nbits_q8)(const wm_nbits_args *a); /* 1: nbits_gemm computes these args with int8 activations */
    int nbits_half_scales;                   /* 1: nbits_gemm reads wm_nbits_args.scales_h when given */
    /* Optional weight repacking for nbits_gemm: pack_size gives the bytes of the layout for these weights (M, A,
     * C unused), 0 when the kernel has none for them; pack writes share ith of nth of it (64-byte aligned dst;
     * all shares together make the layout, in any order or in parallel). */
    size_t (*nbits_pack_size)(const wm_nbits_args *a);
    void (*nbits_pack)(const wm_nbits_args *a, uint8_t *dst, int ith, int nth);
    void (*igemm)(const wm_igemm_args *a, int ith, int nth);

    /* Elementwise on contiguous arrays; y may equal x (in place). */
    void (*vexp)(int64_t n, float *y, const float *x);
    void (*vlog)(int64_t n, float *y, const float *x);
    void (*vtanh)(int64_t n, float *y, const float *x);
    void (*verf)(int64_t n, float *y, const float *x);
    void (*vsigmoid)(int64_t n, float *y, const float *x);
    void (*vgelu_erf)(int64_t n, float *y, const float *x);
    void (*vgelu_tanh)(int64_t n, float *y, const float *x);
    void (*vsilu)(int64_t n, float *y, const float *x);
    void (*vact)(int64_t n, float *y, const float *x, wm_act act, float act_a, float act_b);

    /* Rows. softmax: y = softmax(x * scale + mask) with mask [n] additive or NULL
     * (max-subtracted; a row of all -inf gives NaN like the math). */
    void (*softmax_row)(int64_t n, float *y, const float *x, float scale, const float *mask);
    void (*log_softmax_row)(int64_t n, float *y, const float *x);
    /* y = (x - mean) * inv_std * gamma + beta, inv_std = 1/sqrt(var + eps) (biased variance,
     * two-pass); gamma/beta may be NULL (1 / 0); *mean / *inv_std written when non-NULL. */
    void (*layernorm_row)(int64_t n, float *y, const float *x, const float *gamma, const float *beta, float eps,
                          float *mean, float *inv_std);
    /* y = x / sqrt(mean(x^2) + eps) * gamma (gamma may be NULL) */
    void (*rmsnorm_row)(int64_t n, float *y, const float *x, const float *gamma, float eps);

    /* Attention for a few query rows (decode: the heads of one KV group) over n key/value rows:
     *   attn_qk: s[r*lds + j] = scale * dot(q[r*ldq ..], k[j*ldk ..]) over d, r < m, j < n
     *   attn_pv: o[r*ldo + c] = sum_j p[r*ldp + j] * v[j*ldv + c], c < d (o written, not accumulated)
     * Each key/value row is read once per call whatever m; m <= 16 is the intended use. attn_qk may
     * prefetch pf (NULL: nothing), n rows of pf_d elements pf_ld apart of the keys' type: the value rows
     * the caller reads next, fetched while the keys are. */
    void (*attn_qk)(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *k, int64_t ldk,
                    float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d);
    void (*attn_pv)(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const float *v, int64_t ldv,
                    float *o, int64_t ldo);
    /* the same with float16 keys / values (a float16 KV cache read in place, converted on load) */
    void (*attn_qk_h)(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const uint16_t *k, int64_t ldk,
                      float scale, float *s, int64_t lds, const void *pf, int64_t pf_ld, int64_t pf_d);
    void (*attn_pv_h)(int64_t m, int64_t n, int64_t d, const float *p, int64_t ldp, const uint16_t *v, int64_t ldv,
                      float *o, int64_t ldo);

    /* Whole-sequence attention (an encoder's query tiles): the scores of m query rows against n keys packed once
     * per unit by wm_attn_pack_k, s[r*lds + j] = scale * dot(q[r*ldq ..], key j) over d, r < m, j < n. */
    void (*attn_qk_packed)(int64_t m, int64_t n, int64_t d, const float *q, int64_t ldq, const float *kp,
                           float scale, float *s, int64_t lds);
    /* wm_attn_pack_k's panels (its layout, the same floats): the keys of a unit read once, in order */
    void (*attn_pack_k)(int64_t n, int64_t d, const float *k, int64_t ldk, float *dst);
    /* Their softmax without masks, online over blocks of keys and left unnormalized (flash attention's
     * recurrence): row r's running max mx[r] and sum sum[r] (before its first block: -inf and 0) take this
     * block's n scores (lds apart): mx' = max(mx[r], the block's max), each score becomes exp(x - mx') in place,
     * alpha[r] = exp(mx[r] - mx') (0 when mx[r] is -inf: the factor of the earlier blocks' P V), then
     * sum[r] = sum[r] alpha[r] + the block's sum, mx[r] = mx'. The caller scales the row's P V by 1 / sum[r]
     * after its last block: a row of -inf gives 1 / 0 (NaN after scaling, like softmax_row), a NaN or +inf
     * score NaNs. Terms below 2^-124 of their row's max may be 0. */
    void (*attn_exp_rows)(int64_t m, int64_t n, float *s, int64_t lds, float *mx, float *sum, float *alpha);

    /* Conversions (round to nearest even; NaN stays NaN, overflow gives inf). */
    void (*f16_to_f32)(int64_t n, float *y, const uint16_t *x);
    void (*f32_to_f16)(int64_t n, uint16_t *y, const float *x);
    void (*bf16_to_f32)(int64_t n, float *y, const uint16_t *x);
    void (*f32_to_bf16)(int64_t n, uint16_t *y, const float *x);
    /* 2-D transpose of 4-byte elements (moved as bits): dst[j * ldd + i] = src[i * lds + j], i < rows, j < cols */
    void (*transpose32)(int64_t rows, int64_t cols, const uint32_t *src, int64_t lds, uint32_t *dst, int64_t ldd);

    /* BLAS-1 style. Reductions use a fixed order: deterministic for a given table. */
    float (*dot)(int64_t n, const float *x, const float *y);
    void (*axpy)(int64_t n, float a, const float *x, float *y); /* y += a x */
    void (*scale)(int64_t n, float *y, const float *x, float a); /* y = a x */
    void (*add)(int64_t n, float *z, const float *x, const float *y);
    void (*sub)(int64_t n, float *z, const float *x, const float *y);
    void (*mul)(int64_t n, float *z, const float *x, const float *y);
    void (*div)(int64_t n, float *z, const float *x, const float *y);
    float (*reduce_sum)(int64_t n, const float *x);
    float (*reduce_max)(int64_t n, const float *x); /* -inf for n == 0 */
} wm_kernels;

/* The table for this CPU: the AVX-512 one, else the AVX2 one, else the generic one (WM_KERNELS=generic or
 * WM_KERNELS=avx2 caps it). Never NULL. */
const wm_kernels *wm_kernels_get(void);
/* The portable C table. Never NULL. */
const wm_kernels *wm_kernels_generic(void);
/* The AVX2+FMA+F16C table, or NULL when this CPU (or OS) lacks one of them. */
const wm_kernels *wm_kernels_avx2(void);
/* The AVX2 table with AVX-512 F/BW/VL/VNNI upgrades (MatMulNBits), or NULL when this CPU (or OS) lacks them. */
const wm_kernels *wm_kernels_avx512(void);

#endif
