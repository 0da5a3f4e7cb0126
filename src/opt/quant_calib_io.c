/*
 * quant_calib_io.c - calibration inputs from files: a JSON ranges file, and
 * a folder of collected float32 tensors described by manifest.json.
 * Both are untrusted: sizes are checked, names must be strings, numbers
 * finite, tensor files relative paths inside the folder.
 */
#include <cjson/cJSON.h>
#include <limits.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "core/file.h"
#include "opt/quant_calib.h"

#define MAX_JSON (64u << 20)

/* Parses the JSON file at path into *doc (caller deletes). */
static wm_status load_json(const char *path, cJSON **doc, wm_error *err) {
    wm_map m;
    *doc = NULL;
    wm_status s = wm_map_file(path, 0, &m, err);
    if (s) return s;
    if (m.size > MAX_JSON) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: larger than %u MiB", path, MAX_JSON >> 20);
    }
    *doc = cJSON_ParseWithLength((const char *)m.data, m.size);
    wm_unmap(&m);
    if (!*doc || !cJSON_IsObject(*doc)) {
        cJSON_Delete(*doc);
        *doc = NULL;
        return wm_err(err, WM_ERR_INPUT, "%s: not a JSON object", path);
    }
    return WM_OK;
}

wm_status wm_calib_ranges_load(const char *path, wm_calib_ranges *out, wm_error *err) {
    cJSON *doc;
    memset(out, 0, sizeof *out);
    wm_status s = load_json(path, &doc, err);
    if (s) return s;
    const cJSON *obj = cJSON_GetObjectItemCaseSensitive(doc, "ranges");
    if (!obj) obj = doc;
    if (!cJSON_IsObject(obj)) {
        cJSON_Delete(doc);
        return wm_err(err, WM_ERR_INPUT, "%s: 'ranges' must be an object of value: [min, max]", path);
    }
    int n = cJSON_GetArraySize(obj);
    out->v = calloc(n > 0 ? (size_t)n : 1, sizeof *out->v);
    if (!out->v) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    const cJSON *e;
    cJSON_ArrayForEach(e, obj) {
        if (s) break;
        const cJSON *a = cJSON_GetArrayItem(e, 0), *b = cJSON_GetArrayItem(e, 1);
        if (!e->string || !cJSON_IsArray(e) || cJSON_GetArraySize(e) != 2 || !cJSON_IsNumber(a) || !cJSON_IsNumber(b) ||
            !isfinite(a->valuedouble) || !isfinite(b->valuedouble) || a->valuedouble > b->valuedouble) {
            s = wm_err(err, WM_ERR_INPUT, "%s: range of '%s' must be [min, max] with finite min <= max", path,
                       e->string ? e->string : "?");
            break;
        }
        char *nm = strdup(e->string);
        if (!nm) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
        else out->v[out->n++] = (wm_quant_range){nm, (float)a->valuedouble, (float)b->valuedouble};
    }
    cJSON_Delete(doc);
    if (s) wm_calib_ranges_free(out);
    return s;
}

/* Feeds one raw float32 file to the calibrator. */
static wm_status feed_file(wm_calib *c, const char *dir, const char *value, const char *file, wm_error *err) {
    char path[PATH_MAX];
    wm_status s = wm_path_check_relative(file, err);
    if (!s) s = wm_path_resolve_inside(dir, file, 1, path, sizeof path, err);
    if (s) return s;
    wm_map m;
    if ((s = wm_map_file(path, 1, &m, err))) return s;
    if (m.size % 4) {
        wm_unmap(&m);
        return wm_err(err, WM_ERR_INPUT, "%s: %zu bytes is not a whole number of float32s", path, m.size);
    }
    size_t n = m.size / 4;
    float *buf = malloc((n ? n : 1) * sizeof *buf);
    if (!buf) s = wm_err(err, WM_ERR_NOMEM, "out of memory");
    else {
        if (n) memcpy(buf, m.data, n * 4);
        s = wm_calib_observe(c, value, buf, n, err);
    }
    free(buf);
    wm_unmap(&m);
    return s;
}

wm_status wm_calib_from_dir(const char *dir, const char *method, double percentile, int samples,
                            wm_calib_ranges *out, wm_error *err) {
    memset(out, 0, sizeof *out);
    int md = wm_calib_method_parse(method);
    if (md < 0) return wm_err(err, WM_ERR_USAGE, "calibration method '%s': minmax, percentile or entropy", method);
    char mpath[PATH_MAX];
    if (snprintf(mpath, sizeof mpath, "%s/manifest.json", dir) >= (int)sizeof mpath)
        return wm_err(err, WM_ERR_USAGE, "%s: path too long", dir);
    cJSON *doc;
    wm_status s = load_json(mpath, &doc, err);
    if (s) return s;
    wm_calib_opts o;
    wm_calib_opts_default(&o, (wm_calib_method)md);
    if (percentile > 0) o.percentile = percentile;
    wm_calib *c = NULL;
    if ((s = wm_calib_new(&o, &c, err))) goto done;
    const cJSON *e;
    cJSON_ArrayForEach(e, doc) {
        if (!e->string || !cJSON_IsArray(e)) {
            s = wm_err(err, WM_ERR_INPUT, "%s: '%s' must list tensor files", mpath, e->string ? e->string : "?");
            break;
        }
        int k = 0;
        const cJSON *f;
        cJSON_ArrayForEach(f, e) {
            if (samples > 0 && k >= samples) break;
            if (!cJSON_IsString(f)) {
                s = wm_err(err, WM_ERR_INPUT, "%s: '%s': file names must be strings", mpath, e->string);
                break;
            }
            if ((s = feed_file(c, dir, e->string, f->valuestring, err))) break;
            k++;
        }
        if (s) break;
    }
    if (!s) s = wm_calib_result(c, out, err);
done:
    wm_calib_free(c);
    cJSON_Delete(doc);
    return s;
}
