/* onnx_info.h - the summary `winml inspect` reports for an ONNX file. */
#ifndef WM_ONNX_INFO_H
#define WM_ONNX_INFO_H

#include "core/json.h"
#include "onnx/onnx_model.h"

/*
 * Writes the inspect object of m into j (keys: format, ir_version, producer,
 * opset_imports, inputs, outputs, node_count, op_counts, initializer_count,
 * parameter_count, parameter_bytes, parameters_by_dtype, external_data,
 * metadata ...). Never touches weight bytes.
 */
wm_status wm_onnx_info_json(const wm_onnx_model *m, wm_json *j, wm_error *err);

/* Writes "float32[batch,3,224,224]" style text for a value's type into buf. */
void wm_onnx_type_str(const wm_onnx_type *t, char *buf, size_t n);

#endif
