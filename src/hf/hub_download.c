/*
 * hub_download.c - one repo file from the hub into the cache, with libcurl:
 * HEAD for the metadata (X-Repo-Commit, X-Linked-Etag / ETag, X-Linked-Size
 * / Content-Length, the CDN location), GET into blobs/ETAG.incomplete
 * (resumed with Range, retried after an interruption), verification against
 * the size and the etag, rename to blobs/ETAG, relative snapshot link, ref.
 * Also the parsing of the answers' headers (untrusted input, fuzzed).
 */
#define _GNU_SOURCE
#include <curl/curl.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/file.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <time.h>
#include <unistd.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/hub_internal.h"

/* ---- headers ---- */

void wm_hf_http_meta_reset(wm_hf_http_meta *m) {
    memset(m, 0, sizeof *m);
    m->linked_size = m->content_length = m->range_start = m->range_total = -1;
}

wm_status wm_hf_etag_normalize(const char *v, size_t n, char *out, wm_error *err) {
    if (n >= 2 && v[0] == 'W' && v[1] == '/') v += 2, n -= 2;
    if (n >= 2 && v[0] == '"' && v[n - 1] == '"') v++, n -= 2;
    if (n < 1 || n > WM_HF_MAX_ETAG) return wm_err(err, WM_ERR_INPUT, "ETag of %zu bytes: not usable as a blob name", n);
    for (size_t i = 0; i < n; i++) {
        char ch = v[i];
        if (!((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '_' || ch == '-'))
            return wm_err(err, WM_ERR_INPUT, "ETag holds a character other than letters, digits, '_', '-': not usable as a blob name");
    }
    memcpy(out, v, n);
    out[n] = 0;
    return WM_OK;
}

/* Strict unsigned decimal of at most 18 digits; -2 when malformed. */
static int64_t parse_dec(const char *v, size_t n) {
    if (n == 0 || n > 18) return -2;
    int64_t x = 0;
    for (size_t i = 0; i < n; i++) {
        if (v[i] < '0' || v[i] > '9') return -2;
        x = x * 10 + (v[i] - '0');
    }
    return x;
}

static void copy_text(char *dst, size_t cap, const char *v, size_t n) {
    if (n >= cap) n = cap - 1;
    for (size_t i = 0; i < n; i++) dst[i] = ((unsigned char)v[i] < 0x20 || v[i] == 0x7f) ? '?' : v[i];
    dst[n] = 0;
}

static int name_is(const char *p, size_t n, const char *lit) { return strlen(lit) == n && !strncasecmp(p, lit, n); }

void wm_hf_http_meta_line(wm_hf_http_meta *m, const char *line, size_t n) {
    while (n && (line[n - 1] == '\n' || line[n - 1] == '\r')) n--;
    if (n >= 5 && !strncmp(line, "HTTP/", 5)) {
        wm_hf_http_meta_reset(m);
        const char *sp = memchr(line, ' ', n);
        if (sp) {
            size_t k = (size_t)(line + n - sp - 1);
            if (k >= 3) {
                int64_t code = parse_dec(sp + 1, 3);
                m->status = code < 0 ? 0 : (long)code;
            }
        }
        return;
    }
    const char *colon = memchr(line, ':', n);
    if (!colon) return;
    size_t kn = (size_t)(colon - line);
    const char *v = colon + 1;
    size_t vn = n - kn - 1;
    while (vn && (*v == ' ' || *v == '\t')) v++, vn--;
    while (vn && (v[vn - 1] == ' ' || v[vn - 1] == '\t')) vn--;
    if (name_is(line, kn, "x-repo-commit")) {
        if (vn < sizeof m->commit) copy_text(m->commit, sizeof m->commit, v, vn);
        else m->commit_bad = 1;
    } else if (name_is(line, kn, "etag") || name_is(line, kn, "x-linked-etag")) {
        char *dst = name_is(line, kn, "etag") ? m->etag : m->linked_etag;
        if (wm_hf_etag_normalize(v, vn, dst, NULL)) {
            dst[0] = 0;
            m->etag_bad = 1;
        }
    } else if (name_is(line, kn, "x-linked-size")) {
        m->linked_size = parse_dec(v, vn);
    } else if (name_is(line, kn, "content-length")) {
        m->content_length = parse_dec(v, vn);
    } else if (name_is(line, kn, "content-range")) {
        /* bytes A-B/T */
        m->range_start = m->range_total = -2;
        if (vn < 6 || strncasecmp(v, "bytes ", 6)) return;
        const char *p = v + 6, *end = v + vn, *dash = memchr(p, '-', (size_t)(end - p));
        if (!dash) return;
        const char *sl = memchr(dash, '/', (size_t)(end - dash));
        if (!sl) return;
        int64_t a = parse_dec(p, (size_t)(dash - p)), b = parse_dec(dash + 1, (size_t)(sl - dash - 1));
        int64_t t = (end - sl == 2 && sl[1] == '*') ? -1 : parse_dec(sl + 1, (size_t)(end - sl - 1));
        if (a < 0 || b < a || t == -2 || (t >= 0 && b >= t)) return;
        m->range_start = a;
        m->range_total = t;
    } else if (name_is(line, kn, "x-error-code")) {
        copy_text(m->error_code, sizeof m->error_code, v, vn);
    } else if (name_is(line, kn, "x-error-message")) {
        copy_text(m->error_message, sizeof m->error_message, v, vn);
    }
}

/* ---- libcurl plumbing ---- */

static size_t on_header(char *b, size_t sz, size_t nm, void *ud) {
    wm_hf_http_meta_line(ud, b, sz * nm);
    return sz * nm;
}

/* The running digest of a blob, checked against its etag (sha256 of the
   bytes for 64 hex digits, git's blob sha1 for 40, none otherwise). */
typedef struct digest {
    int kind; /* 0 none, 1 sha256, 2 git blob sha1 */
    wm_sha256 s2;
    wm_sha1 s1;
} digest;

static void dg_init(digest *d, const char *etag, uint64_t size) {
    size_t el = strlen(etag);
    d->kind = el == 64 ? 1 : el == 40 ? 2 : 0;
    for (size_t i = 0; i < el; i++)
        if (!((etag[i] >= '0' && etag[i] <= '9') || (etag[i] >= 'a' && etag[i] <= 'f'))) d->kind = 0;
    if (d->kind == 1) wm_sha256_init(&d->s2);
    if (d->kind == 2) {
        char hdr[48];
        int k = snprintf(hdr, sizeof hdr, "blob %llu", (unsigned long long)size);
        wm_sha1_init(&d->s1);
        wm_sha1_update(&d->s1, hdr, (size_t)k + 1); /* with its NUL */
    }
}

static void dg_update(digest *d, const void *p, size_t n) {
    if (d->kind == 1) wm_sha256_update(&d->s2, p, n);
    if (d->kind == 2) wm_sha1_update(&d->s1, p, n);
}

typedef struct xfer {
    wm_hfi_ctx *c;
    digest dg;
    const char *etag;
    wm_hf_http_meta meta;
    int fd;
    uint64_t have, expect, start;
    int started, overflow, bad_range, io_errno, printed;
    int64_t bad_size; /* >= 0: the answer announced a file of this many bytes, not expect (nothing written) */
    const char *bad_size_from;
    const char *name;
    double last;
} xfer;

/*
 * The headers of a GET: at their end (the blank line) a 200 or 206 answer
 * must announce the size the hub's metadata gave (X-Linked-Size or the HEAD's
 * Content-Length) - checked before a byte is written; a mismatch aborts the
 * transfer (returning 0 makes libcurl stop with CURLE_WRITE_ERROR).
 */
static size_t on_get_header(char *b, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    wm_hf_http_meta_line(&x->meta, b, n);
    if (!(n <= 2 && (n == 0 || b[0] == '\r' || b[0] == '\n'))) return n;
    const wm_hf_http_meta *m = &x->meta;
    if (m->status == 206) {
        if (m->range_total >= 0 && (uint64_t)m->range_total != x->expect) {
            x->bad_size = m->range_total;
            x->bad_size_from = "Content-Range";
        } else if (m->content_length >= 0 && m->range_start >= 0 && (uint64_t)m->range_start <= x->expect &&
                   (uint64_t)m->content_length != x->expect - (uint64_t)m->range_start) {
            x->bad_size = (int64_t)((uint64_t)m->range_start + (uint64_t)m->content_length);
            x->bad_size_from = "Content-Range + Content-Length";
        }
    } else if (m->status == 200 && m->content_length >= 0 && (uint64_t)m->content_length != x->expect) {
        x->bad_size = m->content_length;
        x->bad_size_from = "Content-Length";
    }
    return x->bad_size >= 0 ? 0 : n;
}

static double now_s(void) {
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + ts.tv_nsec / 1e9;
}

static size_t on_body(char *b, size_t sz, size_t nm, void *ud) {
    xfer *x = ud;
    size_t n = sz * nm;
    if (!x->started) {
        x->started = 1;
        long code = 0;
        curl_easy_getinfo(x->c->curl, CURLINFO_RESPONSE_CODE, &code);
        if (code == 206) {
            if (x->meta.range_start != (int64_t)x->start) {
                x->bad_range = 1;
                return 0;
            }
        } else if (x->start > 0) { /* the server ignored Range: start over */
            if (ftruncate(x->fd, 0) != 0 || lseek(x->fd, 0, SEEK_SET) != 0) {
                x->io_errno = errno;
                return 0;
            }
            x->have = x->start = 0;
            dg_init(&x->dg, x->etag, x->expect);
        }
    }
    if (n > x->expect - x->have) {
        x->overflow = 1;
        return 0;
    }
    size_t off = 0;
    while (off < n) {
        ssize_t w = write(x->fd, b + off, n - off);
        if (w < 0 && errno == EINTR) continue;
        if (w <= 0) {
            x->io_errno = w < 0 ? errno : EIO;
            return 0;
        }
        off += (size_t)w;
    }
    dg_update(&x->dg, b, n);
    x->have += n;
    return n;
}

static int on_progress(void *ud, curl_off_t dltotal, curl_off_t dlnow, curl_off_t ultotal, curl_off_t ulnow) {
    (void)dltotal, (void)dlnow, (void)ultotal, (void)ulnow;
    xfer *x = ud;
    double t = now_s();
    if (t - x->last < 0.25 && x->have < x->expect) return 0;
    x->last = t;
    x->printed = 1;
    fprintf(stderr, "\r  %-40.40s %8.1f / %.1f MiB %3d%%", x->name, x->have / 1048576.0, x->expect / 1048576.0,
            x->expect ? (int)(100.0 * (double)x->have / (double)x->expect) : 100);
    return 0;
}

static wm_status net_open(wm_hfi_ctx *c, wm_error *err) {
    static int inited;
    if (c->curl) return WM_OK;
    if (!inited) {
        if (curl_global_init(CURL_GLOBAL_DEFAULT) != CURLE_OK) return wm_err(err, WM_ERR_IO, "libcurl failed to start");
        inited = 1;
    }
    c->curl = curl_easy_init();
    return c->curl ? WM_OK : wm_err(err, WM_ERR_NOMEM, "libcurl: cannot create a handle");
}

void wm_hfi_net_close(wm_hfi_ctx *c) {
    if (c->curl) curl_easy_cleanup(c->curl);
    c->curl = NULL;
}

/* scheme://host:port of url, lowercased, into out; 0 on success. */
static int origin_of(const char *url, char *out, size_t n) {
    CURLU *u = curl_url();
    char *scheme = NULL, *host = NULL, *port = NULL;
    int rc = -1;
    if (u && !curl_url_set(u, CURLUPART_URL, url, 0) && !curl_url_get(u, CURLUPART_SCHEME, &scheme, 0) &&
        !curl_url_get(u, CURLUPART_HOST, &host, 0) && !curl_url_get(u, CURLUPART_PORT, &port, CURLU_DEFAULT_PORT)) {
        int k = snprintf(out, n, "%s://%s:%s", scheme, host, port);
        for (char *p = out; *p; p++) *p = (char)((*p >= 'A' && *p <= 'Z') ? *p + 32 : *p);
        rc = (k > 0 && (size_t)k < n) ? 0 : -1;
    }
    curl_free(scheme);
    curl_free(host);
    curl_free(port);
    curl_url_cleanup(u);
    return rc;
}

static int same_origin(const char *a, const char *b) {
    char oa[1024], ob[1024];
    return !origin_of(a, oa, sizeof oa) && !origin_of(b, ob, sizeof ob) && !strcmp(oa, ob);
}

/* Sets what every request shares; *hdrs (caller frees with curl_slist_free_all) carries the token. */
static void common_opts(wm_hfi_ctx *c, const char *url, int auth, struct curl_slist **hdrs, char *errbuf, void *hdr_ud) {
    CURL *h = c->curl;
    curl_easy_reset(h);
    curl_easy_setopt(h, CURLOPT_URL, url);
    curl_easy_setopt(h, CURLOPT_USERAGENT, "winml/" WM_VERSION_STRING);
    curl_easy_setopt(h, CURLOPT_NOSIGNAL, 1L);
    curl_easy_setopt(h, CURLOPT_CONNECTTIMEOUT, 30L);
#if LIBCURL_VERSION_NUM >= 0x075500
    curl_easy_setopt(h, CURLOPT_PROTOCOLS_STR, "http,https");
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS_STR, "http,https");
#else
    curl_easy_setopt(h, CURLOPT_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
    curl_easy_setopt(h, CURLOPT_REDIR_PROTOCOLS, (long)(CURLPROTO_HTTP | CURLPROTO_HTTPS));
#endif
    curl_easy_setopt(h, CURLOPT_ERRORBUFFER, errbuf);
    curl_easy_setopt(h, CURLOPT_HEADERFUNCTION, on_header);
    curl_easy_setopt(h, CURLOPT_HEADERDATA, hdr_ud);
    *hdrs = NULL;
    if (auth && c->has_token && same_origin(url, c->endpoint)) {
        char line[sizeof c->token + 32];
        snprintf(line, sizeof line, "Authorization: Bearer %s", c->token);
        *hdrs = curl_slist_append(NULL, line);
        memset(line, 0, sizeof line);
        curl_easy_setopt(h, CURLOPT_HTTPHEADER, *hdrs);
    }
}

static void url_escape(char *out, size_t n, const char *s, int keep_slash) {
    static const char hexd[] = "0123456789ABCDEF";
    size_t o = 0;
    for (; *s && o + 4 < n; s++) {
        unsigned char ch = (unsigned char)*s;
        if ((ch >= 'a' && ch <= 'z') || (ch >= 'A' && ch <= 'Z') || (ch >= '0' && ch <= '9') || ch == '-' || ch == '.' ||
            ch == '_' || ch == '~' || (keep_slash && ch == '/')) {
            out[o++] = (char)ch;
        } else {
            out[o++] = '%';
            out[o++] = hexd[ch >> 4];
            out[o++] = hexd[ch & 15];
        }
    }
    out[o] = 0;
}

/* The metadata of one file: HEAD with same-origin redirects followed. location receives the download URL. */
static wm_status head(wm_hfi_ctx *c, const char *rev, const char *name, wm_hf_http_meta *m, char *location,
                      size_t loc_n, int *redirected, wm_error *err) {
    char url[4096], erev[1024], ename[1024], errbuf[CURL_ERROR_SIZE];
    url_escape(erev, sizeof erev, rev, 0);
    url_escape(ename, sizeof ename, name, 1);
    snprintf(url, sizeof url, "%s/%s%s/resolve/%s/%s", c->endpoint, c->kind ? c->kind : "", c->r->repo_id, erev, ename);
    *redirected = 0;
    for (int hop = 0; hop < 10; hop++) {
        struct curl_slist *hdrs;
        errbuf[0] = 0;
        wm_hf_http_meta_reset(m);
        common_opts(c, url, 1, &hdrs, errbuf, m);
        curl_easy_setopt(c->curl, CURLOPT_NOBODY, 1L);
        curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 60L);
        CURLcode rc = curl_easy_perform(c->curl);
        curl_slist_free_all(hdrs);
        if (rc != CURLE_OK)
            return wm_err(err, WM_ERR_IO, "%s: cannot reach the hub at %s: %s (check the network or HF_ENDPOINT; "
                          "HF_HUB_OFFLINE=1 uses the cache only)", c->r->repo_id, c->endpoint,
                          errbuf[0] ? errbuf : curl_easy_strerror(rc));
        long code = 0;
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
        m->status = code;
        if (code < 300 || code >= 400) break;
        char *target = NULL;
        curl_easy_getinfo(c->curl, CURLINFO_REDIRECT_URL, &target);
        if (!target || strlen(target) >= loc_n)
            return wm_err(err, WM_ERR_INPUT, "%s/%s: HTTP %ld redirect without a usable Location", c->r->repo_id, name, code);
        if (!same_origin(url, target)) {
            snprintf(location, loc_n, "%s", target);
            *redirected = 1;
            return WM_OK;
        }
        snprintf(url, sizeof url, "%s", target);
    }
    if (m->status >= 300 && m->status < 400) return wm_err(err, WM_ERR_INPUT, "%s/%s: too many redirects", c->r->repo_id, name);
    snprintf(location, loc_n, "%s", url);
    return WM_OK;
}

