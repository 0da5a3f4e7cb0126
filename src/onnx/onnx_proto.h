/*
 * onnx_proto.h - the ONNX protobuf messages as C structs (onnx.proto, IR 13).
 *
 * Each struct starts with wm_pb_base and is described by the wm_onnx_*_desc
 * table in onnx_schema.c, which drives the generic decoder/encoder of pb.h.
 * Repeated fields are `T *x; size_t n_x;` (T ** for messages). All memory
 * belongs to the arena of the owning wm_onnx_model; `bytes` fields
 * (raw_data, string_data, attribute s) point into the mapped file.
 * Messages not described here (device configurations, sharding) are kept
 * verbatim as unknown fields of their parent.
 */
#ifndef WM_ONNX_PROTO_H
#define WM_ONNX_PROTO_H

#include "onnx/pb.h"

typedef struct wm_onnx_graph wm_onnx_graph;
typedef struct wm_onnx_type wm_onnx_type;
typedef struct wm_onnx_tensor wm_onnx_tensor;
typedef struct wm_onnx_sparse wm_onnx_sparse;

typedef struct wm_onnx_sse { /* StringStringEntryProto */
    wm_pb_base pb;
    char *key;   /* 1 */
    char *value; /* 2 */
} wm_onnx_sse;

typedef struct wm_onnx_opset { /* OperatorSetIdProto */
    wm_pb_base pb;
    char *domain;    /* 1 */
    int64_t version; /* 2 */
} wm_onnx_opset;

typedef struct wm_onnx_segment {
    wm_pb_base pb;
    int64_t begin, end; /* 1, 2 */
} wm_onnx_segment;

enum { WM_ONNX_DATA_DEFAULT = 0, WM_ONNX_DATA_EXTERNAL = 1 };

struct wm_onnx_tensor { /* TensorProto */
    wm_pb_base pb;
    int64_t *dims; size_t n_dims;                  /* 1 */
    int32_t data_type;                             /* 2: wm_dtype */
    wm_onnx_segment *segment;                      /* 3 */
    float *float_data; size_t n_float_data;        /* 4 packed */
    int32_t *int32_data; size_t n_int32_data;      /* 5 packed */
    wm_bytes *string_data; size_t n_string_data;   /* 6 */
    int64_t *int64_data; size_t n_int64_data;      /* 7 packed */
    char *name;                                    /* 8 */
    wm_bytes raw_data;                             /* 9 */
    double *double_data; size_t n_double_data;     /* 10 packed */
    uint64_t *uint64_data; size_t n_uint64_data;   /* 11 packed */
    char *doc_string;                              /* 12 */
    wm_onnx_sse **external_data; size_t n_external_data; /* 13 */
    int32_t data_location;                         /* 14 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props; /* 16 */
    /* not serialized: the bytes of an external tensor once resolved */
    wm_bytes ext;
};

struct wm_onnx_sparse { /* SparseTensorProto */
    wm_pb_base pb;
    wm_onnx_tensor *values;        /* 1 */
    wm_onnx_tensor *indices;       /* 2 */
    int64_t *dims; size_t n_dims;  /* 3 */
};

typedef struct wm_onnx_dim { /* TensorShapeProto.Dimension */
    wm_pb_base pb;
    int64_t dim_value; /* 1 (presence: pb.has bit 0) */
    char *dim_param;   /* 2 */
    char *denotation;  /* 3 */
} wm_onnx_dim;

typedef struct wm_onnx_shape { /* TensorShapeProto */
    wm_pb_base pb;
    wm_onnx_dim **dim; size_t n_dim; /* 1 */
} wm_onnx_shape;

typedef struct wm_onnx_type_tensor { /* TypeProto.Tensor and .SparseTensor */
    wm_pb_base pb;
    int32_t elem_type;    /* 1 */
    wm_onnx_shape *shape; /* 2 (NULL: unknown rank) */
} wm_onnx_type_tensor;

