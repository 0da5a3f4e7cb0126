/*
 * npz.c - numpy .npz / .npy reader (see npz.h).
 *
 * ZIP records are read from the central directory at the end of the archive (the local headers only locate each
 * member's bytes), so a numpy archive written in streaming mode (sizes in the central directory, zero or 0xFFFFFFFF
 * in the local header) reads as well as any other.
 */
#include "core/npz.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <zlib.h>

#include "core/arena.h"
#include "core/sysmem.h"

#define MAX_INFLATED (16ull << 30) /* all deflated members together */
#define MAX_HEADER (1u << 20)      /* an .npy header (numpy's own are < 64 KiB) */
#define MAX_NAME 4096
#define DEFLATE_MAX_RATIO 1032u    /* the most bytes one deflated byte can become */

static uint16_t rd16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }
static uint32_t rd32(const uint8_t *p) { return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t rd64(const uint8_t *p) { return (uint64_t)rd32(p) | (uint64_t)rd32(p + 4) << 32; }

/* ------------------------------------------------------------ .npy header: a Python dict literal */

typedef struct hdr_parse {
    const char *p, *end;
} hdr_parse;

static void skip_ws(hdr_parse *h) {
    while (h->p < h->end && (*h->p == ' ' || *h->p == '\t' || *h->p == '\n' || *h->p == '\r')) h->p++;
}

static int eat(hdr_parse *h, char c) {
    skip_ws(h);
    if (h->p < h->end && *h->p == c) {
        h->p++;
        return 1;
    }
    return 0;
}

/* A quoted string (no escapes: numpy's keys and dtype strings have none) into out[n]. */
static int parse_str(hdr_parse *h, char *out, size_t n) {
    skip_ws(h);
    if (h->p >= h->end || (*h->p != '\'' && *h->p != '"')) return 0;
    char q = *h->p++;
    const char *s = h->p;
    while (h->p < h->end && *h->p != q && *h->p != '\\') h->p++;
    if (h->p >= h->end || *h->p != q || (size_t)(h->p - s) >= n) return 0;
    memcpy(out, s, (size_t)(h->p - s));
    out[h->p - s] = 0;
    h->p++;
    return 1;
}

/* "(2, 3)", "(5,)", "()" into shape; returns the rank, or -1. */
static int parse_shape(hdr_parse *h, int64_t *shape) {
    if (!eat(h, '(')) return -1;
    int rank = 0;
    for (;;) {
        if (eat(h, ')')) return rank;
        skip_ws(h);
        if (h->p >= h->end || *h->p < '0' || *h->p > '9' || rank == WM_NPZ_MAX_RANK) return -1;
        uint64_t v = 0;
        while (h->p < h->end && *h->p >= '0' && *h->p <= '9') {
            if (v > ((uint64_t)INT64_MAX - 9) / 10) return -1;
            v = v * 10 + (uint64_t)(*h->p++ - '0');
        }
        if (h->p < h->end && *h->p == 'L') h->p++; /* Python 2's long suffix */
        shape[rank++] = (int64_t)v;
        if (!eat(h, ',')) {
            if (!eat(h, ')')) return -1;
            return rank;
        }
    }
}

/* Fills a's dtype and shape from an .npy header; NULL, or the field that is wrong. */
static const char *parse_header(const char *text, size_t n, wm_npz_array *a, char *why, size_t why_n) {
    hdr_parse h = {text, text + n};
    char key[32], descr[32] = "";
    int have_descr = 0, have_order = 0, have_shape = 0;
    if (!eat(&h, '{')) return "the header is not a dict";
    while (!eat(&h, '}')) {
        if (!parse_str(&h, key, sizeof key) || !eat(&h, ':')) return "the header is not a dict of known keys";
        if (!strcmp(key, "descr")) {
            if (!parse_str(&h, descr, sizeof descr)) return "'descr' is not a plain dtype string (structured dtype?)";
            have_descr = 1;
        } else if (!strcmp(key, "fortran_order")) {
            skip_ws(&h);
            if ((size_t)(h.end - h.p) >= 4 && !memcmp(h.p, "True", 4)) return "'fortran_order' is True (save a C-order array)";
            if ((size_t)(h.end - h.p) < 5 || memcmp(h.p, "False", 5)) return "'fortran_order' is not True or False";
            h.p += 5;
            have_order = 1;
        } else if (!strcmp(key, "shape")) {
            if ((a->rank = parse_shape(&h, a->shape)) < 0) return "'shape' is not a tuple of at most 8 sizes";
            have_shape = 1;
        } else {
            snprintf(why, why_n, "unknown key '%s'", key);
            return why;
        }
        if (!eat(&h, ',')) {
            if (!eat(&h, '}')) return "the header is not a dict";
            break;
        }
    }
    if (!have_descr || !have_order || !have_shape) return "the header lacks 'descr', 'fortran_order' or 'shape'";
    char order = descr[0], kind = descr[1];
    char *end = NULL;
    long size = descr[1] ? strtol(descr + 2, &end, 10) : 0;
    if (!descr[1] || !end || *end || (order != '<' && order != '|' && order != '=' && order != '>')) {
        snprintf(why, why_n, "'descr' '%s' is not a numeric dtype", descr);
        return why;
    }
    int ok = (kind == 'b' && size == 1) || ((kind == 'i' || kind == 'u') && (size == 1 || size == 2 || size == 4 || size == 8)) ||
             (kind == 'f' && (size == 2 || size == 4 || size == 8));
    if (!ok) {
        snprintf(why, why_n, "'descr' '%s': dtype not supported (bool, int8..64, uint8..64, float16/32/64 are)", descr);
        return why;
    }
    if (order == '>' && size > 1) {
        snprintf(why, why_n, "'descr' '%s' is big-endian (save with dtype '<%c%ld')", descr, kind, size);
        return why;
    }
    a->kind = kind;
    a->itemsize = (int)size;
    uint64_t count = 1;
    for (int d = 0; d < a->rank; d++)
        if (!wm_mul_u64(count, (uint64_t)a->shape[d], &count)) return "'shape' overflows";
    a->count = count;
    if (!wm_mul_u64(count, (uint64_t)size, &a->nbytes)) return "'shape' overflows";
    return NULL;
}

/* One .npy image (bytes, n) into a; the member's name is in a->name for messages. */
static wm_status parse_npy(const uint8_t *b, uint64_t n, const char *label, wm_npz_array *a, wm_error *err) {
    if (n < 10 || memcmp(b, "\x93NUMPY", 6))
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': not an .npy array (no \\x93NUMPY magic)", label, a->name);
    int major = b[6];
    uint64_t hl, off;
    if (major == 1) hl = rd16(b + 8), off = 10;
    else if (major == 2 || major == 3) {
        if (n < 12) return wm_err(err, WM_ERR_INPUT, "%s: member '%s': truncated .npy header", label, a->name);
        hl = rd32(b + 8), off = 12;
    } else
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': .npy format version %d.%d is not 1, 2 or 3", label, a->name,
                      major, b[7]);
    if (hl > MAX_HEADER || hl > n - off)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': .npy header length %llu runs past the member (%llu bytes)",
                      label, a->name, (unsigned long long)hl, (unsigned long long)n);
    char why[160];
    const char *bad = parse_header((const char *)b + off, (size_t)hl, a, why, sizeof why);
    if (bad) return wm_err(err, WM_ERR_INPUT, "%s: member '%s': .npy header: %s", label, a->name, bad);
    uint64_t have = n - off - hl;
    if (have != a->nbytes)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': %llu data bytes, but shape and dtype need %llu", label,
                      a->name, (unsigned long long)have, (unsigned long long)a->nbytes);
    a->data = b + off + hl;
    return WM_OK;
}

