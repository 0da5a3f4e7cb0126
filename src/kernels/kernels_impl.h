/*
 * kernels_impl.h - what the kernel files share internally (not for src/ops).
 *
 * The SGEMM driver (gemm.c) is ISA independent: blocking, packing, the
 * (ith, nth) split and the epilogue. It calls the table's micro-kernel (its
 * tile shape in the wm_gemm_ukr) and vact, so the generic, AVX2 and AVX-512
 * tables share one driver and one packed-B layout.
 */
#ifndef WM_KERNELS_IMPL_H
#define WM_KERNELS_IMPL_H

#include "kernels/kernels.h"

/* Register tile of the micro-kernel and cache blocks (AMD Zen 3: 32 KiB L1d, 512 KiB L2 per core). */
#define WM_MR 6
#define WM_MR_MAX 12 /* tallest register tile of any table (A blocks are sized for it) */
#define WM_NR 16
#define WM_HP 64 /* columns per panel of wm_hgemm_pack_b */
#define WM_KC 256  /* B micro-panel KC x 16 floats = 16 KiB in L1 */
/* the AVX2 table's k-block (row tiles outer: a 6-row tile's A, 18 KiB at 768, stays in L1 while B streams from L2;
   fewer passes over C and tile stores than at 256). One thread, packed B, best of 3 by thread CPU time alternating
   on a Zen 3 core (32 KiB L1, 512 KiB L2), GFLOP/s at kc 256 -> 768: 197 x 768 x 3072 89 -> 92, 197 x 3072 x 768
   86 -> 92 (1024 / 1536 / 3072: within 1%), 257 x 1536 x 384 90 -> 93, 616 x 2048 x 512 86 -> 91 (as 688),
   2056 x 384 x 1152 81 -> 86 (as 384), 196 x 2304 x 256 90 -> 93, 3136 x 576 x 64 77 -> 83, 50 x 3072 x 768
   82 -> 86, 1576 x 3072 x 768 79 -> 82 */
#define WM_KC_AVX2 256 /* 768 measured faster (above) but moved float sums enough that SmolLM2's fp32 GGUF logits went
                          1.3e-4 from transformers', past issue 31's 1e-4 bound (test_gguf test_smollm2_logits) */
#define WM_MC 264  /* A block MC x KC floats = 264 KiB in L2 (a multiple of every tile height) */
#define WM_NC 1024 /* B block packed on the fly: KC x NC floats = 1 MiB */
#define WM_L2_BLOCK (512 * 1024) /* a_outer: most bytes of a prepacked B block (KC x NC_PACKED floats); at most half
                                    the L2 where its size is known (wm_gemm_set_l2_bytes) */
#define WM_NC_PACKED 512 /* prepacked B: columns per block, so C's rows of a block stay in L2 across k-blocks */

#define WM_ALIGN_UP(x, a) (((x) + (a)-1) / (a) * (a))

/*
 * One micro-kernel call on a tile of u->mr rows x u->np 16-column panels:
 * acc[i][j] = sum_{k < kc} A(i,k) * B(k,j), where B(k,j) = bp[(j/16)*pstride +
 * k*16 + j%16] and A(i,k) = ap[k*mr + i] (packed panel of mr rows, lda == 0) or
 * ap[i*lda + k] (rows of A read in place, lda > 0; rows i >= mv are not read).
 * Then for the mv x nv valid corner of the tile at c (ldc):
 *   first && beta == 0:  c = alpha * acc
 *   first:               c = alpha * acc + beta * c
 *   otherwise:           c = alpha * acc + c
 * Full and partial tiles must use the same arithmetic (results independent of nth).
 */
struct wm_bsrc;

/*
 * The epilogue a kernel with wm_gemm_ukr.fused_epi applies to the finished values of the last k-block before it
 * stores them (e != NULL), in wm_vepi's order: v += bias[j]; v += res[i * ld_res + j]; v = max(v, lo), NaN kept.
 * The output then goes to memory once, instead of being stored, read back and stored again.
 */
typedef struct wm_tile_epi {
    const float *bias; /* at the tile's first column, or NULL */
    const float *res;  /* at the tile's first row and column, or NULL */
    int64_t ld_res;
    float lo;          /* 0: ReLU; -INFINITY: none */
    /* a_outer tables only: a far prefetch stream the kernel spreads over its k loop, the lines at
       pf + i * pf_step and pf + i * pf_step + pf_step / 2 into L2 for every 4 k (i = 0, 1, ...); NULL: none.
       With no bias, no res and lo -INFINITY, such an e stores as NULL does. */
    const char *pf;
    int64_t pf_step;
    /* tables with wm_gemm_ukr.fused_act only: then an activation on the values above (lo -INFINITY), as the
       table's vact computes it (WM_ACT_NONE: none) */
    wm_act act;
    float act_a, act_b;
} wm_tile_epi;

