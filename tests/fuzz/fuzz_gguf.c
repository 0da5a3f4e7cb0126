/*
 * libFuzzer target for the GGUF reader and what is made of a GGUF: parse
 * arbitrary bytes as a file image. A refusal must carry a reason and no
 * handle. Whatever is accepted must be self-consistent (every tensor inside
 * the buffer, found by name, byte sizes from dims and type, no two tensors
 * sharing bytes), every metadata value readable (string arrays walked,
 * numbers read), every tensor of a supported type dequantizable; then the
 * checkpoint view is made (config.json, tokenizer.json ...): when it is,
 * the made files parse, the tokenizer loads and encodes, and every view
 * tensor reads; every quantized view (matrices, expert slices and stacks)
 * whose blocks carry (-p gguf) gives, row by row, codes in range whose (code - zp) * scale is the row's
 * float value (bit for bit with integer zero points).
 */
#include <float.h>
#include <math.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "gguf/gguf_hf.h"
#include "hf/tokenizer.h"

static int cmp_off(const void *a, const void *b) {
    const wm_gguf_tensor *x = *(const wm_gguf_tensor *const *)a, *y = *(const wm_gguf_tensor *const *)b;
    return x->data < y->data ? -1 : x->data > y->data;
}

static void check_file(const wm_gguf_file *f, const uint8_t *data, size_t size) {
    size_t n = wm_gguf_tensor_count(f);
    const wm_gguf_tensor **by = malloc((n ? n : 1) * sizeof *by);
    if (!by) abort();
    for (size_t i = 0; i < n; i++) {
        const wm_gguf_tensor *t = wm_gguf_tensor_at(f, i);
        by[i] = t;
        if (wm_gguf_find_tensor(f, t->name) != t) abort();
        uint32_t be = wm_ggml_block_elems(t->type), bb = wm_ggml_block_bytes(t->type);
        if (!be || t->ne[0] % be || t->n_dims < 1 || t->n_dims > WM_GGUF_MAX_DIMS) abort();
        uint64_t numel = 1;
        for (int d = 0; d < WM_GGUF_MAX_DIMS; d++) numel *= t->ne[d];
        if (numel != t->numel || t->row_bytes != t->ne[0] / be * bb) abort();
        if (t->ne[0] && t->nbytes != t->row_bytes * (t->numel / t->ne[0])) abort();
        if (t->nbytes && (t->data < data || t->nbytes > size || t->data > data + size - t->nbytes)) abort();
        if (wm_ggml_type_supported(t->type) && t->numel && t->numel <= (1u << 20)) {
            float *v = malloc((size_t)t->numel * sizeof *v);
            wm_error err = {0};
            if (!v || wm_gguf_dequant(t, 0, (size_t)t->numel, v, &err)) abort();
            free(v);
        }
    }
    qsort(by, n, sizeof *by, cmp_off);
    for (size_t i = 1; i < n; i++)
        if (by[i - 1]->nbytes && by[i]->nbytes && by[i - 1]->data + by[i - 1]->nbytes > by[i]->data) abort();
    free(by);
    uint64_t sum = 0;
    double dsum = 0;
    for (size_t i = 0; i < wm_gguf_kv_count(f); i++) {
        const wm_gguf_kv *kv = wm_gguf_kv_at(f, i);
        if (wm_gguf_find(f, kv->key) != kv) abort();
        if (kv->type == WM_GGUF_ARRAY && kv->elem == WM_GGUF_STRING)
            for (uint64_t k = 0; k < kv->n; k++) {
                wm_gguf_str s = wm_gguf_arr_str(kv, k);
                if (s.n && (s.p < (const char *)data || s.p + s.n > (const char *)data + size)) abort();
                sum += s.n ? (uint8_t)s.p[s.n - 1] : 0;
            }
        else if (kv->type == WM_GGUF_ARRAY)
            for (uint64_t k = 0; k < kv->n; k++) dsum += wm_gguf_arr_num(kv, k);
        else if (kv->type != WM_GGUF_STRING) dsum += wm_gguf_kv_num(kv);
    }
    (void)sum;
    (void)dsum;
}

