/* test_dataset.c - data set tables: JSONL, GLUE-style TSV, RFC 4180 CSV, and their errors; the bounded streaming
   reader (line limit, row cap, BOM, UTF-8) over text and over files. */
#include <setjmp.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <string.h>

#include <cmocka.h>
#include <stdlib.h>

#include "core/table.h"
#include "unit_tmpdir.h"

static void parse_ok(const char *text, wm_table_format f, wm_table *t) {
    wm_error err = {0};
    assert_int_equal(wm_table_parse(text, strlen(text), f, "t", NULL, t, &err), WM_OK);
}

/* Parses len bytes of text with options o (NULL: defaults), expecting WM_ERR_INPUT with every needle (NULL-ended). */
static void parse_err_n(const char *text, size_t len, wm_table_format f, const wm_table_opts *o, ...) {
    wm_table t;
    wm_error err = {0};
    assert_int_equal(wm_table_parse(text, len, f, "t", o, &t, &err), WM_ERR_INPUT);
    assert_int_equal(t.n_rows, 0); /* nothing left behind */
    va_list ap;
    va_start(ap, o);
    for (const char *needle; (needle = va_arg(ap, const char *));) {
        if (!strstr(err.msg, needle)) print_error("'%s' not in '%s'\n", needle, err.msg);
        assert_non_null(strstr(err.msg, needle));
    }
    va_end(ap);
}

