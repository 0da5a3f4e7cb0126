/*
 * thrift.h - reading the Thrift compact protocol (Parquet's footer and page headers) from untrusted bytes: a cursor
 * over [p, end) whose reads past the end, over-long varints, lengths and list sizes past the bytes left, and nesting
 * past WM_TC_MAX_DEPTH set bad (and return 0) instead of reading on; callers check bad once after a struct.
 */
#ifndef WM_CORE_THRIFT_H
#define WM_CORE_THRIFT_H

#include <stddef.h>
#include <stdint.h>

#define WM_TC_MAX_DEPTH 16

typedef struct wm_tc {
    const uint8_t *p, *end;
    int bad;
} wm_tc;

uint8_t wm_tc_byte(wm_tc *c);
uint64_t wm_tc_varint(wm_tc *c);
/* A zigzag varint (i16 / i32 / i64). */
int64_t wm_tc_int(wm_tc *c);
/* A binary / string: *s points into the buffer (n bytes). */
void wm_tc_bin(wm_tc *c, const uint8_t **s, size_t *n);
/* A list header: its size (each element takes a byte at least: at most the bytes left) and element type. */
uint64_t wm_tc_list(wm_tc *c, int *et);
/* The next field of a struct: 1 with its id (delta from *id) and type, 0 at its end (or on an error). */
int wm_tc_field(wm_tc *c, int *id, int *ty);
/* Skips a value of type ty at nesting depth. */
void wm_tc_skip(wm_tc *c, int ty, int depth);
/* An integer field's value (i8 / i16 / i32 / i64); a field of another type sets c->bad. */
int64_t wm_tc_ival(wm_tc *c, int ty);

#endif
