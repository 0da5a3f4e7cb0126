/*
 * inspect_gguf.c - `winml inspect` of a GGUF (see inspect_hf.h): the file as
 * it is, then the checkpoint the builder makes of it. Reads the header only.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch.h"
#include "builder/inspect_hf.h"
#include "core/error.h"
#include "gguf/gguf_hf.h"

#define STR_SHOWN 160 /* bytes of a long string value shown */

/* A metadata value: scalars as they are, strings (cut at STR_SHOWN bytes), arrays as "ARRAY<TYPE>[n]" + a head. */
static void kv_json(wm_json *j, const wm_gguf_kv *kv) {
    char b[256];
    if (kv->type == WM_GGUF_STRING) {
        size_t n = kv->size < STR_SHOWN ? (size_t)kv->size : STR_SHOWN;
        while (n < kv->size && n && ((uint8_t)kv->data[n] & 0xc0) == 0x80) n--; /* whole characters */
        if (!wm_gguf_utf8_ok((const char *)kv->data, n)) {
            snprintf(b, sizeof b, "<%llu bytes, not valid UTF-8>", (unsigned long long)kv->size);
            wm_json_str(j, kv->key, b);
        } else if (n < kv->size) {
            char *t = malloc(n + 64);
            if (t) {
                memcpy(t, kv->data, n);
                snprintf(t + n, 64, "... (%llu bytes)", (unsigned long long)kv->size);
                wm_json_str(j, kv->key, t);
                free(t);
            }
        } else wm_json_strn(j, kv->key, (const char *)kv->data, n);
        return;
    }
    if (kv->type == WM_GGUF_ARRAY) {
        snprintf(b, sizeof b, "ARRAY<%s>[%llu]", wm_gguf_vtype_name(kv->elem), (unsigned long long)kv->n);
        if (kv->elem != WM_GGUF_STRING && kv->n && kv->n <= 8) {
            size_t u = strlen(b);
            for (uint64_t i = 0; i < kv->n && u < sizeof b; i++)
                u += (size_t)snprintf(b + u, sizeof b - u, "%s%.9g", i ? ", " : " ", wm_gguf_arr_num(kv, i));
        }
        wm_json_str(j, kv->key, b);
        return;
    }
    if (kv->type == WM_GGUF_BOOL) wm_json_bool(j, kv->key, kv->data[0]);
    else if (kv->type == WM_GGUF_F32 || kv->type == WM_GGUF_F64) wm_json_num(j, kv->key, wm_gguf_kv_num(kv));
    else if (kv->type == WM_GGUF_U64) {
        uint64_t v;
        memcpy(&v, kv->data, 8);
        wm_json_uint(j, kv->key, v);
    } else wm_json_int(j, kv->key, wm_gguf_arr_int(kv, 0));
}

typedef struct per_type {
    uint64_t tensors, params, bytes;
} per_type;