/* An answer other than 2xx/3xx to a HEAD: a clear error, or ABSENT (returns 1) for a missing file. */
static int refused(wm_hfi_ctx *c, const char *rev, const char *name, const wm_hf_http_meta *m, wm_status *st,
                   wm_error *err) {
    const char *id = c->r->repo_id, *msg = m->error_message;
    if (m->status == 404 && !strcasecmp(m->error_code, "RevisionNotFound")) {
        *st = wm_err(err, WM_ERR_INPUT, "%s: revision '%s' not found on the hub", id, rev);
    } else if (m->status == 401 || (m->status == 404 && !strcasecmp(m->error_code, "RepoNotFound"))) {
        *st = wm_err(err, WM_ERR_INPUT, "%s: repository not found or access refused (HTTP %ld)%s", id, m->status,
                     c->has_token ? ": the token (HF_TOKEN) was refused or has no access to it"
                                  : ": if it is private or gated, set HF_TOKEN to an access token");
    } else if (m->status == 403) {
        *st = wm_err(err, WM_ERR_INPUT, "%s: access refused (HTTP 403)%s%s%s", id, msg[0] ? ": " : "", msg,
                     c->has_token ? "" : " (set HF_TOKEN if the model is gated)");
    } else if (m->status == 404) {
        return 1;
    } else {
        *st = wm_err(err, WM_ERR_IO, "%s/%s: the hub answered HTTP %ld%s%s", id, name, m->status, msg[0] ? ": " : "", msg);
    }
    return 0;
}