/* ------------------------------------------------------------ ZIP */

typedef struct zip_dir {
    uint64_t entries, size, offset;
} zip_dir;

/* The central directory's place from the end records (ZIP64 when the classic fields are saturated). */
static wm_status find_dir(const uint8_t *b, size_t n, const char *label, zip_dir *d, wm_error *err) {
    if (n < 22) return wm_err(err, WM_ERR_INPUT, "%s: not a ZIP archive (%zu bytes)", label, n);
    size_t lo = n - 22 > 65535 ? n - 22 - 65535 : 0;
    size_t e = SIZE_MAX;
    for (size_t i = n - 22 + 1; i-- > lo;)
        if (rd32(b + i) == 0x06054b50 && i + 22 + rd16(b + i + 20) == n) {
            e = i;
            break;
        }
    if (e == SIZE_MAX) return wm_err(err, WM_ERR_INPUT, "%s: not a ZIP archive (no end of central directory record)", label);
    if (rd16(b + e + 4) || rd16(b + e + 6))
        return wm_err(err, WM_ERR_INPUT, "%s: a multi-disk ZIP archive is not supported", label);
    d->entries = rd16(b + e + 10);
    d->size = rd32(b + e + 12);
    d->offset = rd32(b + e + 16);
    if (d->entries == 0xFFFF || d->size == 0xFFFFFFFFu || d->offset == 0xFFFFFFFFu) {
        if (e < 20 || rd32(b + e - 20) != 0x07064b50)
            return wm_err(err, WM_ERR_INPUT, "%s: ZIP64 sizes without a ZIP64 end of central directory locator", label);
        uint64_t z = rd64(b + e - 20 + 8);
        if (z > n || n - z < 56 || rd32(b + z) != 0x06064b50)
            return wm_err(err, WM_ERR_INPUT, "%s: the ZIP64 end of central directory record is missing or truncated",
                          label);
        d->entries = rd64(b + z + 32);
        d->size = rd64(b + z + 40);
        d->offset = rd64(b + z + 48);
    }
    if (d->offset > n || d->size > n - d->offset)
        return wm_err(err, WM_ERR_INPUT, "%s: the central directory (offset %llu, %llu bytes) lies outside the file",
                      label, (unsigned long long)d->offset, (unsigned long long)d->size);
    if (d->entries > WM_NPZ_MAX_MEMBERS)
        return wm_err(err, WM_ERR_INPUT, "%s: %llu members (at most %d are read)", label,
                      (unsigned long long)d->entries, WM_NPZ_MAX_MEMBERS);
    return WM_OK;
}

