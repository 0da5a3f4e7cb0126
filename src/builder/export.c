/*
 * export.c - the export stage (see export.h): model + graph setup, graph
 * inputs and outputs from the recipe, the weight sink chosen by size, and
 * the atomic write (data file first, model.onnx last).
 */
#define _GNU_SOURCE
#include "builder/export.h"

#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "builder/model_impl.h"
#include "core/sha256.h"
#include "core/error.h"
#include "core/file.h"
#include "core/output.h"
#include "onnx/onnx_out.h"
#include "onnx/dtype.h"

size_t wm_export_output_names(const wm_arch *a, const wm_recipe *r, char (*names)[96], size_t cap) {
    return wm_model_outputs(a, r, names, cap);
}

/* IR version an opset needs (onnx's table): 17-18 -> 8, 19-20 -> 9, 21-22 -> 10, 23+ -> 11. */
static int64_t ir_for_opset(int opset) {
    return opset >= 23 ? 11 : opset >= 21 ? 10 : opset >= 19 ? 9 : 8;
}

/* Names a symbolic dim of the graph input or output name (value v's type). */
static wm_status set_dims(wm_graph *g, const char *name, int output, const wm_io_dim *dims, size_t rank, wm_error *err) {
    wm_value *v = wm_graph_find_value(g, name);
    wm_onnx_value_info *vi = v ? (output ? v->output : v->input) : NULL;
    if (!vi || !vi->type || !vi->type->tensor_type || !vi->type->tensor_type->shape)
        return wm_err(err, WM_ERR_INTERNAL, "graph io '%s' has no shape", name);
    wm_onnx_shape *sh = vi->type->tensor_type->shape;
    for (size_t i = 0; i < rank && i < sh->n_dim; i++) {
        if (dims[i].v >= 0) continue;
        wm_onnx_dim *d = sh->dim[i];
        if (!(d->dim_param = wm_arena_strdup(&wm_graph_model(g)->arena, dims[i].name)))
            return wm_err(err, WM_ERR_NOMEM, "out of memory");
        d->dim_value = 0;
        wm_pb_clear_has(&wm_onnx_dim_desc, d, 1);
    }
    return WM_OK;
}

static wm_status add_io(wm_graph *g, const char *name, int output, int32_t dt, const wm_io_dim *dims, size_t rank,
                        wm_error *err) {
    int64_t d[WM_IO_MAX_RANK];
    for (size_t i = 0; i < rank; i++) d[i] = dims[i].v;
    wm_status s = output ? wm_graph_add_output(g, name, dt, d, rank, err) : wm_graph_add_input(g, name, dt, d, rank, err);
    return s ? s : set_dims(g, name, output, dims, rank, err);
}

static wm_io_dim dim_v(int64_t v) {
    wm_io_dim d = {v, ""};
    return d;
}

wm_io_spec wm_float_spec(const char *name, size_t rank, const wm_io_dim *d) {
    wm_io_spec s;
    memset(&s, 0, sizeof s);
    snprintf(s.name, sizeof s.name, "%s", name);
    s.dtype = WM_DT_FLOAT;
    s.rank = rank;
    memcpy(s.dims, d, rank * sizeof *d);
    return s;
}

size_t wm_export_output_specs(const wm_arch *a, const wm_recipe *r, wm_io_spec *out, size_t cap) {
    if (a->graph == WM_GRAPH_S2S && a->s2s_part) return wm_s2s_part_outputs(a, r, out, cap);
    if (a->graph != WM_GRAPH_TEXT) return wm_vis_output_specs(a, r, out, cap);
    const wm_io_spec *ids = wm_recipe_input(r, "input_ids");
    wm_io_dim B = ids ? ids->dims[0] : dim_v(1), S = ids ? ids->dims[1] : dim_v(1);
    size_t n = 0;
#define PUT(...) do { wm_io_spec s_ = wm_float_spec(__VA_ARGS__); if (n < cap) out[n] = s_; n++; } while (0)
    switch (a->task) {
    case WM_TASK_TEXT_GENERATION: {
        const wm_io_spec *m = wm_recipe_input(r, "attention_mask");
        wm_io_dim T = m ? m->dims[1] : dim_v(1);
        wm_io_dim lg[3] = {B, S, dim_v(a->V)}, kv[4] = {B, dim_v(a->kvh), T, dim_v(a->hd)};
        PUT("logits", 3, lg);
        for (int64_t i = 0; i < a->L; i++) {
            char nm[96];
            snprintf(nm, sizeof nm, "present.%lld.key", (long long)i);
            PUT(nm, 4, kv);
            snprintf(nm, sizeof nm, "present.%lld.value", (long long)i);
            PUT(nm, 4, kv);
        }
        break;
    }
    case WM_TASK_TEXT_CLASSIFICATION: {
        wm_io_dim d[2] = {B, dim_v(a->labels)};
        PUT("logits", 2, d);
        break;
    }
    case WM_TASK_TOKEN_CLASSIFICATION: {
        wm_io_dim d[3] = {B, S, dim_v(a->labels)};
        PUT("logits", 3, d);
        break;
    }
    case WM_TASK_FILL_MASK: {
        wm_io_dim d[3] = {B, S, dim_v(a->V)};
        PUT("logits", 3, d);
        break;
    }
    case WM_TASK_QUESTION_ANSWERING: {
        wm_io_dim d[2] = {B, S};
        PUT("start_logits", 2, d);
        PUT("end_logits", 2, d);
        break;
    }
    default: {
        wm_io_dim d[3] = {B, S, dim_v(a->H)}, e[2] = {B, dim_v(a->H)};
        PUT("last_hidden_state", 3, d);
        if (r->pooling != WM_POOL_NONE) PUT("sentence_embedding", 2, e);
        break;
    }
    }
#undef PUT
    return n;
}

