/*
 * pb.h - a table-driven protocol-buffers codec (proto2 wire format).
 *
 * Each message type is described by a wm_pb_msg table listing its fields
 * (number, kind, repeated/packed, offset in the C struct). One generic
 * decoder fills C structs from bytes and one generic encoder writes them
 * back. Decoding is zero-copy for `bytes` fields (spans into the input,
 * which must outlive the decoded structs); strings are copied with a NUL.
 * Fields the table does not know are kept verbatim (tag + payload) and
 * written back, so nothing a peer tool wrote is dropped on a round trip.
 *
 * Limits for untrusted input: varints of at most 10 bytes, every
 * length-delimited field must fit in what its parent has left, nesting
 * depth at most WM_PB_MAX_DEPTH, group wire types rejected.
 */
#ifndef WM_ONNX_PB_H
#define WM_ONNX_PB_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "winml/winml.h"

#define WM_PB_MAX_DEPTH 64
#define WM_PB_MAX_MESSAGE 0x7fffffffull /* 2^31-1: one message must stay below */

typedef struct wm_bytes {
    const uint8_t *p; /* NULL = field absent */
    size_t n;
} wm_bytes;

/* Every described struct starts with this. */
typedef struct wm_pb_base {
    uint64_t has;      /* bit i: singular scalar field i was present */
    wm_bytes *unknown; /* each one complete field (tag + payload) */
    size_t n_unknown;
} wm_pb_base;

typedef enum wm_pb_kind {
    WM_PB_INT64,  /* int64_t   (varint) */
    WM_PB_INT32,  /* int32_t   (varint; enums too) */
    WM_PB_UINT64, /* uint64_t  (varint) */
    WM_PB_FLOAT,  /* float     (fixed32) */
    WM_PB_DOUBLE, /* double    (fixed64) */
    WM_PB_STRING, /* char*, NUL-terminated copy; NULL = absent */
    WM_PB_BYTES,  /* wm_bytes, zero-copy */
    WM_PB_MSG     /* pointer to a described struct; NULL = absent */
} wm_pb_kind;

typedef struct wm_pb_msg wm_pb_msg;
typedef struct wm_pb_field {
    uint32_t num;
    uint8_t kind;     /* wm_pb_kind */
    uint8_t repeated; /* value is an array + size_t count (T* or T** for messages) */
    uint8_t packed;   /* emit repeated scalars packed */
    uint32_t off;     /* offset of the value or of the array pointer */
    uint32_t count_off;
    const wm_pb_msg *sub;
    const char *name;
} wm_pb_field;

struct wm_pb_msg {
    const char *name;
    size_t size;
    const wm_pb_field *fields;
    size_t nfields;
};

/*
 * Decodes buf[0..n) as message d into a new zeroed struct allocated in a.
 * *out receives it. Bytes fields point into buf. On error, err names the
 * field path (e.g. "ModelProto.graph.node[3].attribute[0].t: ...").
 */
wm_status wm_pb_decode(wm_arena *a, const wm_pb_msg *d, const uint8_t *buf, size_t n, void **out,
                       wm_error *err);

/* Allocates a new zeroed message of type d in a (NULL on OOM). */
void *wm_pb_new(wm_arena *a, const wm_pb_msg *d);

/* Serialized size of message m of type d. */
uint64_t wm_pb_size(const wm_pb_msg *d, const void *m);

/* Output sink: write returns 0 on success. */
typedef struct wm_pb_sink {
    int (*write)(void *ctx, const void *p, size_t n);
    void *ctx;
} wm_pb_sink;

/* Encodes m; returns 0 on success, -1 when the sink failed. */
int wm_pb_encode(wm_pb_sink *s, const wm_pb_msg *d, const void *m);

/* Encodes into a new malloc'ed buffer (caller frees); NULL on OOM. */
uint8_t *wm_pb_encode_alloc(const wm_pb_msg *d, const void *m, size_t *n);

/* Marks singular field `num` of m as present (for values equal to 0). */
void wm_pb_set_has(const wm_pb_msg *d, void *m, uint32_t num);
void wm_pb_clear_has(const wm_pb_msg *d, void *m, uint32_t num);

#endif