typedef void (*wm_ukr_fn)(int64_t kc, const float *ap, int64_t lda, const float *bp, int64_t pstride, float *c,
                          int64_t ldc, int mv, int nv, float alpha, float beta, int first, const wm_tile_epi *e);

/*
 * The same tile with indirect A (wm_sgemm_args.ind): A(i,k) = ind[((k0 + k) / seg) * ldi + i][(k0 + k) % seg]
 * for the k-block starting at column k0 of op(A); rows i >= mv are not read. Same arithmetic, in the same
 * order, as the plain kernel on the gathered A, so both paths give the same bits.
 */
typedef void (*wm_ukr_ind_fn)(int64_t kc, const float *const *ind, int64_t ldi, int64_t k0, int64_t seg,
                              const float *bp, int64_t pstride, float *c, int64_t ldc, int mv, int nv, float alpha,
                              float beta, int first, const wm_tile_epi *e);

typedef struct wm_gemm_ukr {
    wm_ukr_fn kernel;
    int mr;           /* rows per tile (<= WM_MR_MAX) */
    int np;           /* 16-column panels per tile */
    int pack_aliased; /* 1: plain A with rows 4 KiB apart is copied to a kc stride by the driver (A^T always packs) */
    void (*vact)(int64_t n, float *y, const float *x, wm_act act, float act_a, float act_b);
    /* optional fast path for small M (NULL: none); returns 1 when it handled share ith */
    int (*small_m)(const wm_sgemm_args *a, int ith, int nth);
    /* packer of fp32 B blocks (a wm_bsrc pack function; NULL: the generic one) */
    void (*pack_f32)(const struct wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst,
                     int64_t pstride);
    /* y[i] += x[i] for the epilogue's bias and residual rows (the kernel table's add) */
    void (*vadd)(int64_t n, float *y, const float *x);
    /* y[i] = max(y[i] + b[i] + r[i], lo) in one pass, b or r NULL for none (NULL: the separate passes) */
    void (*vepi)(int64_t n, float *y, const float *b, const float *r, float lo);
    /* the tile with indirect A (every table has one: the driver sizes no A block for indirect A) */
    wm_ukr_ind_fn kernel_ind;
    int fused_epi; /* the kernels apply a wm_tile_epi (else the driver passes NULL and runs the epilogue after) */
    /* tile order in a block: 0, B slab outer (each B slab stays in L1 while the row tiles' A streams from L2); 1, row
       tiles outer (each tile's A rows stay in L1 while the block's B panels stream from L2, which the kernel then
       prefetches) */
    int a_outer;
    /* 1: the fused store also applies an activation with no vepi form (GELU, QuickGelu, SiLU, ...: wm_tile_epi.act)
       after bias and a residual_first residual, with the same values as its vact on the stored rows */
    int fused_act;
} wm_gemm_ukr;

/* Where B blocks come from when B is not prepacked: pack op(B)[k0:k0+kc, n0:n0+nc]
 * into 16-column panels of kc x 16 floats, pstride floats apart, zero padded. */
struct wm_bsrc {
    void (*pack)(const struct wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst,
                 int64_t pstride);
    const void *p; /* the B data */
    int64_t ld;
    int trans;
    const void *ctx; /* e.g. the wm_nbits_args */
};
typedef struct wm_bsrc wm_bsrc;

extern const wm_gemm_ukr wm_gemm_ukr_generic;
extern const wm_gemm_ukr wm_gemm_ukr_avx2;   /* AVX2 table only */
extern const wm_gemm_ukr wm_gemm_ukr_avx512; /* AVX-512 table only */

void wm_sgemm_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, int ith, int nth);
/* The blocked driver with B from src (a->packed_b must be NULL; a->B unused). */
void wm_gemm_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, const wm_bsrc *src, int ith, int nth);
/* the L1 data cache's ways, from CPUID, for the driver's choice to copy A rows 4 KiB apart (set once, at init) */
void wm_gemm_set_l1d_ways(int ways);
/* one core's L2 bytes, from CPUID (0: unknown), for the a_outer order's column blocks (set once, at init) */
void wm_gemm_set_l2_bytes(int64_t bytes);
/* wm_bsrc packers for fp32 and IEEE half B (p, ld, trans as in the GEMM args) */
void wm_bsrc_pack_f32(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride);
void wm_bsrc_pack_f16(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride);
/* the same from wm_hgemm_pack_b panels (p = the panels, ld = K; n0 a multiple of 16) */
void wm_bsrc_pack_hp(const wm_bsrc *s, int64_t k0, int64_t kc, int64_t n0, int64_t nc, float *dst, int64_t pstride);
void wm_sgemm_batch_drive(const wm_gemm_ukr *u, const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth);
/* Applies ep to rows [m0, m1) x columns [n0, n1) of C (all of the K reduction done), with u's vector
   kernels (activation, row adds, the one-pass bias/residual/ReLU). */
