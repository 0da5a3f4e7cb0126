/*
 * jinja_impl.h - internals shared by the jinja_*.c files: values, the AST,
 * the render context. Not part of any API outside src/llm.
 *
 * Memory: every value, string and AST node lives in an arena (the template's
 * for the AST and constants, the context's for values made while rendering);
 * nothing is freed one by one. The context arena is capped by max_memory.
 */
#ifndef WM_LLM_JINJA_IMPL_H
#define WM_LLM_JINJA_IMPL_H

#include <stddef.h>
#include <stdint.h>

#include "core/arena.h"
#include "llm/jinja.h"

/* ---- values ---- */

typedef enum {
    JV_UNDEF = 0, /* Jinja's Undefined */
    JV_NONE,
    JV_BOOL,
    JV_INT,
    JV_FLOAT,
    JV_STR,
    JV_LIST, /* list or tuple (l->tuple) */
    JV_DICT, /* dict, namespace or loop object (d->kind) */
    JV_FUNC, /* a global function (range, namespace, ...) */
    JV_METHOD, /* a bound method: self + name */
    JV_MACRO
} jv_type;

typedef struct jlist jlist;
typedef struct jdict jdict;
typedef struct jnode jnode;
typedef struct jframe jframe;
typedef struct jctx jctx;

typedef struct jv {
    int t;
    union {
        int b;
        int64_t i;
        double f;
        struct {
            const char *p;
            size_t n;
        } s;
        jlist *l;
        jdict *d;
        const struct jfunc *fn;
        struct jmethod *m;
        struct jmacro *mac;
    } u;
    const char *uname; /* JV_UNDEF: the missing name, for messages (may be NULL) */
} jv;

struct jlist {
    size_t n;
    jv *v;
    int tuple;
    int view; /* 1 dict_items, 2 dict_keys, 3 dict_values: only repr() differs */
};

enum { JD_DICT = 0, JD_NS, JD_LOOP };
struct jdict {
    size_t n, cap;
    jv *k, *v;
    int kind;
    /* JD_LOOP: what loop.cycle needs */
    int64_t index0;
};

typedef struct jargs {
    size_t n;
    jv *v;
    size_t nk;
    const char **kn;
    jv *kv;
} jargs;

typedef int (*jfunc_fn)(jctx *c, const jnode *at, const jargs *a, jv *out);
typedef struct jfunc {
    const char *name;
    jfunc_fn fn;
} jfunc;

typedef struct jmethod {
    jv self;
    const char *name;
} jmethod;

typedef struct jmacro {
    const jnode *def;
    jframe *closure;
} jmacro;

/* ---- AST ---- */

typedef enum {
    /* expressions */
    N_CONST,
    N_NAME,
    N_GETATTR, /* a.name */
    N_GETITEM, /* a[b] */
    N_SLICE,   /* a:b:c (any NULL) */
    N_CALL,    /* a(items, kw items2) */
    N_FILTER,  /* a|name(items, kw items2); a NULL in a filter block */
    N_TEST,    /* a is name(items, kw items2) */
    N_UNARY,   /* op a */
    N_BINARY,  /* a op b (and/or included) */
    N_COMPARE, /* a (op items[i]->a)... */
    N_CMPOP,
    N_CONCAT, /* items joined with ~ */
    N_COND,   /* b if a else c */
    N_LIST,
    N_TUPLE,
    N_DICT,  /* keys items, values items2 */
    N_KWARG, /* name = a (call keyword, macro parameter with default a) */
    N_NSREF, /* name.attr target: name, attr in name2 */
    /* statements */
    N_TEXT,   /* val */
    N_OUTPUT, /* {{ a }} */
    N_IF,     /* a, body items, else items2 */
    N_FOR,    /* target a, iterable b, filter c, body items, else items2; op: FOR_* flags */
    N_SET,    /* target a = b */
    N_SETBLOCK, /* target a, filter chain c (N_FILTER with a=NULL), body items */
    N_MACRO,  /* name, params items (N_NAME or N_KWARG), body items2 */
    N_FILTERBLOCK, /* filter chain c, body items */
    N_BREAK,
    N_CONTINUE,
    N_BLOCK /* plain body: generation blocks, the template itself */
} jnode_kind;

enum { FOR_USES_LOOP = 1, FOR_HAS_MACRO = 2 };

enum {
    OP_ADD = 1, OP_SUB, OP_MUL, OP_DIV, OP_FLOORDIV, OP_MOD, OP_POW,
    OP_AND, OP_OR, OP_NOT, OP_NEG, OP_POS,
    OP_EQ, OP_NE, OP_LT, OP_LE, OP_GT, OP_GE, OP_IN, OP_NOTIN
};

