/* onnx_load.c - decoding a model file, validating tensors, resolving external data. */
#define _GNU_SOURCE
#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"
#include "onnx/onnx_model.h"
#include "onnx/onnx_out.h"

wm_onnx_model *wm_onnx_model_new(void) {
    wm_onnx_model *m = calloc(1, sizeof *m);
    if (!m) return NULL;
    wm_arena_init(&m->arena);
    m->proto = wm_pb_new(&m->arena, &wm_onnx_model_desc);
    if (!m->proto) {
        free(m);
        return NULL;
    }
    m->proto->ir_version = 10;
    return m;
}

void wm_onnx_free(wm_onnx_model *m) {
    if (!m) return;
    for (size_t i = 0; i < m->n_ext; i++) wm_unmap(&m->ext[i].map);
    wm_unmap(&m->file);
    wm_arena_free(&m->arena);
    free(m);
}

/* ------------------------------------------------------------- tensors */

wm_status wm_onnx_tensor_numel(const wm_onnx_tensor *t, uint64_t *numel, wm_error *err) {
    uint64_t n = 1;
    for (size_t i = 0; i < t->n_dims; i++) {
        if (t->dims[i] < 0)
            return wm_err(err, WM_ERR_INPUT, "dims[%zu] is negative (%lld)", i, (long long)t->dims[i]);
        if (!wm_mul_u64(n, (uint64_t)t->dims[i], &n))
            return wm_err(err, WM_ERR_INPUT, "the product of dims overflows 64 bits");
    }
    *numel = n;
    return WM_OK;
}

wm_bytes wm_onnx_tensor_bytes(const wm_onnx_tensor *t) {
    wm_bytes b = {NULL, 0};
    if (t->data_location == WM_ONNX_DATA_EXTERNAL) return t->ext;
    if (t->raw_data.p) return t->raw_data;
    switch (t->data_type) {
    case WM_DT_FLOAT:
    case WM_DT_COMPLEX64:
        if (t->n_float_data) b = (wm_bytes){(const uint8_t *)t->float_data, t->n_float_data * 4};
        break;
    case WM_DT_INT32:
        if (t->n_int32_data) b = (wm_bytes){(const uint8_t *)t->int32_data, t->n_int32_data * 4};
        break;
    case WM_DT_INT64:
        if (t->n_int64_data) b = (wm_bytes){(const uint8_t *)t->int64_data, t->n_int64_data * 8};
        break;
    case WM_DT_DOUBLE:
    case WM_DT_COMPLEX128:
        if (t->n_double_data) b = (wm_bytes){(const uint8_t *)t->double_data, t->n_double_data * 8};
        break;
    case WM_DT_UINT64:
        if (t->n_uint64_data) b = (wm_bytes){(const uint8_t *)t->uint64_data, t->n_uint64_data * 8};
        break;
    default: break;
    }
    return b;
}

/* --------------------------------------------------------- the visitor */

typedef struct visit {
    wm_onnx_tensor_fn fn;
    void *ctx;
    int depth;
} visit;

static wm_status visit_graph(visit *v, wm_onnx_graph *g);

static wm_status visit_sparse(visit *v, wm_onnx_sparse *s, const char *where) {
    wm_status st = WM_OK;
    if (s->values && (st = v->fn(v->ctx, s->values, where))) return st;
    if (s->indices && (st = v->fn(v->ctx, s->indices, where))) return st;
    return st;
}

static wm_status visit_nodes(visit *v, wm_onnx_node **nodes, size_t n) {
    wm_status st;
    for (size_t i = 0; i < n; i++) {
        wm_onnx_node *node = nodes[i];
        for (size_t k = 0; k < node->n_attribute; k++) {
            wm_onnx_attr *a = node->attribute[k];
            if (a->t && (st = v->fn(v->ctx, a->t, "attribute"))) return st;
            for (size_t j = 0; j < a->n_tensors; j++)
                if ((st = v->fn(v->ctx, a->tensors[j], "attribute"))) return st;
            if (a->sparse_tensor && (st = visit_sparse(v, a->sparse_tensor, "attribute"))) return st;
            for (size_t j = 0; j < a->n_sparse_tensors; j++)
                if ((st = visit_sparse(v, a->sparse_tensors[j], "attribute"))) return st;
            if (a->g && (st = visit_graph(v, a->g))) return st;
            for (size_t j = 0; j < a->n_graphs; j++)
                if ((st = visit_graph(v, a->graphs[j]))) return st;
        }
    }
    return WM_OK;
}

static wm_status visit_graph(visit *v, wm_onnx_graph *g) {
    wm_status st;
    for (size_t i = 0; i < g->n_initializer; i++)
        if ((st = v->fn(v->ctx, g->initializer[i], "initializer"))) return st;
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        if ((st = visit_sparse(v, g->sparse_initializer[i], "sparse initializer"))) return st;
    return visit_nodes(v, g->node, g->n_node);
}

