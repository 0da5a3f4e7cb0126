/*
 * wm_kerneltool - runs one kernel on raw little-endian files, for the oracle tests
 * (tests/oracle/test_kernels_ort.py compares the outputs with onnxruntime).
 *
 *   wm_kerneltool nbits M N K BITS BLOCK ACC A.f32 B.u8 SCALES.f32 ZP.u8|f:ZP.f32|- OUT.f32
 *       MatMulNBits: A [M,K], B [N][k_blocks][BLOCK*BITS/8], scales [N][k_blocks], packed
 *       zero points [N][ceil(k_blocks*BITS/8)], float ones [N][k_blocks] (f:FILE) or - (default),
 *       accuracy level ACC
 *   wm_kerneltool igemm M N K A_SIGNED B_SIGNED A.u8 B.u8 AZP BZP|@BZP.i32 OUT.i32
 *       MatMulInteger: A [M,K], B [K,N] (int8 when *_SIGNED is 1), zero points: AZP and BZP
 *       integers, or @FILE with N int32 per-column zero points of B
 *   wm_kerneltool sgemm M N K TRANS_A TRANS_B ALPHA BETA A.f32 B.f32 C.f32 OUT.f32
 *       C = alpha op(A) op(B) + beta C (C.f32 is read when BETA != 0; use - otherwise)
 * Options (after the command): --generic (generic table), --avx2 (the AVX2 table, where the CPU has it),
 * --threads T (shares, run in turn), --ref (the naive reference instead), --packed (prepacked B where there is
 * one; MatMulNBits: the table's nbits_pack layout, B and the scales then not passed).
 * Exit codes: 0 ok, 2 usage or input error (message on stderr).
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "kernels/kernels.h"
#include "kernels/kernels_ref.h"
#include "kernels/nbits_impl.h"

static int die(const char *msg, const char *arg) {
    fprintf(stderr, "wm_kerneltool: error: %s%s%s\n", msg, arg ? ": " : "", arg ? arg : "");
    return 2;
}

/* Reads exactly `bytes` bytes of path into a new buffer (NULL on error; message printed). */
static void *read_exact(const char *path, size_t bytes) {
    FILE *f = fopen(path, "rb");
    if (!f) {
        die("cannot open", path);
        return NULL;
    }
    void *p = malloc(bytes ? bytes : 1);
    size_t got = p ? fread(p, 1, bytes, f) : 0;
    int extra = fgetc(f) != EOF;
    fclose(f);
    if (!p || got != bytes || extra) {
        free(p);
        die("wrong size (or unreadable)", path);
        return NULL;
    }
    return p;
}

static int write_all(const char *path, const void *p, size_t bytes) {
    FILE *f = fopen(path, "wb");
    if (!f) return die("cannot create", path);
    size_t put = fwrite(p, 1, bytes, f);
    if (fclose(f) != 0 || put != bytes) return die("cannot write", path);
    return 0;
}

typedef struct opts {
    int generic, threads, ref, packed, avx2;
} opts;

static int parse_i64(const char *s, int64_t lo, int64_t hi, int64_t *out) {
    char *end;
    long long v = strtoll(s, &end, 10);
    if (*s == 0 || *end != 0 || v < lo || v > hi) return 0;
    *out = v;
    return 1;
}

