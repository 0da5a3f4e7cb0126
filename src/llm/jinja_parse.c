/* jinja_parse.c - tokens to an AST, with jinja2's grammar and precedence:
 * condexpr < or < and < not < compare/in < +,- < ~ < *,/,//,% < ** < unary
 * < postfix (.attr [item] (call)) < filters and tests. */
#include <stdarg.h>
#include <stdio.h>
#include <string.h>

#include "core/error.h"
#include "llm/jinja_parse.h"

const char *describe(const jtok *t, char *buf, size_t n) {
    static const char *ops[] = {"", "+", "-", "/", "//", "*", "%", "**", "~", "[", "]", "(", ")", "{", "}",
                                "==", "!=", ">", ">=", "<", "<=", "=", ".", ":", "|", ",", ";"};
    switch (t->type) {
    case T_EOF: return "end of template";
    case T_DATA: return "template data";
    case T_VAR_BEGIN: return "'{{'";
    case T_VAR_END: return "end of print statement '}}'";
    case T_BLOCK_BEGIN: return "'{%'";
    case T_BLOCK_END: return "end of statement block '%}'";
    case T_NAME: snprintf(buf, n, "'%.*s'", (int)(t->n > 40 ? 40 : t->n), t->p); return buf;
    case T_STRING: return "string literal";
    case T_INT: return "integer";
    case T_FLOAT: return "float";
    default: snprintf(buf, n, "'%s'", t->op > 0 && t->op <= K_SEMICOLON ? ops[t->op] : "?"); return buf;
    }
}

void *pfail(ps *p, const jtok *at, const char *fmt, ...) {
    if (p->failed) return NULL;
    p->failed = 1;
    char msg[512];
    va_list ap;
    va_start(ap, fmt);
    vsnprintf(msg, sizeof msg, fmt, ap);
    va_end(ap);
    wm_err(p->err, WM_ERR_INPUT, "chat template line %d col %d: %s", at->line, at->col, msg);
    return NULL;
}

void *punsupported(ps *p, const jtok *at, const char *what) {
    if (p->failed) return NULL;
    p->failed = 1;
    wm_err(p->err, WM_ERR_UNSUPPORTED, "chat template line %d col %d: %s is not supported", at->line, at->col, what);
    return NULL;
}

jnode *mk(ps *p, int kind, const jtok *at) {
    jnode *n = wm_arena_alloc(&p->t->arena, sizeof *n);
    if (!n) {
        if (!p->failed) {
            p->failed = 1;
            wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        }
        return NULL;
    }
    n->kind = kind;
    n->line = at->line;
    n->col = at->col;
    return n;
}

int push(ps *p, jnode ***arr, size_t *n, jnode *x) {
    jnode **slot = wm_vec_push(&p->t->arena, arr, n, sizeof(jnode *));
    if (!slot) {
        if (!p->failed) {
            p->failed = 1;
            wm_err(p->err, WM_ERR_NOMEM, "out of memory");
        }
        return -1;
    }
    *slot = x;
    return 0;
}

const char *name_dup(ps *p, const jtok *t) {
    char *s = wm_arena_strndup(&p->t->arena, t->p, t->n);
    if (!s && !p->failed) {
        p->failed = 1;
        wm_err(p->err, WM_ERR_NOMEM, "out of memory");
    }
    return s;
}


int expect_op(ps *p, int op, const char *what) {
    char b[64];
    if (!is_op(cur(p), op)) {
        pfail(p, cur(p), "expected '%s', got %s", what, describe(cur(p), b, sizeof b));
        return -1;
    }
    adv(p);
    return 0;
}

int enter(ps *p) {
    if (++p->depth > p->t->lim.max_depth) {
        pfail(p, cur(p), "nesting deeper than %d", p->t->lim.max_depth);
        return -1;
    }
    return 0;
}

jnode *expression(ps *p, int with_cond);
jnode *tuple_expr(ps *p, int with_cond, const char *extra_end, int explicit_parens);
static jnode *unary(ps *p, int with_filter);

