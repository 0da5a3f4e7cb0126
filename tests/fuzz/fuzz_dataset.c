/* libFuzzer target: data set parsing (JSONL, TSV, CSV) of src/core/table.c, through the same bounded line
   reader as files. The second byte picks a small line limit (64 << (b % 8) bytes) and a row cap (b / 8 % 4, 0 all),
   so the too-long-line and stop-early paths run as often as the rest. */
#include <stddef.h>
#include <stdint.h>

#include "core/table.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 2) return 0;
    wm_table_format f = (wm_table_format)(1 + data[0] % 3);
    wm_table_opts o = {.max_rows = (size_t)(data[1] / 8 % 4), .max_line = (size_t)64 << (data[1] % 8)};
    wm_table t;
    wm_error err = {0};
    if (wm_table_parse((const char *)data + 2, size - 2, f, "fuzz", &o, &t, &err) == WM_OK) {
        if (o.max_rows && t.n_rows > o.max_rows) __builtin_trap();
        for (size_t r = 0; r < t.n_rows; r++) {
            if (t.lines[r] < 1) __builtin_trap();
            for (size_t c = 0; c < t.n_cols; c++) (void)wm_table_cell(&t, r, (int)c);
        }
        (void)wm_table_col(&t, "#0");
        wm_table_free(&t);
    }
    return 0;
}