/* Raw deflate of src (csize) into a new buffer of exactly usize bytes (one spare byte detects a longer stream). */
static wm_status inflate_member(const uint8_t *src, uint64_t csize, uint64_t usize, const char *label, const char *name,
                                void **out, wm_error *err) {
    uint8_t *dst = malloc(usize + 1);
    if (!dst) return wm_err(err, WM_ERR_NOMEM, "%s: member '%s': out of memory for %llu bytes", label, name,
                            (unsigned long long)usize);
    z_stream zs;
    memset(&zs, 0, sizeof zs);
    if (inflateInit2(&zs, -15) != Z_OK) {
        free(dst);
        return wm_err(err, WM_ERR_NOMEM, "%s: member '%s': cannot start inflating", label, name);
    }
    uint64_t in_left = csize, produced = 0;
    const uint8_t *ip = src;
    const char *bad = NULL;
    for (;;) {
        uint64_t room = usize + 1 - produced;
        uInt ai = in_left > 1u << 30 ? 1u << 30 : (uInt)in_left, ao = room > 1u << 30 ? 1u << 30 : (uInt)room;
        zs.next_in = (Bytef *)ip, zs.avail_in = ai;
        zs.next_out = dst + produced, zs.avail_out = ao;
        int rc = inflate(&zs, Z_NO_FLUSH);
        ip += ai - zs.avail_in, in_left -= ai - zs.avail_in;
        produced += ao - zs.avail_out;
        if (produced > usize) bad = "is longer than its declared size";
        else if (rc == Z_STREAM_END) bad = produced < usize ? "is shorter than its declared size" : NULL;
        else if (rc == Z_BUF_ERROR && !in_left) bad = "is truncated";
        else if (rc == Z_OK || rc == Z_BUF_ERROR) continue;
        else bad = "is corrupt";
        break;
    }
    inflateEnd(&zs);
    if (bad) {
        free(dst);
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': the deflated data %s", label, name, bad);
    }
    *out = dst;
    return WM_OK;
}

