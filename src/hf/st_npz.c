/*
 * st_npz.c - a numpy .npz / .npy as a safetensors handle (wm_st_open_npz in safetensors.h), so that every
 * reader of named tensors (eval's --reference-outputs, ...) takes numpy's archives too.
 */
#include <stdlib.h>

#include "core/npz.h"
#include "hf/safetensors.h"

wm_st_dtype wm_st_npz_dtype(const wm_npz_array *a) {
    switch (a->kind) {
    case 'b': return WM_ST_BOOL;
    case 'f': return a->itemsize == 2 ? WM_ST_F16 : a->itemsize == 4 ? WM_ST_F32 : WM_ST_F64;
    case 'i': return a->itemsize == 1 ? WM_ST_I8 : a->itemsize == 2 ? WM_ST_I16 : a->itemsize == 4 ? WM_ST_I32 : WM_ST_I64;
    default: return a->itemsize == 1 ? WM_ST_U8 : a->itemsize == 2 ? WM_ST_U16 : a->itemsize == 4 ? WM_ST_U32 : WM_ST_U64;
    }
}

static void npz_free(void *z) {
    wm_npz_close(z);
    free(z);
}

wm_status wm_st_open_npz(const char *path, wm_st_file **out, wm_error *err) {
    *out = NULL;
    wm_npz *z = malloc(sizeof *z);
    if (!z) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_status s = wm_npz_open(path, z, err);
    if (s) {
        free(z);
        return s;
    }
    wm_st_tensor *t = calloc(z->n + 1, sizeof *t);
    if (!t) {
        npz_free(z);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (size_t i = 0; i < z->n; i++) {
        const wm_npz_array *a = &z->a[i];
        t[i] = (wm_st_tensor){.name = a->name, .dtype = wm_st_npz_dtype(a), .rank = (size_t)a->rank,
                              .shape = a->rank ? a->shape : NULL, .numel = a->count, .data = a->data,
                              .nbytes = a->nbytes};
    }
    s = wm_st_open_virtual(t, z->n, path, npz_free, z, out, err); /* copies the records; frees z on failure */
    free(t);
    return s;
}
