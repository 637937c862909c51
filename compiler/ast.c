/* ast.c - arena allocation of syntax nodes. */
#include "ast.h"

#include <stdlib.h>
#include <string.h>

struct ast_arena {
    struct ast_block *head;
};

typedef struct ast_block {
    struct ast_block *next;
    size_t used, cap;
    _Alignas(max_align_t) unsigned char data[];
} ast_block;

ast_arena *ast_arena_new(void) { return nc_xcalloc(1, sizeof(ast_arena)); }

void ast_arena_free(ast_arena *ar)
{
    if (!ar) return;
    for (ast_block *b = ar->head, *next; b; b = next) {
        next = b->next;
        free(b);
    }
    free(ar);
}

void *ast_alloc(ast_arena *ar, size_t n)
{
    n = (n + 15) & ~(size_t)15;
    ast_block *b = ar->head;
    if (!b || b->used + n > b->cap) {
        size_t cap = n > 65536 ? n : 65536;
        b = nc_xmalloc(sizeof(ast_block) + cap);
        b->next = ar->head;
        b->used = 0;
        b->cap = cap;
        ar->head = b;
    }
    void *p = b->data + b->used;
    b->used += n;
    return memset(p, 0, n);
}

ast_node *ast_new(ast_arena *ar, ast_kind kind, nc_loc loc)
{
    ast_node *n = ast_alloc(ar, sizeof *n);
    n->kind = kind;
    n->loc = loc;
    return n;
}

char *ast_strdup(ast_arena *ar, const char *s, size_t len)
{
    char *p = ast_alloc(ar, len + 1);
    memcpy(p, s, len);
    p[len] = 0;
    return p;
}

void ast_list_push(ast_arena *ar, ast_list *l, ast_node *n)
{
    if (l->n == l->cap) {
        uint32_t cap = l->cap ? l->cap * 2 : 4;
        ast_node **items = ast_alloc(ar, cap * sizeof *items);
        if (l->n) memcpy(items, l->items, l->n * sizeof *items);
        l->items = items;
        l->cap = cap;
    }
    l->items[l->n++] = n;
}

const char *ast_kind_name(ast_kind k)
{
    static const char *names[] = {
#define X(k, s) s,
        AST_KINDS(X)
#undef X
    };
    return k < AST_KIND_COUNT ? names[k] : "?";
}

const char *ast_kind_article(ast_kind k)
{
    return strchr("aeiou", ast_kind_name(k)[0]) ? "an" : "a";
}

const char *ast_op_text(ast_op op)
{
    static const char *t[] = {"+", "-", "*", "/", "@", "==", "!=", "<", "<=", ">", ">=", "-", "//", "and", "or", "not", "**"};
    return op < NC_COUNT(t) ? t[op] : "?";
}
