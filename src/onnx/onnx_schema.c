/* onnx_schema.c - field tables of the ONNX messages (numbers from onnx.proto). */
#include <stddef.h>

#include "onnx/onnx_proto.h"

#define S(T, num, kind, f) {num, kind, 0, 0, offsetof(T, f), 0, NULL, #f}
#define R(T, num, kind, packed, f) {num, kind, 1, packed, offsetof(T, f), offsetof(T, n_##f), NULL, #f}
#define SM(T, num, sub, f) {num, WM_PB_MSG, 0, 0, offsetof(T, f), 0, &sub, #f}
#define RM(T, num, sub, f) {num, WM_PB_MSG, 1, 0, offsetof(T, f), offsetof(T, n_##f), &sub, #f}
#define DESC(var, T, name, tab) \
    const wm_pb_msg var = {name, sizeof(T), tab, sizeof(tab) / sizeof(tab[0])}

static const wm_pb_field sse_f[] = {
    S(wm_onnx_sse, 1, WM_PB_STRING, key),
    S(wm_onnx_sse, 2, WM_PB_STRING, value),
};
DESC(wm_onnx_sse_desc, wm_onnx_sse, "StringStringEntryProto", sse_f);

static const wm_pb_field opset_f[] = {
    S(wm_onnx_opset, 1, WM_PB_STRING, domain),
    S(wm_onnx_opset, 2, WM_PB_INT64, version),
};
DESC(wm_onnx_opset_desc, wm_onnx_opset, "OperatorSetIdProto", opset_f);

static const wm_pb_field segment_f[] = {
    S(wm_onnx_segment, 1, WM_PB_INT64, begin),
    S(wm_onnx_segment, 2, WM_PB_INT64, end),
};
DESC(wm_onnx_segment_desc, wm_onnx_segment, "TensorProto.Segment", segment_f);

static const wm_pb_field tensor_f[] = {
    R(wm_onnx_tensor, 1, WM_PB_INT64, 0, dims),
    S(wm_onnx_tensor, 2, WM_PB_INT32, data_type),
    SM(wm_onnx_tensor, 3, wm_onnx_segment_desc, segment),
    R(wm_onnx_tensor, 4, WM_PB_FLOAT, 1, float_data),
    R(wm_onnx_tensor, 5, WM_PB_INT32, 1, int32_data),
    R(wm_onnx_tensor, 6, WM_PB_BYTES, 0, string_data),
    R(wm_onnx_tensor, 7, WM_PB_INT64, 1, int64_data),
    S(wm_onnx_tensor, 8, WM_PB_STRING, name),
    S(wm_onnx_tensor, 9, WM_PB_BYTES, raw_data),
    R(wm_onnx_tensor, 10, WM_PB_DOUBLE, 1, double_data),
    R(wm_onnx_tensor, 11, WM_PB_UINT64, 1, uint64_data),
    S(wm_onnx_tensor, 12, WM_PB_STRING, doc_string),
    RM(wm_onnx_tensor, 13, wm_onnx_sse_desc, external_data),
    S(wm_onnx_tensor, 14, WM_PB_INT32, data_location),
    RM(wm_onnx_tensor, 16, wm_onnx_sse_desc, metadata_props),
};
DESC(wm_onnx_tensor_desc, wm_onnx_tensor, "TensorProto", tensor_f);

static const wm_pb_field sparse_f[] = {
    SM(wm_onnx_sparse, 1, wm_onnx_tensor_desc, values),
    SM(wm_onnx_sparse, 2, wm_onnx_tensor_desc, indices),
    R(wm_onnx_sparse, 3, WM_PB_INT64, 0, dims),
};
DESC(wm_onnx_sparse_desc, wm_onnx_sparse, "SparseTensorProto", sparse_f);

static const wm_pb_field dim_f[] = {
    S(wm_onnx_dim, 1, WM_PB_INT64, dim_value),
    S(wm_onnx_dim, 2, WM_PB_STRING, dim_param),
    S(wm_onnx_dim, 3, WM_PB_STRING, denotation),
};
DESC(wm_onnx_dim_desc, wm_onnx_dim, "TensorShapeProto.Dimension", dim_f);

static const wm_pb_field shape_f[] = {
    RM(wm_onnx_shape, 1, wm_onnx_dim_desc, dim),
};
DESC(wm_onnx_shape_desc, wm_onnx_shape, "TensorShapeProto", shape_f);

static const wm_pb_field type_tensor_f[] = {
    S(wm_onnx_type_tensor, 1, WM_PB_INT32, elem_type),
    SM(wm_onnx_type_tensor, 2, wm_onnx_shape_desc, shape),
};
DESC(wm_onnx_type_tensor_desc, wm_onnx_type_tensor, "TypeProto.Tensor", type_tensor_f);
DESC(wm_onnx_type_sparse_desc, wm_onnx_type_tensor, "TypeProto.SparseTensor", type_tensor_f);

