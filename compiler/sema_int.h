/* sema_int.h - sema's internal state, shared by sema.c (statements, scopes,
 * functions, models) and sema_builtins.c (calls of table ops, broadcasting,
 * autocast, initializers). */
#ifndef NC_SEMA_INT_H
#define NC_SEMA_INT_H

#include "sema.h"
#include "typecheck.h"

/* A compile-time value: what a name or an expression stands for. */
typedef enum sv_kind {
    SV_ERROR,       /* an error was already reported; propagate silently */
    SV_NONE,        /* no value (a statement without one) */
    SV_TENSOR,      /* t */
    SV_INT,         /* i */
    SV_FLOAT,       /* f */
    SV_BOOL,        /* i */
    SV_STRING,      /* s */
    SV_DTYPE,       /* dtype */
    SV_DIM,         /* dim: a symbolic (or bound) dimension, id in the graph */
    SV_LIST,        /* items[0..n) */
    SV_MODULE,      /* mod */
    SV_FN,          /* decl (+ mod: where it was declared) */
} sv_kind;

typedef struct sema_module sema_module;
typedef struct sv sv;

struct sv {
    sv_kind kind;
    bool is_param;          /* a tensor read straight from a parameter */
    nc_dtype dtype;
    ir_value t;
    int64_t i;
    double f;
    const char *s;
    uint32_t dim;
    sv *items;
    uint32_t n;
    sema_module *mod;
    const ast_node *decl;
};

typedef struct binding {
    const char *name;
    sv value;
    nc_loc loc;
    bool used;
    bool fixed;             /* a repeat's index: the body reads it, never assigns it */
} binding;

/* A lexical scope. fn_boundary marks a function's outermost scope: assignment
 * never rebinds a name across it. */
typedef struct scope {
    struct scope *parent;
    binding *b;
    uint32_t n, cap;
    bool fn_boundary;
} scope;

struct sema_module {
    char *name;             /* "nn"; "" for the main file */
    ast_file *ast;
    scope globals;          /* configs, fns, imports */
    int state;              /* 0 new, 1 loading, 2 loaded */
    sema_module *next;
};

typedef struct sema_ctx {
    src_table *sources;
    diag_ctx *diag;
    const driver_opts *opts;
    ast_arena *arena;       /* sema's own values (lists) */
    ir_graph *g;
    sema_module *modules;
    sema_module *main;
    scope *env;
    char *prefix;           /* parameter path: "blocks.3.attn" (heap, grows) */
    size_t prefix_cap;
    char *used_names;       /* scope names taken under the current prefix, "\n"-separated */
    bool autocast;          /* inside a precision block */
    nc_dtype autocast_dtype;
    uint32_t region;        /* current checkpoint region, 0 = none */
    uint32_t next_region;
    int call_depth;
    scope *caller_env;      /* inside a fn: the scope of the call, for a hint about its names */
    uint64_t nstmts;        /* statements run in this build: repeats and calls multiply them (SEMA_MAX_STMTS) */
    bool stmts_cut;         /* past the budget: every statement is passed over */
    int build_errors;       /* the errors before this build: it has failed once there are more */
    const char *pending_name; /* let-binding target, names the next fn call's scope */
    sv *ret;                /* set by return */
    int nret;
    bool returned;
    bool returned_in_if;    /* the return was in an if's branch: what follows the if is not unreachable */
    /* set by an == or != between sizes whose answer depends on a symbol's value
     * (T == 1): an if may not choose by it */
    bool dim_eq_symbolic;
    nc_loc dim_eq_loc;
    /* while a require's condition is read (outside or, not and fn calls): a
     * comparison of sizes that rests on a symbol's value (B > 1) is true
     * here and kept in pending, for the session binding B to check */
    /* the inputs and parameters a build of a model that reads `training`
     * left unused: warned of only when the other build leaves them unused too */
    struct sema_unused { char *name; const char *kind; nc_loc loc; } *unused;
    uint32_t nunused;
    /* the fn expansion being checked (0: the model's body; each call its own)
     * and, per IR value, the expansion whose explicit cast made it
     * (UINT32_MAX: none): a cast round trip is one body's to undo */
    uint32_t body, next_body;
    uint32_t *cast_body;
    uint32_t ncast_body;
    bool defer_sizes;
    const char *defer_blocked;   /* "or", "not": the require's operator that keeps them from the session */
    struct { uint32_t lhs, rhs; ir_cmp cmp; } pending[8];
    int npending;
    nc_loc call_site;       /* outermost fn call (in a model or train body), for notes */
    nc_loc inner_call_site; /* innermost fn call: the line that called the fn being expanded */
    const ast_node *fn_decl; /* the fn being expanded, NULL in a model body */
    bool assert_failed;     /* the fn's expansion stopped at a failed assert */
    bool training;          /* building a training step: `training` is true, `update` assigns */
    bool read_training;     /* the model read `training`: netc check builds it both ways */
    bool body_read_training; /* its body did, not only a fn it calls */
    bool dim_used[64], set_used[64];   /* which --dim / --set names matched something */
    uint64_t random_sites;  /* random ops given no seed so far: each gets its own (default_seed) */
    /* the last names bound in a block that has ended, with the function or
     * model scope they were in: an unknown name found here gets a hint that
     * its block ended (names bound inside { } or precision blocks are local) */
    /* why: the if or repeat whose scope ended the name, for its own hint (NULL: a block) */
    struct { const char *name; nc_loc loc; const scope *owner; const ast_node *why; } ended[16];
    int nended;
    const ast_node *repeats[8];   /* the repeats being expanded, innermost last: a hint for their names */
    int nrepeats;
    /* while config constants are defined, where they are declared: a model's
     * header, else a module's config lines. Configs are read in order, so an
     * unknown name among them may be one declared further on. */
    const ast_node *config_model;
    const sema_module *config_module;
    /* unknown names already reported, with their function or model scope
     * (cleared as it ends): each is reported at its first use only */
    struct { const char *name; const scope *owner; } unknown[16];
    int nunknown;
    /* the train section being checked (its directives so far), NULL elsewhere
     * and inside the fns it calls: a directive is a statement only there */
    struct sema_train_state *train;
} sema_ctx;

