/* cnn.c - window geometry of convolutions and pools (see cnn.h). */
#include "ops/cnn.h"

#include <string.h>

#include "ops/int_math.h"

static wm_status read_list(wm_node *n, const char *name, int64_t *dst, int max, int *count, int64_t min,
                           wm_error *err) {
    size_t k;
    const int64_t *v = wm_attr_ints(n, name, &k);
    *count = 0;
    if (!v) return WM_OK;
    if (k > (size_t)max)
        return wm_node_err(n, err, WM_ERR_UNSUPPORTED, "attribute %s has %zu values; at most %d spatial dims are supported",
                           name, k, WM_CNN_ND);
    for (size_t i = 0; i < k; i++) {
        if (v[i] < min)
            return wm_node_err(n, err, WM_ERR_INPUT, "attribute %s[%zu] = %lld (must be >= %lld)", name, i,
                               (long long)v[i], (long long)min);
        if (v[i] > ((int64_t)1 << 40)) return wm_node_err(n, err, WM_ERR_INPUT, "attribute %s[%zu] is too large", name, i);
        dst[i] = v[i];
    }
    *count = (int)k;
    return WM_OK;
}

wm_status wm_win_attr_read(wm_node *n, wm_win_attr *a, int pool, int allow_neg_pads, wm_error *err) {
    memset(a, 0, sizeof *a);
    wm_status st = read_list(n, "kernel_shape", a->kernel, WM_CNN_ND, &a->n_kernel, 1, err);
    if (!st) st = read_list(n, "strides", a->strides, WM_CNN_ND, &a->n_strides, 1, err);
    if (!st) st = read_list(n, "dilations", a->dil, WM_CNN_ND, &a->n_dil, 1, err);
    if (!st) st = read_list(n, "pads", a->pads, 2 * WM_CNN_ND, &a->n_pads, allow_neg_pads ? -((int64_t)1 << 40) : 0, err);
    if (st) return st;
    if (a->n_pads % 2) return wm_node_err(n, err, WM_ERR_INPUT, "attribute pads has an odd number of values (%d)", a->n_pads);
    char buf[32];
    const char *ap = wm_attr_string(n, "auto_pad", "NOTSET", buf, sizeof buf);
    if (!strcmp(ap, "NOTSET") || !*ap) a->auto_pad = WM_AUTOPAD_NOTSET;
    else if (!strcmp(ap, "SAME_UPPER")) a->auto_pad = WM_AUTOPAD_SAME_UPPER;
    else if (!strcmp(ap, "SAME_LOWER")) a->auto_pad = WM_AUTOPAD_SAME_LOWER;
    else if (!strcmp(ap, "VALID")) a->auto_pad = WM_AUTOPAD_VALID;
    else return wm_node_err(n, err, WM_ERR_INPUT, "auto_pad '%s' is not NOTSET, SAME_UPPER, SAME_LOWER or VALID", ap);
    if (pool) {
        int64_t c = wm_attr_int(n, "ceil_mode", 0);
        if (c != 0 && c != 1) return wm_node_err(n, err, WM_ERR_INPUT, "ceil_mode = %lld (must be 0 or 1)", (long long)c);
        a->ceil_mode = (int)c;
    }
    return WM_OK;
}

