/* test_data.c - IDX loading (gzip and plain, damaged files refused) and the
 * batch loader: every sample once per epoch, order a function of (seed,
 * epoch) only, resuming mid-epoch gives the same remaining batches. */
#include "data.h"
#include "tensor_io.h"

#include "test_util.h"
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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
    CHECK(d.n == 20 && d.classes == 3 && d.x.shape[1] == 4 && d.x.i[13] == 13 && d.y.i[7] == 1);
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

/* A float64 array [n, cols] as NumPy saves one (npy_write writes no float64). */
static void write_f64(const char *path, int64_t n, int64_t cols, const double *v)
{
    char hdr[128];
    int len = snprintf(hdr, sizeof hdr, "{'descr': '<f8', 'fortran_order': False, 'shape': (%lld, %lld), }", (long long)n, (long long)cols);
    int pad = (int)((64 - (10 + len + 1) % 64) % 64);
    unsigned char pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (unsigned char)(len + pad + 1), 0};
    FILE *f = fopen(path, "wb");
    CHECK(f);
    if (!f) return;
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(hdr, 1, (size_t)len, f) == (size_t)len;
    for (int k = 0; k < pad; k++) ok = ok && fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF && fwrite(v, sizeof *v, (size_t)(n * cols), f) == (size_t)(n * cols);
    CHECK(fclose(f) == 0 && ok);
}

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
    CHECK(d.x.dtype == NC_F32 && d.n == 4 && d.x.f[0] == 0.1f && d.x.f[3] == (float)v[3] && d.x.f[4] == 65519.0f);
    char want[256];
    snprintf(want, sizeof want, "%s holds float64: read as f32 for the model's input x, each value rounded as a.astype(np.float32) does", px);
    CHECK(strcmp(d.note, want) == 0);
    data_set_free(&d);
    w.x = NC_F16;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0);
    CHECK(d.x.dtype == NC_F16 && d.x.f[0] == nc_round_f16(0.1f) && d.x.f[3] == 1.0f + ldexpf(1, -10) && d.x.f[4] == 65504.0f &&
          strstr(d.note, "read as f16 for the model's input x, each value rounded as a.astype(np.float16) does"));
    data_set_free(&d);
    v[10] = 70000.0;   /* beyond f16: sample 3, element 1 */
    write_f64(px, 4, 3, v);
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) != 0 &&
          strstr(err, "train_x.npy: sample 3 holds 70000 (at element 1 of its 3), beyond f16's range (its largest is 65504"));
    w.x = NC_F32;
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0 && d.x.f[10] == 70000.0f);
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
    CHECK(d.x.dtype == NC_F16 && d.n == 4 && d.x.f[0] == nc_round_f16(0.1f) && d.x.f[1] == -2.5f && d.x.f[2] == 1.0f &&
          d.x.f[3] == 1.0f + ldexpf(1, -9) && d.x.f[4] == 65504.0f && d.x.f[5] == -65504.0f && d.x.f[6] == ldexpf(1, -24));
    snprintf(want, sizeof want, "%s holds float32: read as f16 for the model's input x, each value rounded as a.astype(np.float16) does", px);
    CHECK(strcmp(d.note, want) == 0);
    data_set_free(&d);
    w.x = NC_F32;   /* an f32 input reads it as it is, without a note */
    CHECK(data_load_dir(dir, "train", &w, &d, err, sizeof err) == 0 && d.x.f[4] == 65519.0f && d.note[0] == 0);
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
    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    else printf("test_data: all checks passed\n");
    return failures != 0;
}
