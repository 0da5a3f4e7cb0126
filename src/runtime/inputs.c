#include "runtime/inputs.h"

#include <ctype.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/error.h"
#include "core/half.h"
#include "core/npz.h"
#include "core/sysmem.h"
#include "hf/safetensors.h"
#include "runtime/session_impl.h"

static int has(const char *s, const char *sub) {
    size_t n = strlen(sub);
    for (; *s; s++)
        if (!strncasecmp(s, sub, n)) return 1;
    return 0;
}

static int explicit_dim(const wm_input_opts *o, const char *nm, int64_t *v) {
    if (nm)
        for (size_t i = 0; i < o->n_dims; i++)
            if (!strcmp(o->dims[i].name, nm)) return *v = o->dims[i].value, 1;
    return 0;
}

static int64_t bind_dim(const wm_input_opts *o, const wm_io_info *io, int d) {
    const char *nm = io->dim_names[d];
    int64_t v;
    if (explicit_dim(o, nm, &v)) return v;
    int64_t batch = o->batch > 0 ? o->batch : 1, seq = o->seq > 0 ? o->seq : 128, past = o->past > 0 ? o->past : 0;
    /* decoders by the GenAI/Optimum convention: the roles of the dims are known whatever their names */
    if (d == 0 && (!strncmp(io->name, "past_key_values.", 16) || !strcmp(io->name, "attention_mask") ||
                   !strcmp(io->name, "input_ids") || !strcmp(io->name, "position_ids")))
        return batch;
    if (!strncmp(io->name, "past_key_values.", 16) && d == 2) return past;
    if (!strcmp(io->name, "attention_mask") && d == 1 && io->rank == 2) return past + seq;
    if ((!strcmp(io->name, "input_ids") || !strcmp(io->name, "position_ids")) && d == 1) return seq;
    if (!nm) return d == 0 ? batch : seq;
    if (has(nm, "batch") || !strcmp(nm, "N") || !strcmp(nm, "b") || !strcmp(nm, "B")) return batch;
    if (has(nm, "total") || strchr(nm, '+')) return past + seq;
    if (has(nm, "past")) return past;
    if (d == 0 && !has(nm, "seq") && !has(nm, "len")) return batch;
    return seq;
}

/* Follows value v through shape-only ops to a Gather's indices; returns the table's row count or 0. */
static int64_t index_range_of(const wm_session *s, const char *name, int depth) {
    if (depth > 6) return 0;
    for (size_t i = 0; i < s->n_nodes; i++) {
        const wm_node *n = &s->nodes[i];
        const wm_onnx_node *p = n->proto;
        for (int k = 0; k < n->n_in; k++) {
            if (!p->input[k] || strcmp(p->input[k], name)) continue;
            const char *op = p->op_type;
            int gbq = !strcmp(op, "GatherBlockQuantized"); /* a quantized table: rows on gather_axis */
            if ((gbq || !strcmp(op, "Gather")) && k == 1 && n->in_const[0]) {
                int r = n->in_const[0]->rank;
                int64_t ax = wm_attr_int(n, gbq ? "gather_axis" : "axis", 0);
                if (ax < 0) ax += r;
                if (ax >= 0 && ax < r) return n->in_const[0]->dims[ax];
            }
            if (k == 0 && (!strcmp(op, "Cast") || !strcmp(op, "Reshape") || !strcmp(op, "Unsqueeze") ||
                           !strcmp(op, "Squeeze") || !strcmp(op, "Flatten") || !strcmp(op, "Identity"))) {
                int64_t r = index_range_of(s, p->output[0], depth + 1);
                if (r) return r;
            }
        }
    }
    return 0;
}

int64_t wm_inputs_index_range(const wm_session *s, size_t i) {
    return i < s->n_inputs ? index_range_of(s, s->inputs[i].name, 0) : 0;
}

static uint64_t next(uint64_t *st) { /* xorshift64* */
    uint64_t x = *st;
    x ^= x >> 12, x ^= x << 25, x ^= x >> 27;
    *st = x;
    return x * 2685821657736338717ull;
}

static double unit(uint64_t *st) { return (double)(next(st) >> 11) * (1.0 / 9007199254740992.0); }

static int is_float_type(int32_t dt) {
    return dt == WM_DT_FLOAT || dt == WM_DT_DOUBLE || dt == WM_DT_FLOAT16 || dt == WM_DT_BFLOAT16;
}

static int is_int_type(int32_t dt) {
    return dt == WM_DT_INT8 || dt == WM_DT_UINT8 || dt == WM_DT_INT16 || dt == WM_DT_UINT16 || dt == WM_DT_INT32 ||
           dt == WM_DT_UINT32 || dt == WM_DT_INT64 || dt == WM_DT_UINT64;
}

