/*
 * gguf.h - zero-copy reader of GGUF files (versions 2 and 3), the format of
 * llama.cpp: single files and split sets (NAME-00001-of-00003.gguf ...).
 *
 * Layout (little-endian): "GGUF", u32 version, u64 tensor count, u64
 * metadata count; the metadata (key string, u32 value type, value); the
 * tensor infos (name string, u32 n_dims, n_dims u64 dims with dims[0] the
 * innermost, u32 ggml type, u64 offset); padding to the alignment
 * (general.alignment, default 32); the data section. A string is a u64
 * byte length and the bytes (no NUL); an array is a u32 element type, a u64
 * count and the elements.
 *
 * Opening maps every file (mmap) and walks only the header; tensor data
 * pointers point into the mapping and no weight byte is touched. The header
 * is hostile input: every count, string length, array length and offset is
 * checked against the bytes that remain (so a count can never make the
 * reader allocate more than the file's size), products of dims and block
 * sizes use checked arithmetic, tensors must lie inside the data section,
 * aligned, without overlapping, keys and tensor names must be unique valid
 * UTF-8, and unknown value types, unknown tensor types and arrays of arrays
 * are refused by number. Known tensor types the dequantizer does not
 * handle (IQ2_XXS ...) are accepted by the reader and named by
 * wm_ggml_type_name; using them (wm_gguf_dequant_*) is refused by name.
 * Errors name the file, the key or tensor, and the reason.
 *
 * Data pointers are NOT aligned for typed access beyond what the alignment
 * promises; values are read with memcpy.
 */
#ifndef WM_GGUF_GGUF_H
#define WM_GGUF_GGUF_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

#define WM_GGUF_MAX_DIMS 4
#define WM_GGUF_MAX_NAME 64          /* tensor name bytes (GGML_MAX_NAME) */
#define WM_GGUF_MAX_KEY 65535        /* metadata key bytes */
#define WM_GGUF_DEFAULT_ALIGN 32
#define WM_GGUF_MAX_SHARDS 1024      /* files of a split set */

/* metadata value types (X: enum suffix, number, name, bytes of a scalar; 0: variable) */
#define WM_GGUF_VTYPE_LIST(X)  \
    X(U8, 0, "UINT8", 1)       \
    X(I8, 1, "INT8", 1)        \
    X(U16, 2, "UINT16", 2)     \
    X(I16, 3, "INT16", 2)      \
    X(U32, 4, "UINT32", 4)     \
    X(I32, 5, "INT32", 4)      \
    X(F32, 6, "FLOAT32", 4)    \
    X(BOOL, 7, "BOOL", 1)      \
    X(STRING, 8, "STRING", 0)  \
    X(ARRAY, 9, "ARRAY", 0)    \
    X(U64, 10, "UINT64", 8)    \
    X(I64, 11, "INT64", 8)     \
    X(F64, 12, "FLOAT64", 8)

typedef enum wm_gguf_vtype {
#define X(e, n, s, b) WM_GGUF_##e = n,
    WM_GGUF_VTYPE_LIST(X)
#undef X
    WM_GGUF_VTYPE_COUNT
} wm_gguf_vtype;

/* "UINT32" ...; NULL for a number that is no value type. */
const char *wm_gguf_vtype_name(uint32_t t);

/*
 * ggml tensor types (X: enum suffix, number, name, elements per block,
 * bytes per block, 1 when wm_gguf_dequant_* handles it). Numbers missing
 * from the list (4, 5, 31-33, 36-38) were removed from ggml and are refused
 * like any unknown number.
 */
