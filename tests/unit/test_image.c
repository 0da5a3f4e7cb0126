/* Unit tests of src/image: the resampler against a naive double-precision reference, the EXIF parser on lying
   input, orientation, the pixel budget, decoding refusals and preprocessor_config.json parsing. */
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <cmocka.h>

#include "core/file.h"
#include "image/image.h"
#include "image/preprocess.h"

/* ---- the naive reference: PIL's filters written out, weights in double, each pass rounded ---- */
static double ref_filter(int f, double x) {
    double ax = fabs(x);
    switch (f) {
    case WM_RESAMPLE_BOX: return x > -0.5 && x <= 0.5;
    case WM_RESAMPLE_BILINEAR: return ax < 1 ? 1 - ax : 0;
    case WM_RESAMPLE_HAMMING: return ax == 0 ? 1 : ax >= 1 ? 0 : sin(M_PI * ax) / (M_PI * ax) * (0.54 + 0.46 * cos(M_PI * ax));
    case WM_RESAMPLE_BICUBIC:
        return ax < 1 ? (1.5 * ax - 2.5) * ax * ax + 1 : ax < 2 ? -0.5 * (((ax - 5) * ax + 8) * ax - 4) : 0;
    default: { /* lanczos */
        if (ax >= 3) return 0;
        double s1 = ax == 0 ? 1 : sin(M_PI * ax) / (M_PI * ax), s3 = ax == 0 ? 1 : sin(M_PI * ax / 3) / (M_PI * ax / 3);
        return s1 * s3;
    }
    }
}

static double ref_support(int f) {
    return f == WM_RESAMPLE_BOX ? 0.5 : f == WM_RESAMPLE_BICUBIC ? 2 : f == WM_RESAMPLE_LANCZOS ? 3 : 1;
}

/* one pass along an axis of n_in samples to n_out, stride between samples, `lines` lines */
static void ref_pass(const uint8_t *src, uint8_t *dst, int f, int n_in, int n_out, int lines, int horiz, int w_in,
                     int w_out) {
    double scale = (double)n_in / n_out, fs = scale > 1 ? scale : 1, sup = ref_support(f) * fs;
    for (int l = 0; l < lines; l++)
        for (int i = 0; i < n_out; i++) {
            double c = (i + 0.5) * scale, acc[3] = {0, 0, 0}, sum = 0;
            for (int j = 0; j < n_in; j++) { /* every sample: the window is what the filter says, not a bound */
                if (j + 0.5 <= c - sup - 1 || j + 0.5 >= c + sup + 1) continue;
                int lo = (int)(c - sup + 0.5), hi = (int)(c + sup + 0.5);
                if (j < lo || j >= hi) continue;
                double wgt = ref_filter(f, (j - c + 0.5) / fs);
                sum += wgt;
                for (int k = 0; k < 3; k++)
                    acc[k] += wgt * src[(horiz ? (size_t)l * w_in + j : (size_t)j * w_in + l) * 3 + k];
            }
            for (int k = 0; k < 3; k++) {
                double v = floor(acc[k] / sum + 0.5);
                dst[(horiz ? (size_t)l * w_out + i : (size_t)i * w_out + l) * 3 + k] = (uint8_t)(v < 0 ? 0 : v > 255 ? 255 : v);
            }
        }
}

static void test_resize_vs_naive(void **state) {
    (void)state;
    uint32_t seed = 12345;
    const int sizes[][4] = {{40, 30, 13, 7}, {13, 9, 40, 31}, {50, 50, 50, 17}, {50, 50, 19, 50}, {7, 5, 1, 1},
                            {64, 3, 21, 9}};
    for (int f = 1; f <= 5; f++)
        for (size_t s = 0; s < sizeof sizes / sizeof *sizes; s++) {
            int W = sizes[s][0], H = sizes[s][1], ow = sizes[s][2], oh = sizes[s][3];
            wm_image in = {W, H, malloc((size_t)W * H * 3)}, out;
            for (int i = 0; i < W * H * 3; i++) in.rgb[i] = (uint8_t)((seed = seed * 1103515245u + 12345u) >> 24);
            wm_error e = {0};
            assert_int_equal(wm_image_resize(&in, ow, oh, f, &out, &e), WM_OK);
            uint8_t *mid = malloc((size_t)ow * H * 3), *ref = malloc((size_t)ow * oh * 3);
            const uint8_t *hsrc = in.rgb;
            if (ow != W) {
                ref_pass(in.rgb, mid, f, W, ow, H, 1, W, ow);
                hsrc = mid;
            }
            if (oh != H) ref_pass(hsrc, ref, f, H, oh, ow, 0, ow, ow);
            else memcpy(ref, hsrc, (size_t)ow * oh * 3);
            int worst = 0;
            for (int i = 0; i < ow * oh * 3; i++) {
                int d = abs((int)out.rgb[i] - (int)ref[i]);
                worst = d > worst ? d : worst;
            }
            if (worst > 1) fail_msg("filter %d, %dx%d -> %dx%d: off by %d from the naive reference", f, W, H, ow, oh, worst);
            free(mid), free(ref), free(in.rgb);
            wm_image_free(&out);
        }
}

