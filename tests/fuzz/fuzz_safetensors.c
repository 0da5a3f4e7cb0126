/*
 * libFuzzer target for the safetensors reader: parse arbitrary bytes as a
 * file image. Whatever is accepted must be self-consistent (every tensor
 * inside the buffer, found by name, sizes matching) and must survive a
 * round trip through the writer: writing the accepted tensors and metadata
 * and reading that back gives the same names, dtypes, shapes, bytes and
 * metadata.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "hf/safetensors.h"

static void check_same(const wm_st_file *a, const wm_st_file *b) {
    if (wm_st_count(a) != wm_st_count(b) || wm_st_meta_count(a) != wm_st_meta_count(b)) abort();
    for (size_t i = 0; i < wm_st_count(a); i++) {
        const wm_st_tensor *x = wm_st_get(a, i), *y = wm_st_get(b, i);
        if (strcmp(x->name, y->name) || x->dtype != y->dtype || x->rank != y->rank || x->nbytes != y->nbytes ||
            x->numel != y->numel)
            abort();
        for (size_t k = 0; k < x->rank; k++)
            if (x->shape[k] != y->shape[k]) abort();
        if (x->nbytes && memcmp(x->data, y->data, x->nbytes)) abort();
        if (!wm_st_is_aligned(y)) abort(); /* our writer aligns every tensor (buffers are malloc'ed) */
    }
    for (size_t i = 0; i < wm_st_meta_count(a); i++) {
        const wm_st_kv *x = wm_st_meta_at(a, i), *y = wm_st_meta_at(b, i);
        if (strcmp(x->key, y->key) || strcmp(x->value, y->value)) abort();
    }
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    wm_st_file *f = NULL;
    if (wm_st_open_buffer(data, size, NULL, &f, &err) != WM_OK) {
        if (err.status != WM_ERR_INPUT || !err.msg[0] || f) abort(); /* bad input: a reason, no handle */
        return 0;
    }
    size_t n = wm_st_count(f);
    uint64_t total = 0, sum = 0;
    for (size_t i = 0; i < n; i++) {
        const wm_st_tensor *t = wm_st_get(f, i);
        if (wm_st_find(f, t->name) != t) abort();
        if (i && strcmp(wm_st_get(f, i - 1)->name, t->name) >= 0) abort();
        if (t->data < data || t->nbytes > size || t->data > data + size - t->nbytes) abort();
        uint64_t numel = 1;
        for (size_t k = 0; k < t->rank; k++) {
            if (t->shape[k] < 0) abort();
            numel *= (uint64_t)t->shape[k];
        }
        if (numel != t->numel || numel * (uint64_t)wm_st_dtype_bits(t->dtype) / 8 != t->nbytes) abort();
        for (uint64_t k = 0; k < t->nbytes; k++) sum += t->data[k]; /* every byte readable (ASan) */
        total += t->nbytes;
    }
    if (total > size) abort();
    (void)sum;

    uint8_t *buf = NULL;
    size_t len = 0;
    if (wm_st_write_buffer(n ? wm_st_get(f, 0) : NULL, n, wm_st_meta_count(f) ? wm_st_meta_at(f, 0) : NULL,
                           wm_st_meta_count(f), &buf, &len, &err) != WM_OK)
        abort(); /* what we read, we can write */
    wm_st_file *g = NULL;
    if (wm_st_open_buffer(buf, len, "rewritten", &g, &err) != WM_OK) abort(); /* and read back */
    check_same(f, g);
    wm_st_close(g);
    free(buf);
    wm_st_close(f);
    return 0;
}
