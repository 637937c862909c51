/* test_tensor_io.c - .npy and safetensors round trips, refusal of damaged
 * files (every truncation, byte flips: run under ASan in CI), and the
 * initialisers' statistics and determinism. */
#include "driver.h"
#include "tensor_io.h"

#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

static char dir[64];

static void path_in(char *buf, size_t cap, const char *name) { snprintf(buf, cap, "%s/%s", dir, name); }

static cpu_tensor make(nc_dtype dt, int rank, const int64_t *shape)
{
    cpu_tensor t;
    if (!cpu_tensor_alloc(&t, dt, (uint8_t)rank, shape, 0)) abort();
    for (int64_t i = 0; i < t.numel; i++) cpu_set(&t, i, dtype_is_float(dt) ? 0.37 * (double)i - 3.1 : (double)(i * 7 % 256));
    return t;
}

static bool same(const cpu_tensor *a, const cpu_tensor *b)
{
    if (a->rank != b->rank || a->numel != b->numel) return false;
    for (int d = 0; d < a->rank; d++) if (a->shape[d] != b->shape[d]) return false;
    for (int64_t i = 0; i < a->numel; i++) if (cpu_get(a, i) != cpu_get(b, i)) return false;
    return true;
}

static void test_npy(void)
{
    const nc_dtype dts[] = {NC_F32, NC_F16, NC_I32, NC_U8, NC_BOOL};
    const int64_t shape[] = {3, 5, 2};
    char path[128], err[512];
    path_in(path, sizeof path, "a.npy");
    for (size_t k = 0; k < NC_COUNT(dts); k++) {
        for (int rank = 0; rank <= 3; rank++) {
            cpu_tensor t = make(dts[k], rank, shape), back;
            CHECK(npy_write(path, &t, err, sizeof err) == 0);
            CHECK(npy_read(path, &back, 0, err, sizeof err) == 0);
            CHECK(back.dtype == dts[k]);
            CHECK(same(&t, &back));
            cpu_tensor_free(&t);
            cpu_tensor_free(&back);
        }
    }
    /* Every truncation is refused; flipped bytes never crash. */
    cpu_tensor t = make(NC_F32, 3, shape), back;
    CHECK(npy_write(path, &t, err, sizeof err) == 0);
    size_t n;
    unsigned char *bytes = slurp(path, &n);
    char bad[128];
    path_in(bad, sizeof bad, "bad.npy");
    for (size_t cut = 0; cut < n; cut++) {
        spit(bad, bytes, cut);
        bool refused = npy_read(bad, &back, 0, err, sizeof err) != 0;
        CHECK(refused);
        if (!refused) cpu_tensor_free(&back);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char saved = bytes[i];
        bytes[i] ^= 0x5a;
        spit(bad, bytes, n);
        if (npy_read(bad, &back, 1 << 20, err, sizeof err) == 0) cpu_tensor_free(&back);
        bytes[i] = saved;
    }
    /* Trailing data and an absurd size are errors with a message. */
    unsigned char *longer = malloc(n + 1);
    memcpy(longer, bytes, n);
    longer[n] = 0;
    spit(bad, longer, n + 1);
    CHECK(npy_read(bad, &back, 0, err, sizeof err) != 0 && strstr(err, "trailing"));
    CHECK(npy_read(path, &back, 16, err, sizeof err) != 0 && strstr(err, "too large"));
    CHECK(npy_read("/nonexistent/x.npy", &back, 0, err, sizeof err) != 0 && strstr(err, "/nonexistent/x.npy"));
    free(longer);
    free(bytes);
    cpu_tensor_free(&t);
}

static ir_graph *compile(const char *source)
{
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, "t.net", source, strlen(source));
    driver_opts o = {.verify = true};
    ir_graph *g = driver_compile(&src, id, &o, &d);
    src_free(&src);
    return g;
}

/* A safetensors file of header (JSON) and nbytes of zero data. */
static void write_st(const char *path, const char *header, size_t nbytes)
{
    size_t h = strlen(header), n = 8 + h + nbytes;
    unsigned char *b = calloc(n, 1);
    for (int k = 0; k < 8; k++) b[k] = (unsigned char)((uint64_t)h >> (8 * k));
    memcpy(b + 8, header, h);
    spit(path, b, n);
    free(b);
}

