/* test_data.c - IDX loading (gzip and plain, damaged files refused) and the
 * batch loader: every sample once per epoch, order a function of (seed,
 * epoch) only, resuming mid-epoch gives the same remaining batches. Sets
 * hold their samples at the file's width, and what data_rows and the
 * loader widen is bit for bit what a 4-byte read of the file gives. */
#include "data.h"
#include "tensor_io.h"

#include "test_util.h"
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
#include <zlib.h>

static char dir[64];

static void put_be32(unsigned char *p, uint32_t v)
{
    p[0] = (unsigned char)(v >> 24), p[1] = (unsigned char)(v >> 16), p[2] = (unsigned char)(v >> 8), p[3] = (unsigned char)v;
}

/* Writes DIR/SPLIT-{images-idx3,labels-idx1}-ubyte[.gz] with n samples of
 * 4x3 pixels; sample i's pixels are (i + k) % 256, its label i % classes. */
static void write_set(const char *split, uint32_t n, int classes, bool gz, size_t cut_images)
{
    char path[256];
    size_t ilen = 16 + (size_t)n * 12, llen = 8 + n;
    unsigned char *img = malloc(ilen), *lab = malloc(llen);
    put_be32(img, 0x803), put_be32(img + 4, n), put_be32(img + 8, 4), put_be32(img + 12, 3);
    put_be32(lab, 0x801), put_be32(lab + 4, n);
    for (uint32_t i = 0; i < n; i++) {
        for (int k = 0; k < 12; k++) img[16 + i * 12 + k] = (unsigned char)((i + (uint32_t)k) % 256);
        lab[8 + i] = (unsigned char)(i % (uint32_t)classes);
    }
    if (cut_images) ilen = cut_images;
    const char *kinds[2] = {"images-idx3", "labels-idx1"};
    unsigned char *bufs[2] = {img, lab};
    size_t lens[2] = {ilen, llen};
    for (int f = 0; f < 2; f++) {
        snprintf(path, sizeof path, "%s/%s-%s-ubyte%s", dir, split, kinds[f], gz ? ".gz" : "");
        if (gz) {
            gzFile z = gzopen(path, "wb");
            gzwrite(z, bufs[f], (unsigned)lens[f]);
            gzclose(z);
        } else {
            FILE *o = fopen(path, "wb");
            fwrite(bufs[f], 1, lens[f], o);
            fclose(o);
        }
    }
    free(img);
    free(lab);
}

static void clean(void)
{
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -f %s/*", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not clean %s\n", dir);
}

static void test_load(void)
{
    char err[512];
    data_set d;
    for (int gz = 0; gz < 2; gz++) {
        clean();
        write_set("train", 100, 10, gz, 0);
        CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) == 0);
        CHECK(d.n == 100 && d.classes == 10 && d.x.rank == 3 && d.x.shape[1] == 4 && d.x.shape[2] == 3);
        /* the images as bytes: no 4-byte copy (Fashion-MNIST's would be 188 MB) */
        CHECK(d.bytes && d.bytes[37 * 12 + 5] == 42 && !d.x.i && d.x.numel == 100 * 12 && d.y.i[37] == 7);
        cpu_tensor rows;
        data_rows(&d, 36, 2, &rows);
        CHECK(rows.dtype == NC_U8 && rows.rank == 3 && rows.shape[0] == 2 && rows.shape[2] == 3 && rows.i[12 + 5] == 42);
        cpu_tensor_free(&rows);
        data_set_free(&d);
        /* Labels beyond max_classes are refused. */
        CHECK(data_load_idx(dir, "train", 5, &d, err, sizeof err) != 0 && strstr(err, "label"));
    }
    clean();
    CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) != 0 && strstr(err, "train-images-idx3-ubyte"));
    write_set("train", 100, 10, true, 500);      /* truncated images */
    CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) != 0 && strstr(err, "truncated"));
    clean();
    write_set("train", 100, 10, false, 3);       /* truncated inside the magic */
    CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) != 0);
    clean();
    write_set("train", 100, 10, false, 0);
    char path[256];
    snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
    FILE *f = fopen(path, "r+b");
    fputc(0x08, f);                              /* wrong magic */
    fclose(f);
    CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) != 0 && strstr(err, "magic"));
}

