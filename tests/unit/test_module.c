/* test_module.c - the module file: write/read round trip, and a reader that
 * refuses every truncation and survives byte flips (run under ASan in CI);
 * which image a device of each compute capability loads. */
#include "cuda_emit.h"
#include "driver.h"
#include "module.h"
#include "typecheck.h"

#include "test_util.h"
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

static char *print_graph(const ir_graph *g)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    ir_print(g, f);
    fclose(f);
    return buf;
}

/* The arch of the image module_image_for picks among archs (comma-separated;
 * "compute_" ones are PTX) on a major.minor device, or "compile:ARCH". */
static const char *image_choice(const char *archs, int major, int minor)
{
    static char out[32];
    nrt_image imgs[8];
    memset(imgs, 0, sizeof imgs);
    nrt_module_data m = {.images = imgs};
    char list[128];
    snprintf(list, sizeof list, "%s", archs);
    for (char *save = NULL, *a = strtok_r(list, ",", &save); a && m.nimages < 8; a = strtok_r(NULL, ",", &save)) {
        snprintf(imgs[m.nimages].arch, sizeof imgs[0].arch, "%s", a);
        imgs[m.nimages++].is_ptx = strncmp(a, "compute_", 8) == 0;
    }
    int i = module_image_for(&m, major, minor);
    char arch[16];
    module_best_arch(major, minor, arch, sizeof arch);
    snprintf(out, sizeof out, "%s%s", i >= 0 ? "" : "compile:", i >= 0 ? imgs[i].arch : arch);
    return out;
}

static void test_image_choice(void)
{
    static const struct { const char *archs; int major, minor; const char *want; } cases[] = {
        {"sm_80,sm_90a,compute_90", 9, 0, "sm_90a"},    /* the default targets on an H100 */
        {"sm_80,sm_90a,compute_90", 8, 0, "sm_80"},
        {"sm_80,sm_90a,compute_90", 8, 6, "sm_80"},     /* a cubin runs on later minor versions */
        {"sm_80,sm_90a,compute_90", 8, 9, "sm_80"},
        {"sm_80,sm_90a,compute_90", 10, 0, "compute_90"},   /* sm_90a's cubin runs on 9.0 only */
        {"sm_80,sm_90a,compute_90", 12, 0, "compute_90"},
        {"sm_80,sm_90a,compute_90", 7, 5, "compile:sm_75"},
        {"sm_80,sm_90,compute_90", 9, 0, "sm_90"},
        {"sm_90,sm_90a", 9, 0, "sm_90a"},               /* the specific image first, in either order */
        {"sm_90a,sm_90", 9, 0, "sm_90a"},
        {"sm_90a", 10, 0, "compile:sm_100"},
        {"compute_80", 9, 0, "compute_80"},
        {"compute_80,compute_90,compute_100", 9, 0, "compute_90"},   /* by number: "compute_100" < "compute_90" as text */
        {"compute_80,compute_90,compute_100", 10, 0, "compute_100"},
        {"compute_90", 8, 6, "compile:sm_86"},          /* PTX newer than the device does not load */
        {"", 9, 0, "compile:sm_90a"},                   /* a module built with --target '' (no images) */
    };
    for (size_t k = 0; k < sizeof cases / sizeof *cases; k++) {
        const char *got = image_choice(cases[k].archs, cases[k].major, cases[k].minor);
        if (strcmp(got, cases[k].want) != 0) {
            fprintf(stderr, "images %s on %d.%d: loaded %s, want %s\n", cases[k].archs, cases[k].major, cases[k].minor, got,
                    cases[k].want);
            failures++;
        }
    }
}

/* A module's graph is checked node by node, and a malformed node reported
 * and passed over; a gather after it still reads its indices' range
 * (index_range.c), which followed the malformed node's operands: a neg with
 * none read operand 0 of NULL (the fuzzer's crash-7f6053...). Now it is
 * reported, and the walk stops there. */
