/*
 * npz.h - numpy's .npz archives (np.savez, np.savez_compressed) and .npy arrays, read as untrusted input.
 *
 * An .npz is a ZIP archive whose members are .npy files. The reader takes the central directory (ZIP64 sizes
 * and offsets included), members stored or deflated (zlib), checks each member's CRC-32, and parses the .npy
 * header (format 1.0 / 2.0 / 3.0: a Python dict literal with 'descr', 'fortran_order', 'shape'). Accepted:
 * little-endian (or one-byte) bool, int8..int64, uint8..uint64, float16/32/64 in C order. Everything else -
 * big-endian, Fortran order, object or structured dtypes, encryption, sizes that disagree, a member that
 * inflates past its declared size - is refused with a message naming the file, the member and the field.
 * A plain .npy file reads as an archive of one array named after the file (without ".npy").
 */
#ifndef WM_CORE_NPZ_H
#define WM_CORE_NPZ_H

#include <stddef.h>
#include <stdint.h>

#include "core/error.h"
#include "core/file.h"

#define WM_NPZ_MAX_RANK 8
#define WM_NPZ_MAX_MEMBERS 4096

typedef struct wm_npz_array {
    char *name;         /* the member's name without ".npy" */
    char kind;          /* 'b' bool, 'i' signed integer, 'u' unsigned integer, 'f' float */
    int itemsize;       /* bytes per element: 1, 2, 4 or 8 */
    int rank;
    int64_t shape[WM_NPZ_MAX_RANK];
    uint64_t count;     /* elements (1 for rank 0) */
    uint64_t nbytes;    /* count * itemsize */
    const void *data;   /* little-endian, C order; inside the archive's bytes (stored) or owned (deflated) */
} wm_npz_array;

typedef struct wm_npz {
    wm_map map;         /* the file (wm_npz_open) */
    wm_npz_array *a;
    size_t n;
    void **owned;       /* inflated members' buffers */
    size_t n_owned;
} wm_npz;

/* Opens path (.npz, or a single .npy). z owns everything: wm_npz_close. Errors: WM_ERR_INPUT naming path. */
wm_status wm_npz_open(const char *path, wm_npz *z, wm_error *err);
/* The same over bytes the caller keeps alive while z is used (label names them in messages). */
wm_status wm_npz_open_buffer(const uint8_t *data, size_t size, const char *label, wm_npz *z, wm_error *err);
/* The array named name, or NULL. */
const wm_npz_array *wm_npz_find(const wm_npz *z, const char *name);
void wm_npz_close(wm_npz *z);

#endif
