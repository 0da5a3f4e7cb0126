/* recipe_impl.h - shared between recipe.c (parsing) and recipe_ref.c (the reference's field meanings). */
#ifndef WM_BUILDER_RECIPE_IMPL_H
#define WM_BUILDER_RECIPE_IMPL_H

#include <stdint.h>

/* JSON value kinds a kept field may hold */
enum { RK_BOOL = 1, RK_STR = 2, RK_NUM = 4, RK_NULL = 8, RK_OBJ = 16 };

typedef struct recipe_kept_def {
    const char *path;  /* "export.dynamo" */
    unsigned kinds;    /* RK_* */
    const char *why;
} recipe_kept_def;

/* The reference bookkeeping field at JSON path, or NULL. */
const recipe_kept_def *recipe_kept_find(const char *path);

/* A quant weight / activation type name (QInt8, int8, QUInt8, uint8, QUInt16, uint16, QInt16, int16) -> wm_dtype; 0. */
int32_t recipe_qtype(const char *s);

#endif