static void test_malformed_index_operand(void)
{
    ir_graph *g = ir_graph_new("malformed");
    uint32_t ten = ir_dim_const(g, 10), two = ir_dim_const(g, 2), three = ir_dim_const(g, 3);
    ir_tensor_decl d = {.name = "t", .dtype = NC_F32, .rank = 2, .shape = {ten, two}};
    ir_node in = {.op = OP_INPUT, .dtype = NC_F32, .rank = 2, .shape = {ten, two}, .attr.index = ir_input_add(g, &d)};
    ir_value t = ir_add(g, &in, NULL, 0);
    ir_node neg = {.op = OP_NEG, .dtype = NC_I32, .rank = 1, .shape = {three}};
    ir_value idx = ir_add(g, &neg, NULL, 0);   /* no operand */
    ir_node gather = {.op = OP_GATHER, .dtype = NC_F32, .rank = 2, .shape = {three, two}};
    ir_value y = ir_add(g, &gather, (const ir_value[]){t, idx}, 2);
    ir_output_add(g, "y", y);
    /* and a where whose condition, a comparison, has no operands */
    ir_node lt = {.op = OP_LT, .dtype = NC_BOOL, .rank = 1, .shape = {three}};
    ir_value cond = ir_add(g, &lt, NULL, 0);
    ir_node iota = {.op = OP_IOTA, .dtype = NC_I32, .rank = 1, .shape = {three}};
    ir_value k = ir_add(g, &iota, NULL, 0);
    ir_node where = {.op = OP_WHERE, .dtype = NC_I32, .rank = 1, .shape = {three}};
    ir_value picked = ir_add(g, &where, (const ir_value[]){cond, k, k}, 3);
    ir_output_add(g, "z", ir_add(g, &gather, (const ir_value[]){t, picked}, 2));
    FILE *quiet = fopen("/dev/null", "w");
    CHECK(ir_verify(g, quiet) > 0);
    fclose(quiet);
    ir_graph_free(g);
}

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 7; k >= 0; k--) v = v << 8 | p[k];
    return v;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
}

/* A copy of the module in bytes with extra zero bytes at the end of top-level
 * section sec, the header's total and the table's offsets and sizes moved to
 * match: a file the header and the table cannot tell from a good one. */
static unsigned char *grow_section(const unsigned char *bytes, size_t size, uint32_t sec, size_t extra)
{
    unsigned char *out = calloc(size + extra, 1);
    const unsigned char *row = bytes + 24 + 24 * (size_t)sec;
    size_t end = (size_t)(get_u64(row + 8) + get_u64(row + 16));
    memcpy(out, bytes, end);
    memcpy(out + end + extra, bytes + end, size - end);
    put_u64(out + 16, size + extra);
    put_u64(out + 24 + 24 * (size_t)sec + 16, get_u64(row + 16) + extra);
    for (uint32_t i = sec + 1; i < (uint32_t)bytes[12]; i++)
        put_u64(out + 24 + 24 * (size_t)i + 8, get_u64(bytes + 24 + 24 * (size_t)i + 8) + extra);
    return out;
}

/* Bytes in a section past what its reader takes were never checked, and
 * were accepted: fuzz_module's round trip found a source section with 4
 * bytes after its text (tests/fuzz/regress/fuzz_module/source_tail.netm).
 * The graph, program and source sections must be read to their last byte. */
static void test_section_tails(const unsigned char *bytes, size_t size)
{
    static const char *const what[] = {"graph", "program", "CUDA source"};
    nrt_module_data r;
    char err[512];
    for (uint32_t sec = 0; sec < 3; sec++) {
        unsigned char *grown = grow_section(bytes, size, sec, 4);
        err[0] = 0;
        int rc = module_read_buffer(grown, size + 4, &r, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "4 bytes after the end of the") && strstr(err, what[sec]));
        if (rc == 0) module_data_free(&r);
        free(grown);
    }
    unsigned char *same = grow_section(bytes, size, 0, 0);   /* the helper itself changes nothing */
    CHECK(module_read_buffer(same, size, &r, err, sizeof err) == 0);
    module_data_free(&r);
    free(same);
}

/* Fields of one bit or a few that the reader took as a wider byte, keeping
 * only what it knew (2 read as true, 0xbd as the matmul flags 0x05): the
 * file was accepted and the writer gave back other bytes. fuzz_module's
 * round trip found the matmul flags (tests/fuzz/regress/fuzz_module/
 * matmul_flags); the others are the same mistake. bytes: a module whose
 * sections are graph, program, source and two images. */
static void test_flag_bytes(unsigned char *bytes, size_t size)
{
    const unsigned char *graph = bytes + 24, *image = bytes + 24 + 3 * 24, *second = bytes + 24 + 4 * 24;
    size_t graph_end = (size_t)(get_u64(graph + 8) + get_u64(graph + 16));
    size_t train = graph_end - 125;   /* the training spec ends the graph: u8 present at its start, */
    size_t nesterov = train + 90;     /* u8 nesterov after u32 loss, u32 first input, u8 optimizer, 10 f64 */
    size_t is_ptx = (size_t)get_u64(image + 8) + 4 + 5;   /* after the arch "sm_90" */
    size_t nvrtc = (size_t)get_u64(second + 8) + 4 + 5 + 1;
    const struct { size_t at; unsigned char to; const char *why; } cases[] = {
        {train, 2, "training flag 2"},
        {nesterov, 3, "training flag 3"},
        {is_ptx, 2, "image kind 2"},
        {nvrtc, 0x7f, "images of NVRTC 13000 and"},
    };
    nrt_module_data r;
    char err[512];
    for (size_t i = 0; i < NC_COUNT(cases); i++) {
        unsigned char saved = bytes[cases[i].at];
        CHECK(saved <= 1 || cases[i].to == 0x7f);
        bytes[cases[i].at] = cases[i].to;
        err[0] = 0;
        int rc = module_read_buffer(bytes, size, &r, err, sizeof err);
        if (rc == 0 || !strstr(err, cases[i].why)) fprintf(stderr, "case %zu: %s\n", i, rc ? err : "accepted");
        CHECK(rc != 0 && strstr(err, cases[i].why));
        if (rc == 0) module_data_free(&r);
        bytes[cases[i].at] = saved;
    }
    CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) == 0);
    module_data_free(&r);
}