static wm_status add_outputs(wm_graph *g, const wm_arch *a, const wm_recipe *r, wm_error *err) {
    size_t cap = 8 + 2 * (size_t)a->L;
    wm_io_spec *o = calloc(cap, sizeof *o);
    if (!o) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = wm_export_output_specs(a, r, o, cap);
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && !s; i++) {
        int listed = !r->n_outputs || a->graph == WM_GRAPH_TEXT; /* image models: the recipe's subset (checked) */
        for (size_t k = 0; !listed && k < r->n_outputs; k++) listed = !strcmp(r->outputs[k], o[i].name);
        if (listed) s = add_io(g, o[i].name, 1, o[i].dtype, o[i].dims, o[i].rank, err);
    }
    free(o);
    return s;
}

/* The op histogram and counts of the finished graph. */
static void tally(const wm_onnx_graph *g, wm_export_result *res) {
    res->n_nodes = g->n_node;
    res->n_initializers = g->n_initializer;
    res->n_ops = 0;
    for (size_t i = 0; i < g->n_node; i++) {
        const char *op = g->node[i]->op_type;
        size_t k = 0;
        while (k < res->n_ops && strcmp(res->ops[k].op, op)) k++;
        if (k == res->n_ops) {
            if (k == WM_EXPORT_MAX_OPS) continue;
            snprintf(res->ops[k].op, sizeof res->ops[k].op, "%s", op);
            res->ops[k].n = 0;
            res->n_ops++;
        }
        res->ops[k].n++;
    }
}

static int fd_write(void *ctx, const void *p, size_t n) { return wm_write_full(*(int *)ctx, p, n); }

/* Encodes the model (weights already external in data file loc, recorded in it) and renames it to path. */
static wm_status write_model(wm_onnx_model *m, const char *path, const char *data_path, const char *loc,
                             wm_error *err) {
    char hex[65], tmp[4200];
    int dfd = open(data_path, O_RDONLY | O_NOFOLLOW | O_CLOEXEC), fd, slot;
    struct stat st;
    if (dfd < 0 || fstat(dfd, &st) != 0) {
        if (dfd >= 0) close(dfd);
        return wm_err(err, WM_ERR_IO, "%s: %s", data_path, strerror(errno));
    }
    wm_onnx_sse **props;
    size_t n_props;
    wm_status s = wm_onnx_data_fingerprint(dfd, (uint64_t)st.st_size, hex, err);
    close(dfd);
    if (!s) s = wm_onnx_record_set(m->proto, &m->arena, loc, (uint64_t)st.st_size, hex, &props, &n_props, err);
    if (s) return s;
    uint64_t size = wm_pb_size(&wm_onnx_model_desc, m->proto);
    if (size > WM_PB_MAX_MESSAGE)
        return wm_err(err, WM_ERR_INPUT, "%s: the model would be %llu bytes, over the protobuf limit", path,
                      (unsigned long long)size);
    if ((s = wm_tmp_create(path, tmp, sizeof tmp, &fd, &slot, err))) return s;
    wm_pb_sink sink = {fd_write, &fd};
    if (wm_pb_encode(&sink, &wm_onnx_model_desc, m->proto) || wm_durable_sync(fd) != 0)
        s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (close(fd) != 0 && !s) s = wm_err(err, WM_ERR_IO, "%s: write failed: %s", path, strerror(errno));
    if (!s) s = wm_tmp_commit(tmp, &slot, path, err);
    if (s) wm_tmp_discard(tmp, &slot);
    return s;
}

