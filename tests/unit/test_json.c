/* Unit tests of the JSON writer: structure, escaping, checked by cJSON. */
#include <cjson/cJSON.h>
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdint.h>
#include <cmocka.h>
#include <string.h>

#include "core/json.h"

static void test_nested_and_escapes(void **state) {
    (void)state;
    wm_json j;
    wm_json_init(&j);
    wm_json_obj(&j, NULL);
    wm_json_str(&j, "s", "a\"b\\c\n\x01");
    wm_json_int(&j, "neg", -5);
    wm_json_uint(&j, "big", 18446744073709551615ull);
    wm_json_arr(&j, "arr");
    wm_json_int(&j, NULL, 1);
    wm_json_null(&j, NULL);
    wm_json_obj(&j, NULL);
    wm_json_obj_end(&j);
    wm_json_arr_end(&j);
    wm_json_obj(&j, "empty");
    wm_json_obj_end(&j);
    wm_json_num(&j, "nan", 0.0 / 0.0);
    wm_json_obj_end(&j);
    cJSON *doc = cJSON_Parse(wm_json_text(&j));
    assert_non_null(doc);
    assert_string_equal(cJSON_GetObjectItem(doc, "s")->valuestring, "a\"b\\c\n\x01");
    assert_int_equal(cJSON_GetObjectItem(doc, "neg")->valueint, -5);
    assert_int_equal(cJSON_GetArraySize(cJSON_GetObjectItem(doc, "arr")), 3);
    assert_true(cJSON_IsNull(cJSON_GetObjectItem(doc, "nan")));
    assert_true(cJSON_IsObject(cJSON_GetObjectItem(doc, "empty")));
    assert_non_null(strstr(wm_json_text(&j), "18446744073709551615"));
    cJSON_Delete(doc);
    wm_json_free(&j);
}

int main(void) {
    const struct CMUnitTest tests[] = {cmocka_unit_test(test_nested_and_escapes)};
    return cmocka_run_group_tests(tests, NULL, NULL);
}
