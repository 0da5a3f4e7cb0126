/* error.h - filling wm_error: one line, file/field/reason, first error wins. */
#ifndef WM_CORE_ERROR_H
#define WM_CORE_ERROR_H

#include "winml/winml.h"

#if defined(__GNUC__)
#define WM_PRINTF(a, b) __attribute__((format(printf, a, b)))
#else
#define WM_PRINTF(a, b)
#endif

/* Sets err (if non-NULL and not already set) and returns s. */
wm_status wm_err(wm_error *err, wm_status s, const char *fmt, ...) WM_PRINTF(3, 4);

/* Prefixes an already set message with "prefix: " (used to add the file name). */
void wm_err_prefix(wm_error *err, const char *fmt, ...) WM_PRINTF(2, 3);

void wm_err_clear(wm_error *err);

#endif
