/*
 * graph.h - a graph IR over the decoded ONNX structs (internal).
 *
 * A wm_graph indexes one wm_onnx_graph of a model; the GraphProto stays the
 * storage. Every edit made through this API changes the proto in place
 * (strings and new messages go to the model arena) and updates the index
 * incrementally, so the model can be written with wm_onnx_save at any time.
 * Edits made to the proto directly must be followed by wm_graph_reindex.
 *
 * Values are the names a graph defines or uses: graph inputs, initializers
 * (dense and sparse), node outputs, graph outputs, value_info entries and
 * node inputs. "" (an omitted optional input or output) is not a value.
 * A node with subgraphs (If/Loop/Scan GRAPH attributes) uses, besides its
 * inputs, every name its subgraphs (recursively) use without defining; those
 * uses are listed with slot WM_USE_SUBGRAPH. Outer-scope names of the indexed
 * graph itself are not known: open the model's main graph.
 *
 * Pointers returned by queries (wm_value, use arrays) stay valid until the
 * next wm_graph_reindex (rename moves a value to a new record: look it up
 * again). After an edit fails with WM_ERR_NOMEM, reindex or free the graph.
 */
#ifndef WM_ONNX_GRAPH_H
#define WM_ONNX_GRAPH_H

#include "onnx/onnx_model.h"

typedef struct wm_graph wm_graph;

#define WM_USE_SUBGRAPH (-1) /* wm_use.slot: referenced from inside a subgraph of the node */

typedef struct wm_use {
    wm_onnx_node *node;
    int32_t slot; /* index into node->input, or WM_USE_SUBGRAPH */
} wm_use;

/* One value; fields are read-only for callers. */
typedef struct wm_value {
    char *name;                  /* in the model arena */
    wm_onnx_node *producer;      /* a node with this output, NULL when none */
    uint32_t n_producers;        /* nodes producing it; > 1 breaks SSA */
    wm_use *uses; size_t n_uses; /* consumers, in index order */
    wm_onnx_value_info *input;   /* graph input entry, or NULL */
    wm_onnx_value_info *output;  /* graph output entry, or NULL */
    wm_onnx_value_info *info;    /* value_info entry, or NULL */
    wm_onnx_tensor *init;        /* initializer, or NULL */
    wm_onnx_sparse *sparse_init; /* sparse initializer, or NULL */
    wm_onnx_type *type;          /* from input, output or value_info; NULL if none */
    /* internal */
    size_t id;        /* creation order */
    uint8_t reserved; /* bit 0: a node name (any level); bit 1: defined inside a subgraph */
    uint8_t dup;      /* listed twice: bit 0 as input/initializer, bit 1 as output/value_info */
} wm_value;

/* ---------------------------------------------------------------- lifecycle */

/*
 * Indexes graph g of model m (usually m->proto->graph). *out receives a new
 * handle, freed with wm_graph_free; it borrows m and g, which must outlive
 * it. *out is NULL on error (NULL g: WM_ERR_INPUT; WM_ERR_NOMEM).
 */
wm_status wm_graph_open(wm_onnx_model *m, wm_onnx_graph *g, wm_graph **out, wm_error *err);

/* Frees the index (never the model); accepts NULL. */
void wm_graph_free(wm_graph *g);

/* Rebuilds the index from the proto, after direct edits of it. */
wm_status wm_graph_reindex(wm_graph *g, wm_error *err);

wm_onnx_graph *wm_graph_proto(const wm_graph *g);
wm_onnx_model *wm_graph_model(const wm_graph *g);

/* ---------------------------------------------------------------- queries */

/* The value named name, or NULL when the graph neither defines nor uses it. */
wm_value *wm_graph_find_value(const wm_graph *g, const char *name);

/* The node producing name, or NULL. */
wm_onnx_node *wm_graph_producer(const wm_graph *g, const char *name);

/* The uses of name (owned by the index) and their count in *n; NULL, 0 if none. */
const wm_use *wm_graph_consumers(const wm_graph *g, const char *name, size_t *n);

