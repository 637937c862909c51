/* gpt2_losses.c - netc's side of issue 6's loss comparison (bench/gpt2_losses.py):
 * the training step of a module built with `netc build --entry train`, from
 * the parameters (and zero optimizer moments) in a safetensors file, on the
 * token batches of a raw little-endian i32 file [steps, B, T + 1] (inputs
 * [:, :T], targets [:, 1:]), at a constant learning rate with Adam's bias
 * corrections for step t. One JSON line per step with the loss.
 *   gpt2_losses MODULE WEIGHTS TOKENS STEPS B T [--lr X] [--device cpu|gpu] */
#include "netrt.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static int fail(const char *what, const nrt_error *e)
{
    fprintf(stderr, "gpt2_losses: %s: %s\n", what, e->message);
    return 1;
}

static nrt_status set_scalar(nrt_session *s, const char *name, float v, nrt_error *e)
{
    return nrt_session_set_input(s, name, NRT_F32, 0, NULL, &v, e);
}

int main(int argc, char **argv)
{
    if (argc < 7) {
        fprintf(stderr, "usage: gpt2_losses MODULE WEIGHTS TOKENS STEPS B T [--lr X] [--device cpu|gpu]\n");
        return 2;
    }
    long steps = strtol(argv[4], NULL, 10), b = strtol(argv[5], NULL, 10), t = strtol(argv[6], NULL, 10);
    double lr = 6e-4;
    nrt_device dev = NRT_DEVICE_GPU;
    for (int i = 7; i + 1 < argc; i += 2) {
        if (!strcmp(argv[i], "--lr")) lr = strtod(argv[i + 1], NULL);
        else if (!strcmp(argv[i], "--device")) dev = !strcmp(argv[i + 1], "cpu") ? NRT_DEVICE_CPU : NRT_DEVICE_GPU;
    }
    if (steps < 1 || b < 1 || t < 1 || !(lr > 0)) {
        fprintf(stderr, "gpt2_losses: STEPS, B and T must be positive, the learning rate too\n");
        return 2;
    }
    size_t row = (size_t)t + 1, count = (size_t)steps * (size_t)b * row;
    int32_t *tokens = malloc(count * sizeof *tokens);
    FILE *f = fopen(argv[3], "rb");
    if (!tokens || !f || fread(tokens, sizeof *tokens, count, f) != count) {
        fprintf(stderr, "gpt2_losses: %s does not hold %zu i32 tokens\n", argv[3], count);
        return 1;
    }
    fclose(f);
    nrt_error e;
    nrt_module *m;
    if (nrt_module_load_entry(argv[1], "train", &m, &e)) return fail(argv[1], &e);
    nrt_session_opts o = nrt_session_defaults();
    const char *names[2];
    int64_t values[2];
    int nd = 0;   /* B and T where the module left them symbolic */
    for (int i = 0; i < nrt_module_num_dims(m) && nd < 2; i++) {
        const char *d = nrt_module_dim_name(m, i);
        if (!strcmp(d, "B") || !strcmp(d, "T")) names[nd] = d, values[nd++] = !strcmp(d, "B") ? b : t;
    }
    o.device = dev, o.dim_names = names, o.dim_values = values, o.ndims = nd;
    nrt_session *s;
    if (nrt_session_create(m, &o, &s, &e)) return fail("session", &e);
    if (nrt_session_load_weights(s, argv[2], &e)) return fail(argv[2], &e);
    int32_t *in = malloc((size_t)b * (size_t)t * sizeof *in), *tg = malloc((size_t)b * (size_t)t * sizeof *tg);
    int64_t shape[2] = {b, t};
    int rc = 0;
    for (long step = 1; step <= steps && rc == 0; step++) {
        const int32_t *batch = tokens + (size_t)(step - 1) * (size_t)b * row;
        for (long i = 0; i < b; i++)
            for (long j = 0; j < t; j++) in[i * t + j] = batch[i * row + j], tg[i * t + j] = batch[i * row + j + 1];
        float loss = NAN;
        if (nrt_session_set_input(s, "tokens", NRT_I32, 2, shape, in, &e) ||
            nrt_session_set_input(s, "targets", NRT_I32, 2, shape, tg, &e) || set_scalar(s, "@lr", (float)lr, &e) ||
            set_scalar(s, "@bias1", (float)(1 - pow(0.9, (double)step)), &e) ||
            set_scalar(s, "@bias2", (float)(1 - pow(0.95, (double)step)), &e) || nrt_session_run(s, &e) ||
            nrt_session_get_output(s, "loss", &loss, sizeof loss, &e))
            rc = fail("step", &e);
        else
            printf("{\"impl\": \"netc\", \"device\": \"%s\", \"step\": %ld, \"loss\": %.9g}\n", nrt_session_device(s), step,
                   (double)loss);
        fflush(stdout);
    }
    free(in);
    free(tg);
    free(tokens);
    nrt_session_free(s);
    nrt_module_free(m);
    return rc;
}