/* A carried view (a matrix, an expert's slice of a stack, or a stack with its pair's rows): every row's blocks
   against its float values (the view's read of that row). */
static void check_carry(const wm_st_tensor *t) {
    wm_ggml_carry cf;
    /* a view of no rows may declare any width: nothing to compare, and K floats could not be allocated */
    if (!wm_gguf_st_carry(t, &cf) || t->numel > (1u << 20) || t->rank < 2 || t->shape[t->rank - 1] <= 0 ||
        t->numel < (uint64_t)t->shape[t->rank - 1])
        return;
    int64_t K = t->shape[t->rank - 1], nblk = K / cf.block, rows = (int64_t)(t->numel / (uint64_t)K);
    if (K % cf.block) abort();
    float *v = malloc((size_t)K * sizeof *v), *sc = malloc((size_t)nblk * sizeof *sc),
          *zp = malloc((size_t)nblk * sizeof *zp);
    uint8_t *c = malloc((size_t)K);
    if (!v || !sc || !zp || !c) abort();
    for (int64_t r = 0; r < rows; r++) {
        t->src->read(t->src->ctx, (uint64_t)(r * K), (size_t)K, v);
        wm_gguf_st_carry_row(t, (uint64_t)r, c, sc, zp);
        for (int64_t k = 0; k < K; k++) {
            int64_t b = k / cf.block;
            if (c[k] >> cf.bits) abort();
            float got = ((float)c[k] - zp[b]) * sc[b];
            if (got == v[k] || (isnan(got) && isnan(v[k]))) continue;
            if (cf.zp != WM_CARRY_ZP_FLOAT) abort(); /* integer zero points: the same product */
            if (isfinite(got) && isfinite(v[k]) && isfinite(zp[b]) &&
                fabsf(got - v[k]) > 8.0f * FLT_EPSILON * fabsf(sc[b]) * (255.0f + fabsf(zp[b])))
                abort();
        }
    }
    free(v);
    free(sc);
    free(zp);
    free(c);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    wm_gguf_file *f = NULL;
    if (wm_gguf_open_buffer(data, size, NULL, &f, &err) != WM_OK) {
        if (err.status != WM_ERR_INPUT || !err.msg[0] || f) abort();
        return 0;
    }
    check_file(f, data, size);
    wm_hf_checkpoint ck;
    wm_st_file *st = NULL;
    memset(&err, 0, sizeof err);
    if (wm_gguf_checkpoint_of(f, &ck, &st, &err) != WM_OK) { /* takes f */
        if (!err.msg[0] || st) abort();
        return 0;
    }
    for (size_t i = 0; i < wm_st_count(st); i++) {
        const wm_st_tensor *t = wm_st_get(st, i);
        if (!t->src || t->numel > (1u << 20)) continue;
        float *v = malloc((t->numel ? (size_t)t->numel : 1) * sizeof *v);
        if (!v) abort();
        t->src->read(t->src->ctx, 0, (size_t)t->numel, v);
        free(v);
    }
    for (size_t i = 0; i < wm_st_count(st); i++)
        check_carry(wm_st_get(st, i));
    for (size_t i = 0; i < ck.n_made; i++) {
        if (strcmp(ck.made[i].name, "tokenizer.json")) continue;
        wm_tokenizer *tok = NULL;
        wm_error e2 = {0};
        if (wm_tokenizer_load_json(ck.made[i].text, ck.made[i].len, "tokenizer.json", &tok, &e2) == WM_OK) {
            wm_encoding enc;
            wm_encoding_init(&enc);
            static const char text[] = "Hello world  <s> \xe2\x96\x81 ab\n";
            wm_tokenizer_encode(tok, text, sizeof text - 1, NULL, 0, NULL, &enc, &e2);
            wm_encoding_free(&enc);
            wm_tokenizer_free(tok);
        }
    }
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    return 0;
}