/* A module of the one graph section g (size bytes, then freed). */
static unsigned char *graph_module(unsigned char *g, size_t size, size_t *out)
{
    *out = 48 + size;
    unsigned char *b = calloc(*out, 1);
    memcpy(b, NRT_MODULE_MAGIC, 8);
    b[8] = NRT_MODULE_VERSION, b[12] = 1;
    put_u64(b + 16, *out);
    b[24] = 1;   /* the graph */
    put_u64(b + 32, 48), put_u64(b + 40, size);
    memcpy(b + 48, g, size);
    free(g);
    return b;
}

/* Seconds module_read_buffer takes to refuse b as truncated in the graph. */
static double refuse_time(const unsigned char *b, size_t size)
{
    struct timespec t0, t1;
    clock_gettime(CLOCK_MONOTONIC, &t0);
    nrt_module_data r;
    char err[512] = "";
    int rc = module_read_buffer(b, size, &r, err, sizeof err);
    clock_gettime(CLOCK_MONOTONIC, &t1);
    CHECK(rc != 0 && strstr(err, "truncated or corrupt (in the graph)"));
    if (rc == 0) module_data_free(&r);
    return (double)(t1.tv_sec - t0.tv_sec) + 1e-9 * (double)(t1.tv_nsec - t0.tv_nsec);
}

/* Graph sections of long lists, then nothing: refused as truncated, at
 * once. The reader grew its lists one item at a time, and under ASan (whose
 * realloc copies) 2^16 one-byte dims took over 20 s, 2^15 updates 11 s
 * (fuzz_module's timeout is 5 s: tests/fuzz/regress/fuzz_module/many_dims
 * and many_updates, the same files); it appends through ir.c's functions
 * now, which double their lists (test_ir_verify's test_growth). */
static void test_long_lists(void)
{
    const uint32_t ndims = 1u << 16, nupdates = 1u << 15;
    size_t n = 12 + (size_t)ndims, size;
    unsigned char *g = calloc(n, 1);
    put_u64(g + 8, ndims);   /* no name, no symbols; the count's high half is the first dim */
    unsigned char *b = graph_module(g, n, &size);
    double dims_s = refuse_time(b, size);
    free(b);
    /* no name, symbols, dims, files or inputs; one parameter f32[] and its node; no
       outputs; then the updates, each of parameter 0 to node 0 */
    size_t param = 4 + 2 + 12 + 2 + 16, node = 4 + 3 + 4 + 43 + 12 + 4;
    n = 6 * 4 + param + 4 + node + 4 + 4 + 8 * (size_t)nupdates;
    g = calloc(n, 1);
    g[20] = 1;                               /* one parameter */
    g[24 + param] = 1;                       /* one node, */
    g[24 + param + 4] = OP_PARAM;            /* the parameter's */
    size_t at = 24 + param + 4 + node + 4;   /* after no outputs */
    put_u64(g + at, nupdates);   /* the high half: the first update's parameter, 0 */
    b = graph_module(g, n, &size);
    double updates_s = refuse_time(b, size);
    free(b);
    if (dims_s >= 5 || updates_s >= 5) fprintf(stderr, "test_long_lists: dims %.1f s, updates %.1f s\n", dims_s, updates_s);
    CHECK(dims_s < 5 && updates_s < 5);
}

/* Inputs fuzz_module found the reader accepting, each refused now. */
static void test_fuzz_regressions(void)
{
    static const struct { const char *file, *why; } cases[] = {
        {"source_tail", "4 bytes after the end of the CUDA source"},
        {"reserved_word", "reserved word is 1"},
        {"matmul_flags", "matmul flags 0xbd"},
        /* an iota of axis -1, which shape_iota normalises and a session's binding
           read as shape[-1] (UBSan in fuzz_module's CPU session) */
        {"iota_axis", "%4 (iota): axis -1, which its op's rules make 0"},
        /* fields the reader took as they came and the writer gave back
           (test_checked_fields), in cast_chain and fashion_mlp */
        {"node_flags", "ir verify: %18: unknown flags 0x40"},
        {"node_region", "node %18: checkpoint region 20 of a graph of 19 nodes"},
        {"image_arch_empty", "section 3: an image with no architecture name"},
        {"entry_name_empty", "section 3: an entry point with no name"},
        {"file_twice", "source file examples/fashion_mlp.net listed twice"},
    };
    for (size_t i = 0; i < NC_COUNT(cases); i++) {
        char path[256], err[512] = "";
        snprintf(path, sizeof path, "tests/fuzz/regress/fuzz_module/%s", cases[i].file);
        nrt_module_data r;
        int rc = module_read(path, &r, err, sizeof err);
        if (rc != 0 && !strstr(err, cases[i].why)) fprintf(stderr, "%s: %s\n", path, err);
        CHECK(rc != 0 && strstr(err, cases[i].why));
        if (rc == 0) module_data_free(&r);
    }
}

