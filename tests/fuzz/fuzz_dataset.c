/* libFuzzer target: data set parsing (JSONL, TSV, CSV) of src/eval/dataset.c. */
#include <stddef.h>
#include <stdint.h>

#include "eval/dataset.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    wm_table_format f = (wm_table_format)(1 + data[0] % 3);
    wm_table t;
    wm_error err = {0};
    if (wm_table_parse((const char *)data + 1, size - 1, f, "fuzz", &t, &err) == WM_OK) {
        for (size_t r = 0; r < t.n_rows; r++)
            for (size_t c = 0; c < t.n_cols; c++) (void)wm_table_cell(&t, r, (int)c);
        (void)wm_table_col(&t, "#0");
        wm_table_free(&t);
    }
    return 0;
}
