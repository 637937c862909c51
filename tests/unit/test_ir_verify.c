/* test_ir_verify.c - ir_verify holds a graph to what its ops' rules make of
 * it, attributes included (the rules normalise them, and everything after
 * reads them normalised). */
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

int main(void)
{
    test_iota_axis();
    test_reduce_axes();
    test_flags();
    test_broken_operand();
    return failures != 0;
}
