/* catalog.c - `winml catalog`'s entries from the generated table (catalog.h). */
#define _GNU_SOURCE
#include "tasks/catalog.h"

#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "core/ep.h"
#include "core/error.h"

static int same(const char *a, const char *b) { return (!a && !b) || (a && b && !strcmp(a, b)); }

static void upper(const char *s, char *out, size_t n) {
    size_t i = 0;
    for (; s[i] && i + 1 < n; i++) out[i] = (char)(s[i] >= 'a' && s[i] <= 'z' ? s[i] - 32 : s[i]);
    out[i] = 0;
}

/* Appends each distinct value of field (of the rows of r's model and task) to the array key. */
static void distinct(wm_json *j, const char *key, size_t i, const wm_catalog_row *r, size_t off) {
    wm_json_arr(j, key);
    for (size_t k = i; k < wm_catalog_n_rows; k++) {
        const wm_catalog_row *q = &wm_catalog_rows[k];
        const char *v = *(const char *const *)((const char *)q + off);
        if (!v || !same(q->model, r->model) || !same(q->task, r->task)) continue;
        int dup = 0;
        for (size_t p = i; p < k && !dup; p++) {
            const wm_catalog_row *x = &wm_catalog_rows[p];
            dup = same(x->model, r->model) && same(x->task, r->task) && same(*(const char *const *)((const char *)x + off), v);
        }
        if (!dup) wm_json_str(j, NULL, v);
    }
    wm_json_arr_end(j);
}

wm_status wm_catalog_json(const char *ep, const char *device, const char *task, wm_json *j, wm_error *err) {
    if (device && strcmp(device, "cpu") && strcmp(device, "gpu") && strcmp(device, "npu"))
        return wm_err(err, WM_ERR_USAGE, "--device: '%s' is not cpu, gpu or npu", device);
    const char *alias = NULL;
    if (ep) {
        alias = wm_ep_find(ep);
        if (!alias)
            return wm_err(err, WM_ERR_USAGE, "--ep: unknown execution provider '%s' (%s, or their ONNX Runtime names)", ep,
                          wm_ep_alias_list());
    }
    size_t n = wm_catalog_n_rows;
    unsigned char *used = calloc(n ? n : 1, 1);
    if (!used) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    wm_json_arr(j, NULL);
    for (size_t i = 0; i < n; i++) {
        const wm_catalog_row *r = &wm_catalog_rows[i];
        if (used[i] || (task && strcmp(task, r->task))) continue;
        /* kept when a row of this model and task ran on the EP and device asked for */
        int ok = 0;
        for (size_t k = i; k < n && !ok; k++) {
            const wm_catalog_row *q = &wm_catalog_rows[k];
            ok = same(q->model, r->model) && same(q->task, r->task) && (!alias || !strcmp(q->ep, alias)) &&
                 (!device || !strcmp(q->device, device));
        }
        if (!ok) continue;
        const wm_catalog_row *last = r;
        double size = -1;
        wm_json_obj(j, NULL);
        wm_json_str(j, "model_id", r->model);
        wm_json_str(j, "task", r->task);
        wm_json_str(j, "model_type", r->model_type);
        wm_json_obj(j, "supported_eps");
        for (size_t e = 0; e < wm_ep_count(); e++) {
            int any = 0;
            const char *devs[8];
            size_t nd = 0;
            for (size_t k = i; k < n; k++) {
                const wm_catalog_row *q = &wm_catalog_rows[k];
                if (!same(q->model, r->model) || !same(q->task, r->task) || strcmp(q->ep, wm_ep_alias_at(e))) continue;
                int seen = 0;
                for (size_t d = 0; d < nd; d++) seen |= !strcmp(devs[d], q->device);
                if (!seen && nd < 8) devs[nd++] = q->device;
                any = 1;
            }
            if (!any) continue;
            wm_json_arr(j, wm_ep_alias_at(e));
            for (size_t d = 0; d < nd; d++) {
                char u[32];
                upper(devs[d], u, sizeof u);
                wm_json_str(j, NULL, u);
            }
            wm_json_arr_end(j);
        }
        wm_json_obj_end(j);
        for (size_t k = i; k < n; k++) {
            const wm_catalog_row *q = &wm_catalog_rows[k];
            if (!same(q->model, r->model) || !same(q->task, r->task)) continue;
            used[k] = 1;
            if (q->onnx_size_bytes > size) size = q->onnx_size_bytes;
            if (q->run_timestamp && (!last->run_timestamp || strcmp(q->run_timestamp, last->run_timestamp) > 0)) last = q;
        }
        distinct(j, "precisions", i, r, offsetof(wm_catalog_row, built_precision));
        distinct(j, "recipe_precisions", i, r, offsetof(wm_catalog_row, precision));
        distinct(j, "parts", i, r, offsetof(wm_catalog_row, part)); /* [] for a model built whole */
        if (size >= 0) wm_json_num(j, "size_mb", (double)(long long)(size / 1048576.0 * 100 + 0.5) / 100);
        else wm_json_null(j, "size_mb");
        wm_json_arr(j, "recipe_targets");
        for (size_t k = i; k < n; k++) {
            const wm_catalog_row *q = &wm_catalog_rows[k];
            if (!same(q->model, r->model) || !same(q->task, r->task)) continue;
            char t[80];
            snprintf(t, sizeof t, "%s/%s", q->recipe_ep ? q->recipe_ep : "any", q->recipe_device ? q->recipe_device : "any");
            int dup = 0;
            for (size_t p = i; p < k; p++) {
                const wm_catalog_row *x = &wm_catalog_rows[p];
                char tx[80];
                snprintf(tx, sizeof tx, "%s/%s", x->recipe_ep ? x->recipe_ep : "any", x->recipe_device ? x->recipe_device : "any");
                dup |= same(x->model, r->model) && same(x->task, r->task) && !strcmp(tx, t);
            }
            if (!dup) wm_json_str(j, NULL, t);
        }
        wm_json_arr_end(j);
        wm_json_obj(j, "last_result");
        wm_json_str(j, "status", "passed");
        wm_json_str(j, "key", last->key);
        wm_json_str(j, "run_timestamp", last->run_timestamp);
        if (last->latency_ms_mean >= 0) wm_json_num(j, "latency_ms_mean", last->latency_ms_mean);
        else wm_json_null(j, "latency_ms_mean");
        if (last->cosine_similarity_min >= -1) wm_json_num(j, "cosine_similarity_min", last->cosine_similarity_min);
        else wm_json_null(j, "cosine_similarity_min");
        wm_json_bool(j, "random_weights", last->random_weights);
        wm_json_str(j, "source", last->source);
        wm_json_obj_end(j);
        wm_json_obj_end(j);
    }
    wm_json_arr_end(j);
    free(used);
    return j->oom ? wm_err(err, WM_ERR_NOMEM, "out of memory") : WM_OK;
}