static const uint8_t *bx(const data_batch *b) { return b->x; }
static const int32_t *by(const data_batch *b) { return b->y; }

/* The pixels identify the sample: sample i's first pixel is i % 256 and its
 * label i % 10, so with n <= 256 a batch names its samples. */
static void test_loader(void)
{
    char err[512];
    data_set d;
    clean();
    write_set("train", 250, 10, true, 0);
    CHECK(data_load_idx(dir, "train", 10, &d, err, sizeof err) == 0);
    data_loader *l = data_loader_new(&d, 32, 9, true, false, 3);
    CHECK(data_loader_batches(l) == 8);
    int order[2][250];
    for (int epoch = 0; epoch < 2; epoch++) {
        int seen[250] = {0}, k = 0;
        data_loader_epoch(l, epoch, 0);
        data_batch b;
        while (data_loader_next(l, &b, NULL)) {
            CHECK(b.count == (b.index == 7 ? 250 - 7 * 32 : 32) && b.x_bytes == 12 && b.y_bytes == 4);
            for (int64_t s = 0; s < b.count; s++) {
                int id = bx(&b)[s * 12];
                CHECK(by(&b)[s] == id % 10 && bx(&b)[s * 12 + 11] == (id + 11) % 256);
                seen[id]++;
                order[epoch][k++] = id;
            }
        }
        for (int i = 0; i < 250; i++) CHECK(seen[i] == 1);
    }
    CHECK(memcmp(order[0], order[1], sizeof order[0]) != 0);   /* a new order each epoch */
    /* Resuming epoch 1 at batch 5 gives the same samples as the full epoch did. */
    data_loader_epoch(l, 1, 5);
    data_batch b;
    int k = 5 * 32;
    while (data_loader_next(l, &b, NULL))
        for (int64_t s = 0; s < b.count; s++) CHECK(bx(&b)[s * 12] == order[1][k++]);
    CHECK(k == 250);
    /* Abandoning an epoch midway and starting another works (producer stopped cleanly). */
    data_loader_epoch(l, 0, 0);
    CHECK(data_loader_next(l, &b, NULL) && bx(&b)[0] == order[0][0]);
    data_loader_epoch(l, 0, 0);
    CHECK(data_loader_next(l, &b, NULL) && bx(&b)[0] == order[0][0]);
    data_loader_free(l);
    /* drop_last drops the short batch; no shuffle keeps file order. */
    l = data_loader_new(&d, 32, 9, false, true, 1);
    CHECK(data_loader_batches(l) == 7);
    data_loader_epoch(l, 0, 0);
    int n = 0;
    while (data_loader_next(l, &b, NULL)) {
        CHECK(b.count == 32 && bx(&b)[0] == (b.index * 32) % 256);
        n++;
    }
    CHECK(n == 7);
    data_loader_free(l);
    /* The same samples in 4-byte elements (as .npy and text sets hold u8):
     * the loader packs them, and with the set's copy dropped gives the same
     * batches. w4 shares d's labels. */
    data_set w4 = d;
    w4.bytes = NULL;
    CHECK(cpu_tensor_alloc(&w4.x, NC_U8, 3, d.x.shape, 0));
    for (int64_t i = 0; i < w4.x.numel; i++) w4.x.i[i] = d.bytes[i];
    l = data_loader_new(&w4, 32, 9, true, false, 3);
    data_loader_drop_source(l, &w4);
    CHECK(w4.x.i == NULL && w4.x.f == NULL && w4.x.numel == 250 * 12);
    data_loader_epoch(l, 0, 0);
    k = 0;
    while (data_loader_next(l, &b, NULL))
        for (int64_t s = 0; s < b.count; s++) CHECK(bx(&b)[s * 12] == order[0][k++] && by(&b)[s] == order[0][k - 1] % 10);
    CHECK(k == 250);
    data_loader_free(l);
    data_set_free(&d);
}