/* ---- the blob ---- */

/* Feeds the first n bytes of fd (a partial download being resumed) to the digest. */
static wm_status dg_prefix(digest *d, int fd, uint64_t n, const char *name, wm_error *err) {
    enum { BUF = 1 << 20 };
    if (!d->kind || !n) return WM_OK;
    uint8_t *buf = malloc(BUF);
    if (!buf) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    uint64_t off = 0;
    while (off < n) {
        size_t want = n - off < BUF ? (size_t)(n - off) : BUF;
        ssize_t r = pread(fd, buf, want, (off_t)off);
        if (r < 0 && errno == EINTR) continue;
        if (r <= 0) {
            free(buf);
            return wm_err(err, WM_ERR_IO, "%s: cannot read the partial download back", name);
        }
        dg_update(d, buf, (size_t)r);
        off += (uint64_t)r;
    }
    free(buf);
    return WM_OK;
}

static wm_status dg_check(digest *d, const char *etag, uint64_t got, const char *name, wm_error *err) {
    if (!d->kind) return WM_OK; /* an etag that is not a digest: the size was checked */
    uint8_t out[32];
    char hex[65];
    if (d->kind == 1) wm_sha256_final(&d->s2, out);
    else wm_sha1_final(&d->s1, out);
    wm_hex(out, d->kind == 1 ? 32 : 20, hex);
    if (strcmp(hex, etag))
        return wm_err(err, WM_ERR_INPUT,
                      "%s: corrupted transfer: the %s of the %llu bytes received is %s, the hub announced %s; the "
                      "partial file was removed: run the command again",
                      name, d->kind == 1 ? "sha256" : "git blob sha1", (unsigned long long)got, hex, etag);
    return WM_OK;
}

