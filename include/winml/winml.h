/*
 * winml.h - public entry point of libwinml.
 *
 * Every fallible function returns a wm_status and, on failure, fills a
 * caller-provided wm_error with one line naming the file, field and reason.
 * The library never aborts or exits on bad input. Handles are opaque;
 * each *_load / *_new has a matching *_free that accepts NULL.
 */
#ifndef WINML_WINML_H
#define WINML_WINML_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define WM_VERSION_MAJOR 0
#define WM_VERSION_MINOR 1
#define WM_VERSION_PATCH 0
#define WM_VERSION_STRING "0.1.0"

typedef enum wm_status {
    WM_OK = 0,
    WM_ERR_INPUT,       /* malformed or hostile input file / value */
    WM_ERR_USAGE,       /* wrong flags or arguments */
    WM_ERR_IO,          /* the OS refused: open, read, write, mmap */
    WM_ERR_NOMEM,       /* allocation failed */
    WM_ERR_UNSUPPORTED, /* well-formed but not supported (op, dtype, arch) */
    WM_ERR_CHECK,       /* a check the user asked for did not pass */
    WM_ERR_INTERNAL     /* a broken invariant of ours */
} wm_status;

typedef struct wm_error {
    wm_status status;
    char msg[1024];
} wm_error;

/* Returns a static, human-readable name of a status ("input error" ...). */
const char *wm_status_name(wm_status s);

/* Library version string, e.g. "0.1.0". */
const char *wm_version(void);

#ifdef __cplusplus
}
#endif
#endif
