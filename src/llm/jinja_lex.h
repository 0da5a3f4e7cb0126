/* jinja_lex.h - tokens of a Jinja template (private to jinja_lex.c / jinja_parse.c). */
#ifndef WM_LLM_JINJA_LEX_H
#define WM_LLM_JINJA_LEX_H

#include "llm/jinja_impl.h"

typedef enum {
    T_EOF = 0,
    T_DATA,        /* text between tags, whitespace control applied (p, n) */
    T_VAR_BEGIN,   /* {{ */
    T_VAR_END,     /* }} */
    T_BLOCK_BEGIN, /* {% */
    T_BLOCK_END,   /* %} */
    T_NAME,        /* p, n */
    T_STRING,      /* decoded p, n */
    T_INT,         /* i */
    T_FLOAT,       /* f */
    T_OP           /* op: one of the K_* below */
} jtok_type;

enum {
    K_ADD = 1, K_SUB, K_DIV, K_FLOORDIV, K_MUL, K_MOD, K_POW, K_TILDE, K_LBRACKET, K_RBRACKET, K_LPAREN,
    K_RPAREN, K_LBRACE, K_RBRACE, K_EQ, K_NE, K_GT, K_GTEQ, K_LT, K_LTEQ, K_ASSIGN, K_DOT, K_COLON,
    K_PIPE, K_COMMA, K_SEMICOLON
};

typedef struct jtok {
    int type, op;
    int line, col;
    const char *p;
    size_t n;
    int64_t i;
    double f;
} jtok;

/*
 * Splits src into tokens with transformers' settings (trim_blocks,
 * lstrip_blocks, newlines normalized to \n, one trailing newline dropped).
 * *toks is allocated in arena a (the template's). Errors name line/col.
 */
wm_status wm_jlex(wm_arena *a, const char *src, size_t n, jtok **toks, size_t *ntoks, wm_error *err);

#endif