static int cmd_nbits(char **p, const opts *o, const wm_kernels *T) {
    int64_t M, N, K, bits, bs, acc;
    if (!parse_i64(p[0], 0, 1 << 20, &M) || !parse_i64(p[1], 0, 1 << 24, &N) || !parse_i64(p[2], 0, 1 << 20, &K) ||
        !parse_i64(p[3], 2, 8, &bits) || !parse_i64(p[4], 16, 4096, &bs) || !parse_i64(p[5], 0, 4, &acc) ||
        (bits != 2 && bits != 4 && bits != 8) || (bs & (bs - 1)))
        return die("bad nbits sizes", NULL);
    int64_t kb = (K + bs - 1) / bs;
    wm_nbits_args a = {0};
    a.M = M;
    a.N = N;
    a.K = K;
    a.bits = (int)bits;
    a.block_size = (int)bs;
    a.accuracy_level = (int)acc;
    a.lda = K;
    a.ldc = N;
    float *A = read_exact(p[6], (size_t)(M * K) * 4), *S = read_exact(p[8], (size_t)(N * kb) * 4);
    uint8_t *B = read_exact(p[7], (size_t)(N * kb * bs * bits / 8));
    int zfl = !strncmp(p[9], "f:", 2);
    uint8_t *Z = strcmp(p[9], "-") && !zfl ? read_exact(p[9], (size_t)(N * ((kb * bits + 7) / 8))) : NULL;
    float *ZF = zfl ? read_exact(p[9] + 2, (size_t)(N * kb) * 4) : NULL;
    float *C = calloc((size_t)(M * N) + 1, 4);
    if (!A || !S || !B || (strcmp(p[9], "-") && !Z && !ZF) || !C) return 2;
    a.A = A;
    a.B = B;
    a.scales = S;
    a.zero_points = Z;
    a.zero_points_f = ZF;
    a.has_zero_points = ZF ? 2 : Z ? 1 : 0;
    a.C = C;
    uint8_t *P = NULL;
    if (o->ref) {
        if (acc == 4) wm_ref_nbits_q8(&a);
        else if (wm_nbits_use_i15(&a)) wm_ref_nbits_i15(&a); /* the kernels' 15-bit decode rows (accuracy_level 2, 3) */
        else wm_ref_nbits(&a);
    } else {
        size_t pk = o->packed && !Z && !ZF && T->nbits_pack_size ? T->nbits_pack_size(&a) : 0;
        if (pk) { /* the layout a session makes of constant weights; the kernel then reads neither B nor S */
            if (!(P = aligned_alloc(64, (pk + 63) / 64 * 64))) return die("out of memory", NULL);
            for (int i = 0; i < o->threads; i++) T->nbits_pack(&a, P, i, o->threads);
            a.packed = P, a.B = NULL, a.scales = NULL;
        } else if (o->packed) {
            return die("--packed: the table has no packed layout for these weights", NULL);
        }
        a.work = malloc(wm_nbits_workspace_size(&a, o->threads) + 1);
        for (int i = 0; i < o->threads; i++) T->nbits_gemm(&a, i, o->threads);
        free(a.work);
    }
    free(P);
    int rc = write_all(p[10], C, (size_t)(M * N) * 4);
    free(A);
    free(S);
    free(B);
    free(Z);
    free(ZF);
    free(C);
    return rc;
}

static int cmd_igemm(char **p, const opts *o, const wm_kernels *T) {
    int64_t M, N, K, as, bsg, za, zb = 0;
    if (!parse_i64(p[0], 0, 1 << 20, &M) || !parse_i64(p[1], 0, 1 << 20, &N) || !parse_i64(p[2], 0, 1 << 20, &K) ||
        !parse_i64(p[3], 0, 1, &as) || !parse_i64(p[4], 0, 1, &bsg) || !parse_i64(p[7], -128, 255, &za))
        return die("bad igemm arguments", NULL);
    int32_t *zcol = NULL;
    if (p[8][0] == '@') {
        zcol = read_exact(p[8] + 1, (size_t)N * 4);
        if (!zcol) return 2;
    } else if (!parse_i64(p[8], -128, 255, &zb)) {
        return die("bad B zero point", p[8]);
    }
    wm_igemm_args a = {0};
    a.M = M;
    a.N = N;
    a.K = K;
    a.a_signed = (int)as;
    a.b_signed = (int)bsg;
    a.lda = K;
    a.ldb = N;
    a.ldc = N;
    a.a_zero_point = (int32_t)za;
    a.b_zero_point = (int32_t)zb;
    a.b_zero_points = zcol;
    uint8_t *A = read_exact(p[5], (size_t)(M * K)), *B = read_exact(p[6], (size_t)(K * N));
    int32_t *C = calloc((size_t)(M * N) + 1, 4);
    if (!A || !B || !C) return 2;
    a.A = A;
    a.B = B;
    a.C = C;
    void *P = NULL;
    if (o->ref) {
        wm_ref_igemm(&a);
    } else {
        if (o->packed) {
            P = malloc(wm_igemm_pack_b_size(K, N) + 1);
            wm_igemm_pack_b(K, N, B, N, a.b_zero_point, zcol, P);
            a.packed_b = P;
        }
        a.work = malloc(wm_igemm_workspace_size(&a, o->threads) + 1);
        for (int i = 0; i < o->threads; i++) T->igemm(&a, i, o->threads);
        free(a.work);
    }
    int rc = write_all(p[9], C, (size_t)(M * N) * 4);
    free(A);
    free(B);
    free(C);
    free(zcol);
    free(P);
    return rc;
}