/* The .npy layout: SPLIT_x.npy (u8) and SPLIT_y.npy (integers), found by data_load_dir. */
static void test_npy_layout(void)
{
    char err[512], px[128], py[128];
    data_set d;
    clean();
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    snprintf(py, sizeof py, "%s/train_y.npy", dir);
    cpu_tensor x, y, yf;
    cpu_tensor_alloc(&x, NC_U8, 3, (int64_t[]){20, 4, 3}, 0);
    cpu_tensor_alloc(&y, NC_I32, 1, (int64_t[]){20}, 0);
    for (int64_t i = 0; i < x.numel; i++) x.i[i] = (int32_t)(i % 251);
    for (int64_t i = 0; i < 20; i++) y.i[i] = (int32_t)(i % 3);
    CHECK(npy_write(px, &x, err, sizeof err) == 0 && npy_write(py, &y, err, sizeof err) == 0);
    data_want w = {.x = NC_U8, .has_y = true, .y = NC_I32, .max_classes = 10, .x_input = "x", .y_input = "labels"};
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    CHECK(d.n == 20 && d.classes == 3 && d.x.shape[1] == 4 && d.y.i[7] == 1);
    CHECK(d.bytes && d.held == NC_U8 && !d.x.i && d.bytes[13] == 13 && d.bytes[20 * 12 - 1] == (20 * 12 - 1) % 251);
    data_set_free(&d);
    w.max_classes = 2;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "label"));
    w.max_classes = 10;
    y.shape[0] = 19, y.numel = 19;                       /* one label short */
    CHECK(npy_write(py, &y, err, sizeof err) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "one target per sample"));
    cpu_tensor_alloc(&yf, NC_F32, 1, (int64_t[]){20}, 0);  /* float labels */
    CHECK(npy_write(py, &yf, err, sizeof err) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "holds float32, but the model's input labels is i32"));
    /* the test split of a .npy directory is test_x.npy: its absence is named, not t10k's IDX file's */
    CHECK(data_load_dir(dir, "test", &w, &d, err, sizeof err) != 0 && strstr(err, "test_x.npy"));
    cpu_tensor_free(&x);
    cpu_tensor_free(&y);
    cpu_tensor_free(&yf);
}

/* Float samples and float targets [n, 2], batched as their 4-byte elements;
 * the dtype the model declares or a refusal that names both; no NaN. */
