/* parse.c - driving the flex scanner and bison parser, and the AST
 * constructors the grammar actions call. */
#include "parse.h"
#include "parser.h"
#include "lexer.h"

#include <ctype.h>
#include <stdlib.h>
#include <string.h>

#define LINE_START_HINT "an operator at the start of a line does not continue the line before: end that line with the operator (y = x +, then the rest)"

/* Hints for the syntax errors people make most: keyed by the start of
 * bison's "unexpected X" message; the last entry that applies wins. */
static const struct {
    const char *prefix, *hint;
    bool line_start;   /* only when the token is the first on its line */
} parse_hints[] = {
    {"unexpected config", "config constants go in the model header, before its '{': model m(x: f32[B, N]) -> f32[B, N] config N = 4 {", false},
    {"unexpected param", "param declares a parameter inside a model or fn body: param w: f32[4, 4] = xavier", false},
    {"unexpected ->", "'->' comes once, between a model's or fn's inputs and its outputs: model m(x: f32[B, 4]) -> (y: f32[B, 4])", false},
    /* a < b < c; then (the later entry wins) any operator that starts a line */
    {"unexpected '<'", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected '>'", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected <=", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected >=", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected ==", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected !=", "comparisons do not chain: a < b < c is an error", false},
    {"unexpected '+'", LINE_START_HINT, true},
    {"unexpected '-'", LINE_START_HINT, true},
    {"unexpected '*'", LINE_START_HINT, true},
    {"unexpected '/'", LINE_START_HINT, true},
    {"unexpected '@'", LINE_START_HINT, true},
    {"unexpected //", LINE_START_HINT, true},
    {"unexpected **", LINE_START_HINT, true},
    {"unexpected '<'", LINE_START_HINT, true},
    {"unexpected '>'", LINE_START_HINT, true},
    {"unexpected <=", LINE_START_HINT, true},
    {"unexpected >=", LINE_START_HINT, true},
    {"unexpected ==", LINE_START_HINT, true},
    {"unexpected !=", LINE_START_HINT, true},
    {"unexpected end of file", "the file ended inside a block or a bracket: a '}', ')' or ']' is missing", false},
    {"unexpected else", "else continues an if, after the '}' of its block: if COND { ... } else { ... }", false},
    {"unexpected and", LINE_START_HINT, true},
    {"unexpected or", LINE_START_HINT, true},
    {"unexpected optimizer", "optimizer, schedule, loss_scale and clip_grad_norm go in a train section: train m { optimizer adam(lr: 1e-3) }", false},
};

/* The statement keywords a user may take for names (update = x). */
static const struct {
    const char *word, *hint;
} keyword_hints[] = {
    {"update", "update is a keyword: update NAME = expr assigns a buffer in a training step; give the value another name"},
    {"buffer", "buffer is a keyword: buffer NAME: f32[C] = zeros declares a buffer; give the value another name"},
    {"param", "param is a keyword: param NAME: f32[4, 4] = xavier declares a parameter; give the value another name"},
};

/* Whether the line of loc ends in a '{' after it (comments and blanks aside):
 * a statement that opens a block broke before its '{' (repeat i in 3 {). */
static bool line_opens_block_after(const parse_state *ps, nc_loc loc)
{
    size_t len;
    const char *line = src_line(ps->diag->sources, loc.file, loc.line, &len);
    if (!line || loc.col == 0 || loc.col - 1 > len) return false;
    const char *hash = memchr(line, '#', len);
    size_t end = hash ? (size_t)(hash - line) : len;
    while (end > loc.col && (line[end - 1] == ' ' || line[end - 1] == '\t' || line[end - 1] == '\r')) end--;
    return end > loc.col && line[end - 1] == '{';
}

/* Whether only blanks precede loc on its line. */
static bool first_on_line(const parse_state *ps, nc_loc loc)
{
    size_t len;
    const char *line = src_line(ps->diag->sources, loc.file, loc.line, &len);
    if (!line || loc.col == 0 || loc.col - 1 > len) return false;
    for (uint32_t i = 0; i + 1 < loc.col; i++)
        if (line[i] != ' ' && line[i] != '\t') return false;
    return true;
}

/* Hints that need the text around the token: what a user of another
 * language writes for a power, an index, an if or a loop, an index with nothing
 * in it. NULL when none applies. */
static const char *foreign_syntax_hint(const parse_state *ps, nc_loc loc, const char *msg)
{
    size_t len;
    const char *line = src_line(ps->diag->sources, loc.file, loc.line, &len);
    if (!line || loc.col < 1 || loc.col - 1 > len) return NULL;
    char before = loc.col >= 2 ? line[loc.col - 2] : 0;
    if (strncmp(msg, "unexpected ']'", 14) == 0 && before == '[') return "an index takes an item per axis: x[0], x[:, 1:3], x[..., -1]";
    size_t b = loc.col - 1;   /* the last thing before the error: x[0] = y closes an index there */
    while (b > 0 && (line[b - 1] == ' ' || line[b - 1] == '\t')) b--;
    if (strncmp(msg, "unexpected '='", 14) == 0 && b > 0 && line[b - 1] == ']')
        return "a tensor is a value: its elements cannot be assigned; make the new tensor, e.g. with concat or where";
    size_t i = 0;
    while (i < len && (line[i] == ' ' || line[i] == '\t')) i++;
    bool after_if = b >= 2 && strncmp(line + b - 2, "if", 2) == 0 && (b == 2 || !isalnum((unsigned char)line[b - 3]));
    if (strncmp(msg, "unexpected '{'", 14) == 0 && after_if) return "an if needs its condition before the '{': if COND { ... }";
    if (strncmp(msg, "unexpected end of line", 22) == 0 && b >= 4 && strncmp(line + b - 4, "else", 4) == 0)
        return "the '{' of an else goes on the else's line: } else {";
    if (strncmp(msg, "unexpected end of line, expecting '{'", 37) == 0 && len - i > 3 && strncmp(line + i, "fn ", 3) == 0)
        return "a fn's '{' goes on its signature's line; header lines (config, precision) are a model's: in a fn, "
               "write a precision block in the body, precision bf16 { ... }";
    /* a keyword used as a name: update = x, return update */
    for (size_t k = 0; k < NC_COUNT(keyword_hints); k++) {
        const char *kw = keyword_hints[k].word;
        size_t n = strlen(kw);
        bool bound = strncmp(msg, "unexpected '='", 14) == 0 && b == i + n && strncmp(line + i, kw, n) == 0;
        bool read = strncmp(msg, "unexpected ", 11) == 0 && strncmp(msg + 11, kw, n) == 0 && (msg[11 + n] == 0 || msg[11 + n] == ',') &&
                    strcmp(kw, "param") != 0;   /* a param out of place has its own hint */
        if (bound || read) return keyword_hints[k].hint;
    }
    const char *at = line + loc.col - 1;   /* where the error is */
    size_t rest = len - (loc.col - 1);
    if (rest >= 2 && strchr("+-*/", at[0]) && at[1] == '=')
        return "there is no update in place: x = x + 1.0 binds x to a new value";
    if (strncmp(msg, "unexpected if", 13) == 0 && i < loc.col - 1)
        return "if is a statement, not a value: if COND { y = a } else { y = b }; elementwise, where(cond, a, b)";
    if (len - i > 4 && strncmp(line + i, "def ", 4) == 0 && loc.col - 1 == i)
        return "a function is written fn name(x: [B, C], n: int) { ... return y }";
    bool if_line = (len - i > 3 && strncmp(line + i, "if ", 3) == 0) || strstr(line, "else if ") != NULL;
    if (strncmp(msg, "unexpected '='", 14) == 0 && if_line) return "to compare, write ==: if a == b { ... }";
    if (strncmp(msg, "unexpected ':'", 14) == 0 && if_line)
        return "an if's branches are blocks: if COND { ... } else { ... }";
    bool at_elif = len - (loc.col - 1) > 5 && strncmp(line + loc.col - 1, "elif ", 5) == 0;
    if (at_elif || (len - i > 5 && strncmp(line + i, "elif ", 5) == 0)) return "write else if: if A { ... } else if B { ... } else { ... }";
    if ((len - i > 4 && strncmp(line + i, "for ", 4) == 0) || (len - i > 7 && strncmp(line + i, "repeat ", 7) == 0))
        return "a loop is written repeat N as name, i { ... }: the body is unrolled N times, with parameters under "
               "name.0, name.1, ... and the index i = 0, 1, ..., N - 1 (a number known when the model is built)";
    return NULL;
}

void parse_error(parse_state *ps, nc_loc loc, const char *msg)
{
    if (ps->muted && ps->tok_brace_depth > 0) return;   /* an echo of a broken declaration head */
    if (ps->tok_brace_depth == 0) ps->mute_next_block = true;
    if (ps->tok_opens_block) ps->muted = true;   /* the head broke at its body's '{': the body echoes it */
    /* a statement broke at a block's '{' (if c { ... }): the recovery stops at the
     * block's last newline and its '}' closes the body, so the rest of the body
     * would echo as errors at the top level, up to the body's own '}' */
    if (strncmp(msg, "unexpected '{'", 14) == 0 && ps->tok_brace_depth >= 2) ps->muted = true;
    /* the same when the statement broke before its '{': the recovery skips the '{' */
    if (ps->tok_brace_depth >= 1 && line_opens_block_after(ps, loc)) ps->muted = true;
    const char *hint = NULL;
    for (size_t i = 0; i < NC_COUNT(parse_hints); i++)
        if (strncmp(msg, parse_hints[i].prefix, strlen(parse_hints[i].prefix)) == 0 &&
            (!parse_hints[i].line_start || first_on_line(ps, loc)))
            hint = parse_hints[i].hint;
    const char *foreign = foreign_syntax_hint(ps, loc, msg);
    if (foreign) hint = foreign;
    if (!hint && ps->tok_opens_block) hint = "the declaration's head before this '{' is incomplete: a name, a value or a closing bracket is missing";
    diag_report(ps->diag, DIAG_ERROR, loc, hint, "%s", msg);
}

/* Depth guards sema's recursion: a tree deeper than AST_MAX_DEPTH is
 * reported once and the file is not analysed further. */
static void set_depth(parse_state *ps, ast_node *n, const ast_node *a, const ast_node *b)
{
    unsigned d = 0;
    if (a && a->depth > d) d = a->depth;
    if (b && b->depth > d) d = b->depth;
    for (uint32_t i = 0; i < n->list.n; i++)
        if (n->list.items[i] && n->list.items[i]->depth > d) d = n->list.items[i]->depth;
    n->depth = (uint16_t)(d + 1 > AST_MAX_DEPTH + 1 ? AST_MAX_DEPTH + 1 : d + 1);
    if (n->depth > AST_MAX_DEPTH && !ps->too_deep) {
        ps->too_deep = true;
        diag_report(ps->diag, DIAG_ERROR, n->loc, "split it into named steps",
                    "nesting is too deep (more than %d levels)", AST_MAX_DEPTH);
    }
}

ast_node *parse_node(parse_state *ps, ast_kind kind, nc_loc loc)
{
    ast_node *n = ast_new(ps->arena, kind, loc);
    n->depth = 1;
    return n;
}

ast_node *parse_binary(parse_state *ps, nc_loc loc, ast_op op, ast_node *a, ast_node *b)
{
    ast_node *n = parse_node(ps, AST_BINARY, loc);
    n->op = op;
    n->a = a;
    n->b = b;
    set_depth(ps, n, a, b);
    return n;
}

ast_node *parse_unary(parse_state *ps, nc_loc loc, ast_op op, ast_node *a)
{
    ast_node *n = parse_node(ps, AST_UNARY, loc);
    n->op = op;
    n->a = a;
    set_depth(ps, n, a, NULL);
    return n;
}

ast_node *parse_call(parse_state *ps, ast_node *callee, ast_list *args)
{
    ast_node *n = parse_node(ps, AST_CALL, callee->loc);
    n->a = callee;
    n->list = *args;
    set_depth(ps, n, callee, NULL);
    return n;
}

ast_node *parse_member(parse_state *ps, nc_loc loc, ast_node *obj, char *name)
{
    ast_node *n = parse_node(ps, AST_MEMBER, obj->loc);
    (void)loc;
    n->a = obj;
    n->name = name;
    set_depth(ps, n, obj, NULL);
    return n;
}

ast_node *parse_list(parse_state *ps, nc_loc loc, ast_list *items)
{
    ast_node *n = parse_node(ps, AST_LIST, loc);
    n->list = *items;
    set_depth(ps, n, NULL, NULL);
    return n;
}

ast_node *parse_index(parse_state *ps, nc_loc loc, ast_node *obj, ast_list *items)
{
    ast_node *n = parse_node(ps, AST_INDEX, loc);
    n->a = obj;
    n->list = *items;
    set_depth(ps, n, obj, NULL);
    return n;
}

/* loc is the first ':'; a bound or step left out is NULL */
ast_node *parse_slice(parse_state *ps, nc_loc loc, ast_node *start, ast_node *end, ast_node *step)
{
    ast_node *n = parse_node(ps, AST_SLICE, loc);
    n->a = start;
    n->b = end;
    n->c = step;
    set_depth(ps, n, start, end);
    if (step && step->depth >= n->depth) set_depth(ps, n, step, NULL);
    return n;
}

ast_node *parse_named(parse_state *ps, ast_kind kind, nc_loc loc, char *name, ast_node *a, ast_node *b)
{
    ast_node *n = parse_node(ps, kind, loc);
    n->name = name;
    n->a = a;
    n->b = b;
    set_depth(ps, n, a, b);
    return n;
}

ast_node *parse_type(parse_state *ps, nc_loc loc, bool has_dtype, nc_dtype t, bool brackets, ast_list *dims)
{
    ast_node *n = parse_node(ps, AST_TYPE, loc);
    n->has_dtype = has_dtype;
    n->dtype = t;
    n->ival = brackets;
    if (dims) n->list = *dims;
    set_depth(ps, n, NULL, NULL);
    return n;
}

ast_node *parse_block(parse_state *ps, nc_loc loc, ast_list *stmts)
{
    ast_node *n = parse_node(ps, AST_BLOCK, loc);
    n->list = *stmts;
    set_depth(ps, n, NULL, NULL);
    return n;
}

void parse_push(parse_state *ps, ast_list *l, ast_node *n) { ast_list_push(ps->arena, l, n); }

ast_node *parse_if(parse_state *ps, nc_loc loc, ast_node *cond, ast_node *then, ast_node *otherwise)
{
    ast_node *n = parse_node(ps, AST_IF, loc);
    n->a = cond;
    n->list = then->list;
    n->c = otherwise;
    set_depth(ps, n, cond, otherwise);   /* nested branches count: sema's recursion stays bounded */
    return n;
}

/* The links of an else-if chain, each the next's else, the last's else the
 * block or NULL. The chain is one statement, not nested ones: it counts as
 * deep as its deepest branch, and sema walks it in a loop. */
ast_node *parse_if_chain(parse_state *ps, ast_list *links, ast_node *otherwise)
{
    ast_node *next = otherwise;
    for (uint32_t i = links->n; i-- > 0;) {
        ast_node *link = links->items[i];
        link->c = next;
        if (next && next == otherwise) set_depth(ps, link, link->a, otherwise);   /* the else block nests, as a branch does */
        else if (next && next->depth > link->depth) link->depth = next->depth;
        next = link;
    }
    return links->items[0];
}

ast_node *parse_repeat_index(parse_state *ps, nc_loc loc, ast_node *count, char *name, nc_loc index_loc, char *index, ast_node *body)
{
    ast_node *n = parse_named(ps, AST_REPEAT, loc, name, count, parse_named(ps, AST_NAME, index_loc, index, NULL, NULL));
    n->list = body->list;
    return n;
}

ast_node *parse_with_attr(parse_state *ps, nc_loc loc, const char *attr, ast_node *stmt)
{
    if (strcmp(attr, "checkpoint") == 0) {
        /* it marks the ops a statement creates: a binding's, a block's, a repeat's */
        if (!stmt) return stmt;
        if (stmt->kind != AST_LET && stmt->kind != AST_BLOCK && stmt->kind != AST_REPEAT)
            diag_report(ps->diag, DIAG_ERROR, loc, stmt->kind == AST_IF ? "mark a binding or a block inside the branch: if c { @checkpoint y = f(x) }"
                                                                          : "mark the binding that computes the value, e.g. @checkpoint y = f(x)",
                        "@checkpoint applies to a binding, a block or a repeat, not %s %s", ast_kind_article(stmt->kind), ast_kind_name(stmt->kind));
        else if (stmt->attrs & AST_ATTR_CHECKPOINT)
            diag_report(ps->diag, DIAG_ERROR, loc, NULL, "@checkpoint given twice");
        stmt->attrs |= AST_ATTR_CHECKPOINT;
    } else {
        diag_report(ps->diag, DIAG_ERROR, loc, "the only attribute is @checkpoint", "unknown attribute '@%s'", attr);
    }
    return stmt;
}

/* Many control bytes near the start mean binary data (an ELF file, a .netm, a
 * gzip): one error for the file instead of one per byte. */
static bool looks_binary(const char *text, size_t len)
{
    size_t n = len < 4096 ? len : 4096, ctrl = 0;
    for (size_t i = 0; i < n; i++) {
        unsigned char c = (unsigned char)text[i];
        if ((c < 32 && c != '\n' && c != '\t' && c != '\r') || c == 127) ctrl++;
    }
    return ctrl >= 4 && ctrl * 20 > n;
}

/* The first byte that can be no part of a .net file, wherever it is (a
 * comment or a string too, or an imported file): invalid UTF-8, a NUL, a
 * carriage return that ends a line alone. Said once for the file, at its
 * line and byte column: after it the lexer's tokens and lines would be wrong. */
static bool check_text(const src_file *f, uint32_t file_id, diag_ctx *d)
{
    if (looks_binary(f->text, f->len)) {
        diag_report(d, DIAG_ERROR, (nc_loc){file_id, 1, 1}, "netc reads .net source text; is this a module or a data file?",
                    "this is not a text file (it holds binary data)");
        return false;
    }
    uint32_t line = 1, col = 1;
    for (size_t i = 0, n; i < f->len; i += n, col += (uint32_t)n) {
        const char *p = f->text + i;
        nc_loc at = {file_id, line, col};
        n = src_utf8_len(p, f->len - i);
        if (n == 0) {
            diag_report(d, DIAG_ERROR, at, "save the file as UTF-8", "invalid UTF-8 byte 0x%02x", (unsigned char)*p);
            return false;
        }
        if (*p == 0) {
            diag_report(d, DIAG_ERROR, at, NULL, "NUL byte in source");
            return false;
        }
        if (*p == '\r' && (i + 1 == f->len || p[1] != '\n')) {
            diag_report(d, DIAG_ERROR, at, "lines end in \\n or \\r\\n; a file with old Mac OS line ends (\\r alone) converts with tr '\\r' '\\n' < FILE > NEW.net",
                        "a carriage return (\\r) without a newline after it");
            return false;
        }
        if (*p == '\n') line++, col = 0;
    }
    return true;
}

ast_file *parse_file(const src_table *sources, uint32_t file_id, diag_ctx *d)
{
    const src_file *sf = src_get(sources, file_id);
    NC_ASSERT(sf);
    ast_file *f = nc_xcalloc(1, sizeof *f);
    f->file_id = file_id;
    f->arena = ast_arena_new();
    parse_state ps = {.arena = f->arena, .diag = d, .file = file_id, .line = 1, .col = 1, .nl_suppressed = true, .stmt_start = true};
    int errors_before = d->errors;
    if (!check_text(sf, file_id, d)) return f;
    if (sf->len == 0) {
        diag_report(d, DIAG_ERROR, (nc_loc){file_id, 1, 1}, "a .net file declares at least one model or fn",
                    "empty file");
        return f;
    }
    yyscan_t scanner;
    if (yylex_init_extra(&ps, &scanner) != 0) NC_BUG("cannot create the scanner");
    yy_scan_bytes(sf->text, (int)sf->len, scanner);
    int rc = yyparse(&ps, scanner);
    yylex_destroy(scanner);
    /* the brackets are counted as they come (lexer.l); what else nests, a run of
     * unary operators (- - - x) or of right-associative ones (a ** b ** c),
     * can fill bison's stack before set_depth sees any of it */
    if (rc == 2)
        diag_report(d, DIAG_ERROR, ps.tok, "split it into named steps",
                    "nesting is too deep (more than %d levels)", AST_MAX_DEPTH);
    else if (rc != 0 && d->errors == errors_before) diag_report(d, DIAG_ERROR, ps.tok, NULL, "cannot parse this file");
    else if (rc == 0 && ps.decls.n == 0 && d->errors == errors_before)
        diag_report(d, DIAG_ERROR, (nc_loc){file_id, 1, 1}, "a .net file declares at least one model or fn",
                    "the file declares nothing (only comments or blank lines)");
    f->decls = ps.decls;
    return f;
}

void ast_file_free(ast_file *f)
{
    if (!f) return;
    ast_arena_free(f->arena);
    free(f);
}