/* (args, kw=args) after '(' */
int call_args(ps *p, jnode *n) {
    if (expect_op(p, K_LPAREN, "(")) return -1;
    int need_comma = 0;
    while (!is_op(cur(p), K_RPAREN)) {
        if (need_comma) {
            if (expect_op(p, K_COMMA, ",")) return -1;
            if (is_op(cur(p), K_RPAREN)) break;
        }
        if (is_op(cur(p), K_MUL) || is_op(cur(p), K_POW)) {
            punsupported(p, cur(p), "*args / **kwargs in a call");
            return -1;
        }
        if (cur(p)->type == T_NAME && is_op(peek(p, 1), K_ASSIGN)) {
            jnode *kw = mk(p, N_KWARG, cur(p));
            if (!kw || !(kw->name = name_dup(p, cur(p)))) return -1;
            adv(p);
            adv(p);
            if (!(kw->a = expression(p, 1)) || push(p, &n->items2, &n->n2, kw)) return -1;
        } else {
            if (n->n2) {
                pfail(p, cur(p), "positional argument after a keyword argument");
                return -1;
            }
            jnode *a = expression(p, 1);
            if (!a || push(p, &n->items, &n->n, a)) return -1;
        }
        need_comma = 1;
    }
    adv(p);
    return 0;
}

static jnode *primary(ps *p) {
    jtok *t = cur(p);
    char b[64];
    jnode *n;
    if (enter(p)) return NULL;
    switch (t->type) {
    case T_NAME:
        adv(p);
        n = mk(p, N_CONST, t);
        if (!n) return NULL;
        if (is_name(t, "true") || is_name(t, "True")) n->val = wm_jv_bool(1);
        else if (is_name(t, "false") || is_name(t, "False")) n->val = wm_jv_bool(0);
        else if (is_name(t, "none") || is_name(t, "None")) n->val = wm_jv_none();
        else {
            n->kind = N_NAME;
            if (!(n->name = name_dup(p, t))) return NULL;
        }
        break;
    case T_STRING: {
        /* adjacent literals concatenate */
        size_t total = 0, k = p->i;
        while (p->tk[k].type == T_STRING) total += p->tk[k++].n;
        char *s = wm_arena_alloc(&p->t->arena, total + 1);
        if (!(n = mk(p, N_CONST, t)) || !s) return pfail(p, t, "out of memory");
        size_t o = 0;
        while (cur(p)->type == T_STRING) {
            memcpy(s + o, cur(p)->p, cur(p)->n);
            o += cur(p)->n;
            adv(p);
        }
        n->val = wm_jv_cstr(s, o);
        break;
    }
    case T_INT:
    case T_FLOAT:
        adv(p);
        if (!(n = mk(p, N_CONST, t))) return NULL;
        n->val = t->type == T_INT ? wm_jv_int(t->i) : wm_jv_float(t->f);
        break;
    case T_OP:
        if (t->op == K_LPAREN) {
            adv(p);
            if (!(n = tuple_expr(p, 1, NULL, 1)) || expect_op(p, K_RPAREN, ")")) return NULL;
            break;
        }
        if (t->op == K_LBRACKET) {
            adv(p);
            if (!(n = mk(p, N_LIST, t))) return NULL;
            while (!is_op(cur(p), K_RBRACKET)) {
                if (n->n && (expect_op(p, K_COMMA, ",") || 0)) return NULL;
                if (is_op(cur(p), K_RBRACKET)) break;
                jnode *e = expression(p, 1);
                if (!e || push(p, &n->items, &n->n, e)) return NULL;
            }
            adv(p);
            break;
        }
        if (t->op == K_LBRACE) {
            adv(p);
            if (!(n = mk(p, N_DICT, t))) return NULL;
            while (!is_op(cur(p), K_RBRACE)) {
                if (n->n && expect_op(p, K_COMMA, ",")) return NULL;
                if (is_op(cur(p), K_RBRACE)) break;
                jnode *k = expression(p, 1);
                if (!k || expect_op(p, K_COLON, ":")) return NULL;
                jnode *v = expression(p, 1);
                if (!v || push(p, &n->items, &n->n, k) || push(p, &n->items2, &n->n2, v)) return NULL;
            }
            adv(p);
            break;
        }
        /* fallthrough */
    default: return pfail(p, t, "unexpected %s", describe(t, b, sizeof b));
    }
    p->depth--;
    return n;
}

