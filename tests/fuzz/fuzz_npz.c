/*
 * libFuzzer target for the numpy .npz / .npy reader (core/npz.h): parse arbitrary bytes as an archive. Whatever
 * is accepted must be self-consistent: unique names, each array's byte count equal to its shape times its item
 * size, and every byte of it readable (inside the input or an inflated buffer; ASan checks the reads).
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "core/npz.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    wm_npz z;
    if (wm_npz_open_buffer(data, size, "fuzz.npz", &z, &err) != WM_OK) {
        if ((err.status != WM_ERR_INPUT && err.status != WM_ERR_NOMEM) || !err.msg[0] || z.n || z.a) abort();
        return 0;
    }
    volatile uint8_t sink = 0;
    for (size_t i = 0; i < z.n; i++) {
        const wm_npz_array *a = &z.a[i];
        uint64_t count = 1;
        for (int d = 0; d < a->rank; d++) count *= (uint64_t)a->shape[d];
        if (count != a->count || a->nbytes != count * (uint64_t)a->itemsize || wm_npz_find(&z, a->name) != a) abort();
        if (!strchr("biuf", a->kind) || (a->itemsize != 1 && a->itemsize != 2 && a->itemsize != 4 && a->itemsize != 8))
            abort();
        for (uint64_t k = 0; k < a->nbytes; k++) sink ^= ((const uint8_t *)a->data)[k];
    }
    (void)sink;
    wm_npz_close(&z);
    return 0;
}