wm_status wm_onnx_visit_tensors(wm_onnx_modelproto *mp, wm_onnx_tensor_fn fn, void *ctx) {
    visit v = {fn, ctx, 0};
    wm_status st;
    if (mp->graph && (st = visit_graph(&v, mp->graph))) return st;
    for (size_t i = 0; i < mp->n_functions; i++)
        if ((st = visit_nodes(&v, mp->functions[i]->node, mp->functions[i]->n_node))) return st;
    for (size_t i = 0; i < mp->n_training_info; i++) {
        wm_onnx_training_info *ti = mp->training_info[i];
        if (ti->initialization && (st = visit_graph(&v, ti->initialization))) return st;
        if (ti->algorithm && (st = visit_graph(&v, ti->algorithm))) return st;
    }
    return WM_OK;
}

/* ------------------------------------------------------ external data */

/* Strict unsigned decimal: digits only, no sign/space, fits in 64 bits. */
static int parse_u64(const char *s, uint64_t *out) {
    if (!s || !*s) return 0;
    uint64_t v = 0;
    for (const char *p = s; *p; p++) {
        if (*p < '0' || *p > '9') return 0;
        if (!wm_mul_u64(v, 10, &v) || !wm_add_u64(v, (uint64_t)(*p - '0'), &v)) return 0;
    }
    *out = v;
    return 1;
}

typedef struct load_ctx {
    wm_onnx_model *m;
    wm_error *err;
} load_ctx;

