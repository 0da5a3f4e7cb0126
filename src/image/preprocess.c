/* preprocess.c - preprocessor_config.json applied as transformers' image processors do (see preprocess.h). */
#include "image/preprocess.h"

#include <cjson/cJSON.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/error.h"
#include "hf/config.h"

#define WM_PREP_MAX_SIDE 65536

/* The class defaults (transformers' *ImagePil classes); -1 in a size: not set. */
typedef struct prep_class {
    const char *name;
    int resample, do_resize, do_center_crop, square; /* square: an int size means height = width (else shortest) */
    int shortest_edge, size_h, size_w, crop_h, crop_w, crop_pct_resize;
    float mean[3], std[3];
} prep_class;

#define STD_MEAN {0.5f, 0.5f, 0.5f}
#define CLIP_MEAN {0.48145466f, 0.4578275f, 0.40821073f}
#define CLIP_STD {0.26862954f, 0.26130258f, 0.27577711f}
#define IMAGENET_MEAN {0.485f, 0.456f, 0.406f}
#define IMAGENET_STD {0.229f, 0.224f, 0.225f}

static const prep_class CLASSES[] = {
    {"ViTImageProcessor", 2, 1, 0, 1, 0, 224, 224, 0, 0, 0, STD_MEAN, STD_MEAN},
    {"DeiTImageProcessor", 3, 1, 1, 1, 0, 256, 256, 224, 224, 0, STD_MEAN, STD_MEAN},
    {"CLIPImageProcessor", 3, 1, 1, 0, 224, 0, 0, 224, 224, 0, CLIP_MEAN, CLIP_STD},
    {"BitImageProcessor", 3, 1, 1, 0, 224, 0, 0, 224, 224, 0, CLIP_MEAN, CLIP_STD},
    {"ConvNextImageProcessor", 3, 1, 0, 0, 384, 0, 0, 0, 0, 1, STD_MEAN, STD_MEAN},
    {"SiglipImageProcessor", 3, 1, 0, 0, 0, 224, 224, 0, 0, 0, STD_MEAN, STD_MEAN},
    /* VitPose's processor warps each person box (given with the image) to size by an affine transform; without
       boxes the whole image is the box, resized (bilinear) to size without the transform's aspect padding */
    {"VitPoseImageProcessor", 2, 1, 0, 0, 0, 256, 192, 0, 0, 0, IMAGENET_MEAN, IMAGENET_STD},
};

static const cJSON *field(const cJSON *root, const char *key) {
    const cJSON *v = cJSON_GetObjectItemCaseSensitive(root, key);
    return v && !cJSON_IsNull(v) ? v : NULL; /* null: the class default, as transformers reads it */
}

