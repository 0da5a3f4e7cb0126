/*
 * attn_core_bench.c - the attention core alone (ops/attn_core.h), one thread, an encoder's whole-sequence
 * self-attention: batch 1, H heads of d, S queries = keys, Q/K/V/O in the (1, S, H*d) layout of
 * MultiHeadAttention, no mask. Prints the minimum over reps of the thread's CPU time and of the wall time
 * (ms): on a shared, oversubscribed machine the CPU time is the steadier of the two. With a fifth argument
 * "packed", Q, K and V are read in place from one (1, S, 3*H*d) projection (the fused Attention op's layout, as
 * in Whisper's encoder). Not built by CMake; link it
 * against a build's library (old and new side by side: two binaries, run in turns):
 *
 *   gcc -O2 -Isrc -Iinclude bench/attn_core_bench.c build/libwinml.a -lm -lpthread -o /tmp/acb
 *   /tmp/acb S H d reps [packed]      e.g. /tmp/acb 1500 6 64 5 packed
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "ops/attn_core.h"

static double now(clockid_t c) {
    struct timespec t;
    clock_gettime(c, &t);
    return (double)t.tv_sec * 1e3 + (double)t.tv_nsec * 1e-6;
}

int main(int argc, char **argv) {
    if (argc < 5) {
        fprintf(stderr, "usage: %s S H d reps\n", argv[0]);
        return 2;
    }
    int64_t S = atoll(argv[1]), H = atoll(argv[2]), d = atoll(argv[3]), reps = atoll(argv[4]);
    int packed = argc > 5 && strcmp(argv[5], "packed") == 0;
    size_t n = (size_t)(S * H * d);
    float *qkv = malloc(3 * n * sizeof *qkv), *o = malloc(n * sizeof *o);
    uint32_t st = 12345;
    for (size_t i = 0; i < 3 * n; i++) st = st * 1664525u + 1013904223u, qkv[i] = (float)(st >> 8) / 16777216.0f - 0.5f;
    int64_t ld = packed ? 3 * H * d : H * d; /* a row of Q, K or V */
    float *q = qkv, *k = packed ? qkv + H * d : qkv + n, *v = packed ? qkv + 2 * H * d : qkv + 2 * n;
    wm_attn a;
    memset(&a, 0, sizeof a);
    a.B = 1, a.Hq = H, a.Hkv = H, a.S = S, a.T = S, a.dk = d, a.dv = d;
    a.q = q, a.q_sb = S * ld, a.q_sh = d, a.q_ss = ld;
    a.k = k, a.k_sb = S * ld, a.k_sh = d, a.k_ss = ld;
    a.v = v, a.v_sb = S * ld, a.v_sh = d, a.v_ss = ld;
    a.o = o, a.o_sb = S * H * d, a.o_sh = d, a.o_ss = H * d;
    a.scale = 0.125f, a.mask_value = -1e30f, a.window = -1;
    wm_error err = {0};
    wm_exec x = {.pool = NULL, .nth = 1, .err = &err};
    void *ws = aligned_alloc(64, (wm_attn_workspace(&a, 1) + 63) & ~(size_t)63);
    double best_cpu = 1e30, best_wall = 1e30, sum = 0;
    wm_attn_run(&a, &x, ws); /* warm-up */
    for (int64_t r = 0; r < reps; r++) {
        double c0 = now(CLOCK_THREAD_CPUTIME_ID), w0 = now(CLOCK_MONOTONIC);
        wm_attn_run(&a, &x, ws);
        double c1 = now(CLOCK_THREAD_CPUTIME_ID), w1 = now(CLOCK_MONOTONIC);
        best_cpu = c1 - c0 < best_cpu ? c1 - c0 : best_cpu, best_wall = w1 - w0 < best_wall ? w1 - w0 : best_wall;
    }
    for (size_t i = 0; i < n; i++) sum += o[i];
    printf("S %lld H %lld d %lld%s: cpu %.3f ms wall %.3f ms (checksum %.6g)\n", (long long)S, (long long)H,
           (long long)d, packed ? " packed" : "", best_cpu, best_wall, sum);
    free(qkv), free(o), free(ws);
    return 0;
}
