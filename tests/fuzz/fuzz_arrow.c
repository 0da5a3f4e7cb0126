/* libFuzzer target: Arrow IPC streams and files (src/core/arrow_ipc.c) read from memory. The first byte picks a
   row cap (b % 4, 0: all) and a small cap on body bytes (1 KiB << (b / 4 % 8)); the table is capped at 4096 cells.
   Seeds: tests/fuzz/seeds/arrow, written by pyarrow (tests/fuzz/make_seeds_parquet.py). */
#include <stddef.h>
#include <stdint.h>

#include "core/arrow_ipc.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    if (size < 1) return 0;
    wm_parquet_opts o = {.max_rows = data[0] % 4, .max_bytes = (uint64_t)1024 << (data[0] / 4 % 8), .max_cells = 4096};
    wm_table t;
    wm_error err = {0};
    if (wm_arrow_parse(data + 1, size - 1, "fuzz", &o, &t, &err) == WM_OK) {
        if (o.max_rows && t.n_rows > o.max_rows) __builtin_trap();
        for (size_t r = 0; r < t.n_rows; r++)
            for (size_t c = 0; c < t.n_cols; c++) {
                const char *s = wm_table_cell(&t, r, (int)c);
                if (s && s[t.sizes[r * t.n_cols + c]]) __builtin_trap(); /* every cell ends in a NUL */
            }
        wm_table_free(&t);
    } else if (!err.msg[0]) __builtin_trap(); /* a failure always says why */
    return 0;
}