static void parse_err(const char *text, wm_table_format f, const char *needle) {
    parse_err_n(text, strlen(text), f, NULL, needle, NULL);
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
    parse_err("a\tb\n1\t2\t3\n", WM_TABLE_TSV, "t:2: the row has 3 cells, the header 2");
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
    parse_err(wide, WM_TABLE_CSV, "t:2:");       /* a row past 256 cells */
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


/* A UTF-8 byte order mark is not part of the first column's name (it was: "no text column"). */
static void test_bom(void **st) {
    (void)st;
    wm_table t;
    parse_ok("\xEF\xBB\xBFtext,label\r\nhello,1\r\n", WM_TABLE_CSV, &t);
    assert_int_equal(wm_table_col(&t, "text"), 0);
    assert_string_equal(t.names[0], "text");
    wm_table_free(&t);
    parse_ok("\xEF\xBB\xBFtext\tlabel\nhello\t1\n", WM_TABLE_TSV, &t);
    assert_int_equal(wm_table_col(&t, "text"), 0);
    wm_table_free(&t);
    parse_ok("\xEF\xBB\xBF{\"text\": \"a\", \"label\": 1}\n", WM_TABLE_JSONL, &t);
    assert_int_equal(wm_table_col(&t, "text"), 0);
    wm_table_free(&t);
    parse_ok("a,b\n\xEF\xBB\xBFx,y\n", WM_TABLE_CSV, &t); /* only at the start of the file */
    assert_string_equal(wm_table_cell(&t, 0, 0), "\xEF\xBB\xBFx");
    wm_table_free(&t);
}

/* Invalid UTF-8 and NUL bytes are refused naming the file, line and byte (1-based within the line). */
static void test_utf8(void **st) {
    (void)st;
    parse_err("text\tlabel\nok \xC3\xA9\t1\nbad \xC3\x28\t0\n", WM_TABLE_TSV, "t:3: invalid UTF-8 at byte 5");
    parse_err("a,b\n\xC0\xAF,1\n", WM_TABLE_CSV, "t:2: invalid UTF-8 at byte 1");        /* overlong */
    parse_err("a,b\n1,\xED\xA0\x80\n", WM_TABLE_CSV, "t:2: invalid UTF-8 at byte 3");    /* a surrogate */
    parse_err("a,b\n1,\xF4\x90\x80\x80\n", WM_TABLE_CSV, "t:2: invalid UTF-8 at byte 3"); /* past U+10FFFF */
    parse_err("a,b\n1,\xE2\x82\n", WM_TABLE_CSV, "t:2: invalid UTF-8 at byte 3");        /* cut short */
    parse_err("{\"a\": \"\x80\"}\n", WM_TABLE_JSONL, "t:1: invalid UTF-8 at byte 8");
    parse_err_n("a\tb\nx\0y\t1\n", 10, WM_TABLE_TSV, NULL, "t:2: a NUL byte at byte 2", NULL);
    wm_table t;
    parse_ok("a\tb\n\xF0\x9F\x98\x80\t\xE2\x82\xAC\n", WM_TABLE_TSV, &t); /* 4- and 3-byte characters */
    assert_string_equal(wm_table_cell(&t, 0, 1), "\xE2\x82\xAC");
    wm_table_free(&t);
}

/* A line over the limit is refused with its length and the limit, also inside a CSV quoted cell. */
static void test_line_limit(void **st) {
    (void)st;
    wm_table_opts o = {.max_line = 64};
    char text[400];
    int k = sprintf(text, "text\tlabel\nshort\t1\n");
    memset(text + k, 'x', 100);
    strcpy(text + k + 100, "\t0\nafter\t1\n");
    parse_err_n(text, strlen(text), WM_TABLE_TSV, &o, "t:3: the line is 102 bytes long", "limit of 64 bytes",
                "--max-line-bytes", NULL);
    o.max_line = 102; /* exactly the limit: read */
    wm_table t;
    wm_error err = {0};
    assert_int_equal(wm_table_parse(text, strlen(text), WM_TABLE_TSV, "t", &o, &t, &err), WM_OK);
    assert_int_equal(t.n_rows, 3);
    wm_table_free(&t);
    o.max_line = 20; /* a CSV record over several lines, each short */
    const char *rec = "a,b\n1,\"one\nline two\nline three\nline four\"\n";
    parse_err_n(rec, strlen(rec), WM_TABLE_CSV, &o, "t:2: the record",
                "limit of 20 bytes", NULL);
    const char *js = "{\"a\": 1}\n{\"a\": \"0123456789012345678901234567890123456789\"}\n";
    parse_err_n(js, strlen(js), WM_TABLE_JSONL, &(wm_table_opts){.max_line = 16}, "t:2: the line is 49 bytes long",
                NULL);
}

/* max_rows: reading stops there, so whatever follows (here a broken row) is never read; lines[] numbers rows. */
static void test_row_cap(void **st) {
    (void)st;
    const char *text = "a\tb\n1\t2\n\n3\t4\nbroken row\n";
    wm_table t;
    wm_error err = {0};
    wm_table_opts o = {.max_rows = 2};
    assert_int_equal(wm_table_parse(text, strlen(text), WM_TABLE_TSV, "t", &o, &t, &err), WM_OK);
    assert_int_equal(t.n_rows, 2);
    assert_int_equal(t.lines[0], 2);
    assert_int_equal(t.lines[1], 4); /* after a blank line */
    wm_table_free(&t);
    o.max_rows = 3;
    parse_err_n(text, strlen(text), WM_TABLE_TSV, &o, "t:5:", NULL);
    parse_ok("a,b\n1,\"x\ny\"\n2,3\n", WM_TABLE_CSV, &t);
    assert_int_equal(t.lines[1], 4); /* the record after one of two lines */
    wm_table_free(&t);
    parse_ok("a\tb\n", WM_TABLE_TSV, &t); /* a header alone: a table without rows (the evaluator refuses it) */
    assert_int_equal(t.n_rows, 0);
    assert_int_equal(t.n_cols, 2);
    wm_table_free(&t);
}

/* Files are read through a 64 KiB buffer: lines across its end, a long line told by length without keeping it,
   and a cap that leaves most of a large file unread. */
static void test_file_stream(void **st) {
    (void)st;
    char dir[64], path[128];
    assert_int_equal(wm_test_tmpdir_make(dir, sizeof dir, "dataset"), 0);
    snprintf(path, sizeof path, "%s/d.tsv", dir);
    FILE *f = fopen(path, "wb");
    assert_non_null(f);
    fputs("\xEF\xBB\xBFtext\tlabel\n", f);
    for (int i = 0; i < 20000; i++) fprintf(f, "row number %d\t%d\n", i, i % 2); /* about 330 KB */
    fputs("broken\n", f);
    fclose(f);
    wm_table t;
    wm_error err = {0};
    assert_int_equal(wm_table_read(path, WM_TABLE_AUTO, NULL, &t, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, ":20002: the row has 1 cells"));
    memset(&err, 0, sizeof err);
    wm_table_opts o = {.max_rows = 20000};
    assert_int_equal(wm_table_read(path, WM_TABLE_AUTO, &o, &t, &err), WM_OK);
    assert_int_equal(t.n_rows, 20000);
    assert_string_equal(t.names[0], "text");
    for (size_t r = 0; r < t.n_rows; r += 997) { /* every row whole, across the buffer boundaries */
        char want[32];
        snprintf(want, sizeof want, "row number %zu", r);
        assert_string_equal(wm_table_cell(&t, r, 0), want);
        assert_int_equal(t.lines[r], r + 2);
    }
    wm_table_free(&t);
    f = fopen(path, "wb"); /* a 1 MB line between two short ones */
    assert_non_null(f);
    fputs("text\tlabel\na\t1\n", f);
    for (int i = 0; i < 1 << 20; i++) fputc('y', f);
    fputs("\t0\nb\t1\n", f);
    fclose(f);
    o = (wm_table_opts){.max_line = 1000};
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_table_read(path, WM_TABLE_TSV, &o, &t, &err), WM_ERR_INPUT);
    assert_non_null(strstr(err.msg, ":3: the line is 1048578 bytes long, over the limit of 1000 bytes"));
    o.max_line = 2 << 20;
    memset(&err, 0, sizeof err);
    assert_int_equal(wm_table_read(path, WM_TABLE_TSV, &o, &t, &err), WM_OK);
    assert_int_equal(t.n_rows, 3);
    assert_int_equal(strlen(wm_table_cell(&t, 1, 0)), 1 << 20);
    assert_string_equal(wm_table_cell(&t, 2, 0), "b");
    wm_table_free(&t);
    assert_int_equal(wm_test_tmpdir_remove(dir), 0);
}

int main(void) {
    const struct CMUnitTest tests[] = {
        cmocka_unit_test(test_tsv_glue),
        cmocka_unit_test(test_csv_quotes),
        cmocka_unit_test(test_jsonl),
        cmocka_unit_test(test_bom),
        cmocka_unit_test(test_utf8),
        cmocka_unit_test(test_line_limit),
        cmocka_unit_test(test_row_cap),
        cmocka_unit_test(test_file_stream),
    };
    return cmocka_run_group_tests(tests, NULL, NULL);
}
