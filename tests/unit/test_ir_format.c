/* test_ir_format.c - the texts ir.h writes about dims, under snprintf's
 * contract: each returns the whole text's length however small the buffer,
 * writes what fits, NUL-terminated, and its *_str is the whole text. Long
 * symbol names make texts past the fixed buffers the formatters once used
 * inside (a dim of a shape cut at 95 characters, a require's message at 255). */
#include "ir.h"
#include "test_util.h"

#define LONG_NAME "SequenceLengthOfTheLongestDocumentInTheCorpusAfterTokenizationWithPaddingToTheNextMultipleOfTheWarpSize"

/* A format call's contract: whole's length returned at every cap, the
 * buffer holding whole's first cap - 1 characters, nothing past cap touched. */
static void check_contract(const char *whole, size_t (*into)(char *buf, size_t cap))
{
    size_t len = strlen(whole);
    for (size_t cap = 0; cap <= len + 1; cap++) {
        char buf[1024];
        memset(buf, 'x', sizeof buf);
        size_t n = into(cap ? buf : NULL, cap);
        bool ok = n == len && buf[cap] == 'x' &&
                  (!cap || (strlen(buf) == (cap - 1 < len ? cap - 1 : len) && strncmp(buf, whole, strlen(buf)) == 0));
        if (!ok) {
            fprintf(stderr, "'%s' at cap %zu: returned %zu, wrote '%.*s'\n", whole, cap, n, cap ? (int)cap : 0, buf);
            failures++;
            return;
        }
    }
}

static ir_graph *g;
static uint32_t shape[2];
static int64_t syms[2] = {8, 1025};

static size_t dim_into(char *buf, size_t cap) { return ir_dim_format(g, shape[1], buf, cap); }
static size_t shape_into(char *buf, size_t cap) { return ir_shape_format(g, NC_F32, 2, shape, buf, cap); }
static size_t syms_into(char *buf, size_t cap) { return ir_syms_format(g, syms, buf, cap); }
static size_t names_into(char *buf, size_t cap) { return ir_sym_names_note(g, buf, cap); }
static char span[512];
static size_t require_into(char *buf, size_t cap) { return ir_require_text(g, span, syms, buf, cap); }

int main(void)
{
    g = ir_graph_new("m");
    ir_sym_add(g, "B");
    ir_sym_add(g, LONG_NAME);
    dim_expr b = dim_sym(0), t = dim_sym(1), one = dim_const(1), t1;
    CHECK(dim_add(&t, &one, &t1) == DIM_OK);
    shape[0] = ir_dim_intern(g, &b);
    shape[1] = ir_dim_intern(g, &t1);

    const char *dim = LONG_NAME " + 1", *type = "f32[B, " LONG_NAME " + 1]";
    check_contract(dim, dim_into);
    check_contract(type, shape_into);
    check_contract("B = 8, " LONG_NAME " = 1025", syms_into);
    check_contract(" (its symbolic dims: B, " LONG_NAME ")", names_into);

    char *s = ir_dim_str(g, shape[1]);
    CHECK(strcmp(s, dim) == 0);
    free(s);
    s = ir_shape_str(g, NC_F32, 2, shape);
    CHECK(strcmp(s, type) == 0);
    free(s);

    /* a require's message: its size span shown as written and as bound */
    size_t n = ir_require_span(g, NC_F32, 2, shape, NULL, 0);
    CHECK(n < sizeof span && ir_require_span(g, NC_F32, 2, shape, span, sizeof span) == n && strlen(span) == n);
    const char *bound = "f32[B, " LONG_NAME " + 1] = f32[8, 1026]";
    check_contract(bound, require_into);
    s = ir_require_str(g, span, syms);
    CHECK(strcmp(s, bound) == 0);
    free(s);

    ir_graph_free(g);
    if (failures) fprintf(stderr, "%d failure(s)\n", failures);
    return failures != 0;
}