static jnode *subscript_arg(ps *p) {
    jtok *t = cur(p);
    jnode *parts[3] = {0};
    int k = 0;
    if (!is_op(t, K_COLON)) {
        jnode *e = expression(p, 1);
        if (!e) return NULL;
        if (!is_op(cur(p), K_COLON)) return e;
        parts[0] = e;
    }
    adv(p); /* first ':' */
    k = 1;
    if (!is_op(cur(p), K_COLON) && !is_op(cur(p), K_RBRACKET) && !is_op(cur(p), K_COMMA)) {
        if (!(parts[1] = expression(p, 1))) return NULL;
    }
    if (is_op(cur(p), K_COLON)) {
        adv(p);
        if (!is_op(cur(p), K_RBRACKET) && !is_op(cur(p), K_COMMA) && !(parts[2] = expression(p, 1))) return NULL;
    }
    (void)k;
    jnode *s = mk(p, N_SLICE, t);
    if (!s) return NULL;
    s->a = parts[0];
    s->b = parts[1];
    s->c = parts[2];
    return s;
}

static jnode *postfix(ps *p, jnode *n) {
    char b[64];
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, K_DOT)) {
            adv(p);
            jtok *a = cur(p);
            if (a->type == T_NAME) {
                jnode *g = mk(p, N_GETATTR, t);
                if (!g || !(g->name = name_dup(p, a))) return NULL;
                g->a = n;
                n = g;
                adv(p);
            } else if (a->type == T_INT) {
                jnode *g = mk(p, N_GETITEM, t), *k = mk(p, N_CONST, a);
                if (!g || !k) return NULL;
                k->val = wm_jv_int(a->i);
                g->a = n;
                g->b = k;
                n = g;
                adv(p);
            } else {
                return pfail(p, a, "expected a name or number after '.', got %s", describe(a, b, sizeof b));
            }
        } else if (is_op(t, K_LBRACKET)) {
            adv(p);
            jnode *g = mk(p, N_GETITEM, t);
            if (!g) return NULL;
            jnode *tup = NULL;
            while (!is_op(cur(p), K_RBRACKET)) {
                if (tup || g->b) {
                    if (expect_op(p, K_COMMA, ",")) return NULL;
                    if (!tup) {
                        if (!(tup = mk(p, N_TUPLE, t)) || push(p, &tup->items, &tup->n, g->b)) return NULL;
                    }
                }
                jnode *arg = subscript_arg(p);
                if (!arg) return NULL;
                if (tup) {
                    if (push(p, &tup->items, &tup->n, arg)) return NULL;
                } else {
                    g->b = arg;
                }
            }
            adv(p);
            if (tup) g->b = tup;
            if (!g->b) return pfail(p, t, "empty subscript");
            g->a = n;
            n = g;
        } else if (is_op(t, K_LPAREN)) {
            jnode *c = mk(p, N_CALL, t);
            if (!c || call_args(p, c)) return NULL;
            c->a = n;
            n = c;
        } else {
            return n;
        }
    }
}

int dotted_name(ps *p, jnode *n, int is_test) {
    char b[64];
    jtok *t = cur(p);
    if (t->type != T_NAME) {
        pfail(p, t, "expected a filter or test name, got %s", describe(t, b, sizeof b));
        return -1;
    }
    if (!(n->name = name_dup(p, t))) return -1;
    adv(p);
    if (is_op(cur(p), K_DOT)) {
        punsupported(p, cur(p), "a dotted filter or test name");
        return -1;
    }
    /* jinja2 resolves filter and test names when it compiles: so do we */
    if (is_test ? !wm_jtest_known(n->name) : wm_jfilter_known(n->name) == 0) {
        pfail(p, t, "no %s named '%s'", is_test ? "test" : "filter", n->name);
        return -1;
    }
    if (!is_test && wm_jfilter_known(n->name) == 2) {
        char what[96];
        snprintf(what, sizeof what, "the '%s' filter", n->name);
        punsupported(p, t, what);
        return -1;
    }
    return 0;
}

jnode *filter_chain(ps *p, jnode *n) {
    while (is_op(cur(p), K_PIPE)) {
        jtok *t = cur(p);
        adv(p);
        jnode *f = mk(p, N_FILTER, cur(p));
        if (!f || dotted_name(p, f, 0)) return NULL;
        (void)t;
        if (is_op(cur(p), K_LPAREN) && call_args(p, f)) return NULL;
        f->a = n;
        n = f;
    }
    return n;
}