static int transient(CURLcode rc) {
    return rc == CURLE_PARTIAL_FILE || rc == CURLE_RECV_ERROR || rc == CURLE_SEND_ERROR || rc == CURLE_GOT_NOTHING ||
           rc == CURLE_OPERATION_TIMEDOUT || rc == CURLE_COULDNT_CONNECT || rc == CURLE_HTTP2_STREAM;
}

/*
 * Refuses a download that cannot fit: the bytes still to come (size less a
 * partial file being resumed) against the free space of the blobs folder
 * (statvfs, as an unprivileged writer sees it). Nothing is created.
 */
static wm_status check_space(const char *blob, const char *inc, uint64_t size, const char *name, wm_error *err) {
    char folder[PATH_MAX];
    struct stat pb;
    struct statvfs vf;
    uint64_t have = lstat(inc, &pb) == 0 && S_ISREG(pb.st_mode) && (uint64_t)pb.st_size <= size ? (uint64_t)pb.st_size : 0;
    wm_path_dirname(blob, folder, sizeof folder);
    if (statvfs(folder, &vf) != 0) return WM_OK; /* unknown: the writes report a full disk */
    uint64_t avail = (uint64_t)vf.f_bavail * (uint64_t)vf.f_frsize;
    if (size - have > avail)
        return wm_err(err, WM_ERR_IO,
                      "%s: needs %llu bytes in %s, only %llu are free: nothing was written (free space, or set "
                      "HF_HUB_CACHE to a folder on another disk)",
                      name, (unsigned long long)(size - have), folder, (unsigned long long)avail);
    return WM_OK;
}

