#include "core/error.h"

#include <stdarg.h>
#include <stdio.h>
#include <string.h>

const char *wm_status_name(wm_status s) {
    switch (s) {
    case WM_OK: return "ok";
    case WM_ERR_INPUT: return "input error";
    case WM_ERR_USAGE: return "usage error";
    case WM_ERR_IO: return "I/O error";
    case WM_ERR_NOMEM: return "out of memory";
    case WM_ERR_UNSUPPORTED: return "unsupported";
    case WM_ERR_CHECK: return "check failed";
    case WM_ERR_INTERNAL: return "internal error";
    }
    return "unknown status";
}

const char *wm_version(void) { return WM_VERSION_STRING; }

wm_status wm_err(wm_error *err, wm_status s, const char *fmt, ...) {
    if (!err || err->status != WM_OK) return s;
    err->status = s;
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(err->msg, sizeof err->msg, fmt, ap);
    va_end(ap);
    /* one line, safe on a terminal: control characters from hostile names become '?' */
    for (char *p = err->msg; *p; p++)
        if ((unsigned char)*p < 0x20 || *p == 0x7f) *p = (*p == '\n' || *p == '\r' || *p == '\t') ? ' ' : '?';
    return s;
}

void wm_err_prefix(wm_error *err, const char *fmt, ...) {
    if (!err || err->status == WM_OK) return;
    char pre[512], old[sizeof err->msg];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(pre, sizeof pre, fmt, ap);
    va_end(ap);
    memcpy(old, err->msg, sizeof old);
    snprintf(err->msg, sizeof err->msg, "%s: %s", pre, old);
}

void wm_err_clear(wm_error *err) {
    if (!err) return;
    err->status = WM_OK;
    err->msg[0] = 0;
}
