/* test_train_entry.c - a module with two entry points: "forward" and "train"
 * round trip through the file, and a libnetrt user trains through the train
 * entry on the CPU: the loss falls, and the trained weights, moved into a
 * forward session, classify the training points. A model with dropout: the
 * train entry's masks follow its @step input (the same step, the same mask;
 * another step, another), the forward entry does not drop. */
#include "cpu_exec.h"
#include "cuda_emit.h"
#include "driver.h"
#include "module.h"
#include "netrt.h"

#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Two classes of 4-pixel images: class 1 is bright on the left half. */
static const char *source =
    "model toy(images: u8[B, 2, 2]) -> (logits: f32[B, 2]) {\n"
    "  param w: f32[4, 2] = xavier\n"
    "  param b: f32[2] = zeros\n"
    "  x = f32(reshape(images, [B, 4])) / 255.0\n"
    "  return x @ w + b\n"
    "}\n"
    "train toy(labels: i32[B]) {\n"
    "  loss = cross_entropy(logits, labels)\n"
    "  optimizer adam(lr: 0.1)\n"
    "}\n";

static ir_graph *compile(src_table *src, uint32_t id, bool train)
{
    diag_ctx d;
    diag_init(&d, src, stderr);
    driver_opts o = {.verify = true, .train_step = train};
    return driver_compile(src, id, &o, &d);
}

static bool emit(ir_graph *g, nrt_module_data *m)
{
    char err[1024];
    *m = (nrt_module_data){.graph = g};
    return cuda_emit_program(g, &m->program, err, sizeof err);
}

/* Dropout whose result is an output: with @lr 0 nothing moves, so each
 * run's y is x times the mask of the step it was given. */
static const char *dropout_source =
    "model dm(x: f32[B, 64]) -> (y: f32[B, 64]) {\n"
    "  param w: f32[64] = ones\n"
    "  return dropout(x * w, p: 0.5, seed: 3)\n"
    "}\n"
    "train dm(t: f32[B, 64]) {\n"
    "  loss = sum(square(y - t))\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* One run of the train entry at @step = step; y's 4 x 64 values into y. */