struct jnode {
    int kind, op;
    int line, col;
    const char *name, *name2;
    jv val;
    jnode *a, *b, *c;
    jnode **items;
    size_t n;
    jnode **items2;
    size_t n2;
};

struct wm_jinja {
    wm_arena arena;
    jnode *root;
    wm_jinja_limits lim;
};

/* ---- render context ---- */

typedef struct jvar {
    const char *name;
    jv v;
} jvar;

struct jframe {
    jframe *parent;
    jvar *vars;
    size_t n, cap;
};

typedef struct jbuf {
    char *p;
    size_t n, cap;
} jbuf;

struct wm_jinja_ctx {
    wm_arena arena; /* the variables set with wm_jinja_ctx_set_* */
    jframe globals;
    wm_jinja_limits lim;
    int64_t now;
};

struct jctx {
    wm_arena *arena; /* where values are made (the render's, or the context's) */
    size_t mem_limit;
    uint64_t steps, max_steps; /* see wm_jcharge */
    uint64_t bytes_uncharged;  /* bytes made or read that have not made a whole step yet */
    int depth, max_depth;
    int edepth, max_edepth; /* expression evaluation depth, 8 x max_depth */
    jbuf *out;
    size_t max_output;
    wm_error *err;
    int64_t now;
    uint64_t iterations, max_iterations;
    int loopctl; /* 1 break, 2 continue pending */
    int failed;
};

/* ---- jinja_value.c ---- */
void *wm_jalloc(jctx *c, size_t n);                 /* NULL + error on OOM / over the memory limit */
int wm_jstr(jctx *c, const char *p, size_t n, jv *out); /* copies */
jv wm_jv_undef(const char *name);
jv wm_jv_none(void);
jv wm_jv_bool(int b);
jv wm_jv_int(int64_t i);
jv wm_jv_float(double f);
jv wm_jv_cstr(const char *p, size_t n); /* no copy: p must outlive the value */
int wm_jlist_new(jctx *c, size_t n, int tuple, jv *out);
int wm_jdict_new(jctx *c, int kind, jv *out);
int wm_jdict_set(jctx *c, jdict *d, jv k, jv v); /* keeps the first position of a key */
/* Appends k (the caller knows it is not in d: a copy of another dict's keys). 0, -1 on error. */
int wm_jdict_append(jctx *c, jdict *d, jv k, jv v);
/* A new dict holding src's items (src's keys are distinct: no comparisons). */
int wm_jdict_copy(jctx *c, const jdict *src, int kind, jv *out);
/* String key lookup: 1 found, 0 not (the keys scanned are charged as steps, checked at the next charge). */
int wm_jdict_get(jctx *c, const jdict *d, const char *k, size_t kn, jv *out);
/* Any key: 1 found, 0 not, -1 error (a key comparison over the step or depth limit). */
int wm_jdict_getv(jctx *c, const jdict *d, jv k, jv *out);
int wm_jv_truthy(jv v);
/* Python ==: 1 equal, 0 not, -1 error. Every value visited and every 64 string bytes compared is a step;
 * values nested deeper than max_edepth are an error (Python's RecursionError), not a stack overflow. */
int wm_jv_eq(jctx *c, jv a, jv b);
/* -1/0/1 into *r; returns 0, or -1 (error set) when not comparable */
int wm_jv_compare(jctx *c, const jnode *at, jv a, jv b, int *r);
const char *wm_jv_typename(jv v);
/* str(v) appended to b; repr(v) appended to b */
int wm_jv_str(jctx *c, jbuf *b, jv v);
int wm_jv_repr(jctx *c, jbuf *b, jv v);
int wm_jv_tostr(jctx *c, jv v, jv *out); /* str(v) as a string value */
void wm_py_float_repr(double f, char *buf, size_t n);

/* buffers (malloc'ed, capped at max_output for the render output, at max_memory otherwise) */
int wm_jbuf_put(jctx *c, jbuf *b, const char *p, size_t n);
int wm_jbuf_putc(jctx *c, jbuf *b, char ch);
int wm_jbuf_to_str(jctx *c, jbuf *b, jv *out); /* copies into the arena, frees b */
void wm_jbuf_free(jbuf *b);

/* Byte offset of the first occurrence of needle at or after from: -1 if none, -2 on error (the step limit).
 * Linear time (memmem); the bytes searched are charged (one step per 16). */
int64_t wm_jfind(jctx *c, const jnode *at, const char *h, size_t hn, const char *nd, size_t nn, size_t from);
/* The last occurrence of needle that ends at or before end: -1 if none, -2 on error. Each position tried and
 * each byte compared is charged, so the worst case (quadratic) stops at the step limit. */
int64_t wm_jrfind(jctx *c, const jnode *at, const char *h, size_t end, const char *nd, size_t nn);

