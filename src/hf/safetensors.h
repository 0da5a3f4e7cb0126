/*
 * safetensors.h - zero-copy reader and atomic writer of the safetensors
 * format (single files and sharded checkpoints).
 *
 * File layout: an 8-byte little-endian header length N, N bytes of UTF-8
 * JSON, then the data section. The JSON maps each tensor name to
 * {"dtype": "F32", "shape": [2, 3], "data_offsets": [begin, end]} (offsets
 * relative to the data section) plus an optional "__metadata__" object of
 * string -> string.
 *
 * Reading maps every file (mmap) and parses only the header; tensor data
 * pointers point into the mapping and no weight byte is touched. Every
 * header is treated as hostile: the length prefix, UTF-8, the JSON grammar
 * (a dedicated parser: exact 64-bit integers, no NUL or control bytes,
 * nesting bounded by the format's fixed depth), dtypes, shapes (checked
 * products), offsets (contiguous from 0 to the end of the data section,
 * no gaps, overlaps or trailing bytes) and duplicate names are all checked,
 * and an error names the file, the tensor and the reason.
 *
 * A sharded checkpoint is a folder with model.safetensors.index.json:
 * {"metadata": {...}, "weight_map": {tensor name: shard file name}}. Shard
 * names must be plain file names in the index's folder; the weight map must
 * agree exactly with what the shards hold.
 *
 * Data pointers are NOT guaranteed to be aligned for typed access (the
 * format does not promise it): check wm_st_is_aligned before casting.
 */
#ifndef WM_HF_SAFETENSORS_H
#define WM_HF_SAFETENSORS_H

#include <stddef.h>
#include <stdint.h>

#include "onnx/dtype.h"
#include "winml/winml.h"

/* Largest header the reader accepts (the reference implementation's cap). */
#define WM_ST_MAX_HEADER 100000000u
/* Largest tensor rank accepted (numpy's limit). */
#define WM_ST_MAX_RANK 64
/* Nesting cap for the JSON values the index file may carry in "metadata". */
#define WM_ST_MAX_DEPTH 64

/*
 * X(enum suffix, name in the file, bits per element, ONNX dtype
 * (WM_DT_UNDEFINED when ONNX has none), byte alignment for typed access):
 * every dtype the format defines (reference implementation, 2026). F8_E4M3
 * is PyTorch's float8_e4m3fn; F4 is the MX E2M1 element type.
 */
#define WM_ST_DTYPE_LIST(X)                                   \
    X(BOOL, "BOOL", 8, WM_DT_BOOL, 1)                         \
    X(U8, "U8", 8, WM_DT_UINT8, 1)                            \
    X(I8, "I8", 8, WM_DT_INT8, 1)                             \
    X(F8_E5M2, "F8_E5M2", 8, WM_DT_FLOAT8E5M2, 1)             \
    X(F8_E4M3, "F8_E4M3", 8, WM_DT_FLOAT8E4M3FN, 1)           \
    X(F8_E8M0, "F8_E8M0", 8, WM_DT_FLOAT8E8M0, 1)             \
    X(F8_E4M3FNUZ, "F8_E4M3FNUZ", 8, WM_DT_FLOAT8E4M3FNUZ, 1) \
    X(F8_E5M2FNUZ, "F8_E5M2FNUZ", 8, WM_DT_FLOAT8E5M2FNUZ, 1) \
    X(I16, "I16", 16, WM_DT_INT16, 2)                         \
    X(U16, "U16", 16, WM_DT_UINT16, 2)                        \
    X(F16, "F16", 16, WM_DT_FLOAT16, 2)                       \
    X(BF16, "BF16", 16, WM_DT_BFLOAT16, 2)                    \
    X(I32, "I32", 32, WM_DT_INT32, 4)                         \
    X(U32, "U32", 32, WM_DT_UINT32, 4)                        \
    X(F32, "F32", 32, WM_DT_FLOAT, 4)                         \
    X(C64, "C64", 64, WM_DT_COMPLEX64, 4)                     \
    X(F64, "F64", 64, WM_DT_DOUBLE, 8)                        \
    X(I64, "I64", 64, WM_DT_INT64, 8)                         \
    X(U64, "U64", 64, WM_DT_UINT64, 8)                        \
    X(F4, "F4", 4, WM_DT_FLOAT4E2M1, 1)                       \
    X(F6_E2M3, "F6_E2M3", 6, WM_DT_UNDEFINED, 1)              \
    X(F6_E3M2, "F6_E3M2", 6, WM_DT_UNDEFINED, 1)