static void test_npy_float(void)
{
    char err[512], px[128], py[128];
    data_set d;
    clean();
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    snprintf(py, sizeof py, "%s/train_y.npy", dir);
    cpu_tensor x, y;
    cpu_tensor_alloc(&x, NC_F32, 2, (int64_t[]){10, 3}, 0);
    cpu_tensor_alloc(&y, NC_F32, 2, (int64_t[]){10, 2}, 0);
    for (int64_t i = 0; i < x.numel; i++) x.f[i] = 0.5f * (float)i;
    for (int64_t i = 0; i < y.numel; i++) y.f[i] = -(float)i;
    CHECK(npy_write(px, &x, err, sizeof err) == 0 && npy_write(py, &y, err, sizeof err) == 0);
    data_want w = {.x = NC_F32, .has_y = true, .y = NC_F32, .max_classes = 10, .x_input = "x", .y_input = "target"};
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    if (d.n == 10) {
        data_loader *l = data_loader_new(&d, 4, 1, false, true, 2);
        data_loader_epoch(l, 0, 0);
        data_batch b;
        CHECK(data_loader_next(l, &b, NULL) && data_loader_next(l, &b, NULL) && b.x_bytes == 12 && b.y_bytes == 8);
        const float *bxf = b.x, *byf = b.y;
        CHECK(bxf[0] == 6.0f && bxf[11] == 11.5f && byf[0] == -8.0f && byf[7] == -15.0f);   /* samples 4-7 */
        data_loader_free(l);
        data_set_free(&d);
    }
    w.has_y = false;   /* an autoencoder's: no targets read, none needed */
    CHECK(remove(py) == 0 && data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0 && d.y.numel == 0);
    data_set_free(&d);
    w.has_y = true;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_y.npy") && strstr(err, "reads its input target"));
    w.x = NC_I32;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 &&
          strstr(err, "holds float32, but the model's input x is i32 (hint: convert the array with NumPy, np.save('train_x.npy', a.astype(np.int32)))"));
    w.x = NC_F32;
    x.f[7] = NAN;
    CHECK(npy_write(px, &x, err, sizeof err) == 0 && npy_write(py, &y, err, sizeof err) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_x.npy: sample 2 holds NaN (at element 1 of its 3)"));
    x.f[7] = 1;
    y.f[19] = -INFINITY;
    CHECK(npy_write(px, &x, err, sizeof err) == 0 && npy_write(py, &y, err, sizeof err) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_y.npy: sample 9 holds -inf"));
    cpu_tensor_free(&x);
    cpu_tensor_free(&y);
}

/* Sample element k of a loaded set, as data_rows widens it (the set holds
 * its samples as bytes, not in x). */
static float value_f(const data_set *d, int64_t k)
{
    cpu_tensor all;
    data_rows(d, 0, d->n, &all);
    float v = all.f ? all.f[k] : NAN;
    cpu_tensor_free(&all);
    return v;
}

/* An array [n, cols] of descr as NumPy saves one, its elements `size`
 * bytes each (npy_write writes no float64 and no int64). */
static void write_raw(const char *path, const char *descr, int64_t n, int64_t cols, const void *v, size_t size)
{
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '%s', 'fortran_order': False, 'shape': (%lld, %lld), }", descr, (long long)n,
                       (long long)cols);
    int pad = (int)((64 - (10 + len + 1) % 64) % 64);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len + pad + 1), 0};
    FILE *f = fopen(path, "wb");
    CHECK(f);
    if (!f) return;
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len;
    for (int k = 0; k < pad; k++) ok = ok && fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(v, size, (size_t)(n * cols), f) == (size_t)(n * cols);
    CHECK(fclose(f) == 0 && ok);
}

static void write_f64(const char *path, int64_t n, int64_t cols, const double *v) { write_raw(path, "<f8", n, cols, v, 8); }

/* NumPy's default float64, read as an f32 or f16 input's dtype: each value
 * rounded once, a note that names the file; a value beyond the dtype's range
 * is refused with its sample, as a NaN is; integer inputs still refuse it. */
