/*
 * inspect_hf.c - `winml inspect` for a Hugging Face checkpoint folder:
 * what the builder will make of it, from config.json and (when present)
 * the safetensors headers only; no weight byte is read.
 */
#include "builder/inspect_hf.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "builder/arch.h"
#include "builder/export.h"
#include "builder/model_impl.h"
#include "builder/recipe.h"
#include "core/error.h"
#include "hf/tokenizer.h"
#include "onnx/dtype.h"

static void shape_json(wm_json *j, const wm_io_spec *s) {
    wm_json_obj(j, NULL);
    wm_json_str(j, "name", s->name);
    wm_json_str(j, "dtype", wm_dtype_name(s->dtype));
    wm_json_arr(j, "shape");
    for (size_t k = 0; k < s->rank; k++) {
        if (s->dims[k].v >= 0) wm_json_int(j, NULL, s->dims[k].v);
        else wm_json_str(j, NULL, s->dims[k].name);
    }
    wm_json_arr_end(j);
    wm_json_obj_end(j);
}

static void ids_json(wm_json *j, const char *key, const wm_hf_ids *ids) {
    if (!ids->n) {
        wm_json_null(j, key);
        return;
    }
    wm_json_arr(j, key);
    for (size_t i = 0; i < ids->n; i++) wm_json_int(j, NULL, ids->v[i]);
    wm_json_arr_end(j);
}

/* "tasks": the tasks the checkpoint serves; "task_groups": for each, the reference's task names it serves
 * (feature-extraction: sentence-similarity, pooled; text-classification: zero-shot-classification, text-ranking). */
static void tasks_json(wm_json *j, const int *tasks, size_t nt) {
    wm_json_arr(j, "tasks");
    for (size_t i = 0; i < nt; i++) wm_json_str(j, NULL, wm_task_name(tasks[i]));
    wm_json_arr_end(j);
    wm_json_obj(j, "task_groups");
    for (size_t i = 0; i < nt; i++) {
        const char *names[16];
        size_t nn = wm_recipe_task_names_for(tasks[i], names, 16);
        wm_json_arr(j, wm_task_name(tasks[i]));
        for (size_t k = 0; k < nn; k++) wm_json_str(j, NULL, names[k]);
        wm_json_arr_end(j);
    }
    wm_json_obj_end(j);
}

/* Writes the keys of a checkpoint's description into the open object j (everything but "format" / "path"). */
wm_status wm_hf_describe(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, wm_json *j, wm_error *err) {
    wm_arch a;
    wm_recipe r;
    memset(&r, 0, sizeof r);
    wm_status s = wm_arch_resolve(ck, st, task, &a, err);
    if (s) return s;
    int tasks[WM_TASK_COUNT];
    size_t nt = wm_arch_tasks(&a, tasks);
    if ((s = wm_recipe_default(&a, WM_PREC_FP32, NULL, NULL, &r, err))) goto done;
    const wm_hf_config *c = &ck->config;
    wm_json_str(j, "model_type", a.model_type);
    wm_json_arr(j, "architectures");
    for (size_t i = 0; i < c->n_architectures; i++) wm_json_str(j, NULL, c->architectures[i]);
    wm_json_arr_end(j);
    wm_json_str(j, "task", wm_task_name(a.task));
    wm_json_str(j, "inference_class", a.inference_class);
    static const char *const graphs[] = {[WM_GRAPH_VIT] = "image encoder", [WM_GRAPH_CLIP_TEXT] = "encoder",
                                         [WM_GRAPH_DUAL] = "text and image encoders", [WM_GRAPH_RESNET] = "convolutional",
                                         [WM_GRAPH_S2S] = "encoder-decoder", [WM_GRAPH_AUDIO] = "speech encoder"};
    wm_json_str(j, "family", a.graph != WM_GRAPH_TEXT ? graphs[a.graph] : a.kind == WM_DECODER ? "decoder" : "encoder");
    wm_json_str(j, "naming_scheme", a.scheme);
    wm_json_str(j, "tensor_prefix", a.prefix);
    tasks_json(j, tasks, nt);
    wm_arch_features_json(&a, j, "features");
    wm_json_obj(j, "sizes");
    wm_json_int(j, "vocab_size", a.V);
    wm_json_int(j, "hidden_size", a.H);
    wm_json_int(j, "intermediate_size", a.I);
    wm_json_int(j, "num_layers", a.L);
    wm_json_int(j, "num_attention_heads", a.nh);
    wm_json_int(j, "num_key_value_heads", a.kvh);
    wm_json_int(j, "head_dim", a.hd);
    if (a.P > 0) wm_json_int(j, "max_position_embeddings", a.P);
    if (a.kind == WM_ENCODER && a.graph == WM_GRAPH_TEXT) wm_json_int(j, "type_vocab_size", a.T);
    if (a.task == WM_TASK_TEXT_CLASSIFICATION || a.task == WM_TASK_TOKEN_CLASSIFICATION ||
        a.task == WM_TASK_IMAGE_CLASSIFICATION)
        wm_json_int(j, "num_labels", a.labels);
    if (a.image > 0) {
        wm_json_int(j, "image_size", a.image);
        wm_json_int(j, "num_channels", a.C);
    }
    if (a.patch > 0) wm_json_int(j, "patch_size", a.patch);
    if (a.proj > 0) wm_json_int(j, "projection_dim", a.proj);
    wm_json_obj_end(j);
    wm_json_str(j, "torch_dtype", c->dtype);
    wm_json_str(j, "weights", ck->weights[0] ? ck->weights : NULL);
    if (st) wm_json_uint(j, "checkpoint_tensors", wm_st_count(st));
    if (ck->pickle[0]) wm_json_str(j, "pickle_weights_refused", ck->pickle);
    size_t cap = 8 + 4 * (size_t)a.L;
    wm_io_spec *outs = calloc(cap, sizeof *outs);
    if (!outs) {
        s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        goto done;
    }
    if (a.graph == WM_GRAPH_S2S && !a.s2s_part) { /* three graphs: each file with its inputs and outputs */
        wm_json_arr(j, "files");
        for (int p = 0; p < WM_S2S_PARTS; p++) {
            wm_json_obj(j, NULL);
            wm_json_str(j, "file", wm_s2s_part_file(p));
            for (int o = 0; o < 2; o++) {
                size_t n = wm_s2s_io(&a, p, o, outs, cap);
                wm_json_arr(j, o ? "outputs" : "inputs");
                for (size_t i = 0; i < n && i < cap; i++) shape_json(j, &outs[i]);
                wm_json_arr_end(j);
            }
            wm_json_obj_end(j);
        }
        wm_json_arr_end(j);
    } else {
        wm_json_arr(j, "inputs");
        for (size_t i = 0; i < r.n_inputs; i++) shape_json(j, &r.inputs[i]);
        wm_json_arr_end(j);
        size_t no = wm_export_output_specs(&a, &r, outs, cap);
        wm_json_arr(j, "outputs");
        for (size_t i = 0; i < no && i < cap; i++) shape_json(j, &outs[i]);
        wm_json_arr_end(j);
    }
    free(outs);
    wm_json_uint(j, "parameters", a.n_params);
    wm_json_obj(j, "size_bytes");
    wm_json_uint(j, "fp32", a.n_params * 4);
    wm_json_uint(j, "fp16", a.n_params * 2);
    wm_json_uint(j, "int8", a.n_params + a.n_params / 32); /* + per-block scales (approximate) */
    wm_json_uint(j, "int4", a.n_params / 2 + a.n_params / 32);
    wm_json_obj_end(j);
    wm_json_bool(j, "external_data", a.n_params * 4 >= (100ull << 20));
    wm_json_bool(j, "over_protobuf_limit", a.n_params * 4 > 0x7fffffffull);
    wm_json_obj(j, "generation");
    ids_json(j, "bos_token_id", ck->has_gen && ck->gen.bos.n ? &ck->gen.bos : &c->bos);
    ids_json(j, "eos_token_id", ck->has_gen && ck->gen.eos.n ? &ck->gen.eos : &c->eos);
    ids_json(j, "pad_token_id", ck->has_gen && ck->gen.pad.n ? &ck->gen.pad : &c->pad);
    wm_json_bool(j, "chat_template", ck->has_tok && ck->tok.chat_template);
    if (ck->has_tok && !isnan(ck->tok.model_max_length) && ck->tok.model_max_length < 1e15)
        wm_json_num(j, "model_max_length", ck->tok.model_max_length);
    wm_json_obj_end(j);
done:
    wm_recipe_free(&r);
    wm_arch_free(&a);
    return s;
}

