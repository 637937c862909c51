/* parse.h - from source text to an ast_file (grammar/lexer.l, grammar/parser.y).
 *
 * The parser recovers at statement level, so one run reports many errors.
 * Newlines end statements; the lexer drops those that cannot (inside brackets,
 * after an operator, a comma or '{') and supplies one before '}' and at end of
 * file, so the grammar sees every statement closed by exactly one NL. */
#ifndef NC_PARSE_H
#define NC_PARSE_H

#include "ast.h"
#include "diag.h"

typedef struct parse_state {
    ast_arena *arena;
    diag_ctx *diag;
    uint32_t file;
    ast_list decls;
    /* lexer position and newline logic */
    uint32_t line, col;
    nc_loc tok;              /* where the current token starts */
    int bracket_depth;       /* ( and [ nesting: newlines inside are not statement ends */
    bool nl_suppressed;      /* the previous token cannot end a statement */
    bool stmt_start;         /* the next token starts a statement: '@name' is an attribute */
    bool too_deep;           /* an expression exceeded AST_MAX_DEPTH; reported once */
    /* error echoes: after a syntax error outside any braces (a declaration's
     * head), the next { ... } block opened at the top level is that broken
     * declaration's body, and the errors its lines raise say nothing new */
    int brace_depth;         /* { nesting */
    int tok_brace_depth;     /* how many braces the current token is inside ('{' and '}' count as inside) */
    bool mute_next_block;    /* a top-level error: mute the next top-level block, unless a declaration starts first */
    bool muted;              /* inside that block: syntax errors are not reported */
    bool unmute_next;        /* that block just closed: report again from the next token */
    bool tok_opens_block;    /* the current token is the '{' of a top-level block */
} parse_state;

/* Parse file_id of sources. Always returns an ast_file (possibly partial);
 * problems are reported through d. */
ast_file *parse_file(const src_table *sources, uint32_t file_id, diag_ctx *d);
void ast_file_free(ast_file *f);

/* Constructors used by the grammar actions: each is one line there. */
ast_node *parse_node(parse_state *ps, ast_kind kind, nc_loc loc);
ast_node *parse_binary(parse_state *ps, nc_loc loc, ast_op op, ast_node *a, ast_node *b);
ast_node *parse_unary(parse_state *ps, nc_loc loc, ast_op op, ast_node *a);
ast_node *parse_call(parse_state *ps, ast_node *callee, ast_list *args);
ast_node *parse_member(parse_state *ps, nc_loc loc, ast_node *obj, char *name);
ast_node *parse_list(parse_state *ps, nc_loc loc, ast_list *items);
ast_node *parse_index(parse_state *ps, nc_loc loc, ast_node *obj, ast_list *items);
ast_node *parse_slice(parse_state *ps, nc_loc loc, ast_node *start, ast_node *end, ast_node *step);
ast_node *parse_named(parse_state *ps, ast_kind kind, nc_loc loc, char *name, ast_node *a, ast_node *b);
ast_node *parse_type(parse_state *ps, nc_loc loc, bool has_dtype, nc_dtype t, bool brackets, ast_list *dims);
ast_node *parse_block(parse_state *ps, nc_loc loc, ast_list *stmts);
void parse_push(parse_state *ps, ast_list *l, ast_node *n);
/* if cond { then } else otherwise: otherwise is a block, an if (else if) or NULL */
ast_node *parse_if(parse_state *ps, nc_loc loc, ast_node *cond, ast_node *then, ast_node *otherwise);
/* if A { } else if B { } ... [else otherwise]: links are the ifs in order */
ast_node *parse_if_chain(parse_state *ps, ast_list *links, ast_node *otherwise);
/* repeat count as name, index { body } */
ast_node *parse_repeat_index(parse_state *ps, nc_loc loc, ast_node *count, char *name, nc_loc index_loc, char *index, ast_node *body);
ast_node *parse_with_attr(parse_state *ps, nc_loc loc, const char *attr, ast_node *stmt);
void parse_error(parse_state *ps, nc_loc loc, const char *msg);

#endif