static void put(int32_t dt, void *p, uint64_t i, double v) {
    switch (dt) {
    case WM_DT_FLOAT: ((float *)p)[i] = (float)v; break;
    case WM_DT_DOUBLE: ((double *)p)[i] = v; break;
    case WM_DT_FLOAT16: ((uint16_t *)p)[i] = wm_f32_to_f16((float)v); break;
    case WM_DT_BFLOAT16: ((uint16_t *)p)[i] = wm_f32_to_bf16((float)v); break;
    case WM_DT_INT8: case WM_DT_UINT8: case WM_DT_BOOL: ((uint8_t *)p)[i] = (uint8_t)(int64_t)v; break;
    case WM_DT_INT16: case WM_DT_UINT16: ((uint16_t *)p)[i] = (uint16_t)(int64_t)v; break;
    case WM_DT_INT32: case WM_DT_UINT32: ((uint32_t *)p)[i] = (uint32_t)(int64_t)v; break;
    default: ((int64_t *)p)[i] = (int64_t)v; break;
    }
}

static wm_status alloc_inputs(wm_inputs *in, size_t n, wm_error *err) {
    memset(in, 0, sizeof *in);
    in->t = calloc(n + 1, sizeof *in->t);
    in->bufs = calloc(n + 1, sizeof *in->bufs);
    in->n = n;
    if (!in->t || !in->bufs) {
        wm_inputs_free(in);
        return wm_err(err, WM_ERR_NOMEM, "inputs: out of memory");
    }
    return WM_OK;
}

wm_status wm_inputs_make(const wm_session *s, const wm_input_opts *o, wm_inputs *in, wm_error *err) {
    wm_status st = alloc_inputs(in, s->n_inputs, err);
    if (st) return st;
    uint64_t rng = o->seed * 0x9e3779b97f4a7c15ull + 0x2545f4914f6cdd1dull, total = 0;
    int64_t past = o->past > 0 ? o->past : 0;
    for (size_t i = 0; i < s->n_inputs; i++) {
        const wm_io_info *io = &s->inputs[i];
        wm_tensor *t = &in->t[i];
        t->dtype = io->dtype;
        if (io->rank < 0)
            return wm_err(err, WM_ERR_INPUT, "input '%s' has unknown rank: give the data with --input-data", io->name);
        t->rank = io->rank;
        uint64_t numel = 1;
        for (int d = 0; d < io->rank; d++) {
            t->dims[d] = io->dims[d] >= 0 ? io->dims[d] : bind_dim(o, io, d);
            if (t->dims[d] < 0 || __builtin_mul_overflow(numel, (uint64_t)t->dims[d], &numel) || numel > (1ull << 34)) {
                wm_inputs_free(in);
                return wm_err(err, WM_ERR_USAGE, "input '%s': dim %d is too large", io->name, d);
            }
        }
        size_t es = wm_dtype_size(io->dtype);
        if (!is_float_type(io->dtype) && io->dtype != WM_DT_BOOL && !is_int_type(io->dtype)) {
            wm_inputs_free(in); /* put() writes the types above only (8-bit floats, sub-byte types: no) */
            return wm_err(err, WM_ERR_USAGE, "input '%s': no generator for element type %s (give the data with --input-data)",
                          io->name, wm_dtype_name(io->dtype));
        }
        total += numel * es; /* sized by flags: within the session's memory limit, like its activations */
        if (!wm_budget_fits(s, 0, total)) {
            char msg[700], shape[256], sz[32];
            snprintf(msg, sizeof msg, "input '%s' %s needs %s (from --batch-size, --seq-len, --past-len, --dim)",
                     io->name, wm_budget_shape(t, shape, sizeof shape), wm_fmt_size(numel * es, sz, sizeof sz));
            wm_budget_over(s, 0, msg, sizeof msg);
            wm_inputs_free(in);
            return wm_err(err, WM_ERR_USAGE, "%s", msg);
        }
        in->bufs[i] = aligned_alloc(64, ((numel * es) | 63) + 1);
        if (!in->bufs[i]) {
            wm_inputs_free(in);
            return wm_err(err, WM_ERR_NOMEM, "input '%s': out of memory", io->name);
        }
        t->data = in->bufs[i];
        int is_float = io->dtype == WM_DT_FLOAT || io->dtype == WM_DT_FLOAT16 || io->dtype == WM_DT_BFLOAT16 ||
                       io->dtype == WM_DT_DOUBLE;
        int64_t range = is_float ? 0 : wm_inputs_index_range(s, i);
        int64_t last = t->rank ? t->dims[t->rank - 1] : 1;
        const wm_input_range *vr = NULL;
        for (size_t k = 0; k < o->n_ranges && !has(io->name, "mask"); k++)
            if (!strcmp(o->ranges[k].name, io->name) && o->ranges[k].hi > o->ranges[k].lo) vr = &o->ranges[k];
        int64_t ilo = 0, ihi = 0; /* an integer range: [ceil lo, hi) within the table's rows */
        if (vr && !is_float) {
            ilo = (int64_t)vr->lo, ihi = (int64_t)vr->hi;
            if ((double)ilo < vr->lo) ilo++;
            if (range > 0 && ihi > range) ihi = range;
            if (range > 0 && ilo < 0) ilo = 0;
            if (ihi <= ilo) vr = NULL; /* nothing valid in it: the default values */
        }
        for (uint64_t k = 0; k < numel; k++) {
            double v;
            if (vr && is_float) v = vr->lo + (vr->hi - vr->lo) * unit(&rng);
            else if (vr) v = (double)(ilo + (int64_t)(next(&rng) % (uint64_t)(ihi - ilo)));
            else if (is_float) v = io->rank == 4 && !has(io->name, "past") ? unit(&rng) : 2 * unit(&rng) - 1;
            else if (range > 0) v = (double)(next(&rng) % (uint64_t)range);
            else if (has(io->name, "mask")) v = 1;
            else if (has(io->name, "position")) v = (double)(past + (int64_t)(k % (uint64_t)(last ? last : 1)));
            else v = 0;
            put(io->dtype, t->data, k, v);
        }
    }
    return WM_OK;
}