static int ends_with(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcmp(s + a - b, suf);
}

/* One central directory entry at b + *pos: its member's .npy image (stored, or inflated into z->owned). */
static wm_status read_entry(wm_npz *z, const uint8_t *b, size_t n, const zip_dir *d, uint64_t *pos, uint64_t *inflated,
                            const char *label, wm_error *err) {
    uint64_t p = *pos, end = d->offset + d->size;
    if (end - p < 46 || rd32(b + p) != 0x02014b50)
        return wm_err(err, WM_ERR_INPUT, "%s: central directory entry %zu is truncated or has no signature", label, z->n);
    uint16_t flags = rd16(b + p + 8), method = rd16(b + p + 10);
    uint32_t crc = rd32(b + p + 16);
    uint64_t csize = rd32(b + p + 20), usize = rd32(b + p + 24), local = rd32(b + p + 42);
    uint16_t nl = rd16(b + p + 28), xl = rd16(b + p + 30), cl = rd16(b + p + 32);
    if (end - p - 46 < (uint64_t)nl + xl + cl)
        return wm_err(err, WM_ERR_INPUT, "%s: central directory entry %zu runs past the directory", label, z->n);
    const uint8_t *x = b + p + 46 + nl, *xe = x + xl;
    while (xe - x >= 4) { /* the ZIP64 extra field: the saturated sizes and offset, in this order */
        uint16_t id = rd16(x), sz = rd16(x + 2);
        if (sz > xe - x - 4) break;
        if (id == 1) {
            const uint8_t *q = x + 4, *qe = q + sz;
            if (usize == 0xFFFFFFFFu && qe - q >= 8) usize = rd64(q), q += 8;
            if (csize == 0xFFFFFFFFu && qe - q >= 8) csize = rd64(q), q += 8;
            if (local == 0xFFFFFFFFu && qe - q >= 8) local = rd64(q), q += 8;
        }
        x += 4 + sz;
    }
    *pos = p + 46 + nl + xl + cl;
    if (nl == 0 || nl > MAX_NAME) return wm_err(err, WM_ERR_INPUT, "%s: member %zu has an empty or too long name", label, z->n);
    wm_npz_array *a = &z->a[z->n];
    if (!(a->name = strndup((const char *)b + p + 46, nl))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    z->n++;
    if (strlen(a->name) != nl) return wm_err(err, WM_ERR_INPUT, "%s: member %zu's name holds a NUL byte", label, z->n - 1);
    if (ends_with(a->name, ".npy")) a->name[nl - 4] = 0;
    for (size_t i = 0; i + 1 < z->n; i++)
        if (!strcmp(z->a[i].name, a->name)) return wm_err(err, WM_ERR_INPUT, "%s: two members named '%s'", label, a->name);
    if (flags & 1) return wm_err(err, WM_ERR_INPUT, "%s: member '%s' is encrypted", label, a->name);
    if (method != 0 && method != 8)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': compression method %u (only stored and deflate are read)",
                      label, a->name, method);
    if (local > n || n - local < 30 || rd32(b + local) != 0x04034b50)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': its local header (offset %llu) is missing", label, a->name,
                      (unsigned long long)local);
    uint64_t data = local + 30 + rd16(b + local + 26) + rd16(b + local + 28);
    if (data > n || csize > n - data)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': its %llu bytes run past the end of the file", label, a->name,
                      (unsigned long long)csize);
    const uint8_t *img = b + data;
    if (method == 8) {
        /* deflate expands at most 1032:1 (a 258-byte match per 2 bits): a larger claim is a lie about the buffer
           the member needs, refused before that buffer is allocated */
        if (usize / DEFLATE_MAX_RATIO > csize + 1)
            return wm_err(err, WM_ERR_INPUT, "%s: member '%s' declares %llu bytes inflated from %llu deflated bytes: "
                          "more than deflate's %u:1 maximum (corrupt)", label, a->name, (unsigned long long)usize,
                          (unsigned long long)csize, (unsigned)DEFLATE_MAX_RATIO);
        uint64_t avail = wm_mem_available(), cap = avail && avail / 2 < MAX_INFLATED ? avail / 2 : MAX_INFLATED;
        if (usize > cap - (*inflated < cap ? *inflated : cap))
            return wm_err(err, WM_ERR_INPUT, "%s: member '%s' declares %llu bytes inflated: over the %llu bytes (16 GiB or "
                          "half the available memory) read in all", label, a->name, (unsigned long long)usize,
                          (unsigned long long)cap);
        *inflated += usize;
        void *buf = NULL;
        wm_status s = inflate_member(img, csize, usize, label, a->name, &buf, err);
        if (s) return s;
        z->owned[z->n_owned++] = buf;
        img = buf;
    } else if (usize != csize)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s' is stored but its sizes differ (%llu, %llu)", label, a->name,
                      (unsigned long long)csize, (unsigned long long)usize);
    uLong c = crc32(0L, Z_NULL, 0);
    for (uint64_t o = 0; o < usize;) { /* crc32's length is a uInt */
        uInt k = usize - o > 1u << 30 ? 1u << 30 : (uInt)(usize - o);
        c = crc32(c, img + o, k);
        o += k;
    }
    if ((uint32_t)c != crc)
        return wm_err(err, WM_ERR_INPUT, "%s: member '%s': CRC-32 %08x, the archive says %08x (corrupt)", label, a->name,
                      (unsigned)c, (unsigned)crc);
    return parse_npy(img, usize, label, a, err);
}

