/*
 * libFuzzer target for the ONNX reader: decode arbitrary bytes as a
 * ModelProto (with every tensor validation), and when that succeeds,
 * re-encode and decode again to check the encoder on whatever the decoder
 * accepted.
 */
#include <stdint.h>
#include <stdlib.h>
#include <string.h>

#include "onnx/onnx_model.h"
#include "onnx/onnx_info.h"

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size) {
    wm_error err = {0};
    wm_onnx_model *m = NULL;
    if (wm_onnx_load_buffer(data, size, &m, &err) != WM_OK) return 0;
    size_t n = 0;
    uint8_t *buf = wm_pb_encode_alloc(&wm_onnx_model_desc, m->proto, &n);
    if (buf) {
        wm_onnx_model *m2 = NULL;
        wm_error err2 = {0};
        if (wm_onnx_load_buffer(buf, n, &m2, &err2) != WM_OK) abort(); /* what we write must read back */
        size_t n2 = 0;
        uint8_t *buf2 = wm_pb_encode_alloc(&wm_onnx_model_desc, m2->proto, &n2);
        if (!buf2 || n2 != n || memcmp(buf, buf2, n)) abort(); /* encoding is a fixed point */
        free(buf2);
        wm_onnx_free(m2);
        free(buf);
    }
    if (m->proto->graph) {
        wm_json j;
        wm_json_init(&j);
        wm_onnx_info_json(m, &j, &err);
        wm_json_free(&j);
    }
    wm_onnx_free(m);
    return 0;
}
