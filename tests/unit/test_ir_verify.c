/* test_ir_verify.c - ir_verify holds a graph to what its ops' rules make of
 * it, attributes included (the rules normalise them, and everything after
 * reads them normalised); and the graph's lists grow by doubling, which a
 * module's reader relies on for lists of 2^20 items. */
#include "ir.h"
#include "test_util.h"

/* ir_verify's problems on g and the text it wrote (the caller frees). */
static int verify(const ir_graph *g, char **text)
{
    size_t n = 0;
    *text = NULL;
    FILE *f = open_memstream(text, &n);
    int problems = ir_verify(g, f);
    fclose(f);
    return problems;
}

static void check_verify(const ir_graph *g, int want, const char *says)
{
    char *text;
    int problems = verify(g, &text);
    if (problems != want || (says && !strstr(text, says)))
        fprintf(stderr, "%d problems (want %d, saying '%s'): %s\n", problems, want, says ? says : "", text);
    CHECK(problems == want && (!says || strstr(text, says)));
    free(text);
}

/* f32[4, 3] */
static ir_graph *small_graph(uint32_t *shape)
{
    ir_graph *g = ir_graph_new("verify");
    shape[0] = ir_dim_const(g, 4), shape[1] = ir_dim_const(g, 3);
    return g;
}

/* An iota of axis -1 has the type of one of axis 1, which the rules give it:
 * its type passed, and a session binding its sizes read shape[-1]. */
static void test_iota_axis(void)
{
    uint32_t s[2];
    ir_graph *g = small_graph(s);
    ir_node iota = {.op = OP_IOTA, .dtype = NC_I32, .rank = 2, .shape = {s[0], s[1]}, .attr.axis = 1};
    ir_add(g, &iota, NULL, 0);
    check_verify(g, 0, NULL);
    iota.attr.axis = -1;
    ir_add(g, &iota, NULL, 0);
    check_verify(g, 1, "%1 (iota): axis -1, which its op's rules make 1");
    ir_graph_free(g);
}

/* A reduce's axes are stored as the rules make them: none given = all. */
static void test_reduce_axes(void)
{
    uint32_t s[2];
    ir_graph *g = small_graph(s);
    ir_node fill = {.op = OP_FILL, .dtype = NC_F32, .rank = 2, .shape = {s[0], s[1]}};
    ir_value x = ir_add(g, &fill, NULL, 0);
    ir_node sum = {.op = OP_SUM, .dtype = NC_F32, .rank = 0, .attr = {.naxes = 2, .axes = {0, 1}}};
    ir_add(g, &sum, &x, 1);
    check_verify(g, 0, NULL);
    sum.attr.naxes = 0, sum.attr.axes[1] = 0;
    ir_add(g, &sum, &x, 1);
    check_verify(g, 1, "%2 (sum): axes [], which its op's rules make [0, 1]");
    ir_graph_free(g);
}

/* Flags past the known ones are no node's. */
static void test_flags(void)
{
    uint32_t s[2];
    ir_graph *g = small_graph(s);
    ir_node fill = {.op = OP_FILL, .dtype = NC_F32, .rank = 2, .shape = {s[0], s[1]}, .flags = IR_FLAG_KNOWN};
    ir_add(g, &fill, NULL, 0);
    check_verify(g, 0, NULL);
    fill.flags = 0x80;
    ir_add(g, &fill, NULL, 0);
    check_verify(g, 1, "%1: unknown flags 0x80");
    ir_graph_free(g);
}

/* A node reading a value with a problem is not checked: its rules would
 * read that value's bad attributes, and the problem is said once. */
static void test_broken_operand(void)
{
    uint32_t s[2];
    ir_graph *g = small_graph(s);
    ir_node iota = {.op = OP_IOTA, .dtype = NC_I32, .rank = 2, .shape = {s[0], s[1]}, .attr.axis = 7};
    ir_value x = ir_add(g, &iota, NULL, 0);
    ir_node neg = {.op = OP_NEG, .dtype = NC_I32, .rank = 2, .shape = {s[0], s[1]}};
    ir_value y = ir_add(g, &neg, &x, 1);
    ir_add(g, &neg, &y, 1);
    check_verify(g, 1, "%0 (iota): iota: axis 7 out of range");
    ir_graph_free(g);
}

/* Appending n items reallocates each list O(log n) times: grown by one each,
 * a module's reader took minutes under ASan (whose realloc copies) for 2^17. */
static void test_growth(void)
{
    enum { N = 100000, FILES = 4096 };
    ir_graph *g = ir_graph_new("lists");
    uint32_t grew[7] = {0}, last[7] = {0};
    ir_tensor_decl d = {.name = "x", .dtype = NC_F32};
    for (uint32_t i = 0; i < N; i++) {
        char file[32];
        snprintf(file, sizeof file, "f%u.net", i);
        if (i < FILES) CHECK(ir_file_add(g, file) == i + 1);   /* each a search of those before: fewer */
        ir_input_add(g, &d);
        ir_param_add(g, &(ir_param){.decl = d});
        ir_output_add(g, "y", i);
        ir_update_add(g, i, i);
        ir_require_add(g, &(ir_require){.lhs = 0, .rhs = 0, .message = "m"});
        dim_expr k = dim_const(i);
        CHECK(ir_dim_append(g, &k) == i);
        uint32_t cap[7] = {g->cap_inputs, g->cap_params, g->cap_outputs, g->cap_updates, g->cap_requires, g->cap_files,
                           g->cap_dims};
        for (int l = 0; l < 7; l++) {
            grew[l] += cap[l] != last[l];
            last[l] = cap[l];
        }
    }
    for (int l = 0; l < 7; l++) {
        if (grew[l] > 20) fprintf(stderr, "list %d: %u reallocations for %d items\n", l, grew[l], N);
        CHECK(grew[l] <= 20);
    }
    CHECK(g->ninputs == N && g->nparams == N && g->noutputs == N && g->nupdates == N && g->nrequires == N &&
          g->nfiles == FILES && g->ndims == N);
    CHECK(g->updates[N - 1].param == N - 1 && !strcmp(g->files[FILES - 1], "f4095.net") && !strcmp(g->requires[N - 1].message, "m"));
    /* an existing path keeps its index; an appended dim is not interned */
    CHECK(ir_file_add(g, "f7.net") == 8 && g->nfiles == FILES);
    dim_expr seven = dim_const(7);
    CHECK(ir_dim_intern(g, &seven) == 7 && ir_dim_append(g, &seven) == N);
    ir_graph_free(g);
}

int main(void)
{
    test_iota_axis();
    test_reduce_axes();
    test_flags();
    test_broken_operand();
    test_growth();
    return failures != 0;
}