#define WM_GGML_TYPE_LIST(X)          \
    X(F32, 0, "F32", 1, 4, 1)         \
    X(F16, 1, "F16", 1, 2, 1)         \
    X(Q4_0, 2, "Q4_0", 32, 18, 1)     \
    X(Q4_1, 3, "Q4_1", 32, 20, 1)     \
    X(Q5_0, 6, "Q5_0", 32, 22, 1)     \
    X(Q5_1, 7, "Q5_1", 32, 24, 1)     \
    X(Q8_0, 8, "Q8_0", 32, 34, 1)     \
    X(Q8_1, 9, "Q8_1", 32, 40, 0)     \
    X(Q2_K, 10, "Q2_K", 256, 84, 0)   \
    X(Q3_K, 11, "Q3_K", 256, 110, 0)  \
    X(Q4_K, 12, "Q4_K", 256, 144, 1)  \
    X(Q5_K, 13, "Q5_K", 256, 176, 1)  \
    X(Q6_K, 14, "Q6_K", 256, 210, 1)  \
    X(Q8_K, 15, "Q8_K", 256, 292, 0)  \
    X(IQ2_XXS, 16, "IQ2_XXS", 256, 66, 0) \
    X(IQ2_XS, 17, "IQ2_XS", 256, 74, 0)   \
    X(IQ3_XXS, 18, "IQ3_XXS", 256, 98, 0) \
    X(IQ1_S, 19, "IQ1_S", 256, 50, 0)     \
    X(IQ4_NL, 20, "IQ4_NL", 32, 18, 0)    \
    X(IQ3_S, 21, "IQ3_S", 256, 110, 0)    \
    X(IQ2_S, 22, "IQ2_S", 256, 82, 0)     \
    X(IQ4_XS, 23, "IQ4_XS", 256, 136, 0)  \
    X(I8, 24, "I8", 1, 1, 0)              \
    X(I16, 25, "I16", 1, 2, 0)            \
    X(I32, 26, "I32", 1, 4, 0)            \
    X(I64, 27, "I64", 1, 8, 0)            \
    X(F64, 28, "F64", 1, 8, 0)            \
    X(IQ1_M, 29, "IQ1_M", 256, 56, 0)     \
    X(BF16, 30, "BF16", 1, 2, 1)          \
    X(TQ1_0, 34, "TQ1_0", 256, 54, 0)     \
    X(TQ2_0, 35, "TQ2_0", 256, 66, 0)     \
    X(MXFP4, 39, "MXFP4", 32, 17, 0)

typedef enum wm_ggml_type {
#define X(e, n, s, bl, by, ok) WM_GGML_##e = n,
    WM_GGML_TYPE_LIST(X)
#undef X
} wm_ggml_type;

/* "Q4_K" ...; NULL for a number that is no ggml type. */
const char *wm_ggml_type_name(uint32_t t);
/* Elements and bytes per block; 0 for an unknown type. */
uint32_t wm_ggml_block_elems(uint32_t t);
uint32_t wm_ggml_block_bytes(uint32_t t);
/* 1 when the dequantizer handles the type. */
int wm_ggml_type_supported(uint32_t t);
/* "F32, F16, BF16, Q8_0, ..." - the supported types, for messages. */
const char *wm_ggml_supported_list(void);

/* A string of the file: n bytes at p (inside the mapping; not NUL-terminated, may hold any byte). */
typedef struct wm_gguf_str {
    const char *p;
    uint64_t n;
} wm_gguf_str;

/* One metadata pair. Everything it points to is owned by the file. */
typedef struct wm_gguf_kv {
    const char *key;        /* NUL-terminated copy */
    uint32_t type;          /* wm_gguf_vtype */
    uint32_t elem;          /* arrays: the element type; otherwise == type */
    uint64_t n;             /* arrays: the element count; 1 otherwise */
    const uint8_t *data;    /* scalars and numeric arrays: the little-endian values; strings: the bytes */
    uint64_t size;          /* bytes at data (a string array: from its first length prefix to its end) */
    const uint64_t *str_at; /* string arrays: offset of element i's length prefix from data; NULL otherwise */
    uint32_t shard;
} wm_gguf_kv;

/* One tensor. Everything it points to is owned by the file. */
typedef struct wm_gguf_tensor {
    const char *name;            /* NUL-terminated, valid UTF-8, unique */
    uint32_t type;               /* wm_ggml_type (a known number) */
    uint32_t n_dims;             /* 1 ..  WM_GGUF_MAX_DIMS */
    uint64_t ne[WM_GGUF_MAX_DIMS]; /* ne[0] innermost (a row); 1 past n_dims */
    uint64_t numel;              /* product of the dims (< 2^63) */
    uint64_t row_bytes;          /* bytes of one row of ne[0] elements (whole blocks) */
    uint64_t nbytes;             /* row_bytes * numel / ne[0] */
    uint64_t offset;             /* from the start of its file's data section */
    const uint8_t *data;         /* nbytes bytes inside the mapping */
    uint32_t shard;
} wm_gguf_tensor;