static jnode *filter_expr(ps *p, jnode *n) {
    for (;;) {
        jtok *t = cur(p);
        if (is_op(t, K_PIPE)) {
            if (!(n = filter_chain(p, n))) return NULL;
        } else if (is_name(t, "is")) {
            adv(p);
            int neg = 0;
            if (is_name(cur(p), "not")) {
                neg = 1;
                adv(p);
            }
            jnode *x = mk(p, N_TEST, t);
            if (!x || dotted_name(p, x, 1)) return NULL;
            jtok *a = cur(p);
            if (is_op(a, K_LPAREN)) {
                if (call_args(p, x)) return NULL;
            } else if ((a->type == T_NAME || a->type == T_STRING || a->type == T_INT || a->type == T_FLOAT ||
                        is_op(a, K_LBRACKET) || is_op(a, K_LBRACE)) &&
                       !is_name(a, "else") && !is_name(a, "or") && !is_name(a, "and")) {
                if (is_name(a, "is")) return pfail(p, a, "you cannot chain multiple tests with 'is'");
                jnode *arg = primary(p);
                if (!arg || !(arg = postfix(p, arg)) || push(p, &x->items, &x->n, arg)) return NULL;
            }
            x->a = n;
            n = x;
            if (neg) {
                jnode *nn = mk(p, N_UNARY, t);
                if (!nn) return NULL;
                nn->op = OP_NOT;
                nn->a = n;
                n = nn;
            }
        } else if (is_op(t, K_LPAREN)) {
            jnode *c = mk(p, N_CALL, t);
            if (!c || call_args(p, c)) return NULL;
            c->a = n;
            n = c;
        } else {
            return n;
        }
    }
}

static jnode *unary(ps *p, int with_filter) {
    jtok *t = cur(p);
    jnode *n;
    if (enter(p)) return NULL;
    if (is_op(t, K_SUB) || is_op(t, K_ADD)) {
        adv(p);
        if (!(n = mk(p, N_UNARY, t))) return NULL;
        n->op = t->op == K_SUB ? OP_NEG : OP_POS;
        if (!(n->a = unary(p, 0))) return NULL;
    } else if (!(n = primary(p))) {
        return NULL;
    }
    if (!(n = postfix(p, n))) return NULL;
    if (with_filter && !(n = filter_expr(p, n))) return NULL;
    p->depth--;
    return n;
}

static jnode *binary(ps *p, jnode *l, int op, jnode *r, const jtok *at) {
    if (!l || !r) return NULL;
    jnode *n = mk(p, N_BINARY, at);
    if (!n) return NULL;
    n->op = op;
    n->a = l;
    n->b = r;
    return n;
}

static jnode *pow_expr(ps *p) {
    jnode *l = unary(p, 1);
    while (l && is_op(cur(p), K_POW)) {
        jtok *t = cur(p);
        adv(p);
        l = binary(p, l, OP_POW, unary(p, 1), t);
    }
    return l;
}

static jnode *math2(ps *p) {
    jnode *l = pow_expr(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, K_MUL) ? OP_MUL : is_op(t, K_DIV) ? OP_DIV : is_op(t, K_FLOORDIV) ? OP_FLOORDIV
               : is_op(t, K_MOD) ? OP_MOD : 0;
        if (!l || !op) return l;
        adv(p);
        l = binary(p, l, op, pow_expr(p), t);
    }
}

static jnode *concat(ps *p) {
    jtok *t = cur(p);
    jnode *l = math2(p);
    if (!l || !is_op(cur(p), K_TILDE)) return l;
    jnode *n = mk(p, N_CONCAT, t);
    if (!n || push(p, &n->items, &n->n, l)) return NULL;
    while (is_op(cur(p), K_TILDE)) {
        adv(p);
        jnode *r = math2(p);
        if (!r || push(p, &n->items, &n->n, r)) return NULL;
    }
    return n;
}

static jnode *math1(ps *p) {
    jnode *l = concat(p);
    for (;;) {
        jtok *t = cur(p);
        int op = is_op(t, K_ADD) ? OP_ADD : is_op(t, K_SUB) ? OP_SUB : 0;
        if (!l || !op) return l;
        adv(p);
        l = binary(p, l, op, concat(p), t);
    }
}