typedef enum wm_st_dtype {
    WM_ST_INVALID = 0,
#define X(e, n, b, o, al) WM_ST_##e,
    WM_ST_DTYPE_LIST(X)
#undef X
    WM_ST_DTYPE_COUNT
} wm_st_dtype;

/* "F32" ...; "invalid" for an out-of-range value. */
const char *wm_st_dtype_name(wm_st_dtype dt);
/* Bits per element (4, 6, 8 ... 64); 0 for an invalid value. */
int wm_st_dtype_bits(wm_st_dtype dt);
/* The ONNX TensorProto.DataType (onnx/dtype.h) or 0 (UNDEFINED) when none. */
int32_t wm_st_dtype_onnx(wm_st_dtype dt);
/* Alignment a data pointer needs for typed access (1 for byte/sub-byte). */
size_t wm_st_dtype_align(wm_st_dtype dt);
/* Parses a dtype name of n bytes; WM_ST_INVALID when unknown. */
wm_st_dtype wm_st_dtype_from_name(const char *s, size_t n);

/*
 * Values another reader produces (a GGUF tensor under its Hugging Face name,
 * dequantized): read writes elements [first, first + n) of the tensor, in
 * row-major order of its shape, as float32 into dst. The range is always
 * inside the tensor.
 */
typedef struct wm_st_source {
    void (*read)(const void *ctx, uint64_t first, size_t n, float *dst);
    const void *ctx;
} wm_st_source;

/* One tensor of an open file. Everything it points to is owned by the file. */
typedef struct wm_st_tensor {
    const char *name;     /* UTF-8, NUL-terminated (names with NUL are refused) */
    wm_st_dtype dtype;
    size_t rank;          /* 0 for a scalar */
    const int64_t *shape; /* rank dims, each >= 0; NULL when rank is 0 */
    uint64_t numel;       /* product of the dims (1 for a scalar) */
    const uint8_t *data;  /* nbytes bytes inside the mapping; alignment NOT guaranteed */
    uint64_t nbytes;
    uint64_t offset;      /* begin, relative to the shard's data section */
    uint32_t shard;       /* index for wm_st_shard_path (0 for a single file) */
    /* NULL for safetensors' own tensors (data holds dtype values). Set: dtype is F32 as the values are read,
       and data / nbytes are the source's raw bytes (quantized blocks), never to be read as dtype values */
    const wm_st_source *src;
} wm_st_tensor;

typedef struct wm_st_kv {
    const char *key, *value;
} wm_st_kv;

typedef struct wm_st_file wm_st_file; /* opaque */

typedef struct wm_st_open_opts {
    /*
     * Folder every shard must resolve inside (symlinks followed, compared
     * by path component), e.g. a Hugging Face cache's models--org--name
     * folder whose snapshot files link to ../../blobs. NULL: the index's
     * own folder, and the path given to wm_st_open is opened as it is.
     * When set, the index file or the single file must resolve inside it
     * too; the resolved path is mapped without following links.
     */
    const char *root;
} wm_st_open_opts;

/*
 * Opens path: a .safetensors file, a model.safetensors.index.json (any
 * *.json is taken as an index), or a folder holding either (the index
 * wins). opts may be NULL. On success *out is a new handle owned by the
 * caller (wm_st_close); on failure *out is NULL and err says why:
 * WM_ERR_INPUT for a malformed or hostile file, WM_ERR_IO, WM_ERR_NOMEM.
 */
wm_status wm_st_open(const char *path, const wm_st_open_opts *opts, wm_st_file **out, wm_error *err);

/*
 * Parses one safetensors file held in memory (size bytes at data). The
 * buffer is not copied: it must stay valid and unchanged until
 * wm_st_close. label names the buffer in messages (NULL: "<buffer>").
 */
