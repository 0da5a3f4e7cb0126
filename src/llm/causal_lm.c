#include "llm/causal_lm.h"

#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/arena.h"
#include "core/error.h"
#include "core/file.h"
#include "llm/clm_head.h"
#include "onnx/onnx_model.h"
#include "ops/op.h"
#include "runtime/inputs.h"

#define MAX_LAYERS 256

struct wm_clm {
    wm_session *s;
    size_t n_in, n_out;
    int i_ids, i_mask, i_pos;
    int i_pk[MAX_LAYERS], i_pv[MAX_LAYERS];
    int o_logits, o_pk[MAX_LAYERS], o_pv[MAX_LAYERS];
    int layers;
    int64_t kv_heads, head_dim, max_len, len, vocab;
    int32_t kv_dtype;
    size_t kv_bytes;          /* one buffer: [1, KV, max_len, D] */
    void *kv[2][2 * MAX_LAYERS]; /* views of kv_mem */
    wm_arena kv_mem;             /* the cache buffers, one mapping on huge pages */
    int cur;                  /* buffer set holding the past */
    int inplace;              /* every present may be bound over its past: one set, appended in place */
    wm_tensor *in, *out;
    wm_out_bind *bind;
    void *ids_buf, *mask_buf, *pos_buf;
    wm_session *s_full;       /* when s has its head narrowed: the graph as it is, opened for append_all */
    int narrowed;             /* s computes the logits of the last position only (clm_head.h) */
    wm_session_opts so;
    char file[4096];
    float *last;              /* last position's logits */
    float *all;               /* every position's logits (wm_clm_append_all) */
    size_t all_cap;
    int want_all;
};

static int is_int_t(int32_t dt) { return dt == WM_DT_INT64 || dt == WM_DT_INT32; }

/* A session for file; with narrow, its logits cut to the last position when the head allows (*narrowed = 1). */
static wm_status open_session(const char *file, const wm_session_opts *so, int narrow, wm_session **out, int *narrowed,
                              wm_error *err) {
    *narrowed = 0;
    if (!narrow) return wm_session_new(file, so, out, err);
    wm_onnx_model *md = NULL;
    wm_status st = wm_onnx_load(file, &md, err);
    if (st) return st;
    wm_graph *g = NULL;
    if (md->proto && md->proto->graph && wm_graph_open(md, md->proto->graph, &g, NULL) == WM_OK) {
        int r = wm_clm_narrow_head(g, "logits", NULL);
        wm_graph_free(g);
        if (r < 0) { /* a failed edit: the graph as it is */
            wm_onnx_free(md);
            return wm_session_new(file, so, out, err);
        }
        *narrowed = r;
    }
    st = wm_session_new_model(md, so, out, err);
    if (st) wm_err_prefix(err, "%s", file);
    return st;
}