/* UTF-8 and Python whitespace */
size_t wm_u8_len(const char *p, size_t n); /* code points */
size_t wm_u8_next(const char *p, size_t n, size_t i); /* byte index of the next code point */
uint32_t wm_u8_decode(const char *p, size_t n, size_t i, size_t *len);
int wm_py_isspace(uint32_t cp);
/* simple Unicode case mapping for Latin, Greek, Cyrillic, Armenian, fullwidth Latin (others unchanged) */
uint32_t wm_jinja_uc_upper(uint32_t cp);
uint32_t wm_jinja_uc_lower(uint32_t cp);
int wm_uc_is_cased(uint32_t cp);
size_t wm_py_space_at(const char *p, size_t n, size_t i); /* bytes of a whitespace char at i, 0 if none */
size_t wm_py_space_before(const char *p, size_t i); /* bytes of a whitespace char ending at i, 0 if none */

/* errors: set once, always return -1 */
int wm_jerr(jctx *c, const jnode *at, wm_status s, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 4, 5)))
#endif
    ;
/*
 * The step limit bounds the work of a render: every node evaluated, loop iteration and value compared is a
 * step, and so is work in proportion to the size of the operands: every 64 bytes made (wm_jbuf_put) or
 * compared, every 16 bytes searched, every 16 dict keys scanned. wm_jcharge adds steps and fails past
 * max_steps; wm_jaccrue adds them where no error can be returned (the next charge fails).
 */
int wm_jcharge(jctx *c, const jnode *at, uint64_t steps);
int wm_jcharge_bytes(jctx *c, const jnode *at, uint64_t bytes);
static inline void wm_jaccrue(jctx *c, uint64_t steps) { c->steps += steps; }
/* code points of p[0, n), charged as bytes read */
size_t wm_jlen(jctx *c, const char *p, size_t n);

/* ---- jinja_json.c ---- */
/* Parses JSON text (Python json.loads rules) into values made in c's arena;
 * depth at most 128. Errors say "JSON offset N: reason". */
int wm_jjson_parse(jctx *c, const char *p, size_t n, jv *out);
typedef struct jdump_opts {
    int indent; /* -1: none */
    const char *indent_str; size_t indent_n; /* a string indent (used when not NULL) */
    const char *item_sep; const char *key_sep;
    int sort_keys, ensure_ascii;
} jdump_opts;
int wm_jjson_dump(jctx *c, const jnode *at, jbuf *b, jv v, const jdump_opts *o, int depth);

/* ---- jinja_lex.c / jinja_parse.c ---- */
wm_status wm_jparse(wm_jinja *t, const char *src, size_t n, wm_error *err);

/* ---- jinja_eval.c ---- */
int wm_jeval(jctx *c, jframe *f, const jnode *e, jv *out);
int wm_jexec_body(jctx *c, jframe *f, jnode *const *body, size_t n);
int wm_jframe_set(jctx *c, jframe *f, const char *name, jv v);
int wm_jframe_append(jctx *c, jframe *f, const char *name, jv v); /* name not in f yet: no lookup */
int wm_jlookup(jctx *c, jframe *f, const char *name, jv *out); /* 1 found; the names scanned are charged */
int wm_jgetattr(jctx *c, const jnode *at, jv obj, const char *name, size_t nn, jv *out);
int wm_jgetitem(jctx *c, const jnode *at, jv obj, jv key, jv *out);
int wm_jcall(jctx *c, const jnode *at, jv fn, const jargs *a, jv *out);
/* iteration: a list of items (dict -> keys, string -> chars, undefined -> empty) */
int wm_jiter(jctx *c, const jnode *at, jv v, jlist **out);

/* ---- jinja_filters.c / jinja_methods.c ---- */
int wm_jfilter(jctx *c, jframe *f, const jnode *at, const char *name, jv v, const jargs *a, jv *out);
int wm_jtest(jctx *c, jframe *f, const jnode *at, const char *name, jv v, const jargs *a, int *out);
int wm_jmethod_call(jctx *c, const jnode *at, jv self, const char *name, const jargs *a, jv *out);
int wm_jmethod_exists(jv self, const char *name, size_t nn);
/* Python's fmt % args (printf-style: %s %r %d %i %u %f %e %g %x %o, flags, width, precision, %(key)s) */
int wm_jformat(jctx *c, const jnode *at, jv fmt, jv args, jv *out);
const jfunc *wm_jglobal_find(const char *name);
/* 1: a supported filter, 2: a jinja2 filter we do not support, 0: no such filter */
int wm_jfilter_known(const char *name);
int wm_jtest_known(const char *name);
/* argument helpers: i-th positional or keyword name; returns 1 when present */
int wm_jarg(const jargs *a, size_t i, const char *kw, jv *out);
int wm_jargs_check(jctx *c, const jnode *at, const char *what, const jargs *a, size_t maxpos,
                const char *const *kws);

#endif
