/* sha256.c - SHA-256 from the FIPS 180-4 description. */
#include "core/sha256.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"

#if defined(__x86_64__) && defined(__GNUC__)
#include <cpuid.h>
#include <immintrin.h>
#define WM_SHA_X86 1
#endif

static const uint32_t K[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

#define ROR(x, n) (((x) >> (n)) | ((x) << (32 - (n))))

static void block_generic(uint32_t h[8], const uint8_t *p) {
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = ROR(w[i - 15], 7) ^ ROR(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = ROR(w[i - 2], 17) ^ ROR(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (ROR(e, 6) ^ ROR(e, 11) ^ ROR(e, 25)) + ((e & f) ^ (~e & g)) + K[i] + w[i];
        uint32_t t2 = (ROR(a, 2) ^ ROR(a, 13) ^ ROR(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g;
        g = f;
        f = e;
        e = d + t1;
        d = c;
        c = b;
        b = a;
        a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

#ifdef WM_SHA_X86
/*
 * The same compression with the SHA extensions (SHA256RNDS2 does two
 * rounds on the state split as ABEF / CDGH; SHA256MSG1/MSG2 extend the
 * message schedule four words at a time).
 */
__attribute__((target("sha,sse4.1,ssse3"))) static void blocks_shani(uint32_t h[8], const uint8_t *p, size_t n) {
    const __m128i bswap = _mm_set_epi64x(0x0c0d0e0f08090a0bll, 0x0405060700010203ll);
    __m128i t = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[0]), 0xB1); /* C D A B */
    __m128i s1 = _mm_shuffle_epi32(_mm_loadu_si128((const __m128i *)&h[4]), 0x1B); /* E F G H */
    __m128i s0 = _mm_alignr_epi8(t, s1, 8);                                      /* A B E F */
    s1 = _mm_blend_epi16(s1, t, 0xF0);                                           /* C D G H */
    for (; n; n--, p += 64) {
        __m128i abef = s0, cdgh = s1, m[4];
        for (int j = 0; j < 16; j++) {
            __m128i *w = &m[j & 3];
            if (j < 4) *w = _mm_shuffle_epi8(_mm_loadu_si128((const __m128i *)(p + 16 * j)), bswap);
            else {
                __m128i x = _mm_sha256msg1_epu32(m[j & 3], m[(j + 1) & 3]);
                x = _mm_add_epi32(x, _mm_alignr_epi8(m[(j + 3) & 3], m[(j + 2) & 3], 4));
                *w = _mm_sha256msg2_epu32(x, m[(j + 3) & 3]);
            }
            __m128i k = _mm_add_epi32(*w, _mm_loadu_si128((const __m128i *)&K[4 * j]));
            s1 = _mm_sha256rnds2_epu32(s1, s0, k);
            s0 = _mm_sha256rnds2_epu32(s0, s1, _mm_shuffle_epi32(k, 0x0E));
        }
        s0 = _mm_add_epi32(s0, abef);
        s1 = _mm_add_epi32(s1, cdgh);
    }
    t = _mm_shuffle_epi32(s0, 0x1B);                               /* F E B A */
    s1 = _mm_shuffle_epi32(s1, 0xB1);                              /* D C H G */
    _mm_storeu_si128((__m128i *)&h[0], _mm_blend_epi16(t, s1, 0xF0)); /* D C B A */
    _mm_storeu_si128((__m128i *)&h[4], _mm_alignr_epi8(s1, t, 8));    /* H G F E */
}

static int have_shani(void) {
    static int known = -1;
    if (known < 0) {
        unsigned a, b, c, d;
        const char *force = getenv("WM_SHA256_GENERIC");
        known = 0;
        if (!(force && *force && strcmp(force, "0")) && __get_cpuid_max(0, NULL) >= 7) {
            __cpuid_count(7, 0, a, b, c, d);
            int sha = (b >> 29) & 1;
            __get_cpuid(1, &a, &b, &c, &d);
            known = sha && ((c >> 19) & 1) && ((c >> 9) & 1); /* + SSE4.1, SSSE3 */
        }
    }
    return known;
}
#endif

/* n whole 64-byte blocks. */
static void blocks(uint32_t h[8], const uint8_t *p, size_t n) {
#ifdef WM_SHA_X86
    if (have_shani()) {
        blocks_shani(h, p, n);
        return;
    }
#endif
    for (; n; n--, p += 64) block_generic(h, p);
}

int wm_sha256_accelerated(void) {
#ifdef WM_SHA_X86
    return have_shani();
#else
    return 0;
#endif
}

void wm_sha256_init(wm_sha256 *s) {
    static const uint32_t iv[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                                   0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    memcpy(s->h, iv, sizeof iv);
    s->len = 0;
    s->nbuf = 0;
}

void wm_sha256_update(wm_sha256 *s, const void *data, size_t n) {
    const uint8_t *p = data;
    s->len += n;
    if (s->nbuf) {
        size_t k = 64 - s->nbuf < n ? 64 - s->nbuf : n;
        memcpy(s->buf + s->nbuf, p, k);
        s->nbuf += k;
        p += k;
        n -= k;
        if (s->nbuf < 64) return;
        blocks(s->h, s->buf, 1);
        s->nbuf = 0;
    }
    blocks(s->h, p, n / 64);
    p += n / 64 * 64;
    n %= 64;
    memcpy(s->buf, p, n);
    s->nbuf = n;
}

void wm_sha256_final(wm_sha256 *s, uint8_t out[32]) {
    uint64_t bits = s->len * 8;
    uint8_t pad[72] = {0x80};
    size_t padn = s->nbuf < 56 ? 56 - s->nbuf : 120 - s->nbuf;
    for (int i = 0; i < 8; i++) pad[padn + (size_t)i] = (uint8_t)(bits >> (56 - 8 * i));
    uint64_t keep = s->len;
    wm_sha256_update(s, pad, padn + 8);
    s->len = keep;
    for (int i = 0; i < 8; i++)
        for (int k = 0; k < 4; k++) out[4 * i + k] = (uint8_t)(s->h[i] >> (24 - 8 * k));
}

void wm_sha256_hex(wm_sha256 *s, char hex[65]) {
    uint8_t d[32];
    wm_sha256_final(s, d);
    for (int i = 0; i < 32; i++) snprintf(hex + 2 * i, 3, "%02x", d[i]);
}

wm_status wm_sha256_file(const char *path, char hex[65], wm_error *err) {
    wm_sha256 s;
    wm_sha256_init(&s);
    return wm_sha256_file_tail(path, 0, &s, hex, err);
}

wm_status wm_sha256_file_tail(const char *path, uint64_t from, wm_sha256 *sp, char hex[65], wm_error *err) {
    int fd;
    wm_status os = wm_open_input(path, 0, &fd, NULL, err); /* a regular file only: never blocks on a FIFO */
    if (os) return os;
    if (lseek(fd, (off_t)from, SEEK_SET) < 0) {
        close(fd);
        return wm_err(err, WM_ERR_IO, "%s: cannot seek: %s", path, strerror(errno));
    }
    size_t cap = 1u << 20;
    uint8_t *buf = malloc(cap);
    if (!buf) {
        close(fd);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    wm_sha256 s = *sp;
    wm_status st = WM_OK;
    for (;;) {
        ssize_t r = read(fd, buf, cap);
        if (r < 0 && errno == EINTR) continue;
        if (r < 0) {
            st = wm_err(err, WM_ERR_IO, "%s: read failed: %s", path, strerror(errno));
            break;
        }
        if (r == 0) break;
        wm_sha256_update(&s, buf, (size_t)r);
    }
    free(buf);
    close(fd);
    if (!st) wm_sha256_hex(&s, hex);
    return st;
}
