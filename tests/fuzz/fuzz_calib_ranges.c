/*
 * libFuzzer target for the calibration ranges file (JSON {"value": [min, max]}):
 * the bytes are written to a temporary file and loaded; no crash, no leak, and
 * every accepted range has finite min <= max.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <unistd.h>

#include "opt/quant_calib.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    char path[] = "/tmp/wm_fuzz_ranges_XXXXXX";
    int fd = mkstemp(path);
    if (fd < 0) return 0;
    size_t off = 0;
    while (off < size) {
        ssize_t w = write(fd, data + off, size - off);
        if (w <= 0) break;
        off += (size_t)w;
    }
    close(fd);
    wm_calib_ranges r = {0};
    wm_error e = {0};
    if (wm_calib_ranges_load(path, &r, &e) == WM_OK)
        for (size_t i = 0; i < r.n; i++)
            if (!(r.v[i].lo <= r.v[i].hi)) abort();
    wm_calib_ranges_free(&r);
    unlink(path);
    return 0;
}