wm_status wm_clm_open(const char *path, const wm_clm_opts *o, wm_clm **out, wm_error *err) {
    *out = NULL;
    wm_clm *m = calloc(1, sizeof *m);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&m->kv_mem);
    char *file = m->file, dir[PATH_MAX];
    wm_status rc = wm_model_path(path, "a model file or a build folder with model.onnx", file, sizeof m->file, dir,
                                 sizeof dir, err);
    if (rc) goto fail;
    if (o && o->session) m->so = *o->session;
    m->so.threads = o ? o->threads : 0;
    /* WM_LOGITS_ALL=1: every position's logits in every step (for comparisons) */
    rc = open_session(file, &m->so, getenv("WM_LOGITS_ALL") == NULL, &m->s, &m->narrowed, err);
    if (rc) goto fail;
    m->max_len = o && o->max_length > 0 ? o->max_length : 2048;
    m->n_in = wm_session_n_inputs(m->s);
    m->n_out = wm_session_n_outputs(m->s);
    m->i_ids = wm_session_input_index(m->s, "input_ids");
    m->i_mask = wm_session_input_index(m->s, "attention_mask");
    m->i_pos = wm_session_input_index(m->s, "position_ids");
    m->o_logits = wm_session_output_index(m->s, "logits");
    if (m->i_ids < 0 || m->o_logits < 0) {
        rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: a causal LM needs an input 'input_ids' and an output 'logits'", file);
        goto fail;
    }
    int32_t idt = wm_session_input(m->s, (size_t)m->i_ids)->dtype;
    if (!is_int_t(idt) || (m->i_mask >= 0 && !is_int_t(wm_session_input(m->s, (size_t)m->i_mask)->dtype)) ||
        (m->i_pos >= 0 && !is_int_t(wm_session_input(m->s, (size_t)m->i_pos)->dtype))) {
        rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: input_ids, attention_mask and position_ids must be int32 or int64", file);
        goto fail;
    }
    for (int l = 0; l < MAX_LAYERS; l++) {
        char k[96], v[96], pk[96], pv[96];
        snprintf(k, sizeof k, "past_key_values.%d.key", l);
        snprintf(v, sizeof v, "past_key_values.%d.value", l);
        snprintf(pk, sizeof pk, "present.%d.key", l);
        snprintf(pv, sizeof pv, "present.%d.value", l);
        int a = wm_session_input_index(m->s, k), b = wm_session_input_index(m->s, v), c = wm_session_output_index(m->s, pk), d = wm_session_output_index(m->s, pv);
        if (a < 0 && b < 0 && c < 0 && d < 0) break;
        if (a < 0 || b < 0 || c < 0 || d < 0) {
            rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: layer %d lacks one of %s, %s, %s, %s", file, l, k, v, pk, pv);
            goto fail;
        }
        const wm_io_info *pi = wm_session_input(m->s, (size_t)a);
        if (pi->rank != 4 || pi->dims[1] < 1 || pi->dims[3] < 1) {
            rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: %s must be [batch, kv_heads, past, head_dim] with fixed heads and head_dim",
                        file, k);
            goto fail;
        }
        if (l == 0) m->kv_heads = pi->dims[1], m->head_dim = pi->dims[3], m->kv_dtype = pi->dtype;
        m->i_pk[l] = a, m->i_pv[l] = b, m->o_pk[l] = c, m->o_pv[l] = d;
        m->layers = l + 1;
    }
    if (m->layers == 0) {
        rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: no past_key_values.N.key inputs: export the decoder with its KV cache", file);
        goto fail;
    }
    if (m->n_in != (size_t)(1 + (m->i_mask >= 0) + (m->i_pos >= 0) + 2 * m->layers)) {
        rc = wm_err(err, WM_ERR_UNSUPPORTED, "%s: inputs other than input_ids, attention_mask, position_ids and the past", file);
        goto fail;
    }
    m->vocab = wm_inputs_index_range(m->s, (size_t)m->i_ids);
    m->inplace = getenv("WM_KV_COPY") == NULL; /* WM_KV_COPY=1: the two-set form (for comparisons) */
    for (int l = 0; l < m->layers && m->inplace; l++)
        m->inplace = wm_session_kv_inplace(m->s, (size_t)m->i_pk[l], (size_t)m->o_pk[l]) &&
                     wm_session_kv_inplace(m->s, (size_t)m->i_pv[l], (size_t)m->o_pv[l]);
    /* the cache is sized by max_length: checked, and taken from the session's memory budget before allocating */
    uint64_t kvb, all, es = wm_dtype_size(m->kv_dtype), nset = m->inplace ? 1 : 2;
    char what[160];
    snprintf(what, sizeof what, "the KV cache of %d layers x %lld tokens (--max-length)", m->layers,
             (long long)m->max_len);
    if (__builtin_mul_overflow((uint64_t)m->kv_heads, (uint64_t)m->max_len, &kvb) ||
        __builtin_mul_overflow(kvb, (uint64_t)m->head_dim, &kvb) || __builtin_mul_overflow(kvb, es, &kvb) ||
        kvb > SIZE_MAX / 4 ||
        __builtin_mul_overflow((kvb + 63) & ~(uint64_t)63, nset * 2 * (uint64_t)m->layers, &all) ||
        __builtin_add_overflow(all, 24 * (uint64_t)m->max_len, &all)) {
        rc = wm_err(err, WM_ERR_INPUT, "%s: %s is too large to count in 64 bits", file, what);
        goto fail;
    }
    if ((rc = wm_session_reserve(m->s, all, what, err))) {
        wm_err_prefix(err, "%s", file);
        goto fail;
    }
    m->kv_bytes = (size_t)kvb;
    /* one mapping for every buffer: it lies on 2 MB pages (wm_arena_alloc), so a decode step's read of the
       whole cache does not miss the TLB every 4 KB (16 rows of a 64-float head): at 1024 tokens of
       Qwen2.5-0.5B the attention kernels took 20% less time over such a cache than over 48 small-page ones */
    size_t stride = (m->kv_bytes + 63) & ~(size_t)63, nbuf = (size_t)(m->inplace ? 1 : 2) * (size_t)(2 * m->layers);
    uint8_t *kvm = wm_arena_alloc(&m->kv_mem, nbuf * stride + 64);
    if (!kvm) goto nomem;
    kvm = (uint8_t *)(((uintptr_t)kvm + 63) & ~(uintptr_t)63);
    for (int set = 0; set < (m->inplace ? 1 : 2); set++)
        for (int l = 0; l < 2 * m->layers; l++) m->kv[set][l] = kvm + (size_t)(set * 2 * m->layers + l) * stride;
    m->in = calloc(m->n_in, sizeof *m->in);
    m->out = calloc(m->n_out, sizeof *m->out);
    m->bind = calloc(m->n_out, sizeof *m->bind);
    m->ids_buf = malloc((size_t)m->max_len * 8);
    m->mask_buf = malloc((size_t)m->max_len * 8);
    m->pos_buf = malloc((size_t)m->max_len * 8);
    if (!m->in || !m->out || !m->bind || !m->ids_buf || !m->mask_buf || !m->pos_buf) goto nomem;
    *out = m;
    return WM_OK;