/* m written to path and read back: refused with a message saying why, or
 * (why NULL) read. */
static void check_refused(const nrt_module_data *m, const char *path, const char *why)
{
    char err[512] = "";
    nrt_module_data r;
    CHECK(module_write(path, m, err, sizeof err) == 0);
    int rc = module_read(path, &r, err, sizeof err);
    if (why ? rc == 0 || !strstr(err, why) : rc != 0) fprintf(stderr, "want '%s': %s\n", why ? why : "read", rc ? err : "read");
    CHECK(why ? rc != 0 && strstr(err, why) : rc == 0);
    if (rc == 0) module_data_free(&r);
}

/* Fields the reader took as they came, which the writer then gave back
 * unchanged: a node's flags and checkpoint region, an image's architecture
 * and an entry's name (empty), a source file named twice. m: a module of
 * graph, program, source and one image sections. */
static void test_checked_fields(nrt_module_data *m, const char *path)
{
    ir_graph *g = m->graph;
    ir_node *n = &g->nodes[g->nnodes - 1];
    char why[128];
    n->flags = 0x40;
    snprintf(why, sizeof why, "ir verify: %%%u: unknown flags 0x40", g->nnodes - 1);
    check_refused(m, path, why);
    n->flags = 0;
    /* a region past the node count is refused (tests/fuzz/regress/fuzz_module/node_region);
       netc writes such numbers, left by dead @checkpoint blocks, as their ranks */
    n->region = g->nnodes;
    check_refused(m, path, NULL);
    n->region = g->nnodes + 1, n[-1].region = 3;
    nrt_module_data r;
    char err[512];
    CHECK(module_write(path, m, err, sizeof err) == 0 && module_read(path, &r, err, sizeof err) == 0);
    if (r.graph) {
        CHECK(r.graph->nodes[g->nnodes - 1].region == 2 && r.graph->nodes[g->nnodes - 2].region == 1);
        module_data_free(&r);
    }
    n->region = 0, n[-1].region = 0;

    CHECK(g->nfiles >= 2);
    if (g->nfiles >= 2) {
        char *second = g->files[1];
        g->files[1] = g->files[0];
        snprintf(why, sizeof why, "source file %s listed twice", g->files[0]);
        check_refused(m, path, why);
        g->files[1] = second;
    }

    char arch[sizeof m->images[0].arch];
    memcpy(arch, m->images[0].arch, sizeof arch);
    m->images[0].arch[0] = 0;
    check_refused(m, path, "module is corrupt: section 3: an image with no architecture name");
    memcpy(m->images[0].arch, arch, sizeof arch);

    check_refused(m, path, NULL);   /* the module of the entry below */
    nrt_module_data sub;
    if (module_read(path, &sub, err, sizeof err) != 0) return;
    module_add_entry(m, "", &sub);
    check_refused(m, path, "module is corrupt: section 4: an entry point with no name");
    free(m->entries[0].name);
    m->entries[0].name = nc_xstrdup("other");
    check_refused(m, path, NULL);
    free(m->entries[0].name);
    module_data_free(&m->entries[0].data);
    free(m->entries);
    m->entries = NULL, m->nentries = 0;
}

/* The entry points listed when the one asked for is missing: names of any
 * length, all of them (a 256-byte list cut them off silently), and an err
 * too small for the text ends in "..." rather than stopping mid-word. */
static void test_long_entry_names(void)
{
    char name[2][301], err[1024];
    for (int k = 0; k < 2; k++) memset(name[k], 'a' + k, 300), name[k][300] = 0;
    for (int small = 0; small < 2; small++) {
        nrt_module_data m = {0}, sub = {0}, out;
        for (int k = 0; k < 2; k++) module_add_entry(&m, name[k], &sub);
        size_t cap = small ? 80 : sizeof err;
        CHECK(module_take_entry(&m, "other", &out, err, cap) != 0);
        if (small) CHECK(strlen(err) == cap - 1 && !strcmp(err + cap - 4, "..."));
        else CHECK(strstr(err, name[0]) && strstr(err, name[1]) && strstr(err, "it has: forward, a") && err[strlen(err) - 1] == ')');
    }
}