/* The format's rules the reader enforces beyond bounds: names unique, the
 * data exactly the tensors' bytes (no overlap, no hole, nothing after), and
 * __metadata__ a map of strings. g has w: f32[3, 4], b: bf16[4], h: f16[4]. */
static void test_safetensors_layout(const ir_graph *g)
{
    char path[128], err[512];
    path_in(path, sizeof path, "layout.safetensors");
    cpu_tensor q[3];
#define W "\"w\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]}"
#define T(name, dt, b, e) "\"" name "\":{\"dtype\":\"" dt "\",\"shape\":[4],\"data_offsets\":[" #b "," #e "]}"
    static const struct { const char *header; size_t bytes; const char *want; } cases[] = {
        {"{" W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "}", 64, NULL},
        {"{\"__metadata__\":{\"format\":\"pt\"}," W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "}", 64, NULL},
        {"{" W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "," T("h", "F16", 56, 64) "}", 64, "names a key twice"},
        {"{" W "," T("b", "BF16", 48, 56) "," T("h", "F16", 52, 60) "}", 60, "tensor 'h' overlaps tensor 'b'"},
        {"{" W "," T("b", "BF16", 48, 56) "," T("h", "F16", 60, 68) "}", 68, "bytes 56 to 60 (before tensor 'h') belong to no tensor"},
        {"{" W "," T("b", "BF16", 56, 64) "," T("h", "F16", 64, 72) "}", 72, "bytes 48 to 56 (before tensor 'b')"},
        {"{" W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "}", 68, "4 bytes after the last tensor's data"},
        {"{\"__metadata__\":5," W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "}", 64, "__metadata__ is not a map"},
        {"{\"__metadata__\":{\"n\":1}," W "," T("b", "BF16", 48, 56) "," T("h", "F16", 56, 64) "}", 64, "'n' is not a string"},
    };
#undef W
#undef T
    for (size_t i = 0; i < NC_COUNT(cases); i++) {
        write_st(path, cases[i].header, cases[i].bytes);
        err[0] = 0;
        int rc = safetensors_load_params(path, g, q, true, err, sizeof err);
        if (rc == 0) for (int k = 0; k < 3; k++) cpu_tensor_free(&q[k]);
        bool ok = cases[i].want ? rc == -1 && strstr(err, path) && strstr(err, cases[i].want) : rc == 0;
        if (!ok) fprintf(stderr, "layout case %zu: rc %d, %s\n", i, rc, err);
        CHECK(ok);
    }
    /* an extra tensor that is not loaded still may not overlap */
    write_st(path, "{\"w\":{\"dtype\":\"F32\",\"shape\":[3,4],\"data_offsets\":[0,48]},"
                   "\"x\":{\"dtype\":\"U8\",\"shape\":[2],\"data_offsets\":[40,42]},"
                   "\"b\":{\"dtype\":\"BF16\",\"shape\":[4],\"data_offsets\":[48,56]},"
                   "\"h\":{\"dtype\":\"F16\",\"shape\":[4],\"data_offsets\":[56,64]}}", 64);
    CHECK(safetensors_load_params(path, g, q, true, err, sizeof err) == -1 && strstr(err, "tensor 'x' overlaps tensor 'w'"));
}