wm_status wm_st_open_buffer(const void *data, size_t size, const char *label, wm_st_file **out,
                            wm_error *err);

/*
 * Opens a sharded checkpoint whose index JSON (size bytes at text) is in
 * memory; the shards are dir/<name> (checked and mapped as by wm_st_open).
 * text is only read during the call. label names it in messages (NULL:
 * "<index>").
 */
wm_status wm_st_open_index_buffer(const void *text, size_t size, const char *label, const char *dir,
                                  const wm_st_open_opts *opts, wm_st_file **out, wm_error *err);

/*
 * A handle over n tensors another reader holds (a GGUF's, named and shaped
 * as the Hugging Face checkpoint would be), so that everything reading
 * checkpoints through this header reads them too. The records are copied
 * (names and shapes into the handle); data and src must stay valid until
 * wm_st_close, which then calls owner_free(owner) (may be NULL). Names
 * must be unique (WM_ERR_INPUT naming label and the name otherwise).
 * owner_free runs on failure too.
 */
wm_status wm_st_open_virtual(const wm_st_tensor *t, size_t n, const char *label, void (*owner_free)(void *),
                             void *owner, wm_st_file **out, wm_error *err);

/*
 * A numpy .npz (np.savez / savez_compressed) or .npy (core/npz.h: validated as untrusted input) as a handle of
 * its arrays by name (a .npy: one array named after the file), dtypes mapped one to one. Close with wm_st_close.
 */
wm_status wm_st_open_npz(const char *path, wm_st_file **out, wm_error *err);
/* The safetensors dtype of a numpy array (core/npz.h). */
struct wm_npz_array;
wm_st_dtype wm_st_npz_dtype(const struct wm_npz_array *a);

/* Releases the handle, its mappings and everything it returned. NULL is fine. */
void wm_st_close(wm_st_file *f);

/* Tensor count and the i-th tensor (sorted by name, bytewise); NULL when i is out of range. */
size_t wm_st_count(const wm_st_file *f);
const wm_st_tensor *wm_st_get(const wm_st_file *f, size_t i);
/* Binary search by exact name; NULL when absent. */
const wm_st_tensor *wm_st_find(const wm_st_file *f, const char *name);

/*
 * The __metadata__ map in file order (for a sharded checkpoint: the union
 * of the shards' maps, first shard first; a key repeated in a later shard
 * is kept once, with the first value).
 */
size_t wm_st_meta_count(const wm_st_file *f);
const wm_st_kv *wm_st_meta_at(const wm_st_file *f, size_t i);
/* Value of key, NULL when absent. */
const char *wm_st_meta_get(const wm_st_file *f, const char *key);

/* Files backing the tensors (1 for a single file), as opened (folder/name). */
size_t wm_st_shard_count(const wm_st_file *f);
const char *wm_st_shard_path(const wm_st_file *f, size_t i);

/* 1 when t->data may be used as an array of its dtype (pointer aligned). */
int wm_st_is_aligned(const wm_st_tensor *t);

/*
 * Writes n tensors and n_meta metadata pairs as one safetensors file.
 * Reads name, dtype, rank, shape and data of each tensor (nbytes is
 * computed from shape and dtype; data must hold that many bytes, and may
 * be NULL only when it is 0). Tensors are laid out by descending alignment
 * then name, so with the header padded by spaces to a multiple of 8 every
 * tensor in the file is aligned. The file is written to a temporary file
 * in the same folder, fsync'ed and renamed over path: on any failure
 * nothing is left behind. Names must be unique, valid UTF-8 and not
 * "__metadata__"; metadata keys unique.
 */
wm_status wm_st_write(const char *path, const wm_st_tensor *t, size_t n, const wm_st_kv *meta,
                      size_t n_meta, wm_error *err);

/*
 * Same checks and layout as wm_st_write, into memory: *out is a malloc'ed
 * buffer of *out_size bytes, owned by the caller (free).
 */
wm_status wm_st_write_buffer(const wm_st_tensor *t, size_t n, const wm_st_kv *meta, size_t n_meta,
                             uint8_t **out, size_t *out_size, wm_error *err);

#endif