/* Downloads url into blob (through blob.incomplete, resumed), verified; the caller holds the lock. */
static wm_status fetch_blob(wm_hfi_ctx *c, const char *url, const char *blob, const char *etag, uint64_t size,
                            const char *name, wm_error *err) {
    char inc[PATH_MAX + 16], errbuf[CURL_ERROR_SIZE];
    snprintf(inc, sizeof inc, "%s.incomplete", blob);
    wm_status sp = check_space(blob, inc, size, name, err);
    if (sp) return sp;
    int fd = open(inc, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return wm_err(err, WM_ERR_IO, "cannot create '%s': %s", inc, strerror(errno));
    struct stat sb;
    if (fstat(fd, &sb) != 0 || !S_ISREG(sb.st_mode)) {
        close(fd);
        return wm_err(err, WM_ERR_INPUT, "%s: not a regular file", inc);
    }
    xfer x = {.c = c, .fd = fd, .have = (uint64_t)sb.st_size, .expect = size, .name = name, .etag = etag,
              .bad_size = -1};
    wm_status s = WM_OK;
    if (x.have > size) {
        if (ftruncate(fd, 0) != 0) goto io_fail;
        x.have = 0;
    }
    dg_init(&x.dg, etag, size); /* hashed as it arrives; a resumed part is read back once */
    if ((s = dg_prefix(&x.dg, fd, x.have, name, err))) goto remove;
    int attempts = 0, restarted = 0;
    while (x.have < size) {
        if (lseek(fd, (off_t)x.have, SEEK_SET) < 0) goto io_fail;
        struct curl_slist *hdrs;
        errbuf[0] = 0;
        x.start = x.have;
        x.started = x.overflow = x.bad_range = x.io_errno = 0;
        wm_hf_http_meta_reset(&x.meta);
        common_opts(c, url, 1, &hdrs, errbuf, &x.meta);
        curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_get_header);
        curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, &x);
        curl_easy_setopt(c->curl, CURLOPT_FOLLOWLOCATION, 1L);
        curl_easy_setopt(c->curl, CURLOPT_MAXREDIRS, 10L);
        curl_easy_setopt(c->curl, CURLOPT_FAILONERROR, 1L);
        curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_LIMIT, 1L);
        curl_easy_setopt(c->curl, CURLOPT_LOW_SPEED_TIME, 60L);
        curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_body);
        curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &x);
        char range[32];
        snprintf(range, sizeof range, "%llu-", (unsigned long long)x.start);
        if (x.start) curl_easy_setopt(c->curl, CURLOPT_RANGE, range); /* a 200 answer is taken too (see on_body) */
        if (c->progress) {
            curl_easy_setopt(c->curl, CURLOPT_NOPROGRESS, 0L);
            curl_easy_setopt(c->curl, CURLOPT_XFERINFOFUNCTION, on_progress);
            curl_easy_setopt(c->curl, CURLOPT_XFERINFODATA, &x);
        }
        CURLcode rc = curl_easy_perform(c->curl);
        curl_slist_free_all(hdrs);
        long code = 0;
        curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
        if (x.printed) fputc('\n', stderr);
        x.printed = 0;
        if (x.io_errno) {
            errno = x.io_errno;
            goto io_fail;
        }
        if (x.bad_size >= 0) {
            s = wm_err(err, WM_ERR_INPUT,
                       "%s: the download announces %lld bytes (%s), the hub's metadata %llu (X-Linked-Size or "
                       "Content-Length of the HEAD): refused before writing, partial file removed",
                       name, (long long)x.bad_size, x.bad_size_from, (unsigned long long)size);
            goto remove;
        }
        if (x.overflow) {
            s = wm_err(err, WM_ERR_INPUT, "%s: the server sent more than the %llu bytes announced: refused, partial file removed",
                       name, (unsigned long long)size);
            goto remove;
        }
        if ((x.bad_range || (rc == CURLE_HTTP_RETURNED_ERROR && code == 416)) && !restarted) {
            restarted = 1; /* the partial file does not fit this blob: start over */
            if (ftruncate(fd, 0) != 0) goto io_fail;
            x.have = 0;
            dg_init(&x.dg, etag, size);
            continue;
        }
        if (rc == CURLE_OK && x.have == size) break;
        if ((rc == CURLE_OK || transient(rc)) && attempts < c->retries) {
            attempts++;
            struct timespec ts = {0, 200000000L * attempts};
            nanosleep(&ts, NULL);
            continue;
        }
        if (rc == CURLE_OK || transient(rc)) {
            s = wm_err(err, WM_ERR_IO,
                       "%s: transfer interrupted after %llu of %llu bytes (%s); the partial file %s is kept: run the "
                       "same command again to resume",
                       name, (unsigned long long)x.have, (unsigned long long)size,
                       rc == CURLE_OK ? "the server closed early" : (errbuf[0] ? errbuf : curl_easy_strerror(rc)), inc);
            close(fd);
            return s;
        }
        if (rc == CURLE_HTTP_RETURNED_ERROR)
            s = wm_err(err, code == 401 || code == 403 || code == 404 ? WM_ERR_INPUT : WM_ERR_IO,
                       "%s: download refused: HTTP %ld", name, code);
        else
            s = wm_err(err, WM_ERR_IO, "%s: download failed: %s", name, errbuf[0] ? errbuf : curl_easy_strerror(rc));
        close(fd);
        return s;
    }
    if (fsync(fd) != 0) goto io_fail;
    close(fd);
    fd = -1;
    if ((s = dg_check(&x.dg, etag, x.have, name, err))) goto remove;
    if (rename(inc, blob) != 0) {
        s = wm_err(err, WM_ERR_IO, "cannot rename '%s': %s", inc, strerror(errno));
        goto remove;
    }
    c->r->bytes_downloaded += size;
    return WM_OK;