static void test_safetensors(void)
{
    ir_graph *g = compile("model m(x: f32[2, 3]) -> f32[2, 4] {\n"
                          "  param w: f32[3, 4] = normal(1)\n  param b: bf16[4] = uniform(-1, 1)\n"
                          "  param h: f16[4] = ones\n  return x @ w + f32(b) + f32(h)\n}\n");
    CHECK(g != NULL);
    if (!g) return;
    char path[128], err[512];
    path_in(path, sizeof path, "w.safetensors");
    cpu_tensor p[3], q[3];
    st_entry e[3];
    for (uint32_t i = 0; i < g->nparams; i++) {
        CHECK(param_init(g, i, 11, &p[i], err, sizeof err) == 0);
        e[i] = (st_entry){.name = g->params[i].decl.name, .t = &p[i]};
    }
    CHECK(safetensors_write(path, e, 3, err, sizeof err) == 0);
    CHECK(safetensors_load_params(path, g, q, false, err, sizeof err) == 0);
    for (int i = 0; i < 3; i++) {
        CHECK(q[i].dtype == p[i].dtype && same(&p[i], &q[i]));
        cpu_tensor_free(&q[i]);
    }
    /* A missing parameter, a wrong shape, an extra tensor: each named in the error. */
    CHECK(safetensors_write(path, e, 2, err, sizeof err) == 0);
    CHECK(safetensors_load_params(path, g, q, false, err, sizeof err) != 0 && strstr(err, "'h' is missing"));
    cpu_tensor wrong = make(NC_F32, 2, (int64_t[]){4, 3});
    st_entry e2[4] = {{"w", &wrong}, e[1], e[2]};
    CHECK(safetensors_write(path, e2, 3, err, sizeof err) == 0);
    CHECK(safetensors_load_params(path, g, q, false, err, sizeof err) != 0 && strstr(err, "the model declares f32[3, 4]"));
    e2[0] = e[0];
    e2[3] = (st_entry){"extra", &wrong};
    CHECK(safetensors_write(path, e2, 4, err, sizeof err) == 0);
    CHECK(safetensors_load_params(path, g, q, false, err, sizeof err) != 0 && strstr(err, "'extra'"));
    CHECK(safetensors_load_params(path, g, q, true, err, sizeof err) == 0);
    for (int i = 0; i < 3; i++) cpu_tensor_free(&q[i]);
    /* Truncations refused, byte flips survived. */
    CHECK(safetensors_write(path, e, 3, err, sizeof err) == 0);
    size_t n;
    unsigned char *bytes = slurp(path, &n);
    char bad[128];
    path_in(bad, sizeof bad, "bad.safetensors");
    for (size_t cut = 0; cut < n; cut++) {
        spit(bad, bytes, cut);
        bool refused = safetensors_load_params(bad, g, q, false, err, sizeof err) != 0;
        CHECK(refused);
        if (!refused) for (int i = 0; i < 3; i++) cpu_tensor_free(&q[i]);
    }
    for (size_t i = 0; i < n; i++) {
        unsigned char saved = bytes[i];
        bytes[i] ^= 0x21;
        spit(bad, bytes, n);
        if (safetensors_load_params(bad, g, q, false, err, sizeof err) == 0)
            for (int k = 0; k < 3; k++) cpu_tensor_free(&q[k]);
        bytes[i] = saved;
    }
    free(bytes);
    test_safetensors_layout(g);
    cpu_tensor_free(&wrong);
    for (int i = 0; i < 3; i++) cpu_tensor_free(&p[i]);
    ir_graph_free(g);
}

/* Sample moments of each initialiser match its formula; values depend on
 * (seed, name) only. */
static void test_param_init(void)
{
    ir_graph *g = compile("model m(x: f32[1, 256]) -> f32[1, 512] {\n"
                          "  param a: f32[256, 512] = normal(0.5)\n  param b: f32[256, 512] = uniform(-2, 1)\n"
                          "  param c: f32[256, 512] = xavier\n  param d: f32[256, 512] = kaiming_normal\n"
                          "  param e: f32[256, 512] = xavier_normal\n  param f: f32[256, 512] = kaiming_uniform\n"
                          "  return x @ a + x @ b + x @ c + x @ d + x @ e + x @ f\n}\n");
    CHECK(g != NULL);
    if (!g) return;
    const double fan_in = 256, fan_out = 512;
    const double want_mean[6] = {0, -0.5, 0, 0, 0, 0};
    const double want_std[6] = {0.5, 3 / sqrt(12.0), sqrt(2.0 / (fan_in + fan_out)), sqrt(2.0) / sqrt(fan_in),
                                sqrt(2.0 / (fan_in + fan_out)), sqrt(2.0) * sqrt(3.0 / fan_in) / sqrt(3.0)};
    char err[256];
    for (uint32_t i = 0; i < 6; i++) {
        cpu_tensor t, t2, t3;
        CHECK(param_init(g, i, 5, &t, err, sizeof err) == 0);
        double s = 0, s2 = 0;
        for (int64_t k = 0; k < t.numel; k++) s += t.f[k], s2 += (double)t.f[k] * t.f[k];
        double mean = s / (double)t.numel, sd = sqrt(s2 / (double)t.numel - mean * mean);
        if (fabs(mean - want_mean[i]) > 0.02 * want_std[i] * 5 || fabs(sd / want_std[i] - 1) > 0.02) {
            fprintf(stderr, "init %s: mean %g sd %g, want %g %g\n", g->params[i].decl.name, mean, sd, want_mean[i], want_std[i]);
            failures++;
        }
        CHECK(param_init(g, i, 5, &t2, err, sizeof err) == 0 && same(&t, &t2));
        CHECK(param_init(g, i, 6, &t3, err, sizeof err) == 0 && !same(&t, &t3));
        cpu_tensor_free(&t);
        cpu_tensor_free(&t2);
        cpu_tensor_free(&t3);
    }
    ir_graph_free(g);
}