static wm_status map_external(wm_onnx_model *m, const char *location, wm_onnx_extfile **out, wm_error *err) {
    for (size_t i = 0; i < m->n_ext; i++)
        if (strcmp(m->ext[i].location, location) == 0) {
            *out = &m->ext[i];
            return WM_OK;
        }
    char real[PATH_MAX];
    wm_status s = wm_path_resolve_inside(m->dir, location, 1, real, sizeof real, err);
    if (s) return s;
    wm_map map;
    /* realpath() resolved every link, so the final component must not be one now */
    if ((s = wm_map_file(real, 1, &map, err))) return s;
    wm_onnx_extfile *e = wm_vec_push(&m->arena, &m->ext, &m->n_ext, sizeof *e);
    if (!e) {
        wm_unmap(&map);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    e->location = wm_arena_strdup(&m->arena, location);
    e->path = wm_arena_strdup(&m->arena, real);
    e->map = map;
    if (!e->location || !e->path) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    *out = e;
    return WM_OK;
}

static wm_status check_external(load_ctx *c, wm_onnx_tensor *t, uint64_t nbytes, int have_nbytes) {
    wm_error *err = c->err;
    const char *location = NULL, *offset_s = NULL, *length_s = NULL;
    for (size_t i = 0; i < t->n_external_data; i++) {
        const wm_onnx_sse *kv = t->external_data[i];
        const char *k = kv->key ? kv->key : "";
        const char **slot = strcmp(k, "location") == 0 ? &location
                            : strcmp(k, "offset") == 0 ? &offset_s
                            : strcmp(k, "length") == 0 ? &length_s
                                                       : NULL;
        if (strcmp(k, "checksum") == 0) continue;
        if (!slot) return wm_err(err, WM_ERR_INPUT, "external_data has an unknown key '%s'", k);
        if (*slot) return wm_err(err, WM_ERR_INPUT, "external_data has a duplicate key '%s'", k);
        *slot = kv->value ? kv->value : "";
    }
    if (!location) return wm_err(err, WM_ERR_INPUT, "external_data has no 'location'");
    wm_status s = wm_path_check_relative(location, err);
    if (s) return s;
    uint64_t offset = 0, length = 0;
    if (offset_s && !parse_u64(offset_s, &offset))
        return wm_err(err, WM_ERR_INPUT, "external_data offset '%s' is not an unsigned decimal", offset_s);
    if (length_s && !parse_u64(length_s, &length))
        return wm_err(err, WM_ERR_INPUT, "external_data length '%s' is not an unsigned decimal", length_s);
    if (length_s && have_nbytes && length != nbytes)
        return wm_err(err, WM_ERR_INPUT, "external_data length %llu does not match the %llu bytes its shape needs",
                      (unsigned long long)length, (unsigned long long)nbytes);
    if (t->raw_data.p) return wm_err(err, WM_ERR_INPUT, "tensor has both raw_data and external data");
    if (!c->m->dir) return WM_OK; /* in-memory model: nothing to resolve against */
    wm_onnx_extfile *e;
    if ((s = map_external(c->m, location, &e, err))) return s;
    uint64_t size = e->map.size;
    if (offset > size)
        return wm_err(err, WM_ERR_INPUT, "external_data offset %llu is past the end of '%s' (%llu bytes)",
                      (unsigned long long)offset, location, (unsigned long long)size);
    if (!length_s) length = size - offset;
    if (length > size - offset)
        return wm_err(err, WM_ERR_INPUT,
                      "external_data offset %llu + length %llu is past the end of '%s' (%llu bytes)",
                      (unsigned long long)offset, (unsigned long long)length, location, (unsigned long long)size);
    if (have_nbytes && length != nbytes)
        return wm_err(err, WM_ERR_INPUT, "external data of %llu bytes does not match the %llu bytes its shape needs",
                      (unsigned long long)length, (unsigned long long)nbytes);
    static const uint8_t empty[1];
    t->ext.p = e->map.data ? e->map.data + offset : empty;
    t->ext.n = (size_t)length;
    return WM_OK;
}

static wm_status check_tensor(void *ctx, wm_onnx_tensor *t, const char *where) {
    load_ctx *c = ctx;
    wm_error *err = c->err;
    uint64_t numel = 0, nbytes = 0;
    wm_status s = wm_onnx_tensor_numel(t, &numel, err);
    int has_data = t->raw_data.p || t->data_location == WM_ONNX_DATA_EXTERNAL;
    int have_nbytes = 0;
    if (!s && has_data) {
        if (!wm_dtype_valid(t->data_type) || t->data_type == WM_DT_UNDEFINED)
            s = wm_err(err, WM_ERR_INPUT, "data_type %d is not a known ONNX type", (int)t->data_type);
        else if (t->data_type == WM_DT_STRING)
            s = t->raw_data.p ? wm_err(err, WM_ERR_INPUT, "string tensor has raw_data") : WM_OK;
        else if (!wm_dtype_nbytes(t->data_type, numel, &nbytes))
            s = wm_err(err, WM_ERR_INPUT, "byte size of %llu %s elements overflows", (unsigned long long)numel,
                       wm_dtype_name(t->data_type));
        else
            have_nbytes = !t->segment;
    }
    if (!s && t->raw_data.p && have_nbytes && t->raw_data.n != nbytes)
        s = wm_err(err, WM_ERR_INPUT, "raw_data has %zu bytes but its shape of %llu %s elements needs %llu",
                   t->raw_data.n, (unsigned long long)numel, wm_dtype_name(t->data_type),
                   (unsigned long long)nbytes);
    if (!s && t->data_location == WM_ONNX_DATA_EXTERNAL) s = check_external(c, t, nbytes, have_nbytes);
    if (!s && t->data_location != WM_ONNX_DATA_EXTERNAL && t->n_external_data)
        s = wm_err(err, WM_ERR_INPUT, "external_data entries on a tensor whose data_location is not EXTERNAL");
    if (s) wm_err_prefix(err, "tensor '%s' (%s)", t->name ? t->name : "", where);
    return s;
}

static wm_status finish_load(wm_onnx_model *m, const uint8_t *buf, size_t n, wm_error *err) {
    void *proto;
    wm_status s = wm_pb_decode(&m->arena, &wm_onnx_model_desc, buf, n, &proto, err);
    if (s) return s;
    m->proto = proto;
    load_ctx c = {m, err};
    return wm_onnx_visit_tensors(m->proto, check_tensor, &c);
}

wm_status wm_onnx_load(const char *path, wm_onnx_model **out, wm_error *err) {
    *out = NULL;
    wm_onnx_model *m = calloc(1, sizeof *m);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    wm_arena_init(&m->arena);
    char dir[PATH_MAX];
    wm_path_dirname(path, dir, sizeof dir);
    m->path = wm_arena_strdup(&m->arena, path);
    m->dir = wm_arena_strdup(&m->arena, dir);
    wm_status s = !m->path || !m->dir ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
    if (!s) s = wm_map_file(path, 0, &m->file, err);
    if (!s && m->file.size == 0) s = wm_err(err, WM_ERR_INPUT, "%s: empty file, not an ONNX model", path);
    if (!s) {
        s = finish_load(m, m->file.data, m->file.size, err);
        if (s) wm_err_prefix(err, "%s", path);
    }
    if (!s && !m->proto->graph) s = wm_err(err, WM_ERR_INPUT, "%s: ModelProto has no graph", path);
    if (!s && (s = wm_onnx_record_check(m, err))) wm_err_prefix(err, "%s", path);
    if (s) {
        wm_onnx_free(m);
        return s;
    }
    *out = m;
    return WM_OK;
}

wm_status wm_onnx_load_buffer(const void *buf, size_t n, wm_onnx_model **out, wm_error *err) {
    *out = NULL;
    wm_onnx_model *m = calloc(1, sizeof *m);
    if (!m) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_arena_init(&m->arena);
    wm_status s = finish_load(m, buf, n, err);
    if (s) {
        wm_onnx_free(m);
        return s;
    }
    *out = m;
    return WM_OK;
}