static wm_status get_bool(const cJSON *root, const char *key, const char *label, int *dst, wm_error *err) {
    const cJSON *v = field(root, key);
    if (!v) return WM_OK;
    if (!cJSON_IsBool(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected true or false", label, key);
    *dst = cJSON_IsTrue(v);
    return WM_OK;
}

static wm_status side(const cJSON *v, const char *label, const char *key, const char *sub, int *dst, wm_error *err) {
    if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || v->valuedouble < 1 ||
        v->valuedouble > WM_PREP_MAX_SIDE)
        return wm_err(err, WM_ERR_INPUT, "%s: field '%s%s%s': expected a whole number of pixels from 1 to %d", label,
                      key, sub ? "." : "", sub ? sub : "", WM_PREP_MAX_SIDE);
    *dst = (int)v->valuedouble;
    return WM_OK;
}

/* size or crop_size: an int (square or shortest edge as the class says), {"height", "width"}, {"shortest_edge"}. */
static wm_status get_size(const cJSON *root, const char *key, const char *label, int square, int allow_short,
                          int *se, int *h, int *w, wm_error *err) {
    const cJSON *v = field(root, key);
    if (!v) return WM_OK;
    wm_status st;
    if (cJSON_IsNumber(v)) {
        int s;
        if ((st = side(v, label, key, NULL, &s, err))) return st;
        if (square || !allow_short) *se = 0, *h = *w = s;
        else *se = s, *h = *w = 0;
        return WM_OK;
    }
    if (!cJSON_IsObject(v)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number or an object", label, key);
    const cJSON *s = field(v, "shortest_edge"), *hh = field(v, "height"), *ww = field(v, "width");
    for (const cJSON *c = v->child; c; c = c->next)
        if (strcmp(c->string, "shortest_edge") && strcmp(c->string, "height") && strcmp(c->string, "width") &&
            !cJSON_IsNull(c))
            return wm_err(err, WM_ERR_UNSUPPORTED, "%s: field '%s.%s': not supported (sizes are {\"shortest_edge\"} "
                          "or {\"height\", \"width\"})", label, key, c->string);
    if (s && allow_short && !hh && !ww) {
        *h = *w = 0;
        return side(s, label, key, "shortest_edge", se, err);
    }
    if (hh && ww && !s) {
        *se = 0;
        if ((st = side(hh, label, key, "height", h, err))) return st;
        return side(ww, label, key, "width", w, err);
    }
    return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected {%s\"height\", \"width\"}", label, key,
                  allow_short ? "\"shortest_edge\"} or {" : "");
}

static wm_status get_triple(const cJSON *root, const char *key, const char *label, float *dst, int nonzero,
                            wm_error *err) {
    const cJSON *v = field(root, key);
    if (!v) return WM_OK;
    double d[3];
    if (cJSON_IsNumber(v)) d[0] = d[1] = d[2] = v->valuedouble;
    else if (cJSON_IsArray(v) && cJSON_GetArraySize(v) == 3) {
        for (int i = 0; i < 3; i++) {
            const cJSON *e = cJSON_GetArrayItem(v, i);
            if (!cJSON_IsNumber(e)) return wm_err(err, WM_ERR_INPUT, "%s: field '%s[%d]': expected a number", label, key, i);
            d[i] = e->valuedouble;
        }
    } else return wm_err(err, WM_ERR_INPUT, "%s: field '%s': expected a number or 3 numbers (R, G, B)", label, key);
    for (int i = 0; i < 3; i++) {
        /* a divisor under 1e-30 (a denormal float, or 0) turns every pixel into inf or NaN */
        if (!isfinite(d[i]) || fabs(d[i]) > 1e30 || (nonzero && fabs(d[i]) < 1e-30))
            return wm_err(err, WM_ERR_INPUT, "%s: field '%s': %g is not a usable value", label, key, d[i]);
        dst[i] = (float)d[i];
    }
    return WM_OK;
}

wm_status wm_img_prep_parse(const char *text, size_t n, const char *label, wm_img_prep *p, wm_error *err) {
    memset(p, 0, sizeof *p);
    cJSON *root = NULL;
    wm_status st = wm_hf_json_parse(text, n, 1 << 20, label, &root, err);
    if (st) return st;
    const cJSON *t = field(root, "image_processor_type");
    char type[64] = "";
    if (cJSON_IsString(t)) {
        snprintf(type, sizeof type, "%s", t->valuestring);
        size_t l = strlen(type);
        if (l > 4 && !strcmp(type + l - 4, "Fast")) type[l - 4] = 0;
        else if (l > 3 && !strcmp(type + l - 3, "Pil")) type[l - 3] = 0;
    }
    const prep_class *c = NULL;
    for (size_t i = 0; i < sizeof CLASSES / sizeof *CLASSES; i++)
        if (!strcmp(type, CLASSES[i].name)) c = &CLASSES[i];
    if (!c) {
        st = wm_err(err, WM_ERR_UNSUPPORTED, "%s: field 'image_processor_type': %s%s%s is not one winml runs "
                    "(ViT, DeiT, CLIP, Bit, ConvNext, Siglip, VitPose image processors)", label, t ? "'" : "",
                    t ? (cJSON_IsString(t) ? t->valuestring : "not a string") : "missing", t ? "'" : "");
        goto done;
    }
    snprintf(p->type, sizeof p->type, "%s", c->name);
    p->resample = c->resample, p->do_resize = c->do_resize, p->do_center_crop = c->do_center_crop;
    p->do_rescale = p->do_normalize = 1;
    p->shortest_edge = c->shortest_edge, p->size_h = c->size_h, p->size_w = c->size_w;
    p->crop_h = c->crop_h, p->crop_w = c->crop_w, p->crop_pct_resize = c->crop_pct_resize;
    p->crop_pct = 224.0 / 256.0, p->rescale_factor = 1.0 / 255.0;
    memcpy(p->mean, c->mean, sizeof p->mean), memcpy(p->std, c->std, sizeof p->std);
    int dummy = 0;
    if ((st = get_bool(root, "do_resize", label, &p->do_resize, err)) ||
        (st = get_bool(root, "do_center_crop", label, &p->do_center_crop, err)) ||
        (st = get_bool(root, "do_rescale", label, &p->do_rescale, err)) ||
        (st = get_bool(root, "do_normalize", label, &p->do_normalize, err)) ||
        (st = get_bool(root, "do_convert_rgb", label, &dummy, err)) || /* decoded images are RGB already */
        (st = get_size(root, "size", label, c->square, 1, &p->shortest_edge, &p->size_h, &p->size_w, err)) ||
        (st = get_size(root, "crop_size", label, 1, 0, &dummy, &p->crop_h, &p->crop_w, err)) ||
        (st = get_triple(root, "image_mean", label, p->mean, 0, err)) ||
        (st = get_triple(root, "image_std", label, p->std, 1, err)))
        goto done;
    const cJSON *v;
    if ((v = field(root, "resample"))) {
        if (!cJSON_IsNumber(v) || v->valuedouble != floor(v->valuedouble) || !wm_resample_name((int)v->valuedouble)) {
            st = wm_err(err, WM_ERR_INPUT, "%s: field 'resample': expected one of PIL's filters (0 nearest, 1 lanczos, "
                        "2 bilinear, 3 bicubic, 4 box, 5 hamming)", label);
            goto done;
        }
        p->resample = (int)v->valuedouble;
    }
    if ((v = field(root, "rescale_factor"))) {
        if (!cJSON_IsNumber(v) || !isfinite(v->valuedouble) || fabs(v->valuedouble) > 1e30) {
            st = wm_err(err, WM_ERR_INPUT, "%s: field 'rescale_factor': expected a finite number", label);
            goto done;
        }
        p->rescale_factor = v->valuedouble;
    }
    if ((v = field(root, "crop_pct"))) {
        if (!cJSON_IsNumber(v) || !(v->valuedouble > 0.01) || v->valuedouble > 100) {
            st = wm_err(err, WM_ERR_INPUT, "%s: field 'crop_pct': expected a number from 0.01 to 100", label);
            goto done;
        }
        p->crop_pct = v->valuedouble;
    }
    if (p->do_resize && !p->shortest_edge && !p->size_h) {
        st = wm_err(err, WM_ERR_INPUT, "%s: field 'size': needed when do_resize is true", label);
        goto done;
    }
    if (p->do_resize && p->crop_pct_resize && !p->shortest_edge) {
        st = wm_err(err, WM_ERR_INPUT, "%s: field 'size': %s resizes by {\"shortest_edge\"}", label, p->type);
        goto done;
    }
    if (p->do_center_crop && !p->crop_h) {
        st = wm_err(err, WM_ERR_INPUT, "%s: field 'crop_size': needed when do_center_crop is true", label);
        goto done;
    }
done:
    cJSON_Delete(root);
    return st;
}

wm_status wm_img_prep_load(const char *path, wm_img_prep *p, wm_error *err) {
    cJSON *root = NULL;
    wm_status st = wm_hf_json_load(path, 1 << 20, &root, err);
    if (st) return st;
    char *text = cJSON_PrintUnformatted(root);
    cJSON_Delete(root);
    if (!text) return wm_err(err, WM_ERR_NOMEM, "%s: out of memory", path);
    st = wm_img_prep_parse(text, strlen(text), path, p, err);
    free(text);
    return st;
}

/* transformers' get_resize_output_image_size(default_to_square=False): the short side becomes s. */
static void shortest(int w, int h, int s, int *ow, int *oh) {
    int shrt = w <= h ? w : h, lng = w <= h ? h : w;
    long long nl = (long long)((double)((long long)s * lng) / shrt);
    if (nl > WM_PREP_MAX_SIDE * 64LL) nl = WM_PREP_MAX_SIDE * 64LL; /* refused by the budget below */
    if (w <= h) *ow = s, *oh = (int)nl;
    else *ow = (int)nl, *oh = s;
}

static long long floordiv2(long long a) { return a >= 0 ? a / 2 : -((-a + 1) / 2); }

/* transformers' center_crop: (ch, cw) around the centre, zeros where the image is smaller. */
static wm_status crop(const wm_image *in, int ch, int cw, wm_image *out, wm_error *err) {
    out->rgb = calloc((size_t)ch * cw, 3);
    if (!out->rgb) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    out->w = cw, out->h = ch;
    long long top = floordiv2((long long)in->h - ch), left = floordiv2((long long)in->w - cw);
    for (int y = 0; y < ch; y++) {
        long long sy = y + top;
        if (sy < 0 || sy >= in->h) continue;
        for (int x = 0; x < cw; x++) {
            long long sx = x + left;
            if (sx >= 0 && sx < in->w)
                memcpy(out->rgb + ((size_t)y * cw + x) * 3, in->rgb + ((size_t)sy * in->w + sx) * 3, 3);
        }
    }
    return WM_OK;
}

static wm_status resize_to(const wm_img_prep *p, wm_image *cur, int w, int h, const char *name, wm_error *err) {
    wm_status st = wm_image_check_size(name, (uint64_t)w, (uint64_t)h, p->max_pixels, err);
    if (st) {
        wm_err_prefix(err, "resized as %s says", p->type);
        return st;
    }
    wm_image r;
    if ((st = wm_image_resize(cur, w, h, p->resample, &r, err))) return st;
    wm_image_free(cur);
    *cur = r;
    return WM_OK;
}

static wm_status crop_to(const wm_img_prep *p, wm_image *cur, int h, int w, const char *name, wm_error *err) {
    wm_status st = wm_image_check_size(name, (uint64_t)w, (uint64_t)h, p->max_pixels, err);
    if (st) {
        wm_err_prefix(err, "cropped as %s says", p->type);
        return st;
    }
    wm_image r = {0};
    st = crop(cur, h, w, &r, err);
    if (st) return st;
    wm_image_free(cur);
    *cur = r;
    return WM_OK;
}

wm_status wm_img_prep_geometry(const wm_img_prep *p, const wm_image *im, const char *name, wm_image *out,
                               wm_error *err) {
    memset(out, 0, sizeof *out);
    wm_image cur = {im->w, im->h, malloc((size_t)im->w * im->h * 3)};
    if (!cur.rgb) return wm_err(err, WM_ERR_NOMEM, "out of memory");
    memcpy(cur.rgb, im->rgb, (size_t)im->w * im->h * 3);
    wm_status st = WM_OK;
    int w, h;
    if (p->do_resize) {
        if (p->crop_pct_resize && p->shortest_edge < 384) {
            double t = floor(p->shortest_edge / p->crop_pct);
            int s = t < 1 ? 1 : t > WM_PREP_MAX_SIDE ? WM_PREP_MAX_SIDE : (int)t;
            shortest(cur.w, cur.h, s, &w, &h);
            if (!(st = resize_to(p, &cur, w, h, name, err))) st = crop_to(p, &cur, p->shortest_edge, p->shortest_edge, name, err);
        } else if (p->crop_pct_resize) st = resize_to(p, &cur, p->shortest_edge, p->shortest_edge, name, err);
        else if (p->shortest_edge) {
            shortest(cur.w, cur.h, p->shortest_edge, &w, &h);
            st = resize_to(p, &cur, w, h, name, err);
        } else st = resize_to(p, &cur, p->size_w, p->size_h, name, err);
    }
    if (!st && p->do_center_crop) st = crop_to(p, &cur, p->crop_h, p->crop_w, name, err);
    if (st) {
        wm_image_free(&cur);
        return st;
    }
    *out = cur;
    return WM_OK;
}

wm_status wm_img_prep_run(const wm_img_prep *p, const wm_image *im, const char *name, float **out, int *h, int *w,
                          wm_error *err) {
    *out = NULL;
    wm_image g;
    wm_status st = wm_img_prep_geometry(p, im, name, &g, err);
    if (st) return st;
    size_t plane = (size_t)g.w * g.h;
    float *x = malloc(plane * 3 * sizeof *x);
    if (!x) {
        wm_image_free(&g);
        return wm_err(err, WM_ERR_NOMEM, "out of memory");
    }
    for (int c = 0; c < 3; c++)
        for (size_t i = 0; i < plane; i++) {
            float v = p->do_rescale ? (float)((double)g.rgb[i * 3 + c] * p->rescale_factor) : (float)g.rgb[i * 3 + c];
            if (p->do_normalize) v = (v - p->mean[c]) / p->std[c];
            x[c * plane + i] = v;
        }
    *out = x, *h = g.h, *w = g.w;
    wm_image_free(&g);
    return WM_OK;
}
