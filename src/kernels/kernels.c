/*
 * kernels.c - the dispatch tables: generic C, then AVX2+FMA+F16C upgrades,
 * then AVX-512 (F, BW, VL, VNNI) upgrades, selected once (pthread_once) from
 * wm_cpu_detect; WM_KERNELS=generic or WM_KERNELS=avx2 caps the choice.
 */
#include <pthread.h>
#include <stdlib.h>
#include <string.h>

#include "core/cpu.h"
#include "kernels/kernels_impl.h"
#include "kernels/nbits_impl.h"

static wm_kernels g_generic, g_avx2, g_avx512;
static int g_have_avx2, g_have_avx512;
static const wm_kernels *g_selected;
static pthread_once_t g_once = PTHREAD_ONCE_INIT;

static void fill_generic(wm_kernels *k) {
    memset(k, 0, sizeof *k);
    k->name = "generic";
    k->sgemm = wm_sgemm_generic;
    k->sgemm_batch = wm_sgemm_batch_generic;
    k->sgemm_kc = WM_KC;
    k->hgemm = wm_hgemm_generic;
    k->nbits_gemm = wm_nbits_generic;
    k->nbits_q8 = wm_nbits_q8_default;
    k->igemm = wm_igemm_generic;
    wm_vmath_fill_generic(k);
    wm_attn_rows_fill_generic(k);
}

static void init_tables(void) {
    fill_generic(&g_generic);
    wm_cpu_info ci;
    wm_cpu_detect(&ci);
    wm_gemm_set_l1d_ways(ci.l1d_ways);
    wm_gemm_set_l2_bytes(ci.l2_bytes);
    g_have_avx2 = ci.avx2 && ci.fma && ci.f16c;
    if (g_have_avx2) {
        g_avx2 = g_generic; /* upgrades replace what has an AVX2 version */
        g_avx2.name = "avx2";
        g_avx2.isa = 1;
        g_avx2.sgemm = wm_sgemm_avx2;
        g_avx2.sgemm_batch = wm_sgemm_batch_avx2;
        g_avx2.sgemm_packs_aliased = wm_gemm_ukr_avx2.pack_aliased;
        g_avx2.sgemm_kc = WM_KC_AVX2;
        g_avx2.hgemm = wm_hgemm_avx2;
        g_avx2.nbits_gemm = wm_nbits_avx2;
        g_avx2.nbits_q8 = wm_nbits_q8_avx2;
        g_avx2.nbits_half_scales = 1;
        g_avx2.nbits_pack_size = wm_nbits_pack_size_sg32;
        g_avx2.nbits_pack = wm_nbits_pack_sg32;
        g_avx2.igemm = wm_igemm_avx2;
        wm_vmath_fill_avx2(&g_avx2);
        wm_attn_rows_fill_avx2(&g_avx2);
    }
    g_have_avx512 = g_have_avx2 && ci.avx512f && ci.avx512bw && ci.avx512vl && ci.avx512vnni;
    if (g_have_avx512) {
        g_avx512 = g_avx2;
        g_avx512.name = "avx512";
        g_avx512.isa = 2;
        g_avx512.sgemm = wm_sgemm_avx512;
        g_avx512.sgemm_batch = wm_sgemm_batch_avx512;
        g_avx512.sgemm_packs_aliased = wm_gemm_ukr_avx512.pack_aliased;
        g_avx512.sgemm_kc = WM_KC;
        g_avx512.hgemm = wm_hgemm_avx512;
        g_avx512.igemm = wm_igemm_avx512;
        g_avx512.nbits_gemm = wm_nbits_avx512;
        g_avx512.nbits_q8 = wm_nbits_q8_avx512;
        g_avx512.nbits_half_scales = 1;
        g_avx512.nbits_pack_size = wm_nbits_pack_size_sg32;
        g_avx512.nbits_pack = wm_nbits_pack_avx512;
        wm_vmath_fill_avx512(&g_avx512);
        wm_attn_rows_fill_avx512(&g_avx512);
    }
    const char *env = getenv("WM_KERNELS");
    int cap = !env ? 2 : strcmp(env, "generic") == 0 ? 0 : strcmp(env, "avx2") == 0 ? 1 : 2;
    g_selected = g_have_avx512 && cap >= 2 ? &g_avx512 : g_have_avx2 && cap >= 1 ? &g_avx2 : &g_generic;
}

const wm_kernels *wm_kernels_get(void) {
    pthread_once(&g_once, init_tables);
    return g_selected;
}

const wm_kernels *wm_kernels_generic(void) {
    pthread_once(&g_once, init_tables);
    return &g_generic;
}

const wm_kernels *wm_kernels_avx2(void) {
    pthread_once(&g_once, init_tables);
    return g_have_avx2 ? &g_avx2 : NULL;
}

const wm_kernels *wm_kernels_avx512(void) {
    pthread_once(&g_once, init_tables);
    return g_have_avx512 ? &g_avx512 : NULL;
}