typedef struct wm_gguf_file wm_gguf_file; /* opaque */

/*
 * Opens path: a .gguf file, one file of a split set NAME-0000K-of-0000N.gguf
 * (all N files are opened, from the same folder), or a folder holding one
 * .gguf file or one split set. On success *out is a new handle owned by
 * the caller (wm_gguf_close); on failure *out is NULL and err says why:
 * WM_ERR_INPUT for a malformed or hostile file (or a folder without one
 * clear choice), WM_ERR_IO, WM_ERR_NOMEM.
 */
wm_status wm_gguf_open(const char *path, wm_gguf_file **out, wm_error *err);

/*
 * Parses one GGUF held in memory (size bytes at data, not copied: it must
 * stay valid and unchanged until wm_gguf_close). label names it in
 * messages (NULL: "<buffer>"). A buffer is one file: split keys are read
 * as metadata but no other file is looked for.
 */
wm_status wm_gguf_open_buffer(const void *data, size_t size, const char *label, wm_gguf_file **out, wm_error *err);

/* Releases the handle, its mappings and everything it returned. NULL is fine. */
void wm_gguf_close(wm_gguf_file *f);

/* 1 when path ends in ".gguf" (there or not) or is a folder holding a .gguf file and no config.json. */
int wm_gguf_is_path(const char *path);

uint32_t wm_gguf_version(const wm_gguf_file *f);
uint64_t wm_gguf_alignment(const wm_gguf_file *f);
/* The path of the file (first file of a split set) as opened; its folder. */
const char *wm_gguf_path(const wm_gguf_file *f);
const char *wm_gguf_dir(const wm_gguf_file *f);
size_t wm_gguf_shard_count(const wm_gguf_file *f);
const char *wm_gguf_shard_path(const wm_gguf_file *f, size_t i);
/* Total bytes of the mapped files. */
uint64_t wm_gguf_file_bytes(const wm_gguf_file *f);

/* Metadata in file order (split sets: the first file's; the split.* keys of the others are checked, not kept). */
size_t wm_gguf_kv_count(const wm_gguf_file *f);
const wm_gguf_kv *wm_gguf_kv_at(const wm_gguf_file *f, size_t i);
/* Exact key; NULL when absent. */
const wm_gguf_kv *wm_gguf_find(const wm_gguf_file *f, const char *key);

/*
 * Typed reads of a value, converting between integer widths and float widths
 * (an integer key read as a number is fine; a float read as an integer is
 * not). WM_ERR_INPUT naming the file and key when the type does not fit or
 * the value is out of [lo, hi]. An absent key (kv NULL) is not an error:
 * *out is left alone and *present (may be NULL) is 0.
 */
wm_status wm_gguf_get_int(const wm_gguf_file *f, const char *key, int64_t lo, int64_t hi, int64_t *out, int *present,
                          wm_error *err);
wm_status wm_gguf_get_num(const wm_gguf_file *f, const char *key, double *out, int *present, wm_error *err);
wm_status wm_gguf_get_bool(const wm_gguf_file *f, const char *key, int *out, int *present, wm_error *err);
wm_status wm_gguf_get_str(const wm_gguf_file *f, const char *key, wm_gguf_str *out, int *present, wm_error *err);
/* An array's type check: WM_ERR_INPUT unless kv is an array whose elements are of one of the listed kinds. */
wm_status wm_gguf_check_array(const wm_gguf_file *f, const wm_gguf_kv *kv, int want_string, wm_error *err);

/* Element i of an array (i < kv->n; no checks): a string, an integer (any integer or bool type), a number. */
wm_gguf_str wm_gguf_arr_str(const wm_gguf_kv *kv, uint64_t i);
int64_t wm_gguf_arr_int(const wm_gguf_kv *kv, uint64_t i);
double wm_gguf_arr_num(const wm_gguf_kv *kv, uint64_t i);
/* 1 when s[0..n) is valid UTF-8 without NUL bytes (no overlongs, surrogates or values past U+10FFFF). */
int wm_gguf_utf8_ok(const char *s, uint64_t n);
/* A scalar (any numeric or bool type) as a double; 0 for strings and arrays. */
double wm_gguf_kv_num(const wm_gguf_kv *kv);