/* The initializer named name, or NULL. */
wm_onnx_tensor *wm_graph_initializer(const wm_graph *g, const char *name);

/*
 * The tensor holding name's value when it is constant: an initializer that
 * is not also a graph input (those are defaults callers may override), or
 * the output of a Constant node with a `value` tensor attribute. NULL else.
 */
const wm_onnx_tensor *wm_graph_constant(const wm_graph *g, const char *name);

/* The model's opset version for domain ("", NULL and "ai.onnx" are one domain); -1 if not imported. */
int64_t wm_graph_opset(const wm_graph *g, const char *domain);

/* The attribute of node n named name, or NULL. */
wm_onnx_attr *wm_graph_node_attr(const wm_onnx_node *n, const char *name);

/* ---------------------------------------------------------------- edits */

/*
 * Appends a node to the graph. Strings are copied into the model arena;
 * domain and name may be NULL (absent); NULL or "" inputs/outputs are
 * omitted optional ones. Returns the node (owned by the model arena), or
 * NULL with err set (NULL op_type: WM_ERR_INPUT; WM_ERR_NOMEM). An output
 * that already has a producer is accepted; wm_graph_check reports it until
 * one of the producers is removed.
 */
wm_onnx_node *wm_graph_add_node(wm_graph *g, const char *op_type, const char *domain, const char *name,
                                const char *const *inputs, size_t n_in, const char *const *outputs, size_t n_out,
                                wm_error *err);

/* Removes node n from the graph (it stays in the arena); WM_ERR_INPUT if n is not in it. */
wm_status wm_graph_remove_node(wm_graph *g, wm_onnx_node *n, wm_error *err);

/*
 * Attribute setters of node n: an attribute of the same name is replaced.
 * Values are copied into the model arena, except the tensor t and graph
 * sub, which must live as long as the model (make t with wm_graph_make_tensor).
 */
wm_status wm_graph_set_attr_int(wm_graph *g, wm_onnx_node *n, const char *name, int64_t v, wm_error *err);
wm_status wm_graph_set_attr_float(wm_graph *g, wm_onnx_node *n, const char *name, float v, wm_error *err);
wm_status wm_graph_set_attr_ints(wm_graph *g, wm_onnx_node *n, const char *name, const int64_t *v, size_t nv,
                                 wm_error *err);
wm_status wm_graph_set_attr_floats(wm_graph *g, wm_onnx_node *n, const char *name, const float *v, size_t nv,
                                   wm_error *err);
wm_status wm_graph_set_attr_string(wm_graph *g, wm_onnx_node *n, const char *name, const char *v, wm_error *err);
/* Gives dst every attribute of src (shared, not copied: both live in the model arena; one of the same name
 * on dst is replaced). Graph attributes are refused (WM_ERR_UNSUPPORTED). */
wm_status wm_graph_copy_attrs(wm_graph *g, wm_onnx_node *dst, const wm_onnx_node *src, wm_error *err);
wm_status wm_graph_set_attr_tensor(wm_graph *g, wm_onnx_node *n, const char *name, wm_onnx_tensor *t,
                                   wm_error *err);
/* Sets a GRAPH attribute (sub must live in the model arena) and indexes the outer names sub uses. */
wm_status wm_graph_set_attr_graph(wm_graph *g, wm_onnx_node *n, const char *name, wm_onnx_graph *sub,
                                  wm_error *err);

/*
 * Makes a tensor in the model arena (not added to the graph): name may be
 * NULL; dims are copied; raw is used in place (raw_data), so the caller
 * keeps its bytes alive as long as the model. raw.n must equal the byte
 * size of dtype x dims (WM_ERR_INPUT otherwise, and for string or unknown
 * dtypes and negative dims). Returns NULL with err set on error.
 */