/* The writer and the reader agree on how many sections a module has: one
 * that needs every section the reader takes (61 images and the 3 fixed
 * sections, refused by a writer that stopped at 60 images) is written and
 * read back; one that needs more (60 images and 2 entry points: 65, which the
 * writer once wrote and the reader called corrupt) is refused when written,
 * with a message that says why, and leaves no file. */
static void test_section_limit(const nrt_module_data *m0, const char *path)
{
    enum { NIMG = NRT_MODULE_SECTIONS_MAX - 3 };
    unsigned char fake[] = "image";
    nrt_image imgs[NIMG];
    for (int i = 0; i < NIMG; i++)
        imgs[i] = (nrt_image){.data = fake, .size = sizeof fake}, snprintf(imgs[i].arch, sizeof imgs[i].arch, "sm_%d", 10 + i);
    nrt_module_data m = *m0, inner = *m0, r;
    m.images = imgs, m.nimages = NIMG;
    inner.images = NULL, inner.nimages = 0, inner.entries = NULL, inner.nentries = 0;
    nrt_module_entry entries[2] = {{.name = "e1", .data = inner}, {.name = "e2", .data = inner}};
    char err[1024] = "";
    remove(path);
    CHECK(module_write(path, &m, err, sizeof err) == 0);
    int rc = module_read(path, &r, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(r.nimages == NIMG && !strcmp(r.images[NIMG - 1].arch, imgs[NIMG - 1].arch));
        module_data_free(&r);
    }
    remove(path);
    m.nimages = NIMG - 1, m.entries = entries, m.nentries = 2;
    err[0] = 0;
    CHECK(module_write(path, &m, err, sizeof err) != 0);
    CHECK(strstr(err, "at most 64 sections") && strstr(err, "would need 65") && strstr(err, "fewer targets"));
    CHECK(module_read(path, &r, err, sizeof err) != 0);   /* nothing written */
    m.nentries = 1;
    CHECK(module_write(path, &m, err, sizeof err) == 0);
    rc = module_read(path, &r, err, sizeof err);
    CHECK(rc == 0);
    if (rc == 0) {
        CHECK(r.nimages == NIMG - 1 && r.nentries == 1);
        module_data_free(&r);
    }
    remove(path);
}