static const wm_pb_field type_elem_f[] = {
    SM(wm_onnx_type_elem, 1, wm_onnx_type_desc, elem_type),
};
DESC(wm_onnx_type_seq_desc, wm_onnx_type_elem, "TypeProto.Sequence", type_elem_f);
DESC(wm_onnx_type_opt_desc, wm_onnx_type_elem, "TypeProto.Optional", type_elem_f);

static const wm_pb_field type_map_f[] = {
    S(wm_onnx_type_map, 1, WM_PB_INT32, key_type),
    SM(wm_onnx_type_map, 2, wm_onnx_type_desc, value_type),
};
DESC(wm_onnx_type_map_desc, wm_onnx_type_map, "TypeProto.Map", type_map_f);

static const wm_pb_field type_opaque_f[] = {
    S(wm_onnx_type_opaque, 1, WM_PB_STRING, domain),
    S(wm_onnx_type_opaque, 2, WM_PB_STRING, name),
};
DESC(wm_onnx_type_opaque_desc, wm_onnx_type_opaque, "TypeProto.Opaque", type_opaque_f);

static const wm_pb_field type_f[] = {
    SM(wm_onnx_type, 1, wm_onnx_type_tensor_desc, tensor_type),
    SM(wm_onnx_type, 4, wm_onnx_type_seq_desc, sequence_type),
    SM(wm_onnx_type, 5, wm_onnx_type_map_desc, map_type),
    S(wm_onnx_type, 6, WM_PB_STRING, denotation),
    SM(wm_onnx_type, 7, wm_onnx_type_opaque_desc, opaque_type),
    SM(wm_onnx_type, 8, wm_onnx_type_sparse_desc, sparse_tensor_type),
    SM(wm_onnx_type, 9, wm_onnx_type_opt_desc, optional_type),
};
DESC(wm_onnx_type_desc, wm_onnx_type, "TypeProto", type_f);

static const wm_pb_field value_info_f[] = {
    S(wm_onnx_value_info, 1, WM_PB_STRING, name),
    SM(wm_onnx_value_info, 2, wm_onnx_type_desc, type),
    S(wm_onnx_value_info, 3, WM_PB_STRING, doc_string),
    RM(wm_onnx_value_info, 4, wm_onnx_sse_desc, metadata_props),
};
DESC(wm_onnx_value_info_desc, wm_onnx_value_info, "ValueInfoProto", value_info_f);

static const wm_pb_field attr_f[] = {
    S(wm_onnx_attr, 1, WM_PB_STRING, name),
    S(wm_onnx_attr, 2, WM_PB_FLOAT, f),
    S(wm_onnx_attr, 3, WM_PB_INT64, i),
    S(wm_onnx_attr, 4, WM_PB_BYTES, s),
    SM(wm_onnx_attr, 5, wm_onnx_tensor_desc, t),
    SM(wm_onnx_attr, 6, wm_onnx_graph_desc, g),
    R(wm_onnx_attr, 7, WM_PB_FLOAT, 0, floats),
    R(wm_onnx_attr, 8, WM_PB_INT64, 0, ints),
    R(wm_onnx_attr, 9, WM_PB_BYTES, 0, strings),
    RM(wm_onnx_attr, 10, wm_onnx_tensor_desc, tensors),
    RM(wm_onnx_attr, 11, wm_onnx_graph_desc, graphs),
    S(wm_onnx_attr, 13, WM_PB_STRING, doc_string),
    SM(wm_onnx_attr, 14, wm_onnx_type_desc, tp),
    RM(wm_onnx_attr, 15, wm_onnx_type_desc, type_protos),
    S(wm_onnx_attr, 20, WM_PB_INT32, type),
    S(wm_onnx_attr, 21, WM_PB_STRING, ref_attr_name),
    SM(wm_onnx_attr, 22, wm_onnx_sparse_desc, sparse_tensor),
    RM(wm_onnx_attr, 23, wm_onnx_sparse_desc, sparse_tensors),
};
DESC(wm_onnx_attr_desc, wm_onnx_attr, "AttributeProto", attr_f);