static bool dropout_run(nrt_session *s, int32_t step, float *y)
{
    nrt_error e;
    float lr = 0;
    return nrt_session_set_input(s, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK &&
           nrt_session_set_input(s, "@step", NRT_I32, 0, NULL, &step, &e) == NRT_OK && nrt_session_run(s, &e) == NRT_OK &&
           nrt_session_get_output(s, "y", y, 256 * sizeof *y, &e) == NRT_OK;
}

/* A module of the source's forward pass and its "train" entry, written to
 * path (a mkstemp template). */
static bool write_module(const char *name, const char *text, char *path)
{
    src_table src = {0};
    uint32_t id = src_add(&src, name, text, strlen(text));
    nrt_module_data m, t;
    ir_graph *fg = compile(&src, id, false), *tg = compile(&src, id, true);
    bool ok = fg && tg && emit(fg, &m) && emit(tg, &t);
    char err[1024];
    if (ok) {
        module_add_entry(&m, "train", &t);
        int fd = mkstemp(path);
        if (fd >= 0) close(fd);
        ok = fd >= 0 && module_write(path, &m, err, sizeof err) == 0;
        CHECK(ok);
        module_data_free(&m);
    }
    src_free(&src);
    return ok;
}

static void check_dropout_steps(void)
{
    char path[] = "/tmp/netc_dropout_XXXXXX";
    if (!write_module("dm.net", dropout_source, path)) { failures++; return; }
    nrt_module *fm, *tm;
    nrt_error e;
    CHECK(nrt_module_load(path, &fm, &e) == NRT_OK);
    CHECK(nrt_module_load_entry(path, "train", &tm, &e) == NRT_OK);
    unlink(path);
    if (failures) return;
    /* the train entry takes @step, an i32 scalar; the forward entry does not */
    bool has_step = false;
    for (int i = 0; i < nrt_module_num_inputs(tm); i++) {
        nrt_tensor_info info;
        CHECK(nrt_module_input(tm, i, &info) == NRT_OK);
        if (strcmp(info.name, "@step") == 0) has_step = info.dtype == NRT_I32 && info.rank == 0;
    }
    CHECK(has_step);
    for (int i = 0; i < nrt_module_num_inputs(fm); i++) {
        nrt_tensor_info info;
        CHECK(nrt_module_input(fm, i, &info) == NRT_OK && info.name[0] != '@');
    }
    const char *dn[] = {"B"};
    int64_t dv[] = {4};
    nrt_session_opts so = nrt_session_defaults();
    so.device = NRT_DEVICE_CPU, so.dim_names = dn, so.dim_values = dv, so.ndims = 1, so.seed = 1;
    nrt_session *ts, *fs;
    CHECK(nrt_session_create(tm, &so, &ts, &e) == NRT_OK);
    CHECK(nrt_session_create(fm, &so, &fs, &e) == NRT_OK);
    if (failures) return;
    float x[256], y1[256], y2[256], y1again[256], yf[256];
    for (int i = 0; i < 256; i++) x[i] = 1.0f + (float)i / 64.0f;
    const int64_t shape[] = {4, 64};
    CHECK(nrt_session_set_input(ts, "x", NRT_F32, 2, shape, x, &e) == NRT_OK);
    CHECK(nrt_session_set_input(ts, "t", NRT_F32, 2, shape, x, &e) == NRT_OK);
    /* a training run without its step is refused, not run with a stale one */
    float lr = 0;
    CHECK(nrt_session_set_input(ts, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
    CHECK(nrt_session_run(ts, &e) == NRT_ERR_STATE && strstr(e.message, "@step"));
    CHECK(dropout_run(ts, 1, y1) && dropout_run(ts, 2, y2) && dropout_run(ts, 1, y1again));
    int differ = 0, again = 0, rng = 0;
    for (int i = 0; i < 256; i++) {
        differ += (y1[i] == 0) != (y2[i] == 0);
        again += memcmp(&y1[i], &y1again[i], sizeof y1[i]) != 0;
        rng += (y1[i] == 0) != (nc_rng_uniform(3, 1, (uint64_t)i) < 0.5f);   /* kept: 2x */
        if (y1[i] != 0 && y1[i] != 2 * x[i]) rng++;
    }
    printf("dropout: @step 1 and 2 differ in %d of 256 elements; @step 1 twice in %d\n", differ, again);
    CHECK(differ > 64 && again == 0 && rng == 0);
    /* the forward entry: the identity */
    CHECK(nrt_session_set_input(fs, "x", NRT_F32, 2, shape, x, &e) == NRT_OK);
    CHECK(nrt_session_run(fs, &e) == NRT_OK);
    CHECK(nrt_session_get_output(fs, "y", yf, sizeof yf, &e) == NRT_OK);
    CHECK(memcmp(x, yf, sizeof x) == 0);
    nrt_session_free(ts);
    nrt_session_free(fs);
    nrt_module_free(tm);
    nrt_module_free(fm);
}

/* A mean over the batch in a module built with B unbound: the gradient
 * divides by the count the run binds (computed in the step), so one module
 * trains at any batch. One SGD step at B = 3 and at B = 5 against the
 * update worked out by hand: w -= lr * x^T (2 (x w - t) / (2 B)). */
static const char *mean_source =
    "model reg(x: f32[B, 3]) -> (y: f32[B, 2]) {\n"
    "  param w: f32[3, 2] = zeros\n"
    "  return x @ w\n"
    "}\n"
    "train reg(t: f32[B, 2]) {\n"
    "  loss = mean(square(y - t))\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

static void check_symbolic_mean(void)
{
    char path[] = "/tmp/netc_mean_XXXXXX";
    if (!write_module("reg.net", mean_source, path)) { failures++; return; }
    nrt_module *tm;
    nrt_error e;
    CHECK(nrt_module_load_entry(path, "train", &tm, &e) == NRT_OK);
    unlink(path);
    if (failures) return;
    for (int64_t B = 3; B <= 5; B += 2) {
        const char *dn[] = {"B"};
        int64_t dv[] = {B};
        nrt_session_opts so = nrt_session_defaults();
        so.device = NRT_DEVICE_CPU, so.dim_names = dn, so.dim_values = dv, so.ndims = 1, so.seed = 1;
        nrt_session *s;
        CHECK(nrt_session_create(tm, &so, &s, &e) == NRT_OK);
        if (failures) return;
        float x[5][3], t[5][2], w0[3][2], w[3][2], lr = 0.1f;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) w0[i][j] = 0.25f * (float)(i - j);
        for (int b = 0; b < B; b++) {
            for (int i = 0; i < 3; i++) x[b][i] = (float)(b + 1) * 0.5f - (float)i;
            for (int j = 0; j < 2; j++) t[b][j] = (float)(b * j) - 1.0f;
        }
        CHECK(nrt_session_set_param(s, "w", NRT_F32, 2, (int64_t[]){3, 2}, w0, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "x", NRT_F32, 2, (int64_t[]){B, 3}, x, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "t", NRT_F32, 2, (int64_t[]){B, 2}, t, &e) == NRT_OK);
        CHECK(nrt_session_set_input(s, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
        CHECK(nrt_session_run(s, &e) == NRT_OK);
        CHECK(nrt_session_get_param(s, "w", w, sizeof w, &e) == NRT_OK);
        double worst = 0;
        for (int i = 0; i < 3; i++)
            for (int j = 0; j < 2; j++) {
                double g = 0;
                for (int b = 0; b < B; b++) {
                    double y = x[b][0] * w0[0][j] + x[b][1] * w0[1][j] + x[b][2] * w0[2][j];
                    g += x[b][i] * 2.0 * (y - t[b][j]) / (2.0 * (double)B);
                }
                worst = fmax(worst, fabs(w[i][j] - (w0[i][j] - lr * g)));
            }
        printf("mean over B unbound at build: one step at B = %lld, largest error in w %.3g\n", (long long)B, worst);
        CHECK(worst < 1e-5);
        nrt_session_free(s);
    }
    nrt_module_free(tm);
}

/* A file that cannot be read is NRT_ERR_IO, one whose contents are wrong
 * NRT_ERR_FORMAT, for modules and weights alike (the reader says which; the
 * message is not searched). module_path is a valid module, not weights. */
/* Two cross entropies in one training step, the second a train-section
 * binding nothing reads, every pass off so it stays (fuzz_compile's
 * crash-13aaf9fe): the schedule that runs each one's gradient before its
 * loss placed nodes the first had already moved a second time, writing past
 * its order (a segfault of netc build). And both in the loss. */
static void check_two_cross_entropies(void)
{
    static const char *const passes[] = {"cast-hoist", "cse", "recompute", "dce"};
    const char *texts[] = {
        "model m(x: bf16[B, 48]) -> (logits: bf16[B, 16])\n  precision bf16\n{\n"
        "  param w1: f32[48, 64] = xavier\n  param b1: f32[64] = zeros\n"
        "  param w2: f32[64, 16] = xavier\n  param b2: f32[16] = zeros\n"
        "  h = gelu_tanh(x @ w1 + b1)\n  return h @ w2 + b2\n}\n"
        "train m(labels: i32[B]) {\n  loss = cross_entropy(logits, labels)\n"
        "  _other = cross_entropy(logits, labels)\n  optimizer sgd(lr: 0.5)\n}\n",
        "model m(x: f32[B, 4]) -> (logits: f32[B, 3]) {\n  param w: f32[4, 3]\n  return x @ w\n}\n"
        "train m(labels: i32[B]) {\n  loss = cross_entropy(logits, labels) + 0.5 * cross_entropy(logits * 2.0, labels)\n"
        "  optimizer sgd(lr: 0.5)\n}\n",
    };
    for (size_t k = 0; k < sizeof texts / sizeof *texts; k++)
        for (int off = 0; off < 2; off++) {
            driver_opts o = {.verify = true, .train_step = true, .fuse = true, .disabled_passes = passes, .ndisabled = off ? 4 : 0};
            ir_graph *g = compile_text("two_ce.net", texts[k], &o);
            CHECK(g != NULL);
            if (g) CHECK(ir_verify(g, stderr) == 0);
            ir_graph_free(g);
        }
}

static void check_status_codes(nrt_session *s, const char *module_path)
{
    nrt_module *m = NULL;
    nrt_error e;
    CHECK(nrt_module_load("/nonexistent/x.netm", &m, &e) == NRT_ERR_IO && strstr(e.message, "/nonexistent/x.netm"));
    CHECK(nrt_module_load("/tmp", &m, &e) == NRT_ERR_IO && strstr(e.message, "is a directory"));
    CHECK(nrt_session_load_weights(s, "/nonexistent/w.safetensors", &e) == NRT_ERR_IO &&
          strstr(e.message, "/nonexistent/w.safetensors"));
    CHECK(nrt_session_load_weights(s, "/tmp", &e) == NRT_ERR_IO && strstr(e.message, "is a directory"));
    CHECK(nrt_session_load_weights(s, module_path, &e) == NRT_ERR_FORMAT && strstr(e.message, "not a safetensors"));
    char w[] = "/tmp/netc_weights_XXXXXX";
    int fd = mkstemp(w);
    CHECK(fd >= 0);
    if (fd < 0) return;
    close(fd);
    CHECK(nrt_session_save_weights(s, w, &e) == NRT_OK && nrt_session_load_weights(s, w, &e) == NRT_OK);
    CHECK(nrt_module_load(w, &m, &e) == NRT_ERR_FORMAT && strstr(e.message, "not a netc module"));
    unlink(w);
}

int main(void)
{
    check_two_cross_entropies();
    char path[] = "/tmp/netc_entry_XXXXXX";
    if (!write_module("toy.net", source, path)) return 1;

    nrt_module *fm, *tm, *none;
    nrt_error e;
    CHECK(nrt_module_load(path, &fm, &e) == NRT_OK);
    CHECK(nrt_module_load_entry(path, "train", &tm, &e) == NRT_OK);
    CHECK(nrt_module_load_entry(path, "backward", &none, &e) != NRT_OK && strstr(e.message, "forward, train"));
    if (failures) return 1;

    const char *dn[] = {"B"};
    int64_t dv[] = {8};
    nrt_session_opts so = nrt_session_defaults();
    so.device = NRT_DEVICE_CPU, so.dim_names = dn, so.dim_values = dv, so.ndims = 1, so.seed = 1;
    nrt_session *ts, *fs;
    CHECK(nrt_session_create(tm, &so, &ts, &e) == NRT_OK);
    CHECK(nrt_session_create(fm, &so, &fs, &e) == NRT_OK);
    if (failures) return 1;

    uint8_t images[8][4];
    int32_t labels[8];
    for (int i = 0; i < 8; i++) {
        labels[i] = i % 2;
        for (int k = 0; k < 4; k++) images[i][k] = (uint8_t)((k % 2 == 0) == (labels[i] == 1) ? 200 + i : 20 + i);
    }
    const int64_t ishape[] = {8, 2, 2}, lshape[] = {8};
    CHECK(nrt_session_set_input(ts, "images", NRT_U8, 3, ishape, images, &e) == NRT_OK);
    CHECK(nrt_session_set_input(ts, "labels", NRT_I32, 1, lshape, labels, &e) == NRT_OK);
    float first = 0, loss = 0;
    for (int step = 1; step <= 60; step++) {
        float lr = 0.1f, bc1 = 1.0f - powf(0.9f, (float)step), bc2 = 1.0f - powf(0.999f, (float)step);
        CHECK(nrt_session_set_input(ts, "@lr", NRT_F32, 0, NULL, &lr, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "@bias1", NRT_F32, 0, NULL, &bc1, &e) == NRT_OK);
        CHECK(nrt_session_set_input(ts, "@bias2", NRT_F32, 0, NULL, &bc2, &e) == NRT_OK);
        if (nrt_session_run(ts, &e) != NRT_OK) {
            fprintf(stderr, "run: %s\n", e.message);
            failures++;
            break;
        }
        CHECK(nrt_session_get_output(ts, "loss", &loss, sizeof loss, &e) == NRT_OK);
        if (step == 1) first = loss;
    }
    printf("train entry: loss %.4f -> %.4f after 60 steps\n", first, loss);
    CHECK(loss < 0.1f * first);

    /* the trained parameters serve through the forward entry */
    float w[8], b[2], logits[8][2];
    CHECK(nrt_session_get_param(ts, "w", w, sizeof w, &e) == NRT_OK);
    CHECK(nrt_session_get_param(ts, "b", b, sizeof b, &e) == NRT_OK);
    CHECK(nrt_session_set_param(fs, "w", NRT_F32, 2, (int64_t[]){4, 2}, w, &e) == NRT_OK);
    CHECK(nrt_session_set_param(fs, "b", NRT_F32, 1, (int64_t[]){2}, b, &e) == NRT_OK);
    CHECK(nrt_session_set_input(fs, "images", NRT_U8, 3, ishape, images, &e) == NRT_OK);
    CHECK(nrt_session_run(fs, &e) == NRT_OK);
    CHECK(nrt_session_get_output(fs, "logits", logits, sizeof logits, &e) == NRT_OK);
    for (int i = 0; i < 8; i++) CHECK((logits[i][1] > logits[i][0]) == (labels[i] == 1));
    check_status_codes(fs, path);

    nrt_session_free(ts);
    nrt_session_free(fs);
    nrt_module_free(tm);
    nrt_module_free(fm);
    unlink(path);
    check_dropout_steps();
    check_symbolic_mean();
    if (!failures) printf("test_train_entry: all checks passed\n");
    return failures != 0;
}