static void test_npy_float64(void)
{
    char err[512], px[128];
    data_set d;
    clean();
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    /* 1 + 2^-11 + 2^-40 is past an f16 tie that f32 alone would round it onto */
    double v[12] = {0.1, -2.5, 1e-3, 1.0 + ldexp(1, -11) + ldexp(1, -40), 65519.0, -7.0, 3.0, 4.0, 5.0, 6.0, 7.0, 8.0};
    write_f64(px, 4, 3, v);
    data_want w = {.x = NC_F32, .x_input = "x"};
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    CHECK(d.x.dtype == NC_F32 && d.held == NC_F32 && d.n == 4 && value_f(&d, 0) == 0.1f && value_f(&d, 3) == (float)v[3] &&
          value_f(&d, 4) == 65519.0f);
    char want[256];
    snprintf(want, sizeof want, "%s holds float64: read as f32 for the model's input x, each value rounded as a.astype(np.float32) does", px);
    CHECK(strcmp(d.note, want) == 0);
    data_set_free(&d);
    w.x = NC_F16;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    CHECK(d.x.dtype == NC_F16 && d.held == NC_F16 && value_f(&d, 0) == nc_round_f16(0.1f) && value_f(&d, 3) == 1.0f + ldexpf(1, -10) &&
          value_f(&d, 4) == 65504.0f &&
          strstr(d.note, "read as f16 for the model's input x, each value rounded as a.astype(np.float16) does"));
    data_set_free(&d);
    v[10] = 70000.0;   /* beyond f16: sample 3, element 1 */
    write_f64(px, 4, 3, v);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 &&
          strstr(err, "train_x.npy: sample 3 holds 70000 (at element 1 of its 3), beyond f16's range (its largest is 65504"));
    w.x = NC_F32;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0 && value_f(&d, 10) == 70000.0f);
    data_set_free(&d);
    v[10] = -1e39;   /* beyond f32 */
    write_f64(px, 4, 3, v);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "sample 3 holds -1e+39 (at element 1 of its 3), beyond f32's range"));
    v[10] = NAN;
    write_f64(px, 4, 3, v);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_x.npy: sample 3 holds NaN (at element 1 of its 3)"));
    w.x = NC_F16;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_x.npy: sample 3 holds NaN (at element 1 of its 3)"));
    w.x = NC_I32;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 &&
          strstr(err, "holds float64, but the model's input x is i32 (hint: convert the array with NumPy, np.save('train_x.npy', a.astype(np.int32)))"));
    cpu_tensor back;   /* netc run's reader refuses what f32 cannot hold */
    v[10] = 1e300;
    write_f64(px, 4, 3, v);
    CHECK(npy_read(px, &back, 0, err, sizeof err) != 0 && strstr(err, "element 10 = 1e+300 does not fit f32"));
}

/* float32 samples for an f16 input, as float64 ones: each value rounded
 * once to nearest even (a.astype(np.float16)), a note that names the file;
 * a finite value beyond f16's range refused with its sample and element. */
static void test_npy_float32_as_f16(void)
{
    char err[512], px[128], want[256];
    data_set d;
    clean();
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    cpu_tensor x;
    cpu_tensor_alloc(&x, NC_F32, 2, (int64_t[]){4, 3}, 0);
    /* 1 + 2^-11 is an f16 tie (to the even 1), 1 + 3 * 2^-11 one to 1 + 2^-9; 65519 rounds down to
       65504, the largest f16, 65520 to inf; 2^-25 + 2^-30 rounds to f16's smallest subnormal */
    const float v[12] = {0.1f, -2.5f, 1.0f + ldexpf(1, -11), 1.0f + 3 * ldexpf(1, -11), 65519.0f, -65519.0f,
                         ldexpf(1, -25) + ldexpf(1, -30), 3.0f, 4.0f, 5.0f, 6.0f, 7.0f};
    memcpy(x.f, v, sizeof v);
    CHECK(npy_write(px, &x, err, sizeof err) == 0);
    data_want w = {.x = NC_F16, .x_input = "x"};
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    CHECK(d.x.dtype == NC_F16 && d.n == 4 && value_f(&d, 0) == nc_round_f16(0.1f) && value_f(&d, 1) == -2.5f && value_f(&d, 2) == 1.0f &&
          value_f(&d, 3) == 1.0f + ldexpf(1, -9) && value_f(&d, 4) == 65504.0f && value_f(&d, 5) == -65504.0f &&
          value_f(&d, 6) == ldexpf(1, -24));
    snprintf(want, sizeof want, "%s holds float32: read as f16 for the model's input x, each value rounded as a.astype(np.float16) does", px);
    CHECK(strcmp(d.note, want) == 0);
    data_set_free(&d);
    w.x = NC_F32;   /* an f32 input reads it as it is, without a note */
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0 && value_f(&d, 4) == 65519.0f && d.note[0] == 0);
    data_set_free(&d);
    x.f[10] = -70000.0f;   /* beyond f16: sample 3, element 1 */
    CHECK(npy_write(px, &x, err, sizeof err) == 0);
    w.x = NC_F16;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 &&
          strstr(err, "train_x.npy: sample 3 holds -70000 (at element 1 of its 3), beyond f16's range (its largest is 65504, the value would be inf)"));
    x.f[10] = INFINITY;   /* an infinity is said as one, as in any float file */
    CHECK(npy_write(px, &x, err, sizeof err) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "train_x.npy: sample 3 holds inf (at element 1 of its 3)"));
    cpu_tensor_free(&x);
}

