/*
 * Unit tests of the reference-layout JSON helpers: the compare aggregate's NaN / infinity rules (wm_agg,
 * wm_agg_ref_mean/std), the GenAI request figures (wm_perf_request_derive), and the writer's Python-style
 * numbers and spliced values (wm_json_num_py, wm_json_raw).
 */
#include <cjson/cJSON.h>
#include <math.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/json.h"
#include "eval/compare.h"
#include "eval/perf_report.h"

static wm_agg agg_of(const double *v, size_t n) {
    wm_agg a;
    memset(&a, 0, sizeof a);
    for (size_t i = 0; i < n; i++) wm_agg_add(&a, v[i]);
    return a;
}

static void test_agg_reference_rules(void **state) {
    (void)state;
    double fin[] = {1, 3}, inf2[] = {INFINITY, INFINITY}, mixed[] = {10, INFINITY}, nan_later[] = {10, NAN, 20};
    wm_agg a = agg_of(fin, 2);
    assert_true(wm_agg_ref_mean(&a) == 2 && wm_agg_ref_std(&a) == 1);
    a = agg_of(inf2, 2); /* identical outputs: +inf, std 0 */
    assert_true(isinf(wm_agg_ref_mean(&a)) && wm_agg_ref_mean(&a) > 0 && wm_agg_ref_std(&a) == 0);
    a = agg_of(mixed, 2); /* mixed: NaN as the reference (ours stays +inf) */
    assert_true(isnan(wm_agg_ref_mean(&a)) && isnan(wm_agg_ref_std(&a)));
    assert_true(isinf(wm_agg_mean(&a)) && a.min == 10 && isinf(a.max));
    a = agg_of(nan_later, 3); /* a NaN after a finite sample: min and max are NaN (a --threshold gate fails) */
    assert_true(isnan(a.min) && isnan(a.max) && isnan(wm_agg_ref_mean(&a)));
}

static void test_request_derive(void **state) {
    (void)state;
    /* spans in ms: template 100, tokenization 150, generator 50, prefill 400, first token 600, decode 3 x 400 */
    double dec[] = {400, 400, 400};
    wm_perf_request r = {.prompt_tokens = 5, .generated_tokens = 4, .template_ms = 100, .tokenization_ms = 150,
                         .generator_create_ms = 50, .prefill_ms = 400, .first_token_ms = 600,
                         .sequence_fetch_ms = 25, .detokenization_ms = 25, .decode_ms = dec, .n_decode = 3};
    wm_perf_derived d;
    wm_perf_request_derive(&r, &d);
    assert_true(fabs(d.model_ttft_ms - 1000) < 1e-9 && fabs(d.request_ttft_ms - 1300) < 1e-9);
    assert_true(fabs(d.response_eval_ms - 1800) < 1e-9 && fabs(d.model_compute_ms - 2200) < 1e-9);
    assert_true(fabs(d.request_ms - 2550) < 1e-9 && fabs(d.prefill_tps - 12.5) < 1e-9);
    assert_true(fabs(d.decode_tps - 2.5) < 1e-9 && fabs(d.tpot_ms - 400) < 1e-9);
    assert_true(fabs(d.response_eval_tps - 4 / 1.8) < 1e-9);
    r.n_decode = 0; /* one generated token: no steady state */
    wm_perf_request_derive(&r, &d);
    assert_true(isnan(d.decode_tps) && isnan(d.tpot_ms));
}

static void test_num_py_and_raw(void **state) {
    (void)state;
    wm_json in, j;
    wm_json_init(&in);
    wm_json_obj(&in, NULL);
    wm_json_int(&in, "a", 1);
    wm_json_arr(&in, "b");
    wm_json_str(&in, NULL, "x\ny");
    wm_json_arr_end(&in);
    wm_json_obj_end(&in);
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_num_py(&j, "inf", INFINITY);
    wm_json_num_py(&j, "ninf", -INFINITY);
    wm_json_num_py(&j, "nan", NAN);
    wm_json_num_py(&j, "x", 2.5);
    wm_json_raw(&j, "inner", wm_json_text(&in));
    wm_json_obj_end(&j);
    const char *t = wm_json_text(&j);
    assert_non_null(strstr(t, "\"inf\": Infinity,"));
    assert_non_null(strstr(t, "\"ninf\": -Infinity,"));
    assert_non_null(strstr(t, "\"nan\": NaN,"));
    /* without the non-strict words the text is strict JSON, the spliced object intact */
    wm_json s;
    wm_json_init(&s);
    wm_json_obj(&s, NULL);
    wm_json_raw(&s, "inner", wm_json_text(&in));
    wm_json_num_py(&s, "x", 2.5);
    wm_json_obj_end(&s);
    cJSON *doc = cJSON_Parse(wm_json_text(&s));
    assert_non_null(doc);
    const cJSON *inner = cJSON_GetObjectItem(doc, "inner");
    assert_int_equal(cJSON_GetObjectItem(inner, "a")->valueint, 1);
    assert_string_equal(cJSON_GetArrayItem(cJSON_GetObjectItem(inner, "b"), 0)->valuestring, "x\ny");
    assert_true(cJSON_GetObjectItem(doc, "x")->valuedouble == 2.5);
    cJSON_Delete(doc);
    wm_json_free(&s);
    wm_json_free(&j);
    wm_json_free(&in);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_agg_reference_rules),
        cmocka_unit_test(test_request_derive),
        cmocka_unit_test(test_num_py_and_raw),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