static int cmd_sgemm(char **p, const opts *o, const wm_kernels *T) {
    int64_t M, N, K, ta, tb;
    if (!parse_i64(p[0], 0, 1 << 20, &M) || !parse_i64(p[1], 0, 1 << 20, &N) || !parse_i64(p[2], 0, 1 << 20, &K) ||
        !parse_i64(p[3], 0, 1, &ta) || !parse_i64(p[4], 0, 1, &tb))
        return die("bad sgemm arguments", NULL);
    wm_sgemm_args a = {0};
    a.M = M;
    a.N = N;
    a.K = K;
    a.trans_a = (int)ta;
    a.trans_b = (int)tb;
    a.alpha = strtof(p[5], NULL);
    a.beta = strtof(p[6], NULL);
    a.lda = ta ? M : K;
    a.ldb = tb ? K : N;
    a.ldc = N;
    float *A = read_exact(p[7], (size_t)(M * K) * 4), *B = read_exact(p[8], (size_t)(K * N) * 4);
    float *C = a.beta != 0.0f ? read_exact(p[9], (size_t)(M * N) * 4) : calloc((size_t)(M * N) + 1, 4);
    if (!A || !B || !C) return 2;
    a.A = A;
    a.B = B;
    a.C = C;
    float *P = NULL;
    if (o->ref) {
        wm_ref_sgemm(&a);
    } else {
        if (o->packed) {
            P = malloc(wm_sgemm_pack_b_size(K, N) + 1);
            wm_sgemm_pack_b(a.trans_b, K, N, B, a.ldb, P);
            a.packed_b = P;
        }
        a.work = malloc(wm_sgemm_workspace_size(&a, o->threads) + 1);
        for (int i = 0; i < o->threads; i++) T->sgemm(&a, i, o->threads);
        free(a.work);
    }
    int rc = write_all(p[10], C, (size_t)(M * N) * 4);
    free(A);
    free(B);
    free(C);
    free(P);
    return rc;
}

int main(int argc, char **argv) {
    if (argc < 2) return die("usage: wm_kerneltool nbits|igemm|sgemm ... (see the file header)", NULL);
    opts o = {0, 1, 0, 0, 0};
    char *pos[16];
    int np = 0;
    for (int i = 2; i < argc; i++) {
        if (!strcmp(argv[i], "--generic")) o.generic = 1;
        else if (!strcmp(argv[i], "--avx2")) o.avx2 = 1;
        else if (!strcmp(argv[i], "--ref")) o.ref = 1;
        else if (!strcmp(argv[i], "--packed")) o.packed = 1;
        else if (!strcmp(argv[i], "--threads") && i + 1 < argc) o.threads = atoi(argv[++i]);
        else if (np < 16) pos[np++] = argv[i];
        else return die("too many arguments", NULL);
    }
    if (o.threads < 1 || o.threads > 64) return die("bad --threads", NULL);
    const wm_kernels *T = o.generic ? wm_kernels_generic() : o.avx2 ? wm_kernels_avx2() : wm_kernels_get();
    if (!T) return die("--avx2: this CPU has no AVX2 table", NULL);
    if (!strcmp(argv[1], "nbits") && np == 11) return cmd_nbits(pos, &o, T);
    if (!strcmp(argv[1], "igemm") && np == 10) return cmd_igemm(pos, &o, T);
    if (!strcmp(argv[1], "sgemm") && np == 11) return cmd_sgemm(pos, &o, T);
    return die("unknown command or wrong argument count", argv[1]);
}