io_fail:
    s = wm_err(err, WM_ERR_IO, "%s: cannot write '%s': %s", name, inc, strerror(errno));
remove:
    if (fd >= 0) close(fd);
    unlink(inc);
    return s;
}

/* ---- one file ---- */

/* Creates the model folder (and CACHEDIR.TAG) once the hub has answered: a failed request leaves nothing. */
static wm_status ensure_model_dir(wm_hfi_ctx *c, wm_error *err) {
    static const char tag[] = "Signature: 8a477f597d28d172789f06886806bc55\n"
                              "# This file is a cache directory tag created by huggingface_hub.\n"
                              "# For information about cache directory tags, see:\n"
                              "#\thttps://bford.info/cachedir/\n";
    if (c->model_real[0]) return WM_OK;
    wm_status s = wm_hfi_mkdir_p(c->model_dir, err);
    if (s) return s;
    if (!realpath(c->model_dir, c->model_real)) return wm_err(err, WM_ERR_IO, "%s: %s", c->model_dir, strerror(errno));
    char p[PATH_MAX + 16];
    struct stat sb;
    snprintf(p, sizeof p, "%s/CACHEDIR.TAG", c->r->cache_dir);
    if (lstat(p, &sb) != 0) (void)wm_hfi_write_atomic(p, tag, sizeof tag - 1, NULL);
    return WM_OK;
}

static wm_status write_ref(wm_hfi_ctx *c, const char *rev, const char *commit, wm_error *err) {
    if (wm_hf_is_commit(rev, strlen(rev))) return WM_OK;
    char have[WM_HF_COMMIT_LEN + 1], rel[WM_HF_MAX_REVISION + 8], p[PATH_MAX];
    wm_error e2 = {0};
    if (!wm_hfi_read_ref(c->model_dir, rev, have, &e2) && !strcmp(have, commit)) return WM_OK;
    snprintf(rel, sizeof rel, "refs/%s", rev);
    char *slash = strrchr(rel, '/');
    *slash = 0;
    wm_status s = wm_hfi_mkdirs(c->model_dir, rel, err);
    if (s) return s;
    snprintf(p, sizeof p, "%s/refs/%s", c->model_dir, rev);
    return wm_hfi_write_atomic(p, commit, WM_HF_COMMIT_LEN, err);
}

static wm_status record_no_exist(wm_hfi_ctx *c, const char *commit, const char *name, wm_error *err) {
    char rel[PATH_MAX], p[PATH_MAX];
    snprintf(rel, sizeof rel, ".no_exist/%s/%s", commit, name);
    *strrchr(rel, '/') = 0;
    wm_status s = wm_hfi_mkdirs(c->model_dir, rel, err);
    if (s) return s;
    snprintf(p, sizeof p, "%s/.no_exist/%s/%s", c->model_dir, commit, name);
    int fd = open(p, O_WRONLY | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0666);
    if (fd < 0) return wm_err(err, WM_ERR_IO, "cannot create '%s': %s", p, strerror(errno));
    close(fd);
    return WM_OK;
}

static wm_status link_pointer(wm_hfi_ctx *c, const char *commit, const char *name, const char *etag, wm_error *err) {
    char rel[PATH_MAX], target[PATH_MAX], p[PATH_MAX];
    snprintf(rel, sizeof rel, "snapshots/%s/%s", commit, name);
    *strrchr(rel, '/') = 0;
    wm_status s = wm_hfi_mkdirs(c->model_dir, rel, err);
    if (s) return s;
    size_t o = 0;
    for (const char *q = name; *q; q++)
        if (*q == '/') o += (size_t)snprintf(target + o, sizeof target - o, "../");
    snprintf(target + o, sizeof target - o, "../../blobs/%s", etag);
    snprintf(p, sizeof p, "%s/snapshots/%s/%s", c->model_dir, commit, name);
    return wm_hfi_symlink_atomic(target, p, err);
}

int wm_hfi_exists(wm_hfi_ctx *c, const char *rev, const char *name, wm_status *st, wm_error *err) {
    wm_hf_http_meta m;
    char loc[4096];
    int redirected;
    if ((*st = net_open(c, err)) || (*st = head(c, rev, name, &m, loc, sizeof loc, &redirected, err))) return -1;
    if (m.status < 300 || redirected) return 1;
    if (refused(c, rev, name, &m, st, err)) return 0;
    return -1;
}