int main(int argc, char **argv)
{
    test_long_entry_names();
    test_image_choice();
    test_malformed_index_operand();
    test_fuzz_regressions();
    test_long_lists();
    const char *example = argc > 1 ? argv[1] : "examples/gpt2.net";
    src_table src = {0};
    char err[1024];
    const char *set_n[] = {"L"}, *set_v[] = {"2"};
    driver_opts o = {.verify = true, .set_names = set_n, .set_values = set_v, .nsets = 1};
    ir_graph *g = compile_file(example, &o, &src);
    if (!g) return 1;
    nrt_module_data m = {.graph = g, .nvrtc_version = 13000};
    CHECK(cuda_emit_program_ex(g, true, &m.program, err, sizeof err));   /* fused: matmul epilogues included */
    unsigned char fake[] = "not really a cubin";
    nrt_image img = {.arch = "sm_90", .data = fake, .size = sizeof fake};
    m.images = &img;
    m.nimages = 1;
    const char *path = "test_module.netm";
    /* every role travels: the last parameter stands for one of --accumulate's accumulators,
       the one before it for a buffer (batch norm's running statistics) */
    CHECK(g->nparams > 1);
    if (g->nparams > 1) g->params[g->nparams - 1].role = IR_ROLE_ACCUMULATOR, g->params[g->nparams - 2].role = IR_ROLE_BUFFER;
    /* a condition on sizes travels, for the session binding them to check (T <= 1024) */
    CHECK(g->nsyms == 2 && g->nrequires == 0);
    const dim_expr t_dim = dim_sym(1);
    /* its {name}s' sizes travel too, shown as written and as bound; a span naming a dim the
       graph lacks (a corrupt file) reads "?" */
    char span[128], msg[256], text[256];
    const dim_expr b_dim = dim_sym(0);
    uint32_t bt[2] = {ir_dim_intern(g, &b_dim), ir_dim_intern(g, &t_dim)};
    ir_require_span(g, NC_F32, 2, bt, span, sizeof span);
    snprintf(msg, sizeof msg, "T is at most 1024, x is %s", span);
    ir_require_text(g, msg, NULL, text, sizeof text);
    CHECK(!strcmp(text, "T is at most 1024, x is f32[B, T]"));
    ir_require_text(g, "x is \x01t1 99999\x01.", (const int64_t[]){8, 1025}, text, sizeof text);
    CHECK(!strcmp(text, "x is ?."));
    ir_require_add(g, &(ir_require){.lhs = ir_dim_intern(g, &t_dim), .rhs = ir_dim_const(g, 1024), .cmp = IR_CMP_LE,
                                    .message = msg, .hint = "cut the text into windows", .loc = {1, 5, 3}, .site = {1, 9, 10}});
    CHECK(module_write(path, &m, err, sizeof err) == 0);

    /* round trip: the same graph text, steps, kernels, source and image */
    nrt_module_data r;
    CHECK(module_read(path, &r, err, sizeof err) == 0);
    if (r.graph) {
        char *a = print_graph(g), *b = print_graph(r.graph);
        CHECK(strcmp(a, b) == 0);
        free(a);
        free(b);
        CHECK(r.program.nsteps == m.program.nsteps && r.program.nkernels == m.program.nkernels);
        CHECK(memcmp(r.program.steps, m.program.steps, m.program.nsteps * sizeof *m.program.steps) == 0);
        CHECK(strcmp(r.program.source, m.program.source) == 0);
        CHECK(r.nimages == 1 && r.images[0].size == sizeof fake && memcmp(r.images[0].data, fake, sizeof fake) == 0);
        CHECK(r.graph->train.present == g->train.present && r.graph->train.lr == g->train.lr);
        CHECK(r.graph->nparams == g->nparams);
        for (uint32_t i = 0; i < g->nparams && i < r.graph->nparams; i++) CHECK(r.graph->params[i].role == g->params[i].role);
        CHECK(r.graph->nrequires == 1);
        if (r.graph->nrequires == 1) {
            const ir_require *q = &r.graph->requires[0];
            CHECK(q->cmp == IR_CMP_LE && !strcmp(q->message, msg) && q->hint && !strcmp(q->hint, "cut the text into windows") && q->site.line == 9 && q->site.col == 10);
            tc_error e;
            CHECK(tc_check_requires(r.graph, (const int64_t[]){8, 1024}, &e));
            CHECK(!tc_check_requires(r.graph, (const int64_t[]){8, 1025}, &e));
            CHECK(strstr(e.msg, "fails at B = 8, T = 1025, where T <= 1024 is false: T is at most 1024, x is f32[B, T] = f32[8, 1025]") != NULL);
            CHECK(!strcmp(e.hint, "cut the text into windows"));
            tc_error_free(&e);
        }
        module_data_free(&r);
    }
    /* one whose dim is not the graph's is refused */
    g->requires[0].rhs = g->ndims + 3;
    CHECK(module_write("test_module_req.netm", &m, err, sizeof err) == 0);
    CHECK(module_read("test_module_req.netm", &r, err, sizeof err) != 0 && strstr(err, "require out of range"));
    remove("test_module_req.netm");
    g->requires[0].rhs = ir_dim_const(g, 1024);

    /* A module whose graph updates a parameter is the entry "train" itself:
       an entry of that name beside it could never be loaded (nrt_module_load_entry
       gives the top level), and the reader took it */
    if (g->nparams && g->noutputs) {
        nrt_module_data sub;
        CHECK(module_read(path, &sub, err, sizeof err) == 0);
        ir_value w = 0;
        while (w < g->nnodes && !(g->nodes[w].op == OP_PARAM && g->nodes[w].attr.index == 0)) w++;
        ir_update_add(g, 0, w);   /* w <- w: a training step's graph as far as the name goes */
        module_add_entry(&m, "train", &sub);
        CHECK(module_write("test_module_train.netm", &m, err, sizeof err) == 0);
        err[0] = 0;
        int rc = module_read("test_module_train.netm", &r, err, sizeof err);
        CHECK(rc != 0 && strstr(err, "an entry named train, the main entry's name"));
        if (rc == 0) module_data_free(&r);
        m.entries[0].name[0] = 'T';   /* another name is fine */
        CHECK(module_write("test_module_train.netm", &m, err, sizeof err) == 0);
        CHECK(module_read("test_module_train.netm", &r, err, sizeof err) == 0);
        module_data_free(&r);
        remove("test_module_train.netm");
        free(m.entries[0].name);
        module_data_free(&m.entries[0].data);
        free(m.entries);
        m.entries = NULL, m.nentries = 0;
        g->nupdates--;
    }

    /* every truncation is refused with a message */
    size_t size = 0;
    unsigned char *bytes = slurp(path, &size);
    CHECK(bytes != NULL);
    int refused = 0, tried = 0;
    for (size_t n = 0; bytes && n < size; n += n < 4096 ? 1 : 97) {
        tried++;
        err[0] = 0;
        if (module_read_buffer(bytes, n, &r, err, sizeof err) != 0 && err[0]) refused++;
        else module_data_free(&r);
    }
    CHECK(refused == tried);

    if (bytes) test_section_tails(bytes, size);
    nrt_image two[2] = {img, img};
    m.images = two, m.nimages = 2;
    CHECK(module_write("test_module_two.netm", &m, err, sizeof err) == 0);
    m.images = &img, m.nimages = 1;
    size_t two_size = 0;
    unsigned char *two_bytes = slurp("test_module_two.netm", &two_size);
    remove("test_module_two.netm");
    CHECK(two_bytes != NULL);
    if (two_bytes) test_flag_bytes(two_bytes, two_size);
    free(two_bytes);

    /* byte flips: refused or read, never a crash (ASan watches) */
    uint64_t x = 88172645463325252ull;
    int accepted = 0;
    for (int k = 0; bytes && k < 3000; k++) {
        x ^= x << 13, x ^= x >> 7, x ^= x << 17;
        size_t at = (size_t)(x % size);
        unsigned char saved = bytes[at];
        bytes[at] ^= (unsigned char)(1u << (x >> 60 & 7));
        if (module_read_buffer(bytes, size, &r, err, sizeof err) == 0) {
            accepted++;
            module_data_free(&r);
        } else {
            CHECK(err[0] != 0);
        }
        bytes[at] = saved;
    }
    /* the header is checked: a wrong magic or version is refused by name */
    if (bytes) {
        bytes[0] = 'X';
        CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) != 0 && strstr(err, "magic"));
        bytes[0] = 'N';
        bytes[8] = NRT_MODULE_VERSION + 1;
        CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) != 0 && strstr(err, "version"));
        bytes[8] = NRT_MODULE_VERSION;
        /* the sections cover the file exactly: a section count cut to 1 leaves
         * the graph where the table now ends, and the rest unread */
        CHECK(bytes[12] >= 3);
        uint8_t nsec = bytes[12];
        bytes[12] = 1;
        CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) != 0 && strstr(err, "section 0 starts at byte"));
        bytes[12] = nsec;
        /* a section's reserved word is 0; another was accepted unread (fuzz_module's round
           trip, tests/fuzz/regress/fuzz_module/reserved_word) */
        bytes[24 + 24 * 2 + 4] = 1;
        CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) != 0 && strstr(err, "section 2's reserved word is 1"));
        bytes[24 + 24 * 2 + 4] = 0;
        /* bytes after the last section, counted in the header's total */
        unsigned char *longer = malloc(size + 8);
        memcpy(longer, bytes, size);
        memset(longer + size, 0, 8);
        uint64_t total = size + 8;
        for (int k = 0; k < 8; k++) longer[16 + k] = (unsigned char)(total >> (8 * k));
        CHECK(module_read_buffer(longer, size + 8, &r, err, sizeof err) != 0 && strstr(err, "belong to no section"));
        free(longer);
        CHECK(module_read_buffer(bytes, size, &r, err, sizeof err) == 0);
        module_data_free(&r);
    }
    /* a matmul epilogue cuBLASLt cannot run is refused by the reader */
    uint32_t epi = UINT32_MAX;
    for (uint32_t k = 0; k < m.program.nsteps && epi == UINT32_MAX; k++)
        if (m.program.steps[k].kind == NRT_STEP_MATMUL && (m.program.steps[k].mm_epilogue & NRT_EPI_BIAS)) epi = k;
    CHECK(epi != UINT32_MAX);
    const uint8_t bad_epilogues[] = {NRT_EPI_BIAS | NRT_EPI_RELU | NRT_EPI_GELU, NRT_EPI_BIAS | NRT_EPI_AUX, 0xff,
                                     NRT_EPI_BIAS | NRT_EPI_RESIDUAL | NRT_EPI_GELU, NRT_EPI_BIAS | NRT_EPI_RESIDUAL,
                                     NRT_EPI_DGELU | NRT_EPI_AUX | NRT_EPI_BIAS, NRT_EPI_DGELU};
    for (size_t i = 0; epi != UINT32_MAX && i < sizeof bad_epilogues; i++) {
        nrt_step saved = m.program.steps[epi];
        m.program.steps[epi].mm_epilogue = bad_epilogues[i];   /* the last: a buffer count that does not match */
        CHECK(module_write(path, &m, err, sizeof err) == 0);
        err[0] = 0;
        CHECK(module_read(path, &r, err, sizeof err) != 0 && strstr(err, "matmul"));
        m.program.steps[epi] = saved;
    }
    /* an output that is an input or a parameter itself is refused: netc gives
     * it a copy, and the session reads an output after the run, when that
     * tensor may have been set or updated since */
    for (ir_value v = 0; v < g->nnodes; v++) {
        if (g->nodes[v].op != OP_INPUT && g->nodes[v].op != OP_PARAM) continue;
        ir_value saved = g->outputs[0].value;
        g->outputs[0].value = v;
        CHECK(module_write(path, &m, err, sizeof err) == 0);
        err[0] = 0;
        CHECK(module_read(path, &r, err, sizeof err) != 0 && strstr(err, "itself, not a copy of it"));
        g->outputs[0].value = saved;
    }
    test_checked_fields(&m, path);
    /* a bias's gradient stored by the matmul (DGELU_BGRAD) goes with GELU's
     * backward alone, after out: the sums, then the fallback's ones */
    nrt_step bg = {.kind = NRT_STEP_MATMUL, .mm_dtype = NC_BF16, .mm_out_dtype = NC_BF16,
                   .mm_epilogue = NRT_EPI_DGELU | NRT_EPI_AUX | NRT_EPI_BGRAD};
    nrt_matmul_slots bs = nrt_matmul_slots_of(&bg);
    CHECK(nrt_matmul_check(&bg) == NULL && nrt_matmul_nbufs(bg.mm_epilogue) == 6);
    CHECK(bs.aux_in == 2 && bs.out == 3 && bs.colsum == 4 && bs.ones == 5 && bs.bias < 0 && bs.aux < 0);
    const uint8_t bad_sums[] = {NRT_EPI_BGRAD, NRT_EPI_GELU | NRT_EPI_AUX | NRT_EPI_BGRAD, NRT_EPI_BIAS | NRT_EPI_BGRAD,
                                NRT_EPI_DGELU | NRT_EPI_AUX | NRT_EPI_BGRAD | NRT_EPI_BIAS};
    for (size_t i = 0; i < sizeof bad_sums; i++) {
        bg.mm_epilogue = bad_sums[i];
        CHECK(nrt_matmul_check(&bg) != NULL);
    }
    /* a batch of launches (cuda_batch.c) that is not one is refused */
    uint32_t head = UINT32_MAX, before_matmul = UINT32_MAX;
    for (uint32_t k = 0; k < m.program.nsteps; k++) {
        if (m.program.steps[k].batch >= 2 && head == UINT32_MAX) head = k;
        if (k + 1 < m.program.nsteps && m.program.steps[k].kind == NRT_STEP_KERNEL && m.program.steps[k].batch == 0 &&
            m.program.steps[k + 1].kind == NRT_STEP_MATMUL && before_matmul == UINT32_MAX)
            before_matmul = k;
    }
    CHECK(head != UINT32_MAX && before_matmul != UINT32_MAX);
    for (int c = 0; head != UINT32_MAX && before_matmul != UINT32_MAX && c < 5; c++) {
        nrt_program *pp = &m.program;
        nrt_step saved_head = pp->steps[head], saved_next = pp->steps[head + 1], saved_bm = pp->steps[before_matmul];
        if (c == 0) pp->steps[head].batch = 1;                                  /* a batch of one */
        if (c == 1) pp->steps[head].batch = (uint16_t)(pp->nsteps - head + 1);  /* past the last step */
        if (c == 2) pp->steps[head].batch_kernel = pp->nkernels;                /* no such kernel */
        if (c == 3) pp->steps[head + 1].batch = 2;                              /* a batch inside a batch */
        if (c == 4) pp->steps[before_matmul].batch = 2;                         /* a matmul in a batch */
        CHECK(module_write(path, &m, err, sizeof err) == 0);
        err[0] = 0;
        CHECK(module_read(path, &r, err, sizeof err) != 0 && strstr(err, "batch"));
        pp->steps[head] = saved_head, pp->steps[head + 1] = saved_next, pp->steps[before_matmul] = saved_bm;
    }
    /* a prepare step (run only when parameters change) must depend on
     * parameters alone, and shares no batch with other steps */
    uint32_t reads_input = UINT32_MAX, prepared = 0;
    for (uint32_t k = 0; k < m.program.nsteps; k++) {
        const nrt_step *s = &m.program.steps[k];
        prepared += s->prepare;
        for (int j = 0; j < s->nbufs && reads_input == UINT32_MAX; j++)
            if (s->kind == NRT_STEP_KERNEL && s->batch == 0 && s->bufs[j] < g->nnodes && g->nodes[s->bufs[j]].op == OP_INPUT)
                reads_input = k;
    }
    CHECK(prepared > 0 && reads_input != UINT32_MAX && head != UINT32_MAX);
    for (int c = 0; reads_input != UINT32_MAX && head != UINT32_MAX && c < 2; c++) {
        /* an input read by a prepare step; a batch of one kind and the other */
        nrt_step *s = &m.program.steps[c == 0 ? reads_input : head + 1];
        bool saved = s->prepare;
        s->prepare = c == 0 ? true : !m.program.steps[head].prepare;
        CHECK(module_write(path, &m, err, sizeof err) == 0);
        err[0] = 0;
        CHECK(module_read(path, &r, err, sizeof err) != 0 && strstr(err, "prepare"));
        s->prepare = saved;
    }
    test_section_limit(&m, path);
    printf("test_module: %zu bytes, %d truncations refused, %d/3000 flips accepted (in names, floats or locations)\n",
           size, refused, accepted);
    free(bytes);
    remove(path);
    m.images = NULL;
    nrt_program_free(&m.program);
    ir_graph_free(g);
    src_free(&src);
    return failures != 0;
}