/* Tensors in file order (split sets: file by file). */
size_t wm_gguf_tensor_count(const wm_gguf_file *f);
const wm_gguf_tensor *wm_gguf_tensor_at(const wm_gguf_file *f, size_t i);
/* Exact name (binary search); NULL when absent. */
const wm_gguf_tensor *wm_gguf_find_tensor(const wm_gguf_file *f, const char *name);

/* ---------------------------------------------------------------- blocks and values (gguf_dequant.c) */

/*
 * Row r of t (rows: numel / ne[0], dims 1.. flattened): its row_bytes bytes
 * of whole blocks, the block-level view a packed (MatMulNBits) path reads.
 * NULL when r is out of range.
 */
const uint8_t *wm_gguf_row(const wm_gguf_tensor *t, uint64_t r);

/*
 * Dequantizes nb whole blocks of type (a supported type) at src (any
 * alignment) into dst (nb * wm_ggml_block_elems(type) floats): the
 * reference conversion of ggml, one plain loop per type.
 */
void wm_ggml_dequant_blocks(uint32_t type, const uint8_t *src, size_t nb, float *dst);

/* Elements [c0, c0 + n) of one row of type (whole blocks from row) into dst; partial blocks go through a buffer. */
void wm_ggml_dequant_range(uint32_t type, const uint8_t *row, uint64_t c0, size_t n, float *dst);

/* Elements [first, first + n) of t in row-major order; WM_ERR_UNSUPPORTED naming t and its type when unsupported. */
wm_status wm_gguf_dequant(const wm_gguf_tensor *t, uint64_t first, size_t n, float *dst, wm_error *err);

/* ---------------------------------------------------------------- carried blocks (gguf_carry.c) */

/*
 * A quantized type's blocks as MatMulNBits / GatherBlockQuantized blocks, without requantizing: per block of
 * `block` elements of a row, codes c (0 .. 2^bits - 1, one byte each here), a scale s and a zero point z with
 * (c - z) * s the dequantizer's value (wm_ggml_dequant_blocks). The forms:
 *   Q4_0  bits 4, block 32, s = d, z = 8 (the implicit one)      Q8_0  bits 8, block 32, c = q + 128, z = 128
 *   Q5_0  bits 8, block 32, c = the 5-bit q, z = 16               Q6_K  bits 8, block 16, c = q6, z = 32, s = d * sc_j
 *   Q4_1  bits 4, block 32, s = d, z = -m / d (float)             Q4_K  bits 4, block 32, s = d * sc_j,
 *   Q5_1  bits 8, block 32, as Q4_1 (float)                              z = dmin * m_j / (d * sc_j) (float)
 *   Q5_K  bits 8, block 32, as Q4_K (float)
 * Integer zero points reproduce the value bit for bit (the same product of the same factors); float ones within
 * the rounding of the offset's quotient and product. A float-zero-point block whose scale is 0 is the constant
 * -z_orig: it is written as codes 0, scale 1, zero point minus that constant.
 */
typedef enum { WM_CARRY_ZP_NONE, WM_CARRY_ZP_U8, WM_CARRY_ZP_FLOAT } wm_carry_zp;

typedef struct wm_ggml_carry {
    int bits;       /* 4 or 8 */
    uint32_t block; /* elements per scale: 16 or 32 */
    int zp;         /* wm_carry_zp: NONE = 2^(bits - 1) for every block */
} wm_ggml_carry;

/* 1 and *form (may be NULL) when type's blocks carry; 0 for float types and types without a form. */
int wm_ggml_carry_form(uint32_t type, wm_ggml_carry *form);

/*
 * The first n elements (whole blocks of type) of row: codes[0..n), scales and zero points [0..n / form.block)
 * (zero points as floats, whole numbers for the integer forms). Nothing is written for a type without a form.
 */
void wm_ggml_carry_row(uint32_t type, const uint8_t *row, uint64_t n, uint8_t *codes, float *scales, float *zp);

#endif