typedef struct wm_onnx_type_elem { /* TypeProto.Sequence and .Optional */
    wm_pb_base pb;
    wm_onnx_type *elem_type; /* 1 */
} wm_onnx_type_elem;

typedef struct wm_onnx_type_map { /* TypeProto.Map */
    wm_pb_base pb;
    int32_t key_type;          /* 1 */
    wm_onnx_type *value_type;  /* 2 */
} wm_onnx_type_map;

typedef struct wm_onnx_type_opaque { /* TypeProto.Opaque */
    wm_pb_base pb;
    char *domain; /* 1 */
    char *name;   /* 2 */
} wm_onnx_type_opaque;

struct wm_onnx_type { /* TypeProto */
    wm_pb_base pb;
    wm_onnx_type_tensor *tensor_type;        /* 1 */
    wm_onnx_type_elem *sequence_type;        /* 4 */
    wm_onnx_type_map *map_type;              /* 5 */
    char *denotation;                        /* 6 */
    wm_onnx_type_opaque *opaque_type;        /* 7 */
    wm_onnx_type_tensor *sparse_tensor_type; /* 8 */
    wm_onnx_type_elem *optional_type;        /* 9 */
};

typedef struct wm_onnx_value_info { /* ValueInfoProto */
    wm_pb_base pb;
    char *name;                                            /* 1 */
    wm_onnx_type *type;                                    /* 2 */
    char *doc_string;                                      /* 3 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props; /* 4 */
} wm_onnx_value_info;

enum wm_onnx_attr_type {
    WM_ATTR_UNDEFINED = 0, WM_ATTR_FLOAT = 1, WM_ATTR_INT = 2, WM_ATTR_STRING = 3, WM_ATTR_TENSOR = 4,
    WM_ATTR_GRAPH = 5, WM_ATTR_FLOATS = 6, WM_ATTR_INTS = 7, WM_ATTR_STRINGS = 8, WM_ATTR_TENSORS = 9,
    WM_ATTR_GRAPHS = 10, WM_ATTR_SPARSE_TENSOR = 11, WM_ATTR_SPARSE_TENSORS = 12, WM_ATTR_TYPE_PROTO = 13,
    WM_ATTR_TYPE_PROTOS = 14
};

typedef struct wm_onnx_attr { /* AttributeProto */
    wm_pb_base pb;
    char *name;                                             /* 1 */
    float f;                                                /* 2 */
    int64_t i;                                              /* 3 */
    wm_bytes s;                                             /* 4 */
    wm_onnx_tensor *t;                                      /* 5 */
    wm_onnx_graph *g;                                       /* 6 */
    float *floats; size_t n_floats;                         /* 7 */
    int64_t *ints; size_t n_ints;                           /* 8 */
    wm_bytes *strings; size_t n_strings;                    /* 9 */
    wm_onnx_tensor **tensors; size_t n_tensors;             /* 10 */
    wm_onnx_graph **graphs; size_t n_graphs;                /* 11 */
    char *doc_string;                                       /* 13 */
    wm_onnx_type *tp;                                       /* 14 */
    wm_onnx_type **type_protos; size_t n_type_protos;       /* 15 */
    int32_t type;                                           /* 20 */
    char *ref_attr_name;                                    /* 21 */
    wm_onnx_sparse *sparse_tensor;                          /* 22 */
    wm_onnx_sparse **sparse_tensors; size_t n_sparse_tensors; /* 23 */
} wm_onnx_attr;

typedef struct wm_onnx_node { /* NodeProto */
    wm_pb_base pb;
    char **input; size_t n_input;                          /* 1 ("" = omitted optional) */
    char **output; size_t n_output;                        /* 2 */
    char *name;                                            /* 3 */
    char *op_type;                                         /* 4 */
    wm_onnx_attr **attribute; size_t n_attribute;          /* 5 */
    char *doc_string;                                      /* 6 */
    char *domain;                                          /* 7 */
    char *overload;                                        /* 8 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props; /* 9 */
} wm_onnx_node;