/* An error naming a path longer than the caller's buffer shows the cut with
 * "..." at its end: it was cut there silently, a path that looked whole. */
static void test_long_path_errors(void)
{
    char path[1600] = "/nonexistent_netc_tio";
    while (strlen(path) < 1500) strcat(path, "/dddddddddddddddddddddddddddddddddddddddd");
    strcat(path, "/x.npy");
    char err[1024];
    cpu_tensor back;
    const int64_t shape[] = {2};
    cpu_tensor t = make(NC_F32, 1, shape);
    size_t cut = sizeof err - 1;
    CHECK(npy_read(path, &back, 0, err, sizeof err) != 0 && strncmp(err, path, 200) == 0);
    CHECK(strlen(err) == cut && strcmp(err + cut - 3, "...") == 0);
    memset(err, 0, sizeof err);
    CHECK(npy_write(path, &t, err, sizeof err) != 0 && strstr(err, "/nonexistent_netc_tio/ddd"));
    CHECK(strlen(err) == cut && strcmp(err + cut - 3, "...") == 0);
    st_entry e = {.name = "w", .t = &t};
    memset(err, 0, sizeof err);
    CHECK(safetensors_write(path, &e, 1, err, sizeof err) != 0 && strstr(err, "/nonexistent_netc_tio/ddd"));
    CHECK(strlen(err) == cut && strcmp(err + cut - 3, "...") == 0);
    /* a message that fits is as it was */
    CHECK(npy_read("/nonexistent/x.npy", &back, 0, err, sizeof err) != 0 && strstr(err, "...") == NULL);
    cpu_tensor_free(&t);
}

/* The safetensors file at path has text in its header. */
static bool header_has(const char *path, const char *text)
{
    size_t n;
    unsigned char *bytes = slurp(path, &n);
    char *header = bytes && n > 8 ? strndup((const char *)bytes + 8, n - 8) : NULL;   /* up to the data's first 0 */
    bool found = header && strstr(header, text);
    free(header);
    free(bytes);
    return found;
}

/* A tensor name that is not UTF-8 (a parameter's in a module made
 * elsewhere) is refused, named: jansson refused it as a header key, and the
 * file was written without that tensor, silently (its data still there),
 * the parameter then missing when loaded. A name that is UTF-8 is kept. */
static void test_safetensors_not_utf8(void)
{
    char path[128], err[512];
    path_in(path, sizeof path, "names.safetensors");
    const int64_t shape[] = {3};
    cpu_tensor t = make(NC_F32, 1, shape);
    st_entry good[2] = {{"w", &t}, {"caf\xc3\xa9.w", &t}};
    CHECK(safetensors_write(path, good, 2, err, sizeof err) == 0);
    CHECK(header_has(path, "\"caf\xc3\xa9.w\""));
    st_entry bad[2] = {{"w", &t}, {"v\xff\xc3(", &t}};   /* a stray byte, a lead byte without its continuation */
    memset(err, 0, sizeof err);
    CHECK(safetensors_write(path, bad, 2, err, sizeof err) != 0 && strstr(err, "'v\\xff\\xc3('") && strstr(err, "not UTF-8"));
    CHECK(header_has(path, "\"caf\xc3\xa9.w\""));   /* the file written before is left as it was */
    cpu_tensor_free(&t);
}