void wm_export_result_free(wm_export_result *r) {
    wm_wsrc_recs_free(r->srcs, r->n_srcs);
    r->srcs = NULL;
    r->n_srcs = 0;
}

/* The graph IO of an encoder-decoder part (specs from model_s2s.c). */
static wm_status add_s2s_io(wm_graph *g, const wm_arch *a, int part, int outputs, wm_error *err) {
    size_t cap = 8 + 4 * (size_t)a->dec_L;
    wm_io_spec *sp = calloc(cap, sizeof *sp);
    if (!sp) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = wm_s2s_io(a, part, outputs, sp, cap);
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && i < cap && !s; i++) s = add_io(g, sp[i].name, outputs, sp[i].dtype, sp[i].dims, sp[i].rank, err);
    free(sp);
    return s;
}

/* The outputs of a part recipe's graph (specs from model_s2s.c). */
static wm_status add_part_outputs(wm_graph *g, const wm_arch *a, const wm_recipe *r, wm_error *err) {
    size_t cap = 2 + 2 * (size_t)a->dec_L;
    wm_io_spec *sp = calloc(cap, sizeof *sp);
    if (!sp) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    size_t n = wm_s2s_part_outputs(a, r, sp, cap);
    wm_status s = WM_OK;
    for (size_t i = 0; i < n && i < cap && !s; i++) s = add_io(g, sp[i].name, 1, sp[i].dtype, sp[i].dims, sp[i].rank, err);
    free(sp);
    return s;
}

