#include "onnx/onnx_info.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "onnx/dtype.h"

typedef struct op_count {
    const char *domain, *op;
    uint64_t n;
} op_count;

typedef struct dtype_stat {
    uint64_t count, bytes, tensors;
} dtype_stat;

static int by_count(const void *a, const void *b) {
    const op_count *x = a, *y = b;
    if (x->n != y->n) return x->n < y->n ? 1 : -1;
    int d = strcmp(x->domain, y->domain);
    return d ? d : strcmp(x->op, y->op);
}

static uint64_t count_subgraph_nodes(const wm_onnx_graph *g, int depth);

static uint64_t attr_nodes(const wm_onnx_node *n, int depth) {
    uint64_t t = 0;
    if (depth > 64) return 0;
    for (size_t k = 0; k < n->n_attribute; k++) {
        const wm_onnx_attr *a = n->attribute[k];
        if (a->g) t += count_subgraph_nodes(a->g, depth + 1);
        for (size_t i = 0; i < a->n_graphs; i++) t += count_subgraph_nodes(a->graphs[i], depth + 1);
    }
    return t;
}

static uint64_t count_subgraph_nodes(const wm_onnx_graph *g, int depth) {
    uint64_t t = g->n_node;
    for (size_t i = 0; i < g->n_node; i++) t += attr_nodes(g->node[i], depth);
    return t;
}

void wm_onnx_type_str(const wm_onnx_type *t, char *buf, size_t n) {
    if (!t) {
        snprintf(buf, n, "?");
        return;
    }
    const wm_onnx_type_tensor *tt = t->tensor_type ? t->tensor_type : t->sparse_tensor_type;
    if (t->sequence_type || t->optional_type) {
        char inner[256];
        const wm_onnx_type_elem *e = t->sequence_type ? t->sequence_type : t->optional_type;
        wm_onnx_type_str(e->elem_type, inner, sizeof inner);
        snprintf(buf, n, "%s(%s)", t->sequence_type ? "seq" : "optional", inner);
        return;
    }
    if (t->map_type) {
        char inner[256];
        wm_onnx_type_str(t->map_type->value_type, inner, sizeof inner);
        snprintf(buf, n, "map(%s,%s)", wm_dtype_name(t->map_type->key_type), inner);
        return;
    }
    if (!tt) {
        snprintf(buf, n, t->opaque_type ? "opaque" : "?");
        return;
    }
    size_t used = (size_t)snprintf(buf, n, "%s%s", t->sparse_tensor_type ? "sparse " : "", wm_dtype_name(tt->elem_type));
    if (!tt->shape || used >= n) return;
    used += (size_t)snprintf(buf + used, n - used, "[");
    for (size_t i = 0; i < tt->shape->n_dim && used < n; i++) {
        const wm_onnx_dim *d = tt->shape->dim[i];
        const char *sep = i ? "," : "";
        if (d->dim_param) used += (size_t)snprintf(buf + used, n - used, "%s%s", sep, d->dim_param);
        else if ((d->pb.has & 1) || d->dim_value) used += (size_t)snprintf(buf + used, n - used, "%s%lld", sep, (long long)d->dim_value);
        else used += (size_t)snprintf(buf + used, n - used, "%s?", sep);
    }
    if (used < n) snprintf(buf + used, n - used, "]");
}