nomem:
    rc = wm_err(err, WM_ERR_NOMEM, "%s: cannot allocate the KV cache (%d layers x %lld tokens)", file, m->layers,
                (long long)m->max_len);
fail:
    wm_clm_free(m);
    return rc;
}

void wm_clm_free(wm_clm *m) {
    if (!m) return;
    wm_arena_free(&m->kv_mem);
    free(m->in);
    free(m->out);
    free(m->bind);
    free(m->ids_buf);
    free(m->mask_buf);
    free(m->pos_buf);
    free(m->last);
    free(m->all);
    wm_session_free(m->s_full);
    wm_session_free(m->s);
    free(m);
}

int64_t wm_clm_vocab(const wm_clm *m) { return m->vocab; }
int64_t wm_clm_length(const wm_clm *m) { return m->len; }
int wm_clm_layers(const wm_clm *m) { return m->layers; }
int wm_clm_inplace(const wm_clm *m) { return m->inplace; }
int wm_clm_narrowed(const wm_clm *m) { return m->narrowed; }
const wm_session *wm_clm_session(const wm_clm *m) { return m->s; }
void wm_clm_reset(wm_clm *m) { m->len = 0; }

wm_status wm_clm_truncate(wm_clm *m, int64_t len, wm_error *err) {
    if (len < 0 || len > m->len)
        return wm_err(err, WM_ERR_USAGE, "cannot cut the cache to %lld tokens: it holds %lld", (long long)len,
                      (long long)m->len);
    if (!m->inplace && len < m->len) { /* the past is [1, KV, len, D] packed: each head's kept rows move down */
        size_t row = (size_t)m->head_dim * wm_dtype_size(m->kv_dtype);
        for (int i = 0; i < 2 * m->layers; i++)
            for (int64_t h = 1; h < m->kv_heads; h++)
                memmove((uint8_t *)m->kv[m->cur][i] + (size_t)(h * len) * row,
                        (uint8_t *)m->kv[m->cur][i] + (size_t)(h * m->len) * row, (size_t)len * row);
    }
    m->len = len;
    return WM_OK;
}

static void fill_int(void *buf, int32_t dt, size_t i, int64_t v) {
    if (dt == WM_DT_INT64) ((int64_t *)buf)[i] = v;
    else ((int32_t *)buf)[i] = (int32_t)v;
}

static void int_input(wm_tensor *t, int32_t dt, void *buf, int64_t n) {
    t->dtype = dt;
    t->rank = 2;
    t->dims[0] = 1;
    t->dims[1] = n;
    t->data = buf;
}