wm_onnx_tensor *wm_graph_make_tensor(wm_graph *g, const char *name, int32_t dtype, const int64_t *dims,
                                     size_t n_dims, wm_bytes raw, wm_error *err);

/*
 * Appends an initializer (see wm_graph_make_tensor for the arguments);
 * *out (may be NULL) receives it. WM_ERR_INPUT when name is already an
 * initializer or a node output.
 */
wm_status wm_graph_add_initializer(wm_graph *g, const char *name, int32_t dtype, const int64_t *dims, size_t n_dims,
                                   wm_bytes raw, wm_onnx_tensor **out, wm_error *err);

/*
 * Removes the initializers no node uses (subgraphs included) that are
 * neither graph outputs nor graph inputs; returns how many went.
 */
size_t wm_graph_remove_unused_initializers(wm_graph *g);

/*
 * Appends a graph input / output of tensor type elem_type (a wm_dtype).
 * dims NULL: unknown rank; a negative dim: unknown size. WM_ERR_INPUT when
 * name is already a graph input (output).
 */
wm_status wm_graph_add_input(wm_graph *g, const char *name, int32_t elem_type, const int64_t *dims, size_t n_dims,
                             wm_error *err);
wm_status wm_graph_add_output(wm_graph *g, const char *name, int32_t elem_type, const int64_t *dims,
                              size_t n_dims, wm_error *err);

/*
 * Makes every node use of from (inputs, and outer references inside
 * subgraphs) use to instead. Graph outputs keep their names: to move an
 * output, rename the value. from without uses: nothing to do. WM_ERR_INPUT
 * when from has subgraph uses and to is defined inside a subgraph (the
 * reference would be captured).
 */
wm_status wm_graph_replace_uses(wm_graph *g, const char *from, const char *to, wm_error *err);

/*
 * Renames value from to to everywhere in the graph: producer outputs, node
 * inputs (subgraph references included), graph inputs and outputs,
 * value_info, initializer and quantization annotations. WM_ERR_INPUT when
 * from is no value, or to already is one or is defined inside a subgraph.
 */
wm_status wm_graph_rename_value(wm_graph *g, const char *from, const char *to, wm_error *err);

/*
 * Returns "<prefix>_<n>" (prefix NULL: "t"), a name no value, node or
 * subgraph of g uses and no earlier call returned; owned by the model
 * arena. NULL on OOM.
 */
const char *wm_graph_unique_name(wm_graph *g, const char *prefix);

/* ---------------------------------------------------------------- order and validation */

/*
 * Reorders g's nodes topologically (Kahn; ties keep the original order;
 * subgraph uses count as dependencies; subgraphs themselves are not
 * reordered). WM_ERR_INPUT naming the node and the value on a cycle, on an
 * input neither produced nor a graph input or initializer, and on a value
 * with two producers; the order is unchanged then.
 */
wm_status wm_graph_topo_sort(wm_graph *g, wm_error *err);

/*
 * Checks SSA: every value defined once (one producer, or a graph input
 * and/or initializer, not both kinds) and every used value (node inputs,
 * subgraph references, graph outputs) defined. WM_ERR_CHECK naming the
 * first offending value otherwise.
 */
wm_status wm_graph_check(const wm_graph *g, wm_error *err);


/* ---------------------------------------------------------------- additions */

/*
 * Appends an already made tensor (in the model arena, e.g. one whose data
 * is external and written elsewhere) as an initializer; t->name must be
 * set and not yet defined in the graph (WM_ERR_INPUT otherwise).
 */
wm_status wm_graph_add_initializer_tensor(wm_graph *g, wm_onnx_tensor *t, wm_error *err);

/* ---------------------------------------------------------------- rewiring (optimizer) */

/*
 * Points input slot of node n at value name (NULL or "": an omitted
 * optional input), keeping the index current; slots past the end are
 * added as omitted inputs. The name is copied when new.
 */
wm_status wm_graph_set_input(wm_graph *g, wm_onnx_node *n, size_t slot, const char *name, wm_error *err);

#endif