wm_status wm_hfi_fetch(wm_hfi_ctx *c, const char *rev, const char *name, wm_hf_file *f, char *commit, wm_error *err) {
    wm_hf_http_meta m;
    char loc[4096], blob[PATH_MAX], lock[PATH_MAX], etag[WM_HF_MAX_ETAG + 1];
    int redirected;
    wm_status s = net_open(c, err);
    if (!s) s = head(c, rev, name, &m, loc, sizeof loc, &redirected, err);
    if (s) return s;
    commit[0] = 0;
    int commit_ok = !m.commit_bad && wm_hf_is_commit(m.commit, strlen(m.commit));
    if (commit_ok && wm_hf_is_commit(rev, strlen(rev)) && strcmp(rev, m.commit))
        return wm_err(err, WM_ERR_INPUT, "%s/%s: asked for commit %s, the hub answered X-Repo-Commit %s", c->r->repo_id,
                      name, rev, m.commit);
    if (m.status >= 400) {
        if (!refused(c, rev, name, &m, &s, err)) return s;
        f->state = WM_HF_FILE_ABSENT;
        if (commit_ok) { /* remember the absence, like huggingface_hub, under an existing snapshot */
            char rel0[WM_HF_COMMIT_LEN + 16];
            memcpy(commit, m.commit, WM_HF_COMMIT_LEN + 1);
            snprintf(rel0, sizeof rel0, "snapshots/%s", commit);
            if ((s = ensure_model_dir(c, err)) || (s = record_no_exist(c, commit, name, err)) || (s = wm_hfi_mkdirs(c->model_dir, rel0, err)) ||
                (s = write_ref(c, rev, commit, err)))
                return s;
        }
        return WM_OK;
    }
    if (!commit_ok)
        return wm_err(err, WM_ERR_INPUT,
                      "%s/%s: the answer has no valid X-Repo-Commit header (40 hex digits): is HF_ENDPOINT (%s) a "
                      "Hugging Face hub?",
                      c->r->repo_id, name, c->endpoint);
    memcpy(commit, m.commit, WM_HF_COMMIT_LEN + 1);
    const char *e = m.linked_etag[0] ? m.linked_etag : m.etag;
    if (!e[0])
        return wm_err(err, WM_ERR_INPUT, "%s/%s: the answer has no usable ETag / X-Linked-Etag header", c->r->repo_id, name);
    snprintf(etag, sizeof etag, "%s", e);
    int64_t size = m.linked_size >= 0 ? m.linked_size : (!redirected ? m.content_length : -1);
    if (m.linked_size == -2 || size < 0)
        return wm_err(err, WM_ERR_INPUT, "%s/%s: the answer has no valid X-Linked-Size / Content-Length header",
                      c->r->repo_id, name);
    f->etag = wm_arena_strdup(&c->r->arena, etag);
    f->size = (uint64_t)size;
    if (!f->etag) return wm_err(err, WM_ERR_NOMEM, "out of memory");

    /* folders first, then the ref, so the cache never names a missing snapshot */
    char rel[PATH_MAX];
    snprintf(rel, sizeof rel, "snapshots/%s", commit);
    if ((s = ensure_model_dir(c, err)) || (s = wm_hfi_mkdirs(c->model_dir, "blobs", err)) ||
        (s = wm_hfi_mkdirs(c->model_dir, rel, err)) || (s = write_ref(c, rev, commit, err)))
        return s;
    char snap[PATH_MAX];
    snprintf(snap, sizeof snap, "%s/snapshots/%s", c->model_dir, commit);
    uint64_t have_size = 0;
    wm_status st;
    int r = wm_hfi_file_state(c->model_real, snap, name, &have_size, &st, err);
    if (r < 0) return st;
    if (r == 1 && have_size == f->size) {
        f->state = WM_HF_FILE_PRESENT;
        return WM_OK;
    }
    snprintf(blob, sizeof blob, "%s/blobs/%s", c->model_dir, etag);
    struct stat sb;
    f->state = WM_HF_FILE_PRESENT;
    if (lstat(blob, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size) {
        char lockrel[WM_HF_MAX_REPO_ID + 32];
        snprintf(lockrel, sizeof lockrel, ".locks/%s", c->repo_folder);
        if ((s = wm_hfi_mkdirs(c->r->cache_dir, lockrel, err))) return s;
        snprintf(lock, sizeof lock, "%s/%s/%s.lock", c->r->cache_dir, lockrel, etag);
        int lfd = open(lock, O_RDWR | O_CREAT | O_NOFOLLOW | O_CLOEXEC, 0664);
        if (lfd < 0) return wm_err(err, WM_ERR_IO, "cannot create lock '%s': %s", lock, strerror(errno));
        if (fstat(lfd, &sb) == 0 && sb.st_size == 0) (void)fchmod(lfd, 0664); /* group-writable, as huggingface_hub's */
        if (flock(lfd, LOCK_EX) != 0) {
            close(lfd);
            return wm_err(err, WM_ERR_IO, "cannot lock '%s': %s", lock, strerror(errno));
        }
        /* another process may have finished it while we waited */
        if (lstat(blob, &sb) != 0 || !S_ISREG(sb.st_mode) || (uint64_t)sb.st_size != f->size) {
            if (lstat(blob, &sb) == 0) unlink(blob); /* wrong size or kind: a damaged blob */
            s = fetch_blob(c, loc, blob, etag, f->size, name, err);
            f->state = WM_HF_FILE_DOWNLOADED;
        }
        flock(lfd, LOCK_UN);
        close(lfd);
        if (s) return s;
    }
    return link_pointer(c, commit, name, etag, err);
}

typedef struct membuf {
    char *p;
    size_t n, cap;
    int over; /* past WM_HF_MAX_TREE_BYTES */
    int oom;
    wm_hf_http_meta *meta;
    char next[4096]; /* the Link header's rel="next" URL ("" none) */
} membuf;

/* Header lines into the meta; a `Link: <URL>; rel="next"` (the hub's pagination) into next. */
static size_t on_tree_header(char *b, size_t sz, size_t nm, void *ud) {
    membuf *m = ud;
    size_t n = sz * nm;
    wm_hf_http_meta_line(m->meta, b, n);
    if (n > 5 && !strncasecmp(b, "link:", 5)) {
        char line[8192];
        size_t k = n < sizeof line - 1 ? n : sizeof line - 1;
        memcpy(line, b, k);
        line[k] = 0;
        char *rel = strstr(line, "rel=\"next\""), *lt = strchr(line, '<'), *gt = lt ? strchr(lt, '>') : NULL;
        if (rel && lt && gt && gt < rel && (size_t)(gt - lt - 1) < sizeof m->next) {
            memcpy(m->next, lt + 1, (size_t)(gt - lt - 1));
            m->next[gt - lt - 1] = 0;
        }
    }
    return n;
}

static size_t on_mem(char *b, size_t sz, size_t nm, void *ud) {
    membuf *m = ud;
    size_t n = sz * nm;
    if (n > WM_HF_MAX_TREE_BYTES - m->n) {
        m->over = 1;
        return 0;
    }
    if (m->n + n + 1 > m->cap) {
        size_t cap = m->cap ? m->cap : 65536;
        while (cap < m->n + n + 1) cap *= 2;
        char *q = realloc(m->p, cap);
        if (!q) {
            m->oom = 1;
            return 0;
        }
        m->p = q, m->cap = cap;
    }
    memcpy(m->p + m->n, b, n);
    m->n += n;
    m->p[m->n] = 0;
    return n;
}

wm_status wm_hfi_tree(wm_hfi_ctx *c, const char *rev, const char *page, char **out, size_t *n, char *next,
                      size_t next_n, wm_error *err) {
    *out = NULL;
    *n = 0;
    next[0] = 0;
    wm_status s = net_open(c, err);
    if (s) return s;
    char url[4096], erev[1024], errbuf[CURL_ERROR_SIZE] = "";
    url_escape(erev, sizeof erev, rev, 0);
    if (page) snprintf(url, sizeof url, "%s", page);
    else
        snprintf(url, sizeof url, "%s/api/%s%s/tree/%s?recursive=true", c->endpoint,
                 c->kind && c->kind[0] ? c->kind : "models/", c->r->repo_id, erev);
    if (!same_origin(url, c->endpoint))
        return wm_err(err, WM_ERR_INPUT, "%s: the file listing's next page '%.200s' is not on the hub (%s)",
                      c->r->repo_id, url, c->endpoint);
    wm_hf_http_meta m;
    wm_hf_http_meta_reset(&m);
    membuf mb = {.meta = &m};
    struct curl_slist *hdrs;
    common_opts(c, url, 1, &hdrs, errbuf, &m);
    curl_easy_setopt(c->curl, CURLOPT_HEADERFUNCTION, on_tree_header);
    curl_easy_setopt(c->curl, CURLOPT_HEADERDATA, &mb);
    curl_easy_setopt(c->curl, CURLOPT_HTTPGET, 1L);
    curl_easy_setopt(c->curl, CURLOPT_TIMEOUT, 120L);
    curl_easy_setopt(c->curl, CURLOPT_WRITEFUNCTION, on_mem);
    curl_easy_setopt(c->curl, CURLOPT_WRITEDATA, &mb);
    CURLcode rc = curl_easy_perform(c->curl);
    curl_slist_free_all(hdrs);
    long code = 0;
    curl_easy_getinfo(c->curl, CURLINFO_RESPONSE_CODE, &code);
    m.status = code;
    if (mb.over) s = wm_err(err, WM_ERR_INPUT, "%s: a page of the file listing is over %u bytes", c->r->repo_id,
                            WM_HF_MAX_TREE_BYTES);
    else if (mb.oom) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    else if (rc != CURLE_OK)
        s = wm_err(err, WM_ERR_IO, "%s: cannot reach the hub at %s: %s (check the network or HF_ENDPOINT; "
                   "HF_HUB_OFFLINE=1 uses the cache only)", c->r->repo_id, c->endpoint,
                   errbuf[0] ? errbuf : curl_easy_strerror(rc));
    else if (code != 200 && refused(c, rev, "(file listing)", &m, &s, err))
        s = wm_err(err, WM_ERR_INPUT, "%s: revision '%s' not found on the hub (HTTP 404 for its file listing)",
                   c->r->repo_id, rev);
    if (s) {
        free(mb.p);
        return s;
    }
    snprintf(next, next_n, "%s", mb.next);
    *out = mb.p ? mb.p : calloc(1, 1);
    *n = mb.n;
    return *out ? WM_OK : wm_err(err, WM_ERR_NOMEM, "out of memory");
}