static void test_resize_nearest_and_refusals(void **state) {
    (void)state;
    wm_image in = {5, 1, malloc(15)}, out;
    for (int i = 0; i < 15; i++) in.rgb[i] = (uint8_t)(i / 3 * 10);
    wm_error e = {0};
    assert_int_equal(wm_image_resize(&in, 2, 1, WM_RESAMPLE_NEAREST, &out, &e), WM_OK);
    /* centres at 1.25 and 3.75 */
    assert_int_equal(out.rgb[0], 10);
    assert_int_equal(out.rgb[3], 30);
    wm_image_free(&out);
    assert_int_equal(wm_image_resize(&in, 0, 1, WM_RESAMPLE_BICUBIC, &out, &e), WM_ERR_USAGE);
    assert_null(out.rgb);
    wm_error e2 = {0};
    assert_int_equal(wm_image_resize(&in, 3, 1, 6, &out, &e2), WM_ERR_USAGE);
    assert_non_null(strstr(e2.msg, "filter 6"));
    /* 2^25 x 1 to 3 x 1: the taps (2^25 * 2 * 2 + ...) would take over 256 MB: refused, not allocated */
    wm_image wide = {1 << 25, 1, NULL};
    wm_error e3 = {0};
    assert_int_equal(wm_image_resize(&wide, 224, 1, WM_RESAMPLE_BICUBIC, &out, &e3), WM_ERR_INPUT);
    assert_non_null(strstr(e3.msg, "too elongated"));
    assert_null(out.rgb);
    free(in.rgb);
}

static void test_exif(void **state) {
    (void)state;
    static const uint8_t le6[] = {'I', 'I', '*', 0, 8, 0, 0, 0, 1, 0, 0x12, 0x01, 3, 0, 1, 0, 0, 0, 6, 0, 0, 0, 0, 0, 0, 0};
    static const uint8_t be8[] = {'M', 'M', 0, '*', 0, 0, 0, 8, 0, 1, 0x01, 0x12, 0, 3, 0, 0, 0, 1, 0, 8, 0, 0, 0, 0, 0, 0};
    assert_int_equal(wm_exif_orientation(le6, sizeof le6), 6);
    assert_int_equal(wm_exif_orientation(be8, sizeof be8), 8);
    assert_int_equal(wm_exif_orientation(le6, sizeof le6 - 9), 1); /* the entry cut: not read */
    uint8_t b[sizeof le6];
    memcpy(b, le6, sizeof b);
    b[4] = 0xf0, b[7] = 0xff; /* IFD0 far past the end */
    assert_int_equal(wm_exif_orientation(b, sizeof b), 1);
    memcpy(b, le6, sizeof b);
    b[8] = 0xff, b[9] = 0xff, b[10] = 0x13; /* 65535 entries in 26 bytes, none Orientation: the walk stops */
    assert_int_equal(wm_exif_orientation(b, sizeof b), 1);
    memcpy(b, le6, sizeof b);
    b[12] = 4; /* LONG, not SHORT */
    assert_int_equal(wm_exif_orientation(b, sizeof b), 1);
    memcpy(b, le6, sizeof b);
    b[18] = 9; /* out of range */
    assert_int_equal(wm_exif_orientation(b, sizeof b), 1);
    assert_int_equal(wm_exif_orientation(le6, 4), 1);
    assert_int_equal(wm_exif_orientation(NULL, 0), 1);
}