static jnode *compare(ps *p) {
    jtok *t0 = cur(p);
    jnode *l = math1(p), *n = NULL;
    if (!l) return NULL;
    for (;;) {
        jtok *t = cur(p);
        int op = 0;
        if (t->type == T_OP) {
            op = t->op == K_EQ ? OP_EQ : t->op == K_NE ? OP_NE : t->op == K_LT ? OP_LT : t->op == K_LTEQ ? OP_LE
               : t->op == K_GT ? OP_GT : t->op == K_GTEQ ? OP_GE : 0;
            if (op) adv(p);
        } else if (is_name(t, "in")) {
            op = OP_IN;
            adv(p);
        } else if (is_name(t, "not") && is_name(peek(p, 1), "in")) {
            op = OP_NOTIN;
            adv(p);
            adv(p);
        }
        if (!op) return n ? n : l;
        if (!n) {
            if (!(n = mk(p, N_COMPARE, t0))) return NULL;
            n->a = l;
        }
        jnode *o = mk(p, N_CMPOP, t);
        if (!o || !(o->a = math1(p)) || push(p, &n->items, &n->n, o)) return NULL;
        o->op = op;
    }
}

static jnode *not_expr(ps *p) {
    jtok *t = cur(p);
    if (is_name(t, "not")) {
        adv(p);
        if (enter(p)) return NULL;
        jnode *n = mk(p, N_UNARY, t);
        if (!n || !(n->a = not_expr(p))) return NULL;
        n->op = OP_NOT;
        p->depth--;
        return n;
    }
    return compare(p);
}

static jnode *and_expr(ps *p) {
    jnode *l = not_expr(p);
    while (l && is_name(cur(p), "and")) {
        jtok *t = cur(p);
        adv(p);
        l = binary(p, l, OP_AND, not_expr(p), t);
    }
    return l;
}

static jnode *or_expr(ps *p) {
    jnode *l = and_expr(p);
    while (l && is_name(cur(p), "or")) {
        jtok *t = cur(p);
        adv(p);
        l = binary(p, l, OP_OR, and_expr(p), t);
    }
    return l;
}

static jnode *cond_expr(ps *p) {
    jnode *l = or_expr(p);
    while (l && is_name(cur(p), "if")) {
        jtok *t = cur(p);
        adv(p);
        if (enter(p)) return NULL;
        jnode *n = mk(p, N_COND, t);
        if (!n || !(n->a = or_expr(p))) return NULL;
        n->b = l;
        if (is_name(cur(p), "else")) {
            adv(p);
            if (!(n->c = cond_expr(p))) return NULL;
        }
        p->depth--;
        l = n;
    }
    return l;
}

jnode *expression(ps *p, int with_cond) { return with_cond ? cond_expr(p) : or_expr(p); }

static int tuple_end(ps *p, const char *extra_end) {
    jtok *t = cur(p);
    if (t->type == T_VAR_END || t->type == T_BLOCK_END || t->type == T_EOF || is_op(t, K_RPAREN)) return 1;
    return extra_end && is_name(t, extra_end);
}

jnode *tuple_expr(ps *p, int with_cond, const char *extra_end, int explicit_parens) {
    jtok *t0 = cur(p);
    char b[64];
    jnode *tup = NULL, *first = NULL;
    for (;;) {
        if (first && expect_op(p, K_COMMA, ",")) return NULL;
        if (tuple_end(p, extra_end)) break;
        jnode *e = expression(p, with_cond);
        if (!e) return NULL;
        if (!first) {
            first = e;
        } else {
            if (!tup && (!(tup = mk(p, N_TUPLE, t0)) || push(p, &tup->items, &tup->n, first))) return NULL;
            if (push(p, &tup->items, &tup->n, e)) return NULL;
        }
        if (!is_op(cur(p), K_COMMA)) break;
        if (!tup && (!(tup = mk(p, N_TUPLE, t0)) || push(p, &tup->items, &tup->n, first))) return NULL;
    }
    if (tup) return tup;
    if (first) return first;
    if (explicit_parens) return mk(p, N_TUPLE, t0);
    return pfail(p, cur(p), "expected an expression, got %s", describe(cur(p), b, sizeof b));
}