/* Element k of an integer array (unaligned little-endian bytes) as int64; 0 when a uint64 does not fit. */
static int npz_int(const wm_npz_array *a, uint64_t k, int64_t *v) {
    const uint8_t *p = (const uint8_t *)a->data + k * (uint64_t)a->itemsize;
    uint64_t u = 0;
    for (int b = 0; b < a->itemsize; b++) u |= (uint64_t)p[b] << (8 * b);
    if (a->kind == 'i' && a->itemsize < 8 && (u >> (8 * a->itemsize - 1)) & 1) u |= ~0ull << (8 * a->itemsize);
    if (a->kind == 'u' && a->itemsize == 8 && u > (uint64_t)INT64_MAX) return 0;
    *v = (int64_t)u;
    return 1;
}

/* The integer range of ONNX type dt: lo..hi. */
static void int_range(int32_t dt, int64_t *lo, int64_t *hi) {
    switch (dt) {
    case WM_DT_BOOL: *lo = 0, *hi = 1; break;
    case WM_DT_INT8: *lo = INT8_MIN, *hi = INT8_MAX; break;
    case WM_DT_UINT8: *lo = 0, *hi = UINT8_MAX; break;
    case WM_DT_INT16: *lo = INT16_MIN, *hi = INT16_MAX; break;
    case WM_DT_UINT16: *lo = 0, *hi = UINT16_MAX; break;
    case WM_DT_INT32: *lo = INT32_MIN, *hi = INT32_MAX; break;
    case WM_DT_UINT32: *lo = 0, *hi = UINT32_MAX; break;
    default: *lo = INT64_MIN, *hi = INT64_MAX; break;
    }
}

/*
 * The array a (from file path) as input io into x / *buf: its own bytes when the dtypes agree; numpy's defaults
 * converted where no value changes (int64 ids into an int32 input, every value checked in range) or where the
 * input is float32 and the array float64 (rounded, as a cast would); anything else refused naming both types.
 */