/* One graph into dir/fname (+ fname.data): the recipe's model (part -1) or an encoder-decoder part. */
static wm_status export_file(const wm_arch *a, const wm_recipe *r, const wm_st_file *st, const wm_export_opts *o,
                             const char *dir, const char *fname, int part, wm_export_result *res, wm_error *err) {
    memset(res, 0, sizeof *res);
    if (!r->has_export) return wm_err(err, WM_ERR_USAGE, "recipe: the export section is null: nothing to export");
    if (!o->random && !st) return wm_err(err, WM_ERR_INPUT, "no weights to export (use --random-weights)");
    char model_path[4096], data_path[4096], data_tmp[4200], data_name[300];
    snprintf(model_path, sizeof model_path, "%s/%s", dir, fname);
    snprintf(data_path, sizeof data_path, "%s/%s.data", dir, fname);
    snprintf(data_name, sizeof data_name, "%s.data", fname);
    wm_status s0 = wm_tmp_name(data_path, data_tmp, sizeof data_tmp, err);
    if (s0) return s0;
    uint64_t thr = o->external_threshold ? o->external_threshold : 100ull << 20;
    uint64_t bytes = a->n_params * 4;
    int external = bytes >= thr;

    wm_onnx_model *m = wm_onnx_model_new();
    wm_graph *g = NULL;
    wm_wsink sink;
    memset(&sink, 0, sizeof sink);
    sink.fd = -1;
    wm_gb b;
    memset(&b, 0, sizeof b);
    wm_status s = WM_OK;
    if (!m || !(m->proto->graph = wm_pb_new(&m->arena, &wm_onnx_graph_desc))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    m->proto->ir_version = ir_for_opset(r->opset);
    m->proto->producer_name = wm_arena_strdup(&m->arena, "winml");
    m->proto->producer_version = wm_arena_strdup(&m->arena, WM_VERSION_STRING);
    m->proto->graph->name = wm_arena_strdup(&m->arena, "main_graph");
    wm_onnx_opset *op = wm_pb_new(&m->arena, &wm_onnx_opset_desc);
    wm_onnx_opset **slot = op ? wm_vec_push(&m->arena, &m->proto->opset_import, &m->proto->n_opset_import, sizeof *slot) : NULL;
    if (!slot || !(op->domain = wm_arena_strdup(&m->arena, ""))) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    op->version = r->opset;
    *slot = op;
    if ((s = wm_graph_open(m, m->proto->graph, &g, err))) goto done;
    if ((s = wm_wsink_init(&sink, m, external ? data_tmp : NULL, data_name, err))) goto done;
    sink.release_source = o->release_source && st && part < 0; /* the parts of one checkpoint read it again */
    int recipe_io = part < 0 || part > WM_S2S_PARTS; /* a part recipe's inputs are the recipe's */
    if (!recipe_io) s = add_s2s_io(g, a, part, 0, err);
    for (size_t i = 0; recipe_io && i < r->n_inputs && !s; i++) {
        const wm_io_spec *io = &r->inputs[i];
        s = add_io(g, io->name, 0, io->dtype, io->dims, io->rank, err);
    }
    if (s) goto done;

    gb_init(&b, m, g, &sink, r->opset, err);
    b.random = o->random;
    b.seed = o->seed;
    const wm_io_spec *ids = wm_recipe_input(r, part == WM_S2S_PART_DECODER ? "decoder_input_ids" : "input_ids");
    wm_model_ctx c = {.a = a, .r = r, .ids_dtype = ids ? ids->dtype : WM_DT_INT64, .progress = o->progress, .st = st};
    s = part >= 0                 ? wm_model_s2s(&b, &c, part)
        : a->graph != WM_GRAPH_TEXT ? wm_model_vision(&b, &c)
        : a->kind == WM_DECODER   ? wm_model_decoder(&b, &c)
                                  : wm_model_encoder(&b, &c);
    if (s || (s = part < 0 ? add_outputs(g, a, r, err) : recipe_io ? add_part_outputs(g, a, r, err)
                                                                  : add_s2s_io(g, a, part, 1, err)))
        goto done; /* after the nodes: outputs are renamed into place */
    if ((s = wm_graph_check(g, err))) goto done;
    if ((s = wm_wsink_finish(&sink, res->data_sha, err))) goto done;
    res->data_state = sink.sha;
    res->external = external;
    res->param_bytes = sink.param_bytes;
    res->n_params = sink.param_bytes / 4;
    res->data_bytes = sink.pos;
    res->srcs = sink.recs, res->n_srcs = sink.n_recs; /* taken: the quant stage reads where each weight came from */
    sink.recs = NULL, sink.n_recs = 0;
    tally(m->proto->graph, res);
    if (external) {
        if (rename(data_tmp, data_path) != 0) {
            s = wm_err(err, WM_ERR_IO, "%s: rename failed: %s", data_path, strerror(errno));
            goto done;
        }
        if ((s = write_model(m, model_path, data_path, data_name, err))) {
            unlink(data_path);
            goto done;
        }
    } else {
        wm_onnx_save_opts so;
        wm_onnx_save_opts_default(&so);
        so.external = WM_EXTDATA_NEVER;
        if ((s = wm_onnx_save(m, model_path, &so, err))) goto done;
    }
    int64_t sz = wm_file_size(model_path);
    res->model_bytes = sz > 0 ? (uint64_t)sz : 0;
    s = wm_sha256_file(model_path, res->model_sha, err);
done:
    wm_wsink_close(&sink); /* safe on a sink that never started */
    unlink(data_tmp);
    gb_free(&b);
    wm_graph_free(g);
    wm_onnx_free(m);
    return s;
}

wm_status wm_export_model(const wm_arch *a, const wm_recipe *r, const wm_st_file *st, const wm_export_opts *o,
                          const char *dir, wm_export_result *res, wm_error *err) {
    if (a->graph == WM_GRAPH_S2S && !a->s2s_part)
        return wm_err(err, WM_ERR_INTERNAL, "an encoder-decoder exports as three files (wm_export_s2s)");
    return export_file(a, r, st, o, dir, "model.onnx", a->graph == WM_GRAPH_S2S ? a->s2s_part : -1, res, err);
}

wm_status wm_export_s2s(const wm_arch *a, const wm_recipe *r, const wm_st_file *st, const wm_export_opts *o,
                        const char *dir, wm_export_result *res, wm_error *err) {
    memset(res, 0, sizeof *res);
    wm_status s = WM_OK;
    int p = 0;
    for (; p < WM_S2S_PARTS && !s; p++) {
        wm_export_result one;
        s = export_file(a, r, st, o, dir, wm_s2s_part_file(p), p, &one, err);
        if (s) break;
        if (p == 0) { /* the encoder's hashes and records; the sums over all three */
            *res = one;
            res->model_sha[0] = res->data_sha[0] = 0;
            continue;
        }
        res->n_nodes += one.n_nodes;
        res->n_initializers += one.n_initializers;
        res->param_bytes += one.param_bytes;
        res->n_params += one.n_params;
        res->external |= one.external;
        for (size_t k = 0; k < one.n_ops; k++) {
            size_t i = 0;
            while (i < res->n_ops && strcmp(res->ops[i].op, one.ops[k].op)) i++;
            if (i == res->n_ops) {
                if (i == WM_EXPORT_MAX_OPS) continue;
                res->ops[res->n_ops++] = one.ops[k];
            } else res->ops[i].n += one.ops[k].n;
        }
        wm_export_result_free(&one);
    }
    if (s) { /* nothing half-written: the parts already written are removed */
        for (int q = 0; q < p; q++) {
            char path[4400];
            snprintf(path, sizeof path, "%s/%s", dir, wm_s2s_part_file(q));
            unlink(path);
            snprintf(path, sizeof path, "%s/%s.data", dir, wm_s2s_part_file(q));
            unlink(path);
        }
        wm_export_result_free(res);
    }
    return s;
}