static void io_json(wm_json *j, const char *key, wm_onnx_value_info **v, size_t n, const wm_onnx_graph *g) {
    wm_json_arr(j, key);
    for (size_t i = 0; i < n; i++) {
        /* graph inputs that are initializers are weights, not model inputs */
        int is_init = 0;
        for (size_t k = 0; g && k < g->n_initializer && !is_init; k++)
            is_init = g->initializer[k]->name && v[i]->name && !strcmp(g->initializer[k]->name, v[i]->name);
        if (is_init) continue;
        wm_json_obj(j, NULL);
        wm_json_str(j, "name", v[i]->name ? v[i]->name : "");
        const wm_onnx_type *t = v[i]->type;
        const wm_onnx_type_tensor *tt = t ? (t->tensor_type ? t->tensor_type : t->sparse_tensor_type) : NULL;
        if (tt) {
            wm_json_str(j, "dtype", wm_dtype_name(tt->elem_type));
            if (tt->shape) {
                wm_json_arr(j, "shape");
                for (size_t d = 0; d < tt->shape->n_dim; d++) {
                    const wm_onnx_dim *dim = tt->shape->dim[d];
                    if (dim->dim_param) wm_json_str(j, NULL, dim->dim_param);
                    else if ((dim->pb.has & 1) || dim->dim_value) wm_json_int(j, NULL, dim->dim_value);
                    else wm_json_null(j, NULL);
                }
                wm_json_arr_end(j);
            } else {
                wm_json_null(j, "shape");
            }
        } else {
            char buf[512];
            wm_onnx_type_str(t, buf, sizeof buf);
            wm_json_str(j, "dtype", buf);
            wm_json_null(j, "shape");
        }
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
}

static void add_params(dtype_stat *st, const wm_onnx_tensor *t, uint64_t *count, uint64_t *bytes) {
    uint64_t numel = 1, nb = 0;
    for (size_t i = 0; i < t->n_dims; i++)
        if (t->dims[i] < 0 || !wm_mul_u64(numel, (uint64_t)t->dims[i], &numel)) return;
    if (!wm_dtype_nbytes(t->data_type, numel, &nb)) nb = 0;
    int dt = wm_dtype_valid(t->data_type) ? t->data_type : 0;
    st[dt].count += numel;
    st[dt].bytes += nb;
    st[dt].tensors++;
    *count += numel;
    *bytes += nb;
}

wm_status wm_onnx_info_json(const wm_onnx_model *m, wm_json *j, wm_error *err) {
    const wm_onnx_modelproto *mp = m->proto;
    const wm_onnx_graph *g = mp->graph;
    (void)err;
    wm_json_obj(j, NULL);
    wm_json_str(j, "format", "onnx");
    if (m->path) wm_json_str(j, "path", m->path);
    wm_json_int(j, "ir_version", mp->ir_version);
    wm_json_str(j, "producer_name", mp->producer_name ? mp->producer_name : "");
    wm_json_str(j, "producer_version", mp->producer_version ? mp->producer_version : "");
    wm_json_str(j, "domain", mp->domain ? mp->domain : "");
    wm_json_int(j, "model_version", mp->model_version);
    wm_json_str(j, "graph_name", g && g->name ? g->name : "");
    wm_json_obj(j, "opset_imports");
    for (size_t i = 0; i < mp->n_opset_import; i++) {
        const char *d = mp->opset_import[i]->domain;
        wm_json_int(j, d && *d ? d : "ai.onnx", mp->opset_import[i]->version);
    }
    wm_json_obj_end(j);
    io_json(j, "inputs", g->input, g->n_input, g);
    io_json(j, "outputs", g->output, g->n_output, NULL);
    wm_json_uint(j, "node_count", g->n_node);
    wm_json_uint(j, "subgraph_node_count", count_subgraph_nodes(g, 0) - g->n_node);

    op_count *ops = calloc(g->n_node ? g->n_node : 1, sizeof *ops);
    if (!ops) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t nops = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const char *dom = g->node[i]->domain ? g->node[i]->domain : "";
        if (!strcmp(dom, "ai.onnx")) dom = "";
        const char *op = g->node[i]->op_type ? g->node[i]->op_type : "";
        size_t k = 0;
        while (k < nops && (strcmp(ops[k].op, op) || strcmp(ops[k].domain, dom))) k++;
        if (k == nops) ops[nops++] = (op_count){dom, op, 0};
        ops[k].n++;
    }
    qsort(ops, nops, sizeof *ops, by_count);
    wm_json_obj(j, "op_counts");
    for (size_t k = 0; k < nops; k++) {
        char key[512];
        if (*ops[k].domain) snprintf(key, sizeof key, "%s:%s", ops[k].domain, ops[k].op);
        else snprintf(key, sizeof key, "%s", ops[k].op);
        wm_json_uint(j, key, ops[k].n);
    }
    wm_json_obj_end(j);
    free(ops);

    dtype_stat st[WM_DT_COUNT];
    memset(st, 0, sizeof st);
    uint64_t count = 0, bytes = 0;
    for (size_t i = 0; i < g->n_initializer; i++) add_params(st, g->initializer[i], &count, &bytes);
    for (size_t i = 0; i < g->n_sparse_initializer; i++)
        if (g->sparse_initializer[i]->values) add_params(st, g->sparse_initializer[i]->values, &count, &bytes);
    wm_json_uint(j, "initializer_count", g->n_initializer);
    wm_json_uint(j, "sparse_initializer_count", g->n_sparse_initializer);
    wm_json_uint(j, "parameter_count", count);
    wm_json_uint(j, "parameter_bytes", bytes);
    wm_json_obj(j, "parameters_by_dtype");
    for (int d = 0; d < WM_DT_COUNT; d++) {
        if (!st[d].tensors) continue;
        wm_json_obj(j, wm_dtype_name(d));
        wm_json_uint(j, "tensors", st[d].tensors);
        wm_json_uint(j, "count", st[d].count);
        wm_json_uint(j, "bytes", st[d].bytes);
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);

    wm_json_arr(j, "external_data");
    for (size_t i = 0; i < m->n_ext; i++) {
        wm_json_obj(j, NULL);
        wm_json_str(j, "location", m->ext[i].location);
        wm_json_uint(j, "size_bytes", m->ext[i].map.size);
        uint64_t nt = 0, tb = 0;
        for (size_t k = 0; k < g->n_initializer; k++) {
            const wm_onnx_tensor *t = g->initializer[k];
            if (t->data_location == WM_ONNX_DATA_EXTERNAL && t->ext.p >= m->ext[i].map.data &&
                t->ext.p < m->ext[i].map.data + m->ext[i].map.size + (m->ext[i].map.size == 0)) {
                nt++;
                tb += t->ext.n;
            }
        }
        wm_json_uint(j, "initializers", nt);
        wm_json_uint(j, "initializer_bytes", tb);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    wm_json_uint(j, "function_count", mp->n_functions);
    wm_json_obj(j, "metadata");
    for (size_t i = 0; i < mp->n_metadata_props; i++)
        wm_json_str(j, mp->metadata_props[i]->key ? mp->metadata_props[i]->key : "", mp->metadata_props[i]->value);
    wm_json_obj_end(j);
    wm_json_obj_end(j);
    return j->oom ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
}
