/*
 * wm_tabletool - prints a data set file as wm_table_read reads it (the oracle tests compare it with pyarrow):
 *   wm_tabletool FILE [MAX_ROWS]
 * One JSON object: {"columns": [...], "rows": [[cell, ...], ...], "lines": [...]}, each cell the hex of its
 * bytes, or null. Errors: the message on stderr, exit 2 (bad input) or 1.
 */
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "core/table.h"

int main(int argc, char **argv) {
    if (argc < 2) {
        fprintf(stderr, "usage: wm_tabletool FILE [MAX_ROWS]\n");
        return 2;
    }
    wm_table_opts o = {.max_rows = argc > 2 ? strtoul(argv[2], NULL, 10) : 0};
    wm_table t;
    wm_error err = {0};
    wm_status st = wm_table_read(argv[1], WM_TABLE_AUTO, &o, &t, &err);
    if (st) {
        fprintf(stderr, "wm_tabletool: error: %s\n", err.msg);
        return st == WM_ERR_NOMEM || st == WM_ERR_IO ? 1 : 2;
    }
    printf("{\"columns\": [");
    for (size_t c = 0; c < t.n_cols; c++) {
        printf("%s\"", c ? ", " : "");
        for (const unsigned char *p = (const unsigned char *)t.names[c]; *p; p++)
            printf(*p == '"' || *p == '\\' ? "\\%c" : *p < 0x20 ? "\\u%04x" : "%c", *p);
        printf("\"");
    }
    printf("], \"rows\": [");
    for (size_t r = 0; r < t.n_rows; r++) {
        printf("%s[", r ? ", " : "");
        for (size_t c = 0; c < t.n_cols; c++) {
            const char *s = wm_table_cell(&t, r, (int)c);
            if (c) printf(", ");
            if (!s) {
                printf("null");
                continue;
            }
            size_t n = t.sizes ? t.sizes[r * t.n_cols + c] : strlen(s);
            printf("\"");
            for (size_t i = 0; i < n; i++) printf("%02x", (unsigned char)s[i]);
            printf("\"");
        }
        printf("]");
    }
    printf("], \"lines\": [");
    for (size_t r = 0; r < t.n_rows; r++) printf("%s%zu", r ? ", " : "", t.lines[r]);
    printf("]}\n");
    wm_table_free(&t);
    return 0;
}