/* sema.c */
sv sema_expr(sema_ctx *c, const ast_node *e);
void sema_bind(sema_ctx *c, const char *name, sv v, nc_loc loc);
/* name = expr, or a, b = f(...): evaluate and bind (a model body's rules). */
void sema_exec_let(sema_ctx *c, const ast_node *s);
/* Run statements in order up to a return; an if expands its taken branch. */
void sema_exec_stmts(sema_ctx *c, const ast_list *stmts);
sv sv_error(void);
sv sv_int(int64_t i);
sv sv_float(double f);
sv sv_tensor(sema_ctx *c, ir_value t);
/* A symbolic dim's value as a scalar tensor of float dtype t (x / T, f32(T)). */
sv sema_dim_tensor(sema_ctx *c, uint32_t dim, nc_dtype t, nc_loc loc);
/* A number (weakly typed) as a tensor of dtype and shape: a fill, broadcast;
 * an error where the dtype cannot hold it (300 in u8, 1e-8 in f16). */
sv sema_number_tensor(sema_ctx *c, sv number, nc_dtype dtype, uint8_t rank, const uint32_t *shape, nc_loc loc);
/* A kind with its article, for messages: "an integer", "a dtype". */
const char *sv_kind_phrase(sv_kind k);
/* Texts for messages, whole, in c's arena: fmt's, a dim's, a shape's. */
const char *sema_textf(sema_ctx *c, const char *fmt, ...) __attribute__((format(printf, 2, 3)));
const char *sema_dim_text(sema_ctx *c, uint32_t dim);
const char *sema_shape_text(sema_ctx *c, nc_dtype t, uint8_t rank, const uint32_t *shape);
const char *sema_node_text(sema_ctx *c, ir_value v);   /* its type: "f32[B, 784]" */
void sema_err(sema_ctx *c, nc_loc loc, const char *hint, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
void sema_warn(sema_ctx *c, nc_loc loc, const char *hint, const char *fmt, ...) __attribute__((format(printf, 4, 5)));
bool sema_as_dim(sema_ctx *c, sv v, nc_loc loc, uint32_t *dim);
/* A typed tensor's shape: no dim of size 0, at most DIM_LIMIT elements. */
bool sema_check_shape(sema_ctx *c, nc_dtype dtype, uint8_t rank, const uint32_t *shape, nc_loc loc);
ir_node sema_proto(sema_ctx *c, nc_op op, nc_loc loc);

void sema_declare_train_inputs(sema_ctx *c, const ast_list *args);

/* sema_index.c */
/* x[i, a:b, ...]: slices and a reshape of the tensor x. */
sv sema_index(sema_ctx *c, const ast_node *e);

/* sema_train.c */
void sema_train(sema_ctx *c, const ast_node *model, const ast_node *train);
/* A statement of a train section other than an if: a binding, a directive
 * (checked against those given so far on the path taken), or an error. */
void sema_train_stmt(sema_ctx *c, const ast_node *s);

/* sema_builtins.c */
/* A call of a name that is not a user fn: table ops, casts, initializers. */
bool sema_builtin_exists(const char *name);
sv sema_call_builtin(sema_ctx *c, const char *name, const ast_node *call);
/* Binary operators and unary minus on compile-time values or tensors. */
/* operand_locs: where a and b are written, for errors about one of them
 * (a number out of its tensor's range); loc: the operator. */
sv sema_binary(sema_ctx *c, ast_op op, sv a, sv b, nc_loc loc, const nc_loc operand_locs[2]);
sv sema_negate(sema_ctx *c, sv a, nc_loc loc);
/* Where a call wrote its non-tensor arguments: each written one's field in
 * the op's kwargs spec (ops.def) and location; defaulted ones are absent. */
typedef struct sema_attr_locs {
    int n;
    const char *field[8];
    nc_loc loc[8];
} sema_attr_locs;
/* Build a table op on tensor operands, with broadcasting and autocast. An
 * error about an operand is said at its arg_locs entry, one about an
 * attribute at its attrs entry (attrs may be NULL), else at the call. */
sv sema_apply(sema_ctx *c, ir_node *proto, sv *operands, int n, const nc_loc *arg_locs, const sema_attr_locs *attrs);
/* An explicit (or automatic) cast of a tensor. */
sv sema_cast(sema_ctx *c, sv x, nc_dtype to, nc_loc loc, bool automatic);
/* Parameter initializer from an expression like normal(0.02). */
bool sema_initializer(sema_ctx *c, const ast_node *e, ir_param *p);

#endif
