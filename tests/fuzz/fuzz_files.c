/* fuzz_files.c - libFuzzer target for the readers of user files: .npy
 * arrays, safetensors weights (into a small model's parameters) and IDX
 * data sets. The first byte picks the reader, the rest is the file. Any
 * bytes must give a clean error or a valid result: never a crash, a hang, a
 * leak or an absurd allocation. Seeds: tests/fuzz/seeds/fuzz_files/. */
#include "data.h"
#include "driver.h"
#include "tensor_io.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

static char dir[64];
static ir_graph *model;   /* parameters w: f32[3, 4], b: bf16[4] */

static void setup(void)
{
    snprintf(dir, sizeof dir, "/tmp/netc_fuzz_files_XXXXXX");
    if (!mkdtemp(dir)) abort();
    static const char src_text[] = "model m(x: f32[2, 3]) -> f32[2, 4] {\n  param w: f32[3, 4] = normal(1)\n"
                                    "  param b: bf16[4] = zeros\n  return x @ w + f32(b)\n}\n";
    src_table src = {0};
    diag_ctx d;
    diag_init(&d, &src, stderr);
    uint32_t id = src_add(&src, "m.net", src_text, strlen(src_text));
    driver_opts o = {.verify = true};
    model = driver_compile(&src, id, &o, &d);
    src_free(&src);
    if (!model) abort();
}

static void write_file(const char *path, const uint8_t *data, size_t size)
{
    FILE *f = fopen(path, "wb");
    if (!f) abort();
    if (size && fwrite(data, 1, size, f) != size) abort();
    fclose(f);
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    if (!model) setup();
    if (size < 1) return 0;
    char path[128], err[512];
    switch (data[0] % 4) {
    case 0: {
        snprintf(path, sizeof path, "%s/a.npy", dir);
        write_file(path, data + 1, size - 1);
        cpu_tensor t;
        if (npy_read(path, &t, (int64_t)1 << 26, err, sizeof err) == 0) cpu_tensor_free(&t);
        break;
    }
    case 1: {
        snprintf(path, sizeof path, "%s/w.safetensors", dir);
        write_file(path, data + 1, size - 1);
        cpu_tensor p[2];
        if (safetensors_load_params(path, model, p, data[0] & 4, err, sizeof err) == 0)
            for (int i = 0; i < 2; i++) cpu_tensor_free(&p[i]);
        break;
    }
    case 2: {   /* an IDX pair: byte 1 says where the images end and the labels start */
        if (size < 2) break;
        size_t rest = size - 2, cut = data[1] % (rest + 1);
        snprintf(path, sizeof path, "%s/train-images-idx3-ubyte", dir);
        write_file(path, data + 2, cut);
        snprintf(path, sizeof path, "%s/train-labels-idx1-ubyte", dir);
        write_file(path, data + 2 + cut, rest - cut);
        data_set d;
        if (data_load_idx(dir, "train", 256, &d, err, sizeof err) == 0) data_set_free(&d);
        break;
    }
    default: {
        snprintf(path, sizeof path, "%s/text", dir);
        write_file(path, data + 1, size - 1);
        data_set train, test;
        if (data_load_text(path, 2 + data[0] / 4 % 30, 0.1, &train, &test, err, sizeof err) == 0) {
            data_set_free(&train);
            data_set_free(&test);
        }
        break;
    }
    }
    return 0;
}