/* What the tokenizer loader reads in dir (tokenizer.json, a SentencePiece model, vocab files), or why it cannot:
 * "tokenizer" (null when the folder has none) and "tokenizer_error". */
static void tokenizer_json(const char *dir, wm_json *j) {
    wm_tokenizer *t = NULL;
    wm_error e = {0};
    if (!wm_tokenizer_dir_has(dir)) {
        wm_json_null(j, "tokenizer");
    } else if (wm_tokenizer_load_dir(dir, &t, &e) == WM_OK) {
        wm_json_str(j, "tokenizer", wm_tokenizer_describe(t));
        wm_tokenizer_free(t);
    } else {
        wm_json_null(j, "tokenizer");
        wm_json_str(j, "tokenizer_error", e.msg);
    }
}

wm_status wm_hf_inspect(const char *spec, int task, int list_tasks, wm_json *j, wm_error *err) {
    wm_hf_checkpoint ck;
    wm_st_file *st = NULL;
    wm_status s = wm_hf_open_checkpoint(spec, &ck, err);
    if (s) return s;
    if (ck.weights[0] && (s = wm_st_open(ck.dir, &(wm_st_open_opts){.root = ck.root[0] ? ck.root : NULL}, &st, err))) goto done;
    if (list_tasks) {
        s = wm_hf_list_tasks(&ck, st, task, "hf", j, err);
        goto done;
    }
    wm_json_obj(j, NULL);
    wm_json_str(j, "format", "hf");
    wm_json_str(j, "path", ck.dir);
    s = wm_hf_describe(&ck, st, task, j, err);
    if (!s) tokenizer_json(ck.dir, j);
    wm_json_obj_end(j);
done:
    wm_st_close(st);
    wm_hf_checkpoint_free(&ck);
    return s;
}

wm_status wm_hf_list_tasks(const wm_hf_checkpoint *ck, const wm_st_file *st, int task, const char *format, wm_json *j,
                           wm_error *err) {
    wm_arch a;
    wm_status s = wm_arch_resolve(ck, st, task, &a, err);
    if (s) return s;
    int tasks[WM_TASK_COUNT];
    size_t nt = wm_arch_tasks(&a, tasks);
    wm_json_obj(j, NULL);
    wm_json_str(j, "format", format);
    wm_json_str(j, "model_type", a.model_type);
    wm_json_str(j, "default_task", wm_task_name(a.task));
    tasks_json(j, tasks, nt);
    wm_json_obj_end(j);
    wm_arch_free(&a);
    return WM_OK;
}
