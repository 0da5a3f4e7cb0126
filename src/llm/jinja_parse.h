/* jinja_parse.h - the parser's state and helpers shared by jinja_parse.c (expressions) and
 * jinja_stmt.c (statements). Private to those two files. */
#ifndef WM_LLM_JINJA_PARSE_H
#define WM_LLM_JINJA_PARSE_H

#include <string.h>

#include "llm/jinja_lex.h"

typedef struct ps {
    wm_jinja *t;
    jtok *tk;
    size_t nt, i;
    int depth;
    int loops; /* for bodies we are inside (a macro body starts again at 0) */
    wm_error *err;
    int failed;
} ps;

static inline jtok *cur(ps *p) { return &p->tk[p->i]; }
static inline jtok *peek(ps *p, size_t k) { return p->i + k < p->nt ? &p->tk[p->i + k] : &p->tk[p->nt - 1]; }
static inline void adv(ps *p) {
    if (p->i + 1 < p->nt) p->i++;
}

static inline int is_name(const jtok *t, const char *w) {
    return t->type == T_NAME && t->n == strlen(w) && memcmp(t->p, w, t->n) == 0;
}
static inline int is_op(const jtok *t, int op) { return t->type == T_OP && t->op == op; }

#define describe wm_jp_describe
#define pfail wm_jp_fail
#define punsupported wm_jp_unsupported
#define mk wm_jp_mk
#define push wm_jp_push
#define name_dup wm_jp_name_dup
#define expect_op wm_jp_expect_op
#define enter wm_jp_enter
#define expression wm_jp_expression
#define tuple_expr wm_jp_tuple_expr
#define filter_chain wm_jp_filter_chain
#define dotted_name wm_jp_dotted_name
#define call_args wm_jp_call_args

const char *describe(const jtok *t, char *buf, size_t n);
void *pfail(ps *p, const jtok *at, const char *fmt, ...)
#if defined(__GNUC__)
    __attribute__((format(printf, 3, 4)))
#endif
    ;
void *punsupported(ps *p, const jtok *at, const char *what);
/* a zeroed node in the template's arena at token at; NULL (error set) on OOM */
jnode *mk(ps *p, int kind, const jtok *at);
int push(ps *p, jnode ***arr, size_t *n, jnode *x);
const char *name_dup(ps *p, const jtok *t);
int expect_op(ps *p, int op, const char *what);
int enter(ps *p);
jnode *expression(ps *p, int with_cond);
jnode *tuple_expr(ps *p, int with_cond, const char *extra_end, int explicit_parens);
jnode *filter_chain(ps *p, jnode *n);
int dotted_name(ps *p, jnode *n, int is_test);
int call_args(ps *p, jnode *n);

#endif