/* Element k of a 4-byte tensor (a float's bits or an int) as raw bits. */
static uint32_t bits_at(const cpu_tensor *t, int64_t k)
{
    uint32_t v;
    memcpy(&v, t->f ? (const void *)(t->f + k) : (const void *)(t->i + k), 4);
    return v;
}

/* A train_x.npy of descr (n samples of cols elements, `size` bytes each in
 * file) for an input of dtype want: the set holds it at held's width, its
 * bytes those of `native` (NULL: cpu_tensor_to_native of the reference),
 * and data_rows and the loader (its source dropped) give bit for bit the
 * 4-byte elements of npy_read_as, the reference: how sets were held. */
static void check_native(const char *descr, const void *file, size_t size, int64_t n, int64_t cols, nc_dtype want, nc_dtype held,
                         const void *native)
{
    char err[512], px[128];
    clean();
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    write_raw(px, descr, n, cols, file, size);
    cpu_tensor ref;
    npy_file_info info;
    if (npy_read_as(px, want == NC_F16 ? NC_F16 : NC_F32, &ref, 0, &info, err, sizeof err) != 0) {
        fprintf(stderr, "%s: reference: %s\n", descr, err);
        failures++;
        return;
    }
    data_want w = {.x = want, .x_input = "x"};
    data_set d;
    if (data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0) {
        fprintf(stderr, "%s as %s: %s\n", descr, dtype_name(want), err);
        failures++;
        cpu_tensor_free(&ref);
        return;
    }
    const int64_t numel = n * cols;
    uint8_t *want_bytes = nc_xmalloc((size_t)numel * 4);
    if (native) memcpy(want_bytes, native, (size_t)numel * dtype_size(held));
    else cpu_tensor_to_native(&ref, want_bytes);
    bool same_bytes = d.bytes && memcmp(d.bytes, want_bytes, (size_t)numel * dtype_size(held)) == 0;
    CHECK(d.n == n && d.x.dtype == want && d.held == held && !d.x.f && !d.x.i && same_bytes);
    cpu_tensor rows;
    data_rows(&d, 0, n, &rows);
    int64_t bad = 0;
    for (int64_t k = 0; k < numel; k++) bad += bits_at(&rows, k) != bits_at(&ref, k);
    CHECK(rows.dtype == want && bad == 0);
    if (bad) fprintf(stderr, "%s as %s: data_rows: %" PRId64 " elements differ\n", descr, dtype_name(want), bad);
    cpu_tensor_free(&rows);
    data_loader *l = data_loader_new(&d, 7, 1, false, false, 2);
    data_loader_drop_source(l, &d);
    CHECK(d.bytes != NULL);   /* the loader reads them */
    data_loader_epoch(l, 0, 0);
    data_batch b;
    int64_t seen = 0;
    bad = 0;
    while (data_loader_next(l, &b, NULL)) {
        CHECK(b.x_bytes == cols * (want == NC_U8 ? 1 : 4) && b.y == NULL);
        for (int64_t j = 0; j < b.count * cols; j++) {
            uint32_t got;
            if (want == NC_U8) got = ((const uint8_t *)b.x)[j];
            else memcpy(&got, (const unsigned char *)b.x + 4 * j, 4);
            bad += got != bits_at(&ref, seen * cols + j);
        }
        seen += b.count;
    }
    CHECK(seen == n && bad == 0);
    if (bad) fprintf(stderr, "%s as %s: loader: %" PRId64 " elements differ\n", descr, dtype_name(want), bad);
    data_loader_free(l);
    data_set_free(&d);
    cpu_tensor_free(&ref);
    free(want_bytes);
}