/* Why a load failed, as a status a caller can test (netc train's resume
 * told another model's checkpoint by the words of the message), and the
 * __metadata__ a writer adds, read back from the header alone. */
static void test_safetensors_status(void)
{
    ir_graph *g = compile("model m(x: f32[2, 3]) -> f32[2, 4] {\n  param w: f32[3, 4] = ones\n  param k: f32[4] = zeros\n"
                          "  return x @ w + k\n}\n");
    CHECK(g != NULL);
    if (!g) return;
    char path[128], err[512];
    path_in(path, sizeof path, "status.safetensors");
    cpu_tensor w = make(NC_F32, 2, (int64_t[]){3, 4}), k = make(NC_F32, 1, (int64_t[]){4}), wt = make(NC_F32, 2, (int64_t[]){4, 3});
    cpu_tensor ki = make(NC_I32, 1, (int64_t[]){4}), q[2];
    const struct {
        st_entry e[3];
        uint32_t n;
        int want;
    } cases[] = {
        {{{"w", &w}, {"k", &k}}, 2, ST_LOAD_OK},
        {{{"w", &w}}, 1, ST_LOAD_MISSING},
        {{{"w", &wt}, {"k", &k}}, 2, ST_LOAD_SHAPE},
        {{{"w", &w}, {"k", &ki}}, 2, ST_LOAD_DTYPE},
        {{{"w", &w}, {"k", &k}, {"x", &k}}, 3, ST_LOAD_EXTRA},
    };
    for (size_t c = 0; c < sizeof cases / sizeof *cases; c++) {
        CHECK(safetensors_write(path, cases[c].e, cases[c].n, err, sizeof err) == 0);
        int rc = safetensors_load_params(path, g, q, false, err, sizeof err);
        CHECK(rc == cases[c].want);
        if (rc == 0) cpu_tensor_free(&q[0]), cpu_tensor_free(&q[1]);
    }
    char missing[128];
    path_in(missing, sizeof missing, "none.safetensors");
    CHECK(safetensors_load_params(missing, g, q, false, err, sizeof err) == ST_LOAD_IO);
    CHECK(safetensors_load_params(dir, g, q, false, err, sizeof err) == ST_LOAD_IO);
    /* metadata: "format" stays netc's, the others are kept; the header reads without the data */
    const st_meta meta[] = {{"netc.optimizer", "adamw"}, {"format", "other"}, {"note", "a \"quoted\" value"}};
    st_entry e[2] = {{"w", &w}, {"k", &k}};
    CHECK(safetensors_write_meta(path, e, 2, meta, 3, err, sizeof err) == 0);
    st_header h;
    CHECK(safetensors_read_header(path, &h, err, sizeof err) == 0);
    CHECK(h.nnames == 2 && st_header_has(&h, "w") && st_header_has(&h, "k") && !st_header_has(&h, "__metadata__"));
    CHECK(h.nmeta == 3 && !strcmp(st_header_meta(&h, "format"), "netc") && !strcmp(st_header_meta(&h, "netc.optimizer"), "adamw"));
    CHECK(!strcmp(st_header_meta(&h, "note"), "a \"quoted\" value") && st_header_meta(&h, "none") == NULL);
    st_header_free(&h);
    CHECK(safetensors_load_params(path, g, q, false, err, sizeof err) == 0);
    cpu_tensor_free(&q[0]), cpu_tensor_free(&q[1]);
    CHECK(safetensors_read_header(missing, &h, err, sizeof err) == ST_LOAD_IO && h.nnames == 0);
    cpu_tensor *all[] = {&w, &k, &wt, &ki};
    for (size_t i = 0; i < sizeof all / sizeof *all; i++) cpu_tensor_free(all[i]);
    ir_graph_free(g);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/netc_tio_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_npy();
    test_safetensors();
    test_param_init();
    test_long_path_errors();
    test_safetensors_not_utf8();
    test_safetensors_status();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    else printf("test_tensor_io: all checks passed\n");
    return failures != 0;
}
