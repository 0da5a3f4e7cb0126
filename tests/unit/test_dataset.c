/* test_dataset.c - data set tables: JSONL, GLUE-style TSV, RFC 4180 CSV, and their errors. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>

#include "eval/dataset.h"

static void parse_ok(const char *text, wm_table_format f, wm_table *t) {
    wm_error err = {0};
    assert_int_equal(wm_table_parse(text, strlen(text), f, "t", t, &err), WM_OK);
}

static void parse_err(const char *text, wm_table_format f, const char *needle) {
    wm_table t;
    wm_error err = {0};
    assert_int_equal(wm_table_parse(text, strlen(text), f, "t", &t, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, needle));
}

static void test_tsv_glue(void **st) {
    (void)st;
    wm_table t;
    parse_ok("Quality\t#1 ID\t#2 ID\t#1 String\t#2 String\n1\t1\t2\tHe said \"hi\" .\tShe \"left\" .\n\n0\t3\t4\ta\tb\n",
             WM_TABLE_TSV, &t);
    assert_int_equal(t.n_rows, 2);
    assert_int_equal(wm_table_col(&t, "#1 String"), 3);
    assert_int_equal(wm_table_col(&t, "#4"), 4);
    assert_int_equal(wm_table_col(&t, "#5"), -1);
    assert_string_equal(wm_table_cell(&t, 0, 3), "He said \"hi\" ."); /* quotes are text in GLUE TSV */
    assert_string_equal(wm_table_cell(&t, 1, 0), "0");
    wm_table_free(&t);
    parse_err("a\tb\n1\t2\t3\n", WM_TABLE_TSV, "line 2");
}

static void test_csv_quotes(void **st) {
    (void)st;
    wm_table t;
    parse_ok("s1,s2,score\r\n\"A, \"\"quoted\"\"\",B,4.5\r\nx,\"multi\nline\",0\r\n", WM_TABLE_CSV, &t);
    assert_int_equal(t.n_rows, 2);
    assert_string_equal(wm_table_cell(&t, 0, 0), "A, \"quoted\"");
    assert_string_equal(wm_table_cell(&t, 1, 1), "multi\nline");
    assert_string_equal(wm_table_cell(&t, 1, 2), "0");
    wm_table_free(&t);
    parse_err("a,b\n\"open,1\n", WM_TABLE_CSV, "unterminated");
    /* a record that fails after some cells: those cells are freed (the ASan build checks for leaks; the fuzzer
       found this one) */
    parse_err("a,b\n1,\"open\n", WM_TABLE_CSV, "unterminated");
    char wide[1024], *w = wide;
    w += sprintf(w, "a,b\n");
    for (int i = 0; i < 300; i++) w += sprintf(w, "%d,", i % 10);
    strcpy(w, "9\n");
    parse_err(wide, WM_TABLE_CSV, "line 2");     /* a row past 256 cells */
    parse_err(wide + 4, WM_TABLE_CSV, "columns"); /* a header past 256 cells */
}

static void test_jsonl(void **st) {
    (void)st;
    wm_table t;
    parse_ok("{\"query\": \"q\", \"passage\": \"p\", \"label\": 1}\n\n{\"passage\": \"r\", \"query\": \"q2\", \"label\": true}\n",
             WM_TABLE_JSONL, &t);
    assert_int_equal(t.n_rows, 2);
    int lab = wm_table_col(&t, "label");
    assert_string_equal(wm_table_cell(&t, 0, lab), "1");
    assert_string_equal(wm_table_cell(&t, 1, lab), "true");
    assert_string_equal(wm_table_cell(&t, 1, wm_table_col(&t, "query")), "q2");
    wm_table_free(&t);
    parse_ok("{\"a\": 1}\n{\"b\": 2}\n", WM_TABLE_JSONL, &t);
    assert_null(wm_table_cell(&t, 1, 0)); /* missing key */
    wm_table_free(&t);
    parse_err("[1, 2]\n", WM_TABLE_JSONL, "not a JSON object");
    char deep[200];
    memset(deep, '[', 100);
    strcpy(deep + 100, "\n");
    parse_err(deep, WM_TABLE_JSONL, "deeper");
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tsv_glue),
        cmocka_unit_test(test_csv_quotes),
        cmocka_unit_test(test_jsonl),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