typedef struct wm_onnx_tensor_annotation { /* TensorAnnotation */
    wm_pb_base pb;
    char *tensor_name;                                                          /* 1 */
    wm_onnx_sse **quant_parameter_tensor_names; size_t n_quant_parameter_tensor_names; /* 2 */
} wm_onnx_tensor_annotation;

struct wm_onnx_graph { /* GraphProto */
    wm_pb_base pb;
    wm_onnx_node **node; size_t n_node;                       /* 1 */
    char *name;                                               /* 2 */
    wm_onnx_tensor **initializer; size_t n_initializer;       /* 5 */
    char *doc_string;                                         /* 10 */
    wm_onnx_value_info **input; size_t n_input;               /* 11 */
    wm_onnx_value_info **output; size_t n_output;             /* 12 */
    wm_onnx_value_info **value_info; size_t n_value_info;     /* 13 */
    wm_onnx_tensor_annotation **quantization_annotation; size_t n_quantization_annotation; /* 14 */
    wm_onnx_sparse **sparse_initializer; size_t n_sparse_initializer; /* 15 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props;   /* 16 */
};

typedef struct wm_onnx_training_info { /* TrainingInfoProto */
    wm_pb_base pb;
    wm_onnx_graph *initialization;                                       /* 1 */
    wm_onnx_graph *algorithm;                                            /* 2 */
    wm_onnx_sse **initialization_binding; size_t n_initialization_binding; /* 3 */
    wm_onnx_sse **update_binding; size_t n_update_binding;                 /* 4 */
} wm_onnx_training_info;

typedef struct wm_onnx_function { /* FunctionProto */
    wm_pb_base pb;
    char *name;                                              /* 1 */
    char **input; size_t n_input;                            /* 4 */
    char **output; size_t n_output;                          /* 5 */
    char **attribute; size_t n_attribute;                    /* 6 */
    wm_onnx_node **node; size_t n_node;                      /* 7 */
    char *doc_string;                                        /* 8 */
    wm_onnx_opset **opset_import; size_t n_opset_import;     /* 9 */
    char *domain;                                            /* 10 */
    wm_onnx_attr **attribute_proto; size_t n_attribute_proto; /* 11 */
    wm_onnx_value_info **value_info; size_t n_value_info;    /* 12 */
    char *overload;                                          /* 13 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props;   /* 14 */
} wm_onnx_function;

typedef struct wm_onnx_modelproto { /* ModelProto */
    wm_pb_base pb;
    int64_t ir_version;                                    /* 1 */
    char *producer_name;                                   /* 2 */
    char *producer_version;                                /* 3 */
    char *domain;                                          /* 4 */
    int64_t model_version;                                 /* 5 */
    char *doc_string;                                      /* 6 */
    wm_onnx_graph *graph;                                  /* 7 */
    wm_onnx_opset **opset_import; size_t n_opset_import;   /* 8 */
    wm_onnx_sse **metadata_props; size_t n_metadata_props; /* 14 */
    wm_onnx_training_info **training_info; size_t n_training_info; /* 20 */
    wm_onnx_function **functions; size_t n_functions;      /* 25 */
} wm_onnx_modelproto;

extern const wm_pb_msg wm_onnx_sse_desc, wm_onnx_opset_desc, wm_onnx_segment_desc, wm_onnx_tensor_desc,
    wm_onnx_sparse_desc, wm_onnx_dim_desc, wm_onnx_shape_desc, wm_onnx_type_tensor_desc,
    wm_onnx_type_sparse_desc, wm_onnx_type_seq_desc, wm_onnx_type_opt_desc, wm_onnx_type_map_desc,
    wm_onnx_type_opaque_desc, wm_onnx_type_desc, wm_onnx_value_info_desc, wm_onnx_attr_desc,
    wm_onnx_node_desc, wm_onnx_tensor_annotation_desc, wm_onnx_graph_desc, wm_onnx_training_info_desc,
    wm_onnx_function_desc, wm_onnx_model_desc;

#endif