wm_status wm_gguf_inspect(const char *spec, int task, int list_tasks, wm_json *j, wm_error *err) {
    wm_gguf_file *f = NULL;
    wm_hf_checkpoint ck;
    wm_st_file *st = NULL;
    memset(&ck, 0, sizeof ck);
    wm_status s = wm_gguf_open(spec, &f, err);
    if (s) return s;
    wm_error cerr = {0};
    wm_status cs = wm_gguf_open_checkpoint(spec, &ck, &st, &cerr);
    wm_arch a;
    if (!cs && !list_tasks && (cs = wm_arch_resolve(&ck, st, task, &a, &cerr)) == WM_OK) wm_arch_free(&a);
    /* the builder's own checks, run once for both: a file it refuses as malformed (a key out of range, an expert
       stack whose dims disagree with the metadata) fails here too; one that is well formed but maps to nothing
       supported (an architecture or tensor type without a table) is described, with why in checkpoint_error */
    if (cs && (list_tasks || cs != WM_ERR_UNSUPPORTED)) {
        s = wm_err(err, cs, "%s", cerr.msg);
        goto done;
    }
    if (list_tasks) {
        s = wm_hf_list_tasks(&ck, st, task, "gguf", j, err);
        goto done;
    }
    wm_json_obj(j, NULL);
    wm_json_str(j, "format", "gguf");
    wm_json_str(j, "path", wm_gguf_path(f));
    if (wm_gguf_shard_count(f) > 1) {
        wm_json_arr(j, "files");
        for (size_t i = 0; i < wm_gguf_shard_count(f); i++) wm_json_str(j, NULL, wm_gguf_shard_path(f, i));
        wm_json_arr_end(j);
    }
    wm_json_uint(j, "version", wm_gguf_version(f));
    wm_json_uint(j, "alignment", wm_gguf_alignment(f));
    wm_json_uint(j, "file_bytes", wm_gguf_file_bytes(f));
    wm_json_uint(j, "metadata_count", wm_gguf_kv_count(f));
    wm_json_uint(j, "tensor_count", wm_gguf_tensor_count(f));
    wm_json_obj(j, "metadata");
    for (size_t i = 0; i < wm_gguf_kv_count(f); i++) kv_json(j, wm_gguf_kv_at(f, i));
    wm_json_obj_end(j);
    /* the tensor table, with the Hugging Face names when the file maps to a checkpoint */
    size_t nt = wm_gguf_tensor_count(f);
    const wm_st_tensor **hf = calloc(nt ? nt : 1, sizeof *hf);
    if (!hf) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    for (size_t i = 0; st && i < wm_st_count(st); i++) {
        const wm_st_tensor *t = wm_st_get(st, i);
        const wm_gguf_tensor *g = wm_gguf_st_origin(t);
        const wm_gguf_tensor *mine = g ? wm_gguf_find_tensor(f, g->name) : NULL; /* the checkpoint opened its own */
        size_t at = mine ? (size_t)(mine - wm_gguf_tensor_at(f, 0)) : 0;
        if (mine && !hf[at]) hf[at] = t; /* an expert stack's views: the first (expert 0) */
    }
    per_type types[64] = {{0}};
    uint64_t params = 0;
    wm_json_arr(j, "tensors");
    for (size_t i = 0; i < nt; i++) {
        const wm_gguf_tensor *t = wm_gguf_tensor_at(f, i);
        wm_json_obj(j, NULL);
        wm_json_str(j, "name", t->name);
        wm_json_str(j, "type", wm_ggml_type_name(t->type));
        wm_json_arr(j, "dims");
        for (uint32_t d = 0; d < t->n_dims; d++) wm_json_uint(j, NULL, t->ne[d]);
        wm_json_arr_end(j);
        wm_json_uint(j, "bytes", t->nbytes);
        if (hf[i]) {
            wm_json_str(j, "maps_to", hf[i]->name);
            const char *conv = wm_gguf_st_conversion(hf[i]);
            if (*conv) wm_json_str(j, "conversion", conv);
        }
        wm_json_obj_end(j);
        if (t->type < 64) {
            types[t->type].tensors++;
            types[t->type].params += t->numel;
            types[t->type].bytes += t->nbytes;
        }
        params += t->numel;
    }
    wm_json_arr_end(j);
    free(hf);
    wm_json_uint(j, "parameters", params);
    wm_json_obj(j, "by_type");
    for (uint32_t t = 0; t < 64; t++) {
        if (!types[t].tensors) continue;
        wm_json_obj(j, wm_ggml_type_name(t));
        wm_json_uint(j, "tensors", types[t].tensors);
        wm_json_uint(j, "parameters", types[t].params);
        wm_json_uint(j, "bytes", types[t].bytes);
        wm_json_bool(j, "supported", wm_ggml_type_supported(t));
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);
    if (cs) {
        wm_json_str(j, "checkpoint_error", cerr.msg); /* the file is described; what the builder would refuse, why */
    } else {
        wm_json_obj(j, "checkpoint");
        s = wm_hf_describe(&ck, st, task, j, err);
        wm_json_obj_end(j);
    }
    wm_json_obj_end(j);
done:
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    wm_gguf_close(f);
    return s;
}