void wm_epilogue_apply(const wm_epilogue *ep, const wm_gemm_ukr *u, float *C, int64_t ldc, int64_t m0, int64_t m1,
                       int64_t n0, int64_t n1);
void wm_vadd_avx2_fwd(int64_t n, float *y, const float *x); /* y += x: the AVX2 table's add (gemm_avx2.c) */
void wm_vepi_avx2(int64_t n, float *y, const float *b, const float *r, float lo); /* the vepi of gemm_avx2.c */
/* pack_a for 12-row panels with AVX2 8x8 / 4x8 transposes (gemm_avx2.c) */
/* Padded width of a packed B (N rounded up to 16): k-block k0 starts at k0 * wm_packed_np(N). */
int64_t wm_packed_np(int64_t N);
/* Rows per k-block for a K deep GEMM (<= the selected table's sgemm_kc, balanced; defines the packed B layout
   too). */
int64_t wm_sgemm_kc(int64_t K);
/* The k-block of a's B: a->kc when set, else wm_sgemm_kc(a->K). */
int64_t wm_sgemm_args_kc(const wm_sgemm_args *a);
/* Splits [0, n) in units of `unit` among nth shares: share ith gets [*b, *e). */
void wm_split_units(int64_t n, int64_t unit, int ith, int nth, int64_t *b, int64_t *e);
/* A 64-byte aligned slice `ith` of `per` bytes from work (per already includes 64 bytes of slack). */
void *wm_work_slice(void *work, size_t per, int ith);

/* IEEE half <-> float, scalar, exact RNE (shared by generic code and tails). */
float wm_half_to_float(uint16_t h);
uint16_t wm_float_to_half(float f);

/* Generic table entries */
void wm_sgemm_generic(const wm_sgemm_args *a, int ith, int nth);
void wm_sgemm_batch_generic(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth);
void wm_hgemm_generic(const wm_hgemm_args *a, int ith, int nth);
void wm_nbits_generic(const wm_nbits_args *a, int ith, int nth);
void wm_igemm_generic(const wm_igemm_args *a, int ith, int nth);
void wm_vmath_fill_generic(wm_kernels *k);
void wm_attn_rows_fill_generic(wm_kernels *k);

/* AVX2 table entries (defined in *_avx2.c; call only when wm_kernels_avx2() is non-NULL) */
void wm_sgemm_avx2(const wm_sgemm_args *a, int ith, int nth);
void wm_sgemm_batch_avx2(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth);
void wm_hgemm_avx2(const wm_hgemm_args *a, int ith, int nth);
void wm_nbits_avx2(const wm_nbits_args *a, int ith, int nth);
void wm_igemm_avx2(const wm_igemm_args *a, int ith, int nth);
void wm_igemm_avx512(const wm_igemm_args *a, int ith, int nth);
void wm_vmath_fill_avx2(wm_kernels *k);
/* AVX-512 few-row attention (attn_rows_avx512.c): float32 attn_qk / attn_pv */
void wm_attn_rows_fill_avx512(wm_kernels *k);
void wm_attn_rows_fill_avx2(wm_kernels *k);

/* AVX-512 (F, BW, VL, VNNI) upgrades (defined in *_avx512.c; call only when wm_kernels_avx512() is non-NULL) */
void wm_nbits_avx512(const wm_nbits_args *a, int ith, int nth);
void wm_nbits_pack_avx512(const wm_nbits_args *a, uint8_t *dst, int ith, int nth);
void wm_sgemm_avx512(const wm_sgemm_args *a, int ith, int nth);
/* vmath_simd.h at 16 lanes and the row softmax (vmath_avx512.c); the activation map on its own for the GEMM */
void wm_vmath_fill_avx512(wm_kernels *k);
void wm_vact_avx512(int64_t n, float *y, const float *x, wm_act act, float p, float q);
void wm_sgemm_batch_avx512(const wm_sgemm_args *a, const wm_gemm_batch *b, int ith, int nth);
void wm_hgemm_avx512(const wm_hgemm_args *a, int ith, int nth); /* the AVX2 one with the AVX-512 micro-kernel */
int wm_nbits_q8_avx512(const wm_nbits_args *a);
int wm_nbits_q8_default(const wm_nbits_args *a);
int wm_nbits_q8_avx2(const wm_nbits_args *a);

#endif