static uint64_t lcg(uint64_t *s)
{
    *s = *s * 6364136223846793005ull + 1442695040888963407ull;
    return *s >> 11;
}

/* Every file dtype an input takes, held at its own width: u8 and bool a
 * byte, f16 two (every finite f16; f32 and f64 rounded to it), f32 and i32
 * four; a uint8 file for an i32 input stays bytes. */
static void test_npy_native(void)
{
    enum { N = 3968, COLS = 16 };   /* N * COLS: the finite f16s */
    uint16_t *h = malloc(N * COLS * 2);
    int64_t m = 0;
    for (uint32_t b = 0; b < 65536; b++)
        if ((b & 0x7c00) != 0x7c00) h[m++] = (uint16_t)b;
    CHECK(m == N * COLS);
    check_native("<f2", h, 2, N, COLS, NC_F16, NC_F16, h);
    free(h);

    enum { R = 301 };   /* 301 samples of 16: batches of 7, the last short */
    float *f = malloc(R * COLS * 4);
    double *g = malloc(R * COLS * 8);
    int32_t *i4 = malloc(R * COLS * 4);
    int64_t *i8 = malloc(R * COLS * 8);
    uint8_t *u = malloc(R * COLS), *bo = malloc(R * COLS);
    uint64_t s = 7;
    for (int64_t k = 0; k < R * COLS; k++) {
        uint32_t r = (uint32_t)lcg(&s);
        /* f16's range and below it, subnormals, ties (low 13 bits 0x1000) and signed zeros among them */
        uint32_t e = 90 + (r >> 8) % 52, fb = (r & 0x80000000u) | e << 23 | ((uint32_t)lcg(&s) & 0x7fffff);
        if (k % 5 == 0) fb = (fb & ~0x1fffu) | 0x1000u;
        if (k % 97 == 0) fb &= 0x80000000u;
        memcpy(&f[k], &fb, 4);
        g[k] = (double)f[k] * (1.0 + ldexp((double)(lcg(&s) % 1024) - 512, -40));
        i4[k] = (int32_t)lcg(&s);
        i8[k] = (int64_t)i4[k];
        u[k] = (uint8_t)r;
        bo[k] = (uint8_t)(r & 1);
    }
    check_native("<f4", f, 4, R, COLS, NC_F16, NC_F16, NULL);
    check_native("<f8", g, 8, R, COLS, NC_F16, NC_F16, NULL);
    check_native("<f8", g, 8, R, COLS, NC_F32, NC_F32, NULL);
    for (int64_t k = 0; k < R * COLS; k++) {   /* any finite f32: beyond f16's range, subnormals */
        uint32_t fb = (uint32_t)lcg(&s);
        if ((fb & 0x7f800000u) == 0x7f800000u) fb &= ~0x00800000u;
        memcpy(&f[k], &fb, 4);
    }
    check_native("<f4", f, 4, R, COLS, NC_F32, NC_F32, f);
    check_native("<i4", i4, 4, R, COLS, NC_I32, NC_I32, i4);
    check_native("<i8", i8, 8, R, COLS, NC_I32, NC_I32, i4);
    check_native("|u1", u, 1, R, COLS, NC_U8, NC_U8, u);
    check_native("|u1", u, 1, R, COLS, NC_I32, NC_U8, u);   /* widened as a batch is taken, not as the file loads */
    check_native("|b1", bo, 1, R, COLS, NC_BOOL, NC_BOOL, bo);
    free(f), free(g), free(i4), free(i8), free(u), free(bo);
}

/* An f16 file's NaN and infinities refused as an f32 file's are, read from
 * the bytes it is held in; a truncated file as before. */
