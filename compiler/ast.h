/* ast.h - the syntax tree the parser builds and sema walks.
 *
 * One node struct for every kind; the table below says which fields each kind
 * uses (the others stay zero). Nodes live in an arena owned by the ast_file
 * and are freed with it, never one by one. */
#ifndef NC_AST_H
#define NC_AST_H

#include "base.h"
#include "dtype.h"

typedef struct ast_node ast_node;

typedef struct ast_list {
    ast_node **items;
    uint32_t n, cap;
} ast_list;

/*        kind            fields used                                          */
#define AST_KINDS(X)                                                           \
    X(AST_INT,       "int")        /* ival                                     */ \
    X(AST_FLOAT,     "float")      /* fval                                     */ \
    X(AST_BOOL,      "bool")       /* ival 0/1                                 */ \
    X(AST_STRING,    "string")     /* name = the text                          */ \
    X(AST_NAME,      "name")       /* name                                     */ \
    X(AST_DTYPE,     "dtype")      /* dtype (a dtype written as a value)       */ \
    X(AST_MEMBER,    "member")     /* a.name: a = object                       */ \
    X(AST_CALL,      "call")       /* a = callee, list = args (exprs, KWARG)   */ \
    X(AST_KWARG,     "kwarg")      /* name: a                                  */ \
    X(AST_BINARY,    "binary")     /* a op b; op = AST_OP_*                    */ \
    X(AST_UNARY,     "unary")      /* op a                                     */ \
    X(AST_LIST,      "list")       /* [list]                                   */ \
    X(AST_WILDCARD,  "_")          /* a dim pattern matching any one dim       */ \
    X(AST_ELLIPSIS,  "...")        /* a dim pattern matching any leading dims  */ \
    X(AST_INDEX,     "index")      /* a[list]: list = items (exprs, SLICEs)    */ \
    X(AST_SLICE,     "slice")      /* a:b[:c] in an index; NULL where omitted  */ \
    X(AST_TYPE,      "type")       /* dtype (or has_dtype=0), list = dims;     */ \
                                   /* ival = 1 if brackets were written        */ \
    X(AST_KIND,      "kind")       /* name = int|float|bool|string (static arg)*/ \
    X(AST_LET,       "let")        /* name = a                                 */ \
    X(AST_PARAM,     "param")      /* param name: a(type) = b(init, optional)  */ \
    X(AST_BUFFER,    "buffer")     /* buffer name: a(type) = b(init, optional) */ \
    X(AST_UPDATE,    "update")     /* update name = a                          */ \
    X(AST_RETURN,    "return")     /* list = values                            */ \
    X(AST_ASSERT,    "assert")     /* assert a, b(message) [, c(hint)]         */ \
    X(AST_REQUIRE,   "require")    /* require a, b(message) [, c(hint)]: an assert whose
                                      comparisons of symbolic sizes the session checks */ \
    X(AST_BLOCK,     "block")      /* list = stmts; dtype/has_dtype: precision */ \
    X(AST_REPEAT,    "repeat")     /* repeat a as name[, b(index NAME)] { list } */ \
    X(AST_IF,        "if")         /* if a { list } else c (BLOCK, IF or NULL) */ \
    X(AST_DIRECTIVE, "directive")  /* name a  (optimizer adamw(...), ...)      */ \
    X(AST_ARG,       "arg")        /* name: a(type, optional) = b(default)     */ \
    X(AST_IMPORT,    "import")     /* name = module                            */ \
    X(AST_CONFIG,    "config")     /* name = a                                 */ \
    X(AST_FN,        "fn")         /* name(list2 = ARGs) -> c { list }         */ \
    X(AST_MODEL,     "model")      /* name(list2) -> list3 (ARGs) header list4 */ \
                                   /* (CONFIGs) precision dtype { list }       */ \
    X(AST_TRAIN,     "train")      /* train name(list2 = extra inputs) { list }*/

typedef enum ast_kind {
#define X(k, s) k,
    AST_KINDS(X)
#undef X
    AST_KIND_COUNT
} ast_kind;

typedef enum ast_op {
    AST_OP_ADD, AST_OP_SUB, AST_OP_MUL, AST_OP_DIV, AST_OP_MATMUL,
    AST_OP_EQ, AST_OP_NE, AST_OP_LT, AST_OP_LE, AST_OP_GT, AST_OP_GE,
    AST_OP_NEG, AST_OP_FLOORDIV,
    AST_OP_AND, AST_OP_OR, AST_OP_NOT,   /* compile-time bools only */
    AST_OP_POW,
} ast_op;

enum { AST_ATTR_CHECKPOINT = 1u << 0 };

struct ast_node {
    ast_kind kind;
    nc_loc loc;
    uint16_t depth;          /* nesting depth of expressions; bounded by the parser */
    uint8_t attrs;           /* AST_ATTR_* written before a statement */
    bool has_dtype;
    nc_dtype dtype;
    ast_op op;
    char *name;
    int64_t ival;
    double fval;
    ast_node *a, *b, *c;
    ast_list list, list2, list3, list4;
};

typedef struct ast_arena ast_arena;

/* A parsed file: its declarations and the arena holding them. */
typedef struct ast_file {
    uint32_t file_id;
    ast_list decls;
    ast_arena *arena;
} ast_file;

ast_node *ast_new(ast_arena *ar, ast_kind kind, nc_loc loc);
void *ast_alloc(ast_arena *ar, size_t n);   /* zeroed */
char *ast_strdup(ast_arena *ar, const char *s, size_t len);
void ast_list_push(ast_arena *ar, ast_list *l, ast_node *n);
ast_arena *ast_arena_new(void);
void ast_arena_free(ast_arena *ar);
const char *ast_kind_name(ast_kind k);
const char *ast_kind_article(ast_kind k);  /* "a" (a return) or "an" (an assert) */
const char *ast_op_text(ast_op op);

#define AST_MAX_DEPTH 256   /* deeper expressions are refused with a diagnostic */

#endif