wm_status wm_npz_open_buffer(const uint8_t *data, size_t size, const char *label, wm_npz *z, wm_error *err) {
    memset(z, 0, sizeof *z);
    if (!label) label = "npz";
    wm_status s;
    if (size >= 6 && !memcmp(data, "\x93NUMPY", 6)) { /* a single .npy */
        if (!(z->a = calloc(1, sizeof *z->a)) || !(z->a[0].name = strdup("array"))) {
            wm_npz_close(z);
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        }
        const char *base = strrchr(label, '/');
        base = base ? base + 1 : label;
        char *nm = strdup(base);
        if (nm) {
            if (ends_with(nm, ".npy")) nm[strlen(nm) - 4] = 0;
            free(z->a[0].name);
            z->a[0].name = nm;
        }
        z->n = 1;
        if ((s = parse_npy(data, size, label, &z->a[0], err))) wm_npz_close(z);
        return s;
    }
    zip_dir d = {0};
    if ((s = find_dir(data, size, label, &d, err))) return s;
    size_t cap = d.entries ? (size_t)d.entries : 1;
    z->a = calloc(cap, sizeof *z->a);
    z->owned = calloc(cap, sizeof *z->owned);
    if (!z->a || !z->owned) {
        wm_npz_close(z);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    uint64_t pos = d.offset, inflated = 0;
    while (!s && z->n < d.entries) s = read_entry(z, data, size, &d, &pos, &inflated, label, err);
    if (s) wm_npz_close(z);
    return s;
}

wm_status wm_npz_open(const char *path, wm_npz *z, wm_error *err) {
    memset(z, 0, sizeof *z);
    wm_map m;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    if ((s = wm_npz_open_buffer(m.data, m.size, path, z, err))) wm_unmap(&m);
    else z->map = m;
    return s;
}

const wm_npz_array *wm_npz_find(const wm_npz *z, const char *name) {
    for (size_t i = 0; name && i < z->n; i++)
        if (!strcmp(z->a[i].name, name)) return &z->a[i];
    return NULL;
}

void wm_npz_close(wm_npz *z) {
    if (!z) return;
    for (size_t i = 0; z->a && i < z->n; i++) free(z->a[i].name);
    for (size_t i = 0; z->owned && i < z->n_owned; i++) free(z->owned[i]);
    free(z->a);
    free(z->owned);
    wm_unmap(&z->map);
    memset(z, 0, sizeof *z);
}