static void test_npy_native_errors(void)
{
    char err[512], px[128];
    data_set d;
    data_want w = {.x = NC_F16, .x_input = "x"};
    snprintf(px, sizeof px, "%s/train_x.npy", dir);
    const struct { uint16_t bits; const char *said; } bad[] = {{0x7e01, "NaN"}, {0x7c00, "inf"}, {0xfc00, "-inf"}};
    for (size_t c = 0; c < sizeof bad / sizeof *bad; c++) {
        uint16_t h[12] = {0x3c00, 0x4000, 0x4200, 0x4400, 0x4500, 0x4600, 0x4700, 0x4800, 0x4880, 0x4900, 0x4980, 0x4a00};
        h[6] = bad[c].bits;   /* sample 1, element 2 */
        clean();
        write_raw(px, "<f2", 3, 4, h, 2);
        char want[160];
        snprintf(want, sizeof want, "train_x.npy: sample 1 holds %s (at element 2 of its 4): clean the data", bad[c].said);
        CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, want));
    }
    CHECK(truncate(px, 64 + 12 * 2 - 1) == 0);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 && strstr(err, "file is truncated"));
}

/* Text windows held as their bytes, widened by data_rows; batches of bytes. */
static void test_text_bytes(void)
{
    char err[512], path[128];
    clean();
    snprintf(path, sizeof path, "%s/text", dir);
    uint8_t text[1000];
    for (int k = 0; k < 1000; k++) text[k] = (uint8_t)(k * 7 % 251);
    FILE *o = fopen(path, "wb");
    CHECK(o && fwrite(text, 1, sizeof text, o) == sizeof text);
    if (o) fclose(o);
    data_set train, test;
    CHECK(data_load_text(path, 10, 0.1, &train, &test, err, sizeof err) == 0);
    /* (1000 - 1) / 9 = 111 windows of 10 bytes, each starting on its predecessor's last byte; the last 11 are the test set */
    CHECK(train.n == 100 && test.n == 11 && train.x.dtype == NC_U8 && train.x.shape[1] == 10 && train.x.numel == 1000);
    CHECK(train.bytes && train.held == NC_U8 && !train.x.i && test.bytes && test.held == NC_U8 && !test.x.i);
    CHECK(train.y.numel == 100 && train.y.i[99] == 0 && train.classes == 256);
    if (!train.bytes || !test.bytes) {
        data_set_free(&train);
        data_set_free(&test);
        return;
    }
    int64_t bad = 0;
    for (int64_t w = 0; w < 100; w++)
        for (int k = 0; k < 10; k++) bad += train.bytes[w * 10 + k] != text[w * 9 + k];
    for (int64_t w = 0; w < 11; w++)
        for (int k = 0; k < 10; k++) bad += test.bytes[w * 10 + k] != text[(100 + w) * 9 + k];
    CHECK(bad == 0);
    cpu_tensor rows;
    data_rows(&test, 3, 2, &rows);
    CHECK(rows.dtype == NC_U8 && rows.shape[0] == 2 && rows.shape[1] == 10 && rows.i[0] == text[103 * 9] && rows.i[19] == text[104 * 9 + 9]);
    cpu_tensor_free(&rows);
    data_loader *l = data_loader_new(&train, 16, 5, true, true, 2);
    data_loader_drop_source(l, &train);
    data_loader_epoch(l, 0, 0);
    data_batch b;
    int64_t seen = 0;
    while (data_loader_next(l, &b, NULL)) {
        CHECK(b.x_bytes == 10 && b.y_bytes == 4);
        for (int64_t r = 0; r < b.count; r++) {   /* a window names itself: its first byte is text[w * 9] */
            const uint8_t *x = (const uint8_t *)b.x + r * 10;
            int64_t w = 0;
            while (w < 100 && memcmp(train.bytes + w * 10, x, 10) != 0) w++;
            bad += w == 100;
        }
        seen += b.count;
    }
    CHECK(seen == 96 && bad == 0);
    data_loader_free(l);
    data_set_free(&train);
    data_set_free(&test);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/netc_data_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    test_load();
    test_loader();
    test_npy_layout();
    test_npy_float();
    test_npy_float64();
    test_npy_float32_as_f16();
    test_npy_native();
    test_npy_native_errors();
    test_text_bytes();
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    else printf("test_data: all checks passed\n");
    return failures != 0;
}
