#include "onnx/dtype.h"

#include "core/arena.h"

static const struct {
    const char *name;
    int bits;
} dtypes[] = {
#define X(e, v, n, b) [v] = {n, b},
    WM_DTYPE_LIST(X)
#undef X
};

int wm_dtype_valid(int32_t dt) { return dt >= 0 && dt < WM_DT_COUNT; }

const char *wm_dtype_name(int32_t dt) { return wm_dtype_valid(dt) ? dtypes[dt].name : "unknown"; }

int wm_dtype_bits(int32_t dt) { return wm_dtype_valid(dt) ? dtypes[dt].bits : 0; }

int wm_dtype_nbytes(int32_t dt, uint64_t numel, uint64_t *out) {
    int bits = wm_dtype_bits(dt);
    if (bits == 0) return 0;
    uint64_t total;
    if (!wm_mul_u64(numel, (uint64_t)bits, &total)) return 0;
    *out = total / 8 + (total % 8 != 0);
    return 1;
}
