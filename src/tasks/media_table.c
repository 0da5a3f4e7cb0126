/* media_table.c - media inputs and text targets of a task-eval table (see media_table.h). */
#include "tasks/media_table.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#include "core/error.h"
#include "core/file.h"
#include "hf/dataset.h"

/* The first column of t named want, else the first of defaults; -1 when none. */
static int column(const wm_table *t, const char *want, const char *const *defaults) {
    if (want) return wm_table_col(t, want);
    int c = -1;
    for (size_t i = 0; defaults[i] && c < 0; i++) c = wm_table_col(t, defaults[i]);
    return c;
}

/* defaults joined as "a, b, c or d" into out[n]. */
static void names_of(const char *const *d, char *out, size_t n) {
    size_t k = 0, m = 0;
    while (d[m]) m++;
    out[0] = 0;
    for (size_t i = 0; i < m; i++) {
        int w = snprintf(out + k, n - k, "%s%s", i == 0 ? "" : i + 1 == m ? " or " : ", ", d[i]);
        if (w < 0 || (size_t)w >= n - k) break;
        k += (size_t)w;
    }
}

/* The media column: a plain column (*cp, *cb -1), else NAME.bytes (*cb) with NAME.path (*cp, -1 when absent). */
static void media_column(const wm_table *t, const wm_media_cols *c, int *cp, int *cb) {
    *cp = *cb = -1;
    for (size_t i = 0; (c->want_media ? i < 1 : c->media_defaults[i] != NULL); i++) {
        const char *nm = c->want_media ? c->want_media : c->media_defaults[i];
        char sub[300];
        if ((*cp = wm_table_col(t, nm)) >= 0) return;
        snprintf(sub, sizeof sub, "%s.bytes", nm);
        *cb = wm_table_col(t, sub);
        snprintf(sub, sizeof sub, "%s.path", nm);
        *cp = wm_table_col(t, sub);
        if (*cb >= 0 || *cp >= 0) return;
    }
}

void wm_media_rows_free(wm_media_rows *r) {
    for (size_t i = 0; r->names && i < r->t.n_rows; i++) free(r->names[i]); /* calloc'ed: one per table row */
    free(r->names);
    free(r->v);
    wm_table_free(&r->t);
    memset(r, 0, sizeof *r);
}

wm_status wm_media_rows_read(const wm_task_opts *o, const wm_media_cols *c, wm_media_rows *r, wm_json *j,
                             wm_error *err) {
    memset(r, 0, sizeof *r);
    wm_table_opts tabo = {.max_rows = o->samples > 0 ? (size_t)o->samples : 0, .max_line = o->max_line};
    wm_dataset_files *f = malloc(sizeof *f);
    if (!f) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    char why[1400];
    struct stat sb;
    wm_status st = WM_OK;
    if (!stat(o->dataset, &sb) && S_ISREG(sb.st_mode))
        snprintf(f->paths[0], sizeof f->paths[0], "%s", o->dataset), f->n = 1;
    else if (!(st = wm_dataset_resolve(o->dataset, o->dataset_config, o->split, f, why, sizeof why, err)) && !f->n)
        st = wm_err(err, WM_ERR_INPUT, "--dataset: %s", why);
    if (!st && j) {
        wm_json_arr(j, "dataset_files");
        for (size_t i = 0; i < f->n; i++) wm_json_str(j, NULL, f->paths[i]);
        wm_json_arr_end(j);
    }
    if (!st)
        st = f->n == 1 ? wm_table_read(f->paths[0], WM_TABLE_AUTO, &tabo, &r->t, err)
                       : wm_dataset_read(f, &tabo, &r->t, err);
    char base[1024] = ".";
    if (!st) wm_path_dirname(f->paths[0], base, sizeof base);
    free(f);
    if (st) return st;
    const wm_table *t = &r->t;
    int cp, cb, ct = column(t, c->want_target, c->target_defaults);
    media_column(t, c, &cp, &cb);
    if ((cp < 0 && cb < 0) || ct < 0) {
        int media = cp < 0 && cb < 0;
        const char *want = media ? c->want_media : c->want_target;
        char list[300];
        names_of(media ? c->media_defaults : c->target_defaults, list, sizeof list);
        if (want) return wm_err(err, WM_ERR_INPUT, "%s: no column '%s'%s", o->dataset, want, media ? " (nor its .bytes "
                                "/ .path fields)" : "");
        return wm_err(err, WM_ERR_INPUT, "%s: no %s column (%s; or name it with --%s-column)", o->dataset,
                      media ? c->kind : c->what, list, media ? c->kind : c->target_flag);
    }
    if (!t->n_rows) return wm_err(err, WM_ERR_INPUT, "%s: no data rows to evaluate", o->dataset);
    if (!(r->v = calloc(t->n_rows, sizeof *r->v)) || !(r->names = calloc(t->n_rows, sizeof *r->names)))
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    for (size_t i = 0; i < t->n_rows; i++) {
        wm_media_row *e = &r->v[i];
        const char *p = cp >= 0 ? wm_table_cell(t, i, cp) : NULL, *b = cb >= 0 ? wm_table_cell(t, i, cb) : NULL;
        e->target = wm_table_cell(t, i, ct), e->line = t->lines[i];
        if ((!b && (!p || !p[0])) || !e->target || !e->target[0])
            return wm_err(err, WM_ERR_INPUT, "%s:%zu: the %s cell is missing", o->dataset, t->lines[i],
                          !b && (!p || !p[0]) ? c->kind : c->what);
        size_t len = b ? strlen(o->dataset) + strlen(t->names[cb]) + 64 : strlen(base) + strlen(p) + 2;
        if (!(r->names[i] = malloc(len))) return wm_err(err, WM_ERR_NOMEM, "out of memory");
        if (b) { /* the encoded file held in the table */
            snprintf(r->names[i], len, "%s: row %zu, column %s", o->dataset, i + 1, t->names[cb]);
            e->data = (const uint8_t *)b;
            e->n = t->sizes ? t->sizes[i * t->n_cols + (size_t)cb] : strlen(b);
        } else if (p[0] == '/') snprintf(r->names[i], len, "%s", p);
        else snprintf(r->names[i], len, "%s/%s", base, p);
        e->name = r->names[i];
    }
    r->n = t->n_rows;
    return WM_OK;
}