static const wm_pb_field node_f[] = {
    R(wm_onnx_node, 1, WM_PB_STRING, 0, input),
    R(wm_onnx_node, 2, WM_PB_STRING, 0, output),
    S(wm_onnx_node, 3, WM_PB_STRING, name),
    S(wm_onnx_node, 4, WM_PB_STRING, op_type),
    RM(wm_onnx_node, 5, wm_onnx_attr_desc, attribute),
    S(wm_onnx_node, 6, WM_PB_STRING, doc_string),
    S(wm_onnx_node, 7, WM_PB_STRING, domain),
    S(wm_onnx_node, 8, WM_PB_STRING, overload),
    RM(wm_onnx_node, 9, wm_onnx_sse_desc, metadata_props),
};
DESC(wm_onnx_node_desc, wm_onnx_node, "NodeProto", node_f);

static const wm_pb_field tensor_annotation_f[] = {
    S(wm_onnx_tensor_annotation, 1, WM_PB_STRING, tensor_name),
    RM(wm_onnx_tensor_annotation, 2, wm_onnx_sse_desc, quant_parameter_tensor_names),
};
DESC(wm_onnx_tensor_annotation_desc, wm_onnx_tensor_annotation, "TensorAnnotation", tensor_annotation_f);

static const wm_pb_field graph_f[] = {
    RM(wm_onnx_graph, 1, wm_onnx_node_desc, node),
    S(wm_onnx_graph, 2, WM_PB_STRING, name),
    RM(wm_onnx_graph, 5, wm_onnx_tensor_desc, initializer),
    S(wm_onnx_graph, 10, WM_PB_STRING, doc_string),
    RM(wm_onnx_graph, 11, wm_onnx_value_info_desc, input),
    RM(wm_onnx_graph, 12, wm_onnx_value_info_desc, output),
    RM(wm_onnx_graph, 13, wm_onnx_value_info_desc, value_info),
    RM(wm_onnx_graph, 14, wm_onnx_tensor_annotation_desc, quantization_annotation),
    RM(wm_onnx_graph, 15, wm_onnx_sparse_desc, sparse_initializer),
    RM(wm_onnx_graph, 16, wm_onnx_sse_desc, metadata_props),
};
DESC(wm_onnx_graph_desc, wm_onnx_graph, "GraphProto", graph_f);

static const wm_pb_field training_info_f[] = {
    SM(wm_onnx_training_info, 1, wm_onnx_graph_desc, initialization),
    SM(wm_onnx_training_info, 2, wm_onnx_graph_desc, algorithm),
    RM(wm_onnx_training_info, 3, wm_onnx_sse_desc, initialization_binding),
    RM(wm_onnx_training_info, 4, wm_onnx_sse_desc, update_binding),
};
DESC(wm_onnx_training_info_desc, wm_onnx_training_info, "TrainingInfoProto", training_info_f);

static const wm_pb_field function_f[] = {
    S(wm_onnx_function, 1, WM_PB_STRING, name),
    R(wm_onnx_function, 4, WM_PB_STRING, 0, input),
    R(wm_onnx_function, 5, WM_PB_STRING, 0, output),
    R(wm_onnx_function, 6, WM_PB_STRING, 0, attribute),
    RM(wm_onnx_function, 7, wm_onnx_node_desc, node),
    S(wm_onnx_function, 8, WM_PB_STRING, doc_string),
    RM(wm_onnx_function, 9, wm_onnx_opset_desc, opset_import),
    S(wm_onnx_function, 10, WM_PB_STRING, domain),
    RM(wm_onnx_function, 11, wm_onnx_attr_desc, attribute_proto),
    RM(wm_onnx_function, 12, wm_onnx_value_info_desc, value_info),
    S(wm_onnx_function, 13, WM_PB_STRING, overload),
    RM(wm_onnx_function, 14, wm_onnx_sse_desc, metadata_props),
};
DESC(wm_onnx_function_desc, wm_onnx_function, "FunctionProto", function_f);

static const wm_pb_field model_f[] = {
    S(wm_onnx_modelproto, 1, WM_PB_INT64, ir_version),
    S(wm_onnx_modelproto, 2, WM_PB_STRING, producer_name),
    S(wm_onnx_modelproto, 3, WM_PB_STRING, producer_version),
    S(wm_onnx_modelproto, 4, WM_PB_STRING, domain),
    S(wm_onnx_modelproto, 5, WM_PB_INT64, model_version),
    S(wm_onnx_modelproto, 6, WM_PB_STRING, doc_string),
    SM(wm_onnx_modelproto, 7, wm_onnx_graph_desc, graph),
    RM(wm_onnx_modelproto, 8, wm_onnx_opset_desc, opset_import),
    RM(wm_onnx_modelproto, 14, wm_onnx_sse_desc, metadata_props),
    RM(wm_onnx_modelproto, 20, wm_onnx_training_info_desc, training_info),
    RM(wm_onnx_modelproto, 25, wm_onnx_function_desc, functions),
};
DESC(wm_onnx_model_desc, wm_onnx_modelproto, "ModelProto", model_f);