static wm_status npz_tensor(const wm_npz_array *a, const wm_io_info *io, const char *path, wm_tensor *x, void **buf,
                            wm_error *err) {
    int32_t have = wm_st_dtype_onnx(wm_st_npz_dtype(a)), want = io->dtype;
    int ints = a->kind == 'i' || a->kind == 'u' || a->kind == 'b';
    int want_int = want == WM_DT_BOOL || want == WM_DT_INT8 || want == WM_DT_UINT8 || want == WM_DT_INT16 ||
                   want == WM_DT_UINT16 || want == WM_DT_INT32 || want == WM_DT_UINT32 || want == WM_DT_INT64;
    int convert = have != want;
    if (convert && !(ints && want_int) && !(have == WM_DT_DOUBLE && want == WM_DT_FLOAT))
        return wm_err(err, WM_ERR_INPUT, "%s: array '%s' is %s, the model's input is %s (no lossless conversion)", path,
                      io->name, wm_dtype_name(have), wm_dtype_name(want));
    if (a->rank > WM_MAX_RANK)
        return wm_err(err, WM_ERR_INPUT, "%s: array '%s' has rank %d", path, io->name, a->rank);
    uint64_t es = (uint64_t)wm_dtype_bits(convert ? want : have) / 8, nb = a->count * es;
    if (!(*buf = aligned_alloc(64, (nb | 63) + 1))) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    x->dtype = convert ? want : have;
    x->rank = a->rank;
    for (int d = 0; d < a->rank; d++) x->dims[d] = a->shape[d];
    x->data = *buf;
    if (!convert) {
        if (nb) memcpy(*buf, a->data, nb);
        return WM_OK;
    }
    if (have == WM_DT_DOUBLE) {
        for (uint64_t k = 0; k < a->count; k++) {
            double v;
            memcpy(&v, (const uint8_t *)a->data + 8 * k, 8);
            ((float *)*buf)[k] = (float)v;
        }
        return WM_OK;
    }
    int64_t lo, hi;
    int_range(want, &lo, &hi);
    for (uint64_t k = 0; k < a->count; k++) {
        int64_t v = 0;
        if (!npz_int(a, k, &v) || v < lo || v > hi)
            return wm_err(err, WM_ERR_INPUT, "%s: array '%s' element %llu does not fit the input's %s", path, io->name,
                          (unsigned long long)k, wm_dtype_name(want));
        put(want, *buf, k, (double)v);
    }
    return WM_OK;
}

/* An .npz (np.savez / savez_compressed) or .npy: the session's inputs by name (a single .npy feeds a model of
 * one input). */
static wm_status inputs_read_npz(const wm_session *s, const char *path, wm_inputs *in, wm_error *err) {
    wm_npz z;
    wm_status st = wm_npz_open(path, &z, err);
    if (st) return st;
    if ((st = alloc_inputs(in, s->n_inputs, err))) goto done;
    for (size_t i = 0; i < s->n_inputs; i++) {
        const wm_io_info *io = &s->inputs[i];
        const wm_npz_array *a = wm_npz_find(&z, io->name);
        if (!a && z.n == 1 && s->n_inputs == 1) a = &z.a[0];
        if (!a) {
            st = wm_err(err, WM_ERR_INPUT, "%s: no array named '%s' (an input of the model)", path, io->name);
            goto done;
        }
        if ((st = npz_tensor(a, io, path, &in->t[i], &in->bufs[i], err))) goto done;
    }
done:
    wm_npz_close(&z);
    if (st) wm_inputs_free(in);
    return st;
}

static int has_suffix(const char *s, const char *suf) {
    size_t a = strlen(s), b = strlen(suf);
    return a >= b && !strcasecmp(s + a - b, suf);
}

wm_status wm_inputs_read(const wm_session *s, const char *path, wm_inputs *in, wm_error *err) {
    if (has_suffix(path, ".npz") || has_suffix(path, ".npy")) return inputs_read_npz(s, path, in, err);
    wm_st_file *f = NULL;
    wm_status st = wm_st_open(path, NULL, &f, err);
    if (st) return st;
    if ((st = alloc_inputs(in, s->n_inputs, err))) goto done;
    for (size_t i = 0; i < s->n_inputs; i++) {
        const wm_io_info *io = &s->inputs[i];
        const wm_st_tensor *t = wm_st_find(f, io->name);
        if (!t) {
            st = wm_err(err, WM_ERR_INPUT, "%s: no tensor named '%s' (an input of the model)", path, io->name);
            goto done;
        }
        if (t->rank > WM_MAX_RANK) {
            st = wm_err(err, WM_ERR_INPUT, "%s: tensor '%s' has rank %zu", path, io->name, t->rank);
            goto done;
        }
        wm_tensor *x = &in->t[i];
        x->dtype = wm_st_dtype_onnx(t->dtype);
        x->rank = (int32_t)t->rank;
        for (size_t d = 0; d < t->rank; d++) x->dims[d] = t->shape[d];
        in->bufs[i] = aligned_alloc(64, (t->nbytes | 63) + 1);
        if (!in->bufs[i]) {
            st = wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
            goto done;
        }
        if (t->nbytes) memcpy(in->bufs[i], t->data, t->nbytes);
        x->data = in->bufs[i];
    }
done:
    wm_st_close(f);
    if (st) wm_inputs_free(in);
    return st;
}

void wm_inputs_free(wm_inputs *in) {
    if (!in) return;
    if (in->bufs)
        for (size_t i = 0; i < in->n; i++) free(in->bufs[i]);
    free(in->bufs);
    free(in->t);
    memset(in, 0, sizeof *in);
}