static void test_orient(void **state) {
    (void)state;
    /* 3 wide, 2 tall: pixel value = 10 * row + column */
    const int want[9][6] = {
        {0},
        {0, 1, 2, 10, 11, 12}, {2, 1, 0, 12, 11, 10}, {12, 11, 10, 2, 1, 0}, {10, 11, 12, 0, 1, 2},
        {0, 10, 1, 11, 2, 12}, {10, 0, 11, 1, 12, 2}, {12, 2, 11, 1, 10, 0}, {2, 12, 1, 11, 0, 10},
    };
    for (int o = 1; o <= 8; o++) {
        wm_image im = {3, 2, malloc(18)};
        for (int y = 0; y < 2; y++)
            for (int x = 0; x < 3; x++) memset(im.rgb + (y * 3 + x) * 3, 10 * y + x, 3);
        wm_error e = {0};
        assert_int_equal(wm_image_orient(&im, o, &e), WM_OK);
        assert_int_equal(im.w, o >= 5 ? 2 : 3);
        for (int i = 0; i < 6; i++)
            if (im.rgb[i * 3] != want[o][i]) fail_msg("orientation %d: pixel %d is %d, want %d", o, i, im.rgb[i * 3], want[o][i]);
        wm_image_free(&im);
    }
}

static void test_budget_and_refusals(void **state) {
    (void)state;
    wm_error e = {0};
    assert_int_equal(wm_image_check_size("x.png", 1ull << 33, 1ull << 33, 0, &e), WM_ERR_INPUT);
    assert_non_null(strstr(e.msg, "x.png: the image is 8589934592x8589934592"));
    wm_error e2 = {0};
    assert_int_equal(wm_image_check_size("x.png", 100, 100, 9999, &e2), WM_ERR_INPUT);
    assert_non_null(strstr(e2.msg, "10000 pixels, over the budget of 9999"));
    assert_int_equal(wm_image_check_size("x.png", 100, 100, 10000, &e2), WM_OK);
    wm_image im;
    wm_error e3 = {0};
    static const uint8_t gif[] = "GIF89a........";
    assert_int_equal(wm_image_decode(gif, sizeof gif, "a.gif", 0, &im, &e3), WM_ERR_UNSUPPORTED);
    assert_null(im.rgb);
    assert_non_null(strstr(e3.msg, "a.gif: not a PNG or JPEG image (a GIF)"));
    /* a seed PNG and JPEG: whole they decode, cut at every length they fail cleanly with nothing allocated */
    const char *srcdir = getenv("WM_SOURCE_DIR");
    const char *names[] = {"rgba8.png", "exif8.jpg", "progressive444.jpg"};
    for (int k = 0; k < 3; k++) {
        char p[4096];
        snprintf(p, sizeof p, "%s/tests/fuzz/seeds/image/%s", srcdir ? srcdir : ".", names[k]);
        wm_map m;
        wm_error em = {0};
        assert_int_equal(wm_map_file(p, 0, &m, &em), WM_OK);
        wm_error ed = {0};
        assert_int_equal(wm_image_decode(m.data, m.size, p, 0, &im, &ed), WM_OK);
        assert_true(im.w > 0 && im.h > 0);
        if (k == 1) assert_true(im.w == 12 && im.h == 19); /* 19x12 with orientation 8: rotated */
        wm_image_free(&im);
        for (size_t n = 0; n + 2 < m.size; n += 1 + n / 8) {
            wm_error ec = {0};
            wm_status st = wm_image_decode(m.data, n, "cut", 0, &im, &ec);
            if (st == WM_OK) fail_msg("%s cut to %zu bytes decoded", names[k], n);
            assert_null(im.rgb);
            assert_non_null(strstr(ec.msg, "cut"));
        }
        wm_unmap(&m);
    }
}

static void expect_prep_error(const char *json, wm_status want, const char *needle) {
    wm_img_prep p;
    wm_error e = {0};
    wm_status st = wm_img_prep_parse(json, strlen(json), "pp.json", &p, &e);
    if (st != want || !strstr(e.msg, needle)) fail_msg("%s: status %d, message '%s' (want %d, '%s')", json, st, e.msg, want, needle);
}

