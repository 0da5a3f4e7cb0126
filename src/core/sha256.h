/* sha256.h - SHA-256 (FIPS 180-4), streaming, with the SHA extensions when the CPU has them: build artifact digests and downloaded blobs. */
#ifndef WM_CORE_SHA256_H
#define WM_CORE_SHA256_H

#include <stddef.h>
#include <stdint.h>

#include "winml/winml.h"

typedef struct wm_sha256 {
    uint32_t h[8];
    uint64_t len;       /* bytes hashed so far */
    uint8_t buf[64];
    size_t nbuf;
} wm_sha256;

void wm_sha256_init(wm_sha256 *s);
void wm_sha256_update(wm_sha256 *s, const void *p, size_t n);
/* Finishes and writes the 32-byte digest. */
void wm_sha256_final(wm_sha256 *s, uint8_t out[32]);
/* Finishes and writes 64 lowercase hex digits + NUL into hex. */
void wm_sha256_hex(wm_sha256 *s, char hex[65]);
/* 1 when the SHA extensions are used (x86-64 SHA-NI; WM_SHA256_GENERIC=1 forces the portable code). */
int wm_sha256_accelerated(void);
/* Digest of a whole file (read in chunks) into hex; WM_ERR_IO on a read error. */
wm_status wm_sha256_file(const char *path, char hex[65], wm_error *err);
/* The digest of path given the state s after its first `from` bytes (s itself unchanged): hashes only the
 * bytes from `from` to the end, e.g. of a file that grew by appending. */
wm_status wm_sha256_file_tail(const char *path, uint64_t from, wm_sha256 *s, char hex[65], wm_error *err);

#endif