wm_status wm_clm_append(wm_clm *m, const int32_t *ids, size_t n, const float **logits, wm_error *err) {
    if (n == 0) return wm_err(err, WM_ERR_USAGE, "no tokens to append");
    if (m->len + (int64_t)n > m->max_len)
        return wm_err(err, WM_ERR_USAGE, "the sequence would reach %lld tokens, over the cache's %lld (raise max length)",
                      (long long)(m->len + (int64_t)n), (long long)m->max_len);
    if (m->want_all && m->narrowed && !m->s_full) {
        int unused;
        wm_status st = open_session(m->file, &m->so, 0, &m->s_full, &unused, err);
        if (st) return st;
    }
    wm_session *s = m->want_all && m->narrowed ? m->s_full : m->s;
    int32_t dt = wm_session_input(s, (size_t)m->i_ids)->dtype;
    for (size_t i = 0; i < n; i++) fill_int(m->ids_buf, dt, i, ids[i]);
    int_input(&m->in[m->i_ids], dt, m->ids_buf, (int64_t)n);
    int64_t total = m->len + (int64_t)n;
    if (m->i_mask >= 0) {
        /* in place: the mask spans the whole cache (ones, then zeros), as long as the past it describes, so every
           decode step has the same input shapes and reuses one execution plan; GroupQueryAttention reads the
           lengths from the ones (seqlens_k) */
        int64_t mlen = m->inplace ? m->max_len : total;
        int32_t mdt = wm_session_input(s, (size_t)m->i_mask)->dtype;
        for (int64_t i = 0; i < mlen; i++) fill_int(m->mask_buf, mdt, (size_t)i, i < total);
        int_input(&m->in[m->i_mask], mdt, m->mask_buf, mlen);
    }
    if (m->i_pos >= 0) {
        int32_t pdt = wm_session_input(s, (size_t)m->i_pos)->dtype;
        for (size_t i = 0; i < n; i++) fill_int(m->pos_buf, pdt, i, m->len + (int64_t)i);
        int_input(&m->in[m->i_pos], pdt, m->pos_buf, (int64_t)n);
    }
    for (int l = 0; l < m->layers; l++)
        for (int kv = 0; kv < 2; kv++) {
            wm_tensor *t = &m->in[kv ? m->i_pv[l] : m->i_pk[l]];
            t->dtype = m->kv_dtype;
            t->rank = 4;
            t->dims[0] = 1, t->dims[1] = m->kv_heads, t->dims[2] = m->inplace ? m->max_len : m->len;
            t->dims[3] = m->head_dim;
            t->data = m->kv[m->cur][2 * l + kv];
            wm_out_bind *b = &m->bind[kv ? m->o_pv[l] : m->o_pk[l]];
            b->data = m->kv[m->inplace ? m->cur : 1 - m->cur][2 * l + kv];
            b->capacity = m->kv_bytes;
        }
    wm_status st = wm_session_run_bound(s, m->in, m->n_in, m->out, m->n_out, m->bind, err);
    if (st) return st;
    const wm_tensor *lg = &m->out[m->o_logits];
    int64_t v = lg->rank ? lg->dims[lg->rank - 1] : 0;
    if (v <= 0 || (int64_t)wm_tensor_numel(lg) % v) return wm_err(err, WM_ERR_INPUT, "logits have an unexpected shape");
    if (v != m->vocab || !m->last) {
        float *nl = realloc(m->last, (size_t)v * sizeof *nl);
        if (!nl) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        m->last = nl;
        m->vocab = v;
    }
    uint64_t off = wm_tensor_numel(lg) - (uint64_t)v;
    wm_convert(lg->dtype, (const uint8_t *)lg->data + off * wm_dtype_size(lg->dtype), WM_DT_FLOAT, m->last, (uint64_t)v);
    if (m->want_all) {
        uint64_t total_f = wm_tensor_numel(lg);
        if (total_f != (uint64_t)n * (uint64_t)v)
            return wm_err(err, WM_ERR_UNSUPPORTED, "the model returns logits for the last position only");
        if (total_f > m->all_cap) {
            float *na = realloc(m->all, (size_t)total_f * sizeof *na);
            if (!na) return wm_err(err, WM_ERR_NOMEM, "out of memory");
            m->all = na, m->all_cap = (size_t)total_f;
        }
        wm_convert(lg->dtype, lg->data, WM_DT_FLOAT, m->all, total_f);
    }
    if (!m->inplace) m->cur = 1 - m->cur;
    m->len = total;
    *logits = m->last;
    return WM_OK;
}

wm_status wm_clm_append_all(wm_clm *m, const int32_t *ids, size_t n, const float **all, wm_error *err) {
    const float *last;
    m->want_all = 1;
    wm_status st = wm_clm_append(m, ids, n, &last, err);
    m->want_all = 0;
    if (!st) *all = m->all;
    return st;
}