wm_status wm_win_make(const wm_node *n, const wm_win_attr *a, int nd, const int64_t *in_sp, const int64_t *kernel,
                      wm_win *w, wm_error *err) {
    memset(w, 0, sizeof *w);
    if (nd < 1 || nd > WM_CNN_ND)
        return wm_node_err(n, err, nd < 1 ? WM_ERR_INPUT : WM_ERR_UNSUPPORTED,
                           "input has %d spatial dims; 1 to %d are supported", nd, WM_CNN_ND);
    if (!kernel && a->n_kernel != nd)
        return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape has %d values for %d spatial dims", a->n_kernel, nd);
    if (kernel && a->n_kernel && a->n_kernel != nd)
        return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape has %d values for %d spatial dims", a->n_kernel, nd);
    if ((a->n_strides && a->n_strides != nd) || (a->n_dil && a->n_dil != nd) || (a->n_pads && a->n_pads != 2 * nd))
        return wm_node_err(n, err, WM_ERR_INPUT, "strides/dilations/pads do not match %d spatial dims", nd);
    w->nd = nd;
    int o = WM_CNN_ND - nd;
    for (int i = 0; i < WM_CNN_ND; i++) {
        w->in[i] = w->out[i] = w->k[i] = w->s[i] = w->d[i] = 1;
        w->pb[i] = w->pe[i] = 0;
    }
    for (int i = 0; i < nd; i++) {
        int j = o + i;
        int64_t k = kernel ? kernel[i] : a->kernel[i];
        if (kernel && a->n_kernel && a->kernel[i] != k)
            return wm_node_err(n, err, WM_ERR_INPUT, "kernel_shape[%d] = %lld but the weight has %lld", i,
                               (long long)a->kernel[i], (long long)k);
        if (k < 1) return wm_node_err(n, err, WM_ERR_INPUT, "kernel dim %d is %lld", i, (long long)k);
        int64_t s = a->n_strides ? a->strides[i] : 1, d = a->n_dil ? a->dil[i] : 1, in = in_sp[i];
        int64_t ext, out, pb = 0, pe = 0;
        if (in < 0) return wm_node_err(n, err, WM_ERR_INPUT, "spatial dim %d is negative", i);
        if (k > ((int64_t)1 << 40) || !wm_mul_i64_ok(k - 1, d, &ext) || ext > ((int64_t)1 << 46)) /* k, d <= 2^40 each */
            return wm_node_err(n, err, WM_ERR_INPUT, "spatial dim %d: kernel %lld dilated by %lld is too large", i,
                               (long long)k, (long long)d);
        ext += 1;
        switch (a->auto_pad) {
        case WM_AUTOPAD_SAME_UPPER:
        case WM_AUTOPAD_SAME_LOWER: {
            out = (in + s - 1) / s;
            int64_t total = (out - 1) * s + ext - in;
            if (total < 0) total = 0;
            pb = a->auto_pad == WM_AUTOPAD_SAME_UPPER ? total / 2 : total - total / 2;
            pe = total - pb;
            break;
        }
        case WM_AUTOPAD_VALID:
            if (in < ext)
                return wm_node_err(n, err, WM_ERR_INPUT, "spatial dim %d (%lld) is smaller than the kernel extent %lld", i,
                                   (long long)in, (long long)ext);
            out = (in - ext) / s + 1;
            break;
        default: {
            pb = a->n_pads ? a->pads[i] : 0;
            pe = a->n_pads ? a->pads[nd + i] : 0;
            int64_t num = in + pb + pe - ext;
            if (num < 0)
                return wm_node_err(n, err, WM_ERR_INPUT,
                                   "spatial dim %d: input %lld plus pads %lld+%lld is smaller than the kernel extent %lld", i,
                                   (long long)in, (long long)pb, (long long)pe, (long long)ext);
            out = num / s + 1;
            if (a->ceil_mode) {
                out = (num + s - 1) / s + 1;
                if ((out - 1) * s >= in + pb) out--; /* the last window must start inside input or head pad */
            }
            break;
        }
        }
        w->in[j] = in;
        w->out[j] = out;
        w->k[j] = k;
        w->s[j] = s;
        w->d[j] = d;
        w->pb[j] = pb;
        w->pe[j] = pe;
    }
    return WM_OK;
}

wm_status wm_cnn_read_ints(const wm_node *n, const wm_tensor *t, int64_t *v, int max, int *count, wm_error *err) {
    uint64_t cnt = wm_tensor_numel(t);
    if (!t->data && cnt) return WM_NEED_DATA;
    if (t->rank > 1) return wm_node_err(n, err, WM_ERR_INPUT, "a sizes/pads/axes input must be 1-D (rank %d)", t->rank);
    if (cnt > (uint64_t)max) return wm_node_err(n, err, WM_ERR_INPUT, "%llu values in a sizes/pads/axes input (at most %d)",
                                                (unsigned long long)cnt, max);
    if (t->dtype != WM_DT_INT64 && t->dtype != WM_DT_INT32)
        return wm_node_err(n, err, WM_ERR_INPUT, "a sizes/pads/axes input must be int64");
    for (uint64_t i = 0; i < cnt; i++) v[i] = wm_tensor_get_int(t, i);
    *count = (int)cnt;
    return WM_OK;
}
