/* thrift.c - the Thrift compact protocol, read with every length checked (thrift.h). */
#include "core/thrift.h"

uint8_t wm_tc_byte(wm_tc *c) {
    if (c->p >= c->end) return c->bad = 1, 0;
    return *c->p++;
}

uint64_t wm_tc_varint(wm_tc *c) {
    uint64_t v = 0;
    for (int sh = 0; sh < 64; sh += 7) {
        uint8_t b = wm_tc_byte(c);
        if (c->bad) return 0;
        v |= (uint64_t)(b & 0x7f) << sh;
        if (!(b & 0x80)) return v;
    }
    return c->bad = 1, 0;
}

int64_t wm_tc_int(wm_tc *c) {
    uint64_t v = wm_tc_varint(c);
    return (int64_t)(v >> 1) ^ -(int64_t)(v & 1);
}

void wm_tc_bin(wm_tc *c, const uint8_t **s, size_t *n) {
    uint64_t l = wm_tc_varint(c);
    *s = NULL, *n = 0;
    if (c->bad || l > (uint64_t)(c->end - c->p)) {
        c->bad = 1;
        return;
    }
    *s = c->p, *n = (size_t)l;
    c->p += l;
}

/* A list header: its size (each element takes a byte at least: at most the bytes left) and element type. */
uint64_t wm_tc_list(wm_tc *c, int *et) {
    uint8_t b = wm_tc_byte(c);
    uint64_t n = b >> 4;
    *et = b & 15;
    if (n == 15) n = wm_tc_varint(c);
    if (c->bad || n > (uint64_t)(c->end - c->p)) return c->bad = 1, 0;
    return n;
}

/* The next field of a struct: 1 with its id (delta from *id) and type, 0 at its end (or on an error). */
int wm_tc_field(wm_tc *c, int *id, int *ty) {
    uint8_t b = wm_tc_byte(c);
    if (c->bad || !b) return 0;
    *ty = b & 15;
    if (b >> 4) *id += b >> 4;
    else *id = (int)wm_tc_int(c);
    return !c->bad;
}

static void skip_elem(wm_tc *c, int et, int depth) {
    if (et == 1 || et == 2) wm_tc_byte(c); /* a boolean in a collection is a byte */
    else wm_tc_skip(c, et, depth);
}

void wm_tc_skip(wm_tc *c, int ty, int depth) {
    if (depth > WM_TC_MAX_DEPTH) {
        c->bad = 1;
        return;
    }
    switch (ty) {
    case 1: case 2: return; /* a boolean field: its value is its type */
    case 3: wm_tc_byte(c); return;
    case 4: case 5: case 6: wm_tc_varint(c); return;
    case 7:
        if (c->end - c->p < 8) c->bad = 1;
        else c->p += 8;
        return;
    case 8: {
        const uint8_t *s;
        size_t n;
        wm_tc_bin(c, &s, &n);
        return;
    }
    case 9: case 10: {
        int et;
        uint64_t n = wm_tc_list(c, &et);
        for (uint64_t i = 0; i < n && !c->bad; i++) skip_elem(c, et, depth + 1);
        return;
    }
    case 11: {
        uint64_t n = wm_tc_varint(c);
        if (c->bad || n > (uint64_t)(c->end - c->p)) {
            c->bad = 1;
            return;
        }
        if (!n) return;
        uint8_t kv = wm_tc_byte(c);
        for (uint64_t i = 0; i < n && !c->bad; i++) {
            skip_elem(c, kv >> 4, depth + 1);
            skip_elem(c, kv & 15, depth + 1);
        }
        return;
    }
    case 12: {
        int id = 0, t;
        while (wm_tc_field(c, &id, &t)) wm_tc_skip(c, t, depth + 1);
        return;
    }
    default: c->bad = 1;
    }
}

/* An integer field's value (i8 / i16 / i32 / i64); a field of another type sets c->bad. */
int64_t wm_tc_ival(wm_tc *c, int ty) {
    if (ty == 3) return (int8_t)wm_tc_byte(c);
    if (ty >= 4 && ty <= 6) return wm_tc_int(c);
    return c->bad = 1, 0;
}