static void test_prep_parse(void **state) {
    (void)state;
    wm_img_prep p;
    wm_error e = {0};
    const char *ok = "{\"image_processor_type\": \"CLIPImageProcessorFast\", \"size\": 200, \"resample\": null}";
    assert_int_equal(wm_img_prep_parse(ok, strlen(ok), "pp.json", &p, &e), WM_OK);
    assert_string_equal(p.type, "CLIPImageProcessor");
    assert_int_equal(p.shortest_edge, 200); /* CLIP: an int size is the shortest edge */
    assert_int_equal(p.resample, WM_RESAMPLE_BICUBIC);
    assert_int_equal(p.crop_h, 224);
    const char *vit = "{\"image_processor_type\": \"ViTImageProcessor\", \"size\": 96}";
    assert_int_equal(wm_img_prep_parse(vit, strlen(vit), "pp.json", &p, &e), WM_OK);
    assert_true(p.shortest_edge == 0 && p.size_h == 96 && p.size_w == 96); /* ViT: square */
    assert_int_equal(p.resample, WM_RESAMPLE_BILINEAR);
    expect_prep_error("{\"image_processor_type\": \"LlavaImageProcessor\"}", WM_ERR_UNSUPPORTED, "'LlavaImageProcessor'");
    expect_prep_error("{}", WM_ERR_UNSUPPORTED, "image_processor_type': missing");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"resample\": 9}", WM_ERR_INPUT, "'resample'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"do_resize\": \"yes\"}", WM_ERR_INPUT, "'do_resize'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"size\": {\"longest_edge\": 5}}",
                      WM_ERR_UNSUPPORTED, "'size.longest_edge'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"size\": {\"height\": 0, \"width\": 4}}",
                      WM_ERR_INPUT, "'size.height'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"size\": 1e9}", WM_ERR_INPUT, "'size'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"image_std\": [1, 0, 1]}", WM_ERR_INPUT, "'image_std'");
    expect_prep_error("{\"image_processor_type\": \"ViTImageProcessor\", \"image_mean\": [1, 2]}", WM_ERR_INPUT, "'image_mean'");
    expect_prep_error("{\"image_processor_type\": \"ConvNextImageProcessor\", \"crop_pct\": 0}", WM_ERR_INPUT, "'crop_pct'");
    expect_prep_error("{\"image_processor_type\": \"ConvNextImageProcessor\", \"size\": {\"height\": 4, \"width\": 4}}",
                      WM_ERR_INPUT, "shortest_edge");
    expect_prep_error("{\"image_processor_type\": \"CLIPImageProcessor\", \"crop_size\": {\"shortest_edge\": 4}}",
                      WM_ERR_INPUT, "'crop_size'");
}

static void test_prep_extreme_aspect(void **state) {
    (void)state;
    /* 1 x 40 with shortest_edge 256: resized to 256 x 10240 pixels, which a budget of 10^6 refuses */
    wm_img_prep p;
    wm_error e = {0};
    const char *j = "{\"image_processor_type\": \"BitImageProcessor\"}";
    assert_int_equal(wm_img_prep_parse(j, strlen(j), "pp.json", &p, &e), WM_OK);
    p.max_pixels = 1000000;
    wm_image im = {1, 40, calloc(40, 3)};
    float *x = NULL;
    int h, w;
    assert_int_equal(wm_img_prep_run(&p, &im, "thin.png", &x, &h, &w, &e), WM_ERR_INPUT);
    assert_null(x);
    assert_non_null(strstr(e.msg, "thin.png"));
    assert_non_null(strstr(e.msg, "budget"));
    /* a crop_size of 65536 x 65536 (4.3 G pixels) is refused before anything that size is allocated */
    wm_img_prep big = p;
    big.do_resize = 0, big.crop_h = big.crop_w = 65536, big.max_pixels = 0;
    wm_error e4 = {0};
    assert_int_equal(wm_img_prep_run(&big, &im, "thin.png", &x, &h, &w, &e4), WM_ERR_INPUT);
    assert_non_null(strstr(e4.msg, "cropped as BitImageProcessor says"));
    assert_non_null(strstr(e4.msg, "65536x65536"));
    p.max_pixels = 0;
    wm_error e2 = {0};
    assert_int_equal(wm_img_prep_run(&p, &im, "thin.png", &x, &h, &w, &e2), WM_OK);
    assert_true(h == 224 && w == 224);
    free(x);
    wm_image_free(&im);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_resize_vs_naive),   cmocka_unit_test(test_resize_nearest_and_refusals),
        cmocka_unit_test(test_exif),              cmocka_unit_test(test_orient),
        cmocka_unit_test(test_budget_and_refusals), cmocka_unit_test(test_prep_parse),
        cmocka_unit_test(test_prep_extreme_aspect),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
