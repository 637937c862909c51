/* test_stdlib_conv.c - stdlib/nn.net's image layers against loops written
 * here. windows, conv2d, max_pool2d and avg_pool2d are written in the .net
 * language (a gather of pixel rows at indices computed from iota and where),
 * so their index arithmetic is checked on random images over kernel sizes,
 * strides, paddings and odd sizes whose output size rounds down; the pools
 * with PyTorch's strides and paddings (max: the padding never wins, avg: its
 * zeros counted). Also the sizes that meet tensors as numbers (a fn's known
 * H, a symbolic T). depthwise_conv2d likewise, flatten, softmax over an
 * axis that is not the last, and rotary (RoPE) with cos and sin. */
#include "cpu_exec.h"
#include "driver.h"
#include "tensor_io.h"
#include "typecheck.h"

#include "test_util.h"

typedef struct conv_case {
    int b, h, w, c, out, kernel, stride, padding;
} conv_case;

static const conv_case cases[] = {
    {2, 5, 4, 3, 2, 3, 1, 1},   /* same size */
    {1, 7, 7, 2, 3, 3, 2, 1},   /* 7 -> 4: (7 + 2 - 3) // 2 + 1 */
    {2, 6, 5, 1, 4, 2, 2, 0},   /* 5 -> 2: the last column is dropped */
    {1, 5, 6, 2, 2, 5, 1, 2},   /* LeNet's 5x5 with padding 2 */
    {3, 4, 3, 4, 5, 1, 1, 0},   /* 1x1: a matmul per pixel */
    {1, 3, 3, 1, 1, 3, 3, 2},   /* stride past the image: windows mostly padding */
};

static int out_size(int n, const conv_case *k) { return (n + 2 * k->padding - k->kernel) / k->stride + 1; }

/* The value x[b, i, j, ch] of an image in (B, H, W, C), 0 in the padding. */
static float pixel(const cpu_tensor *x, const conv_case *k, int b, int i, int j, int ch)
{
    if (i < 0 || i >= k->h || j < 0 || j >= k->w) return 0.0f;
    return x->f[(((int64_t)b * k->h + i) * k->w + j) * k->c + ch];
}

static void random_fill(cpu_tensor *t, uint32_t seed)
{
    for (int64_t i = 0; i < t->numel; i++) {
        seed = seed * 1664525u + 1013904223u;
        t->f[i] = (float)((seed >> 8) / 16777216.0 * 2.0 - 1.0);
    }
}

/* Outputs: the windows, the convolution, and (stride = kernel, no padding)
 * both pools, checked element by element. */
/* max_pool2d (mp) and avg_pool2d (ap) of x against PyTorch's definition on
 * geo's windows (its stride and padding): the max over each window's pixels
 * (the padding never wins), their sum divided by kernel * kernel
 * (count_include_pad). The number of elements that differ. */
static int check_pools(const char *name, const cpu_tensor *x, int batch, const conv_case *geo, const cpu_tensor *mp,
                       const cpu_tensor *ap)
{
    int oh = out_size(geo->h, geo), ow = out_size(geo->w, geo), bad = 0, kk = geo->kernel * geo->kernel;
    CHECK(mp->rank == 4 && mp->shape[1] == oh && mp->shape[2] == ow && ap->shape[1] == oh && ap->shape[2] == ow);
    if (mp->numel != (int64_t)batch * oh * ow * geo->c || ap->numel != mp->numel) return 1;
    for (int b = 0; b < batch; b++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                for (int ch = 0; ch < geo->c; ch++) {
                    float hi = -INFINITY;
                    double sum = 0;
                    for (int u = 0; u < geo->kernel; u++)
                        for (int v = 0; v < geo->kernel; v++) {
                            int r = i * geo->stride + u - geo->padding, q = j * geo->stride + v - geo->padding;
                            if (r < 0 || r >= geo->h || q < 0 || q >= geo->w) continue;
                            float p = pixel(x, geo, b, r, q, ch);
                            hi = p > hi ? p : hi;
                            sum += p;
                        }
                    int64_t at = (((int64_t)b * oh + i) * ow + j) * geo->c + ch;
                    if (!same_bits(mp->f[at], hi) && bad++ < 3)
                        fprintf(stderr, "%s: max_pool2d[%d, %d, %d, %d] = %g, want %g\n", name, b, i, j, ch, mp->f[at], hi);
                    if (fabs(ap->f[at] - sum / kk) > 1e-6 && bad++ < 3)
                        fprintf(stderr, "%s: avg_pool2d[%d, %d, %d, %d] = %g, want %g\n", name, b, i, j, ch, ap->f[at], sum / kk);
                }
    return bad;
}

static void check_case(const conv_case *k)
{
    char text[1024], name[64];
    snprintf(name, sizeof name, "conv_%dx%d_s%d_p%d", k->kernel, k->kernel, k->stride, k->padding);
    snprintf(text, sizeof text,
             "import nn\n"
             "model m(x: f32[%d, %d, %d, %d]) -> (win, y, mp, ap) {\n"
             "  win = nn.windows(x, %d, stride: %d, padding: %d)\n"
             "  y = nn.conv2d(x, %d, %d, stride: %d, padding: %d)\n"
             "  return win, y, nn.max_pool2d(x, %d), nn.avg_pool2d(x, %d)\n"
             "}\n",
             k->b, k->h, k->w, k->c, k->kernel, k->stride, k->padding, k->out, k->kernel, k->stride, k->padding,
             k->kernel, k->kernel);
    ir_graph *g = compile_text(name, text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    char err[512];
    cpu_tensor x = {0}, params[2] = {{0}};
    int64_t xs[4] = {k->b, k->h, k->w, k->c};
    cpu_tensor_alloc(&x, NC_F32, 4, xs, 0);
    random_fill(&x, (uint32_t)(k->h * 131 + k->kernel));
    CHECK(g->nparams == 2);   /* y.weight [k, k, C, out], y.bias [out] */
    for (uint32_t i = 0; i < g->nparams && i < 2; i++) CHECK(param_init(g, i, 11, &params[i], err, sizeof err) == 0);
    random_fill(&params[1], 5);   /* a bias of zeros would hide a wrong one */
    cpu_exec_result res;
    if (!run_cpu(name, g, &x, params, &res)) {
        failures++;
        goto done;
    }
    const cpu_tensor *win = &res.values[g->outputs[0].value], *y = &res.values[g->outputs[1].value];
    const cpu_tensor *mp = &res.values[g->outputs[2].value], *ap = &res.values[g->outputs[3].value];
    const cpu_tensor *wt = &params[0], *bias = &params[1];
    int oh = out_size(k->h, k), ow = out_size(k->w, k), kk = k->kernel * k->kernel;
    CHECK(win->rank == 5 && win->shape[1] == oh && win->shape[2] == ow && win->shape[3] == kk && win->shape[4] == k->c);
    CHECK(y->rank == 4 && y->shape[1] == oh && y->shape[2] == ow && y->shape[3] == k->out);
    int bad = 0;
    for (int b = 0; b < k->b; b++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++) {
                for (int o2 = 0; o2 < k->out; o2++) {
                    double want = bias->f[o2];
                    for (int u = 0; u < k->kernel; u++)
                        for (int v = 0; v < k->kernel; v++)
                            for (int ch = 0; ch < k->c; ch++)
                                want += (double)pixel(&x, k, b, i * k->stride + u - k->padding, j * k->stride + v - k->padding, ch) *
                                        wt->f[((u * k->kernel + v) * k->c + ch) * k->out + o2];
                    float got = y->f[(((int64_t)b * oh + i) * ow + j) * k->out + o2];
                    if (fabs(got - want) > 1e-5 * (1 + fabs(want)) && bad++ < 3)
                        fprintf(stderr, "%s: y[%d, %d, %d, %d] = %g, want %g\n", name, b, i, j, o2, got, want);
                }
                for (int u = 0; u < kk; u++)
                    for (int ch = 0; ch < k->c; ch++) {
                        float want = pixel(&x, k, b, i * k->stride + u / k->kernel - k->padding,
                                           j * k->stride + u % k->kernel - k->padding, ch);
                        float got = win->f[((((int64_t)b * oh + i) * ow + j) * kk + u) * k->c + ch];
                        if (!same_bits(got, want) && bad++ < 3)
                            fprintf(stderr, "%s: windows[%d, %d, %d, %d, %d] = %g, want %g\n", name, b, i, j, u, ch, got, want);
                    }
            }
    conv_case pools = {.h = k->h, .w = k->w, .c = k->c, .kernel = k->kernel, .stride = k->kernel};   /* stride = kernel, no padding */
    bad += check_pools(name, &x, k->b, &pools, mp, ap);
    if (bad) { fprintf(stderr, "%s: %d elements differ\n", name, bad); failures++; }
    cpu_exec_result_free(&res);
done:
    cpu_tensor_free(&x);
    for (int i = 0; i < 2; i++) cpu_tensor_free(&params[i]);
    ir_graph_free(g);
}

typedef struct pool_case {
    int b, h, w, c, kernel, stride, padding;   /* stride 0: not written (the kernel) */
    bool negative;                              /* every pixel below 0 */
} pool_case;

static const pool_case pool_cases[] = {
    {2, 6, 5, 3, 2, 0, 0, false},   /* the default stride, the kernel: 5 -> 2 drops a column */
    {1, 7, 7, 2, 3, 2, 1, false},   /* ResNet's stem pool: 7 -> 4, the last window reads the padding */
    {2, 5, 6, 1, 3, 1, 1, true},    /* same size; all negative: a zero padding would win at the edges */
    {1, 6, 6, 2, 2, 1, 1, true},    /* 6 -> 7: the corner windows hold one pixel and three of padding */
    {1, 4, 5, 1, 4, 2, 2, true},    /* padding = kernel / 2, the most PyTorch allows */
    {1, 8, 9, 2, 2, 3, 0, false},   /* stride past the kernel: pixels between windows unread */
    {1, 5, 5, 2, 3, 3, 1, false},   /* stride = kernel, padded: 5 -> 2 */
};

/* max_pool2d and avg_pool2d against PyTorch's definition: the max over the
 * window's pixels (the padding never wins), the sum over them divided by
 * kernel * kernel (count_include_pad). */
static void check_pool(const pool_case *k)
{
    char text[1024], name[64], stride[32] = "";
    if (k->stride) snprintf(stride, sizeof stride, ", stride: %d", k->stride);
    int s = k->stride ? k->stride : k->kernel;
    snprintf(name, sizeof name, "pool_%dx%d_s%d_p%d%s", k->kernel, k->kernel, s, k->padding, k->negative ? "_neg" : "");
    snprintf(text, sizeof text,
             "import nn\n"
             "model m(x: f32[%d, %d, %d, %d]) -> (mp, ap, gp) {\n"
             "  return nn.max_pool2d(x, %d%s, padding: %d), nn.avg_pool2d(x, %d%s, padding: %d), nn.global_avg_pool(x)\n"
             "}\n",
             k->b, k->h, k->w, k->c, k->kernel, stride, k->padding, k->kernel, stride, k->padding);
    ir_graph *g = compile_text(name, text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    cpu_tensor x = {0};
    int64_t xs[4] = {k->b, k->h, k->w, k->c};
    cpu_tensor_alloc(&x, NC_F32, 4, xs, 0);
    random_fill(&x, (uint32_t)(k->h * 977 + k->kernel * 31 + k->padding));
    if (k->negative)
        for (int64_t i = 0; i < x.numel; i++) x.f[i] = -fabsf(x.f[i]) - 0.25f;
    cpu_exec_result res;
    if (!run_cpu(name, g, &x, NULL, &res)) {
        failures++;
        goto done;
    }
    const cpu_tensor *mp = &res.values[g->outputs[0].value], *ap = &res.values[g->outputs[1].value];
    const cpu_tensor *gp = &res.values[g->outputs[2].value];
    conv_case geo = {.h = k->h, .w = k->w, .c = k->c, .kernel = k->kernel, .stride = s, .padding = k->padding};
    int bad = check_pools(name, &x, k->b, &geo, mp, ap);
    CHECK(gp->rank == 2 && gp->shape[0] == k->b && gp->shape[1] == k->c);
    for (int b = 0; b < k->b; b++)
        for (int ch = 0; ch < k->c; ch++) {
            double sum = 0;
            for (int i = 0; i < k->h; i++)
                for (int j = 0; j < k->w; j++) sum += pixel(&x, &geo, b, i, j, ch);
            if (fabs(gp->f[b * k->c + ch] - sum / (k->h * k->w)) > 1e-6 && bad++ < 3)
                fprintf(stderr, "%s: global_avg_pool[%d, %d] = %g, want %g\n", name, b, ch, gp->f[b * k->c + ch], sum / (k->h * k->w));
        }
    if (bad) { fprintf(stderr, "%s: %d elements differ\n", name, bad); failures++; }
    cpu_exec_result_free(&res);
done:
    cpu_tensor_free(&x);
    ir_graph_free(g);
}

/* A fn's N compares as 4 where v fixes it, and as the bound T (its value at
 * run time in i32 and f32) where x leaves it symbolic. */
static void check_sizes_beside_tensors(void)
{
    const char *text = "fn below(i: i32[N]) {\n  return where(i < N, i, N - 1)\n}\n"
                       "model m(x: i32[T], v: i32[4]) -> (y: i32[T], w: i32[4], h: f32[T]) {\n"
                       "  return below(x) * (1 + i32(iota([T]) < T - 1)), below(v), f32(x) / T\n}\n";
    ir_graph *g = compile_text("sizes", text, NULL);
    CHECK(g != NULL && g->nsyms == 1);
    if (!g || g->nsyms != 1) { ir_graph_free(g); return; }
    int64_t t = 5, syms[1] = {t}, four = 4;
    cpu_tensor in[2] = {{0}};
    cpu_tensor_alloc(&in[0], NC_I32, 1, &t, 0);
    cpu_tensor_alloc(&in[1], NC_I32, 1, &four, 0);
    const int32_t x[5] = {0, 5, 2, 9, -1}, v[4] = {3, 4, 7, 1};
    memcpy(in[0].i, x, sizeof x);
    memcpy(in[1].i, v, sizeof v);
    cpu_exec_opts o = {.syms = syms, .inputs = in};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "sizes: %s\n", err);
        failures++;
    } else {
        const int32_t want_y[5] = {0, 8, 4, 8, -1}, want_w[4] = {3, 3, 3, 1};   /* x >= 5 -> 4, doubled but the last */
        const cpu_tensor *y = &res.values[g->outputs[0].value], *w = &res.values[g->outputs[1].value];
        const cpu_tensor *h = &res.values[g->outputs[2].value];
        CHECK(memcmp(y->i, want_y, sizeof want_y) == 0);
        CHECK(memcmp(w->i, want_w, sizeof want_w) == 0);
        for (int i = 0; i < 5; i++) CHECK(same_bits(h->f[i], (float)x[i] / 5.0f));
        cpu_exec_result_free(&res);
    }
    for (int i = 0; i < 2; i++) cpu_tensor_free(&in[i]);
    ir_graph_free(g);
}

/* Padded pools, windows and depthwise_conv2d gather from x where it lies:
 * no concat copying x beside a row of padding, every gather's table x's
 * B * H * W pixel rows (the padding is a where after the gather). */
static void check_padding_reads_x(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 5, 6, 3]) -> (a, b, c, d) {\n"
                       "  return nn.max_pool2d(x, 3, 2, padding: 1), nn.avg_pool2d(x, 3, 1, padding: 1),\n"
                       "    nn.depthwise_conv2d(x, 3, padding: 1), nn.windows(x, 2, padding: 1, pad_value: 5.0)\n"
                       "}\n";
    ir_graph *g = compile_text("padding_reads_x", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    int gathers = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        CHECK(n->op != OP_CONCAT);
        if (n->op != OP_GATHER) continue;
        gathers++;
        const ir_node *table = &g->nodes[ir_args(g, n)[0]];
        int64_t rows = 0;
        CHECK(dim_is_const(&g->dims[table->shape[0]], &rows) && rows == 2 * 5 * 6);
    }
    CHECK(gathers == 3);   /* the avg pool and depthwise_conv2d share theirs (CSE) */
    ir_graph_free(g);
}

/* Concats and gathers of g: whether a padded conv2d copies x beside a row of
 * padding, and the rows of the table its gather reads. */
static void count_copies(const ir_graph *g, int *concats, int *gathers_of_x, int64_t x_rows)
{
    *concats = *gathers_of_x = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        *concats += n->op == OP_CONCAT;
        int64_t rows = 0;
        if (n->op == OP_GATHER && dim_is_const(&g->dims[g->nodes[ir_args(g, n)[0]].shape[0]], &rows))
            *gathers_of_x += rows == x_rows;
    }
}

/* A padded conv2d's forward pass gathers its windows from x where it lies
 * (no concat), the training step from the copy; the forward's values are the
 * copy's to the bit: z, the copy's windows times the same weight and bias. */
static void check_conv_forward_reads_x(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 5, 6, 3]) -> (y, z) {\n"
                       "  param w: f32[3, 3, 3, 4] = kaiming\n"
                       "  param b: f32[4] = zeros\n"
                       "  cols = reshape(nn.copied_windows(x, 3, 1, padding: 1), [2, 5, 6, 27])\n"
                       "  return nn.conv2d(x, 4, 3, padding: 1), cols @ reshape(w, [27, 4]) + b\n"
                       "}\n"
                       "train m(t: f32[2, 5, 6, 4]) {\n"
                       "  loss = nn.mse(y + z, t)\n"
                       "  optimizer sgd(lr: 0.1)\n"
                       "}\n";
    driver_opts step = {.verify = true, .train_step = true};
    ir_graph *g = compile_text("conv_forward", text, NULL), *t = compile_text("conv_step", text, &step);
    CHECK(g != NULL && t != NULL);
    int concats, gathers;
    if (t) {
        count_copies(t, &concats, &gathers, 2 * 5 * 6);
        CHECK(concats >= 2 && gathers == 0);   /* z's copy, and conv2d's own */
    }
    if (!g || !t || g->nparams != 4) goto done;
    count_copies(g, &concats, &gathers, 2 * 5 * 6);
    CHECK(concats == 1 && gathers == 1);   /* z's copy; conv2d reads x */
    char err[512];
    cpu_tensor x = {0}, params[4] = {{0}};
    int64_t xs[4] = {2, 5, 6, 3};
    cpu_tensor_alloc(&x, NC_F32, 4, xs, 0);
    random_fill(&x, 41);
    for (uint32_t i = 0; i < 4; i++) CHECK(param_init(g, i, 7, &params[i], err, sizeof err) == 0);
    random_fill(&params[1], 5);   /* w, b and conv2d's weight, bias, in some order: pairs alike */
    for (int i = 0; i < 2 && params[i].numel == params[i + 2].numel; i++)
        memcpy(params[i + 2].f, params[i].f, (size_t)params[i].numel * sizeof(float));
    cpu_exec_result res;
    if (!run_cpu("conv_forward", g, &x, params, &res)) {
        failures++;
    } else {
        const cpu_tensor *y = &res.values[g->outputs[0].value], *z = &res.values[g->outputs[1].value];
        CHECK(y->numel == 2 * 5 * 6 * 4 && z->numel == y->numel);
        CHECK(memcmp(y->f, z->f, (size_t)y->numel * sizeof(float)) == 0);
        cpu_exec_result_free(&res);
    }
    cpu_tensor_free(&x);
    for (int i = 0; i < 4; i++) cpu_tensor_free(&params[i]);
done:
    ir_graph_free(g);
    ir_graph_free(t);
}

/* A symbolic size's value as a number is read from the bound symbols
 * (dim_value), not counted as a sum of ones: the IR has no sum, and the
 * values are the sizes themselves at every binding, f32 rounded to nearest
 * past 2^24 (4097 * 4097 is odd) and i32 exact; an i32 value past 2^31 - 1
 * is refused when a session binds it. */
static void check_size_values(void)
{
    const char *text = "model m(x: bf16[B], k: i32[T]) -> (n: f32[], r: f32[], p: i32[T], h: bf16[B]) {\n"
                       "  return f32(B * T), f32(B * T) / f32(B * T - 1), k + B * T, x / T\n}\n";
    ir_graph *g = compile_text("size values", text, NULL);
    CHECK(g != NULL && g->nsyms == 2);
    if (!g || g->nsyms != 2) { ir_graph_free(g); return; }
    int sums = 0, values = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        sums += g->nodes[v].op == OP_SUM;
        values += g->nodes[v].op == OP_DIM_VALUE;
    }
    CHECK(sums == 0 && values >= 3);
    const int64_t bindings[][2] = {{2, 3}, {7, 5}, {64, 4099}, {4097, 4097}, {3, 300}};
    for (size_t b = 0; b < sizeof bindings / sizeof *bindings; b++) {
        int64_t nb = bindings[b][0], nt = bindings[b][1], syms[2], n = nb * nt;
        syms[strcmp(g->sym_names[0], "B") == 0 ? 0 : 1] = nb;
        syms[strcmp(g->sym_names[0], "B") == 0 ? 1 : 0] = nt;
        cpu_tensor in[2] = {{0}};
        cpu_tensor_alloc(&in[0], NC_BF16, 1, &nb, 0);
        cpu_tensor_alloc(&in[1], NC_I32, 1, &nt, 0);
        for (int64_t i = 0; i < nb; i++) in[0].f[i] = 1.0f;
        for (int64_t i = 0; i < nt; i++) in[1].i[i] = (int32_t)i - 7;
        cpu_exec_opts o = {.syms = syms, .inputs = in};
        cpu_exec_result res;
        char err[512];
        if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
            fprintf(stderr, "size values at B = %lld, T = %lld: %s\n", (long long)nb, (long long)nt, err);
            failures++;
        } else {
            const cpu_tensor *nv = &res.values[g->outputs[0].value], *r = &res.values[g->outputs[1].value];
            const cpu_tensor *p = &res.values[g->outputs[2].value], *h = &res.values[g->outputs[3].value];
            float fn = (float)n, fn1 = (float)(n - 1);
            if (!same_bits(nv->f[0], fn) || !same_bits(r->f[0], fn / fn1)) {
                fprintf(stderr, "size values at B = %lld, T = %lld: f32(N) = %.9g, N / (N - 1) = %.9g, want %.9g, %.9g\n",
                        (long long)nb, (long long)nt, nv->f[0], r->f[0], fn, fn / fn1);
                failures++;
            }
            for (int64_t i = 0; i < nt; i++) CHECK(p->i[i] == (int32_t)(i - 7 + n));
            /* x / T in bf16: T rounded to bf16 (4097 -> 4096), the quotient too */
            CHECK(same_bits(h->f[0], nc_round_to(NC_BF16, 1.0f / nc_round_to(NC_BF16, (float)nt))));
            cpu_exec_result_free(&res);
        }
        for (int i = 0; i < 2; i++) cpu_tensor_free(&in[i]);
    }
    /* B * T = 2^31 as an i32: refused at the binding, as a wrap would not be */
    int64_t big[2] = {65536, 32768};
    int refused = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        tc_error e;
        if (!tc_check_binding(g, &g->nodes[v], big, &e)) {
            refused++;
            CHECK(strstr(e.msg, "too large for the i32 value") != NULL);
            tc_error_free(&e);
        }
    }
    CHECK(refused == 1);
    ir_graph_free(g);
}

/* depthwise_conv2d: channel ch of the output reads only channel ch of the
 * windows, weighted by weight[u, v, ch]. */
static void check_depthwise(const conv_case *k)
{
    char text[512], name[64];
    snprintf(name, sizeof name, "depthwise_%dx%d_s%d_p%d", k->kernel, k->kernel, k->stride, k->padding);
    snprintf(text, sizeof text,
             "import nn\n"
             "model m(x: f32[%d, %d, %d, %d]) -> (y) {\n"
             "  y = nn.depthwise_conv2d(x, %d, stride: %d, padding: %d)\n"
             "  return y\n"
             "}\n",
             k->b, k->h, k->w, k->c, k->kernel, k->stride, k->padding);
    ir_graph *g = compile_text(name, text, NULL);
    CHECK(g != NULL && g->nparams == 2);   /* y.weight [k, k, C], y.bias [C] */
    if (!g || g->nparams != 2) { if (g) ir_graph_free(g); return; }
    char err[512];
    cpu_tensor x = {0}, params[2] = {{0}};
    int64_t xs[4] = {k->b, k->h, k->w, k->c};
    cpu_tensor_alloc(&x, NC_F32, 4, xs, 0);
    random_fill(&x, (uint32_t)(k->w * 71 + k->kernel));
    for (uint32_t i = 0; i < 2; i++) CHECK(param_init(g, i, 13, &params[i], err, sizeof err) == 0);
    CHECK(params[0].rank == 3 && params[0].shape[0] == k->kernel && params[0].shape[2] == k->c);
    random_fill(&params[1], 7);
    cpu_exec_result res;
    if (!run_cpu(name, g, &x, params, &res)) {
        failures++;
        goto done;
    }
    const cpu_tensor *y = &res.values[g->outputs[0].value], *wt = &params[0];
    int oh = out_size(k->h, k), ow = out_size(k->w, k), bad = 0;
    CHECK(y->rank == 4 && y->shape[1] == oh && y->shape[2] == ow && y->shape[3] == k->c);
    for (int b = 0; b < k->b; b++)
        for (int i = 0; i < oh; i++)
            for (int j = 0; j < ow; j++)
                for (int ch = 0; ch < k->c; ch++) {
                    double want = params[1].f[ch];
                    for (int u = 0; u < k->kernel; u++)
                        for (int v = 0; v < k->kernel; v++)
                            want += (double)pixel(&x, k, b, i * k->stride + u - k->padding, j * k->stride + v - k->padding, ch) *
                                    wt->f[(u * k->kernel + v) * k->c + ch];
                    float got = y->f[(((int64_t)b * oh + i) * ow + j) * k->c + ch];
                    if (fabs(got - want) > 1e-5 * (1 + fabs(want)) && bad++ < 3)
                        fprintf(stderr, "%s: y[%d, %d, %d, %d] = %g, want %g\n", name, b, i, j, ch, got, want);
                }
    if (bad) { fprintf(stderr, "%s: %d elements differ\n", name, bad); failures++; }
    cpu_exec_result_free(&res);
done:
    cpu_tensor_free(&x);
    for (int i = 0; i < 2; i++) cpu_tensor_free(&params[i]);
    ir_graph_free(g);
}

/* softmax and log_softmax over the middle axis of a (2, 3, 4) tensor against
 * exp(x - max) / sum over that axis, and nn.flatten, a (B, H, W, C) image as
 * (B, H * W * C) rows with a symbolic B. */
static void check_softmax_axis_and_flatten(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 3, 4], im: f32[B, 3, 2, 2]) -> (s, l, s0, f) {\n"
                       "  return softmax(x, axis: 1), log_softmax(x, axis: -2), softmax(x, axis: -3), nn.flatten(im)\n"
                       "}\n";
    ir_graph *g = compile_text("softmax_axis", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    char err[512];
    cpu_tensor in[2] = {{0}};
    int64_t xs[3] = {2, 3, 4}, ims[4] = {5, 3, 2, 2};
    cpu_tensor_alloc(&in[0], NC_F32, 3, xs, 0);
    cpu_tensor_alloc(&in[1], NC_F32, 4, ims, 0);
    random_fill(&in[0], 3);
    for (int i = 0; i < 24; i++) in[0].f[i] *= 4.0f;
    random_fill(&in[1], 9);
    int64_t bsym[1] = {5};
    cpu_exec_opts o = {.syms = bsym, .inputs = in};
    cpu_exec_result res;
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "softmax_axis: %s\n", err);
        failures++;
        goto done;
    }
    const cpu_tensor *s = &res.values[g->outputs[0].value], *l = &res.values[g->outputs[1].value];
    const cpu_tensor *s0 = &res.values[g->outputs[2].value], *f = &res.values[g->outputs[3].value];
    CHECK(s->rank == 3 && l->rank == 3 && s->shape[1] == 3 && s0->shape[0] == 2);
    int bad = 0;
    for (int a = 0; a < 2; a++)
        for (int c = 0; c < 4; c++) {
            double sum = 0;
            for (int j = 0; j < 3; j++) sum += exp(in[0].f[(a * 3 + j) * 4 + c]);
            for (int j = 0; j < 3; j++) {
                int at = (a * 3 + j) * 4 + c;
                double p = exp(in[0].f[at]) / sum;
                if (fabs(s->f[at] - p) > 1e-6 && bad++ < 3) fprintf(stderr, "softmax axis 1 [%d] = %g, want %g\n", at, s->f[at], p);
                if (fabs(l->f[at] - log(p)) > 1e-5 && bad++ < 3) fprintf(stderr, "log_softmax axis -2 [%d] = %g, want %g\n", at, l->f[at], log(p));
            }
        }
    for (int r = 0; r < 12; r++) {
        double sum = exp(in[0].f[r]) + exp(in[0].f[12 + r]);
        for (int a = 0; a < 2; a++)
            if (fabs(s0->f[a * 12 + r] - exp(in[0].f[a * 12 + r]) / sum) > 1e-6 && bad++ < 3)
                fprintf(stderr, "softmax axis -3 [%d] = %g\n", a * 12 + r, s0->f[a * 12 + r]);
    }
    CHECK(f->rank == 2 && f->shape[0] == 5 && f->shape[1] == 12);
    for (int i = 0; i < 60 && f->numel == 60; i++)
        if (!same_bits(f->f[i], in[1].f[i]) && bad++ < 3) fprintf(stderr, "flatten [%d] = %g, want %g\n", i, f->f[i], in[1].f[i]);
    if (bad) { fprintf(stderr, "softmax_axis: %d elements differ\n", bad); failures++; }
    cpu_exec_result_free(&res);
done:
    for (int i = 0; i < 2; i++) cpu_tensor_free(&in[i]);
    ir_graph_free(g);
}

/* rotary (RoPE) against its definition with libm's cos and sin in double:
 * the pair (x[i], x[i + D/2]) at position t turned by t * base^(-2i/D), over
 * 200 positions (angles to 199 radians), and the ops cos and sin on
 * angles of both signs to 1000. */
static void check_rotary(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, T, 8], a: f32[7]) -> (y, c, s) {\n"
                       "  c = cos(a)\n"
                       "  s = sin(a)\n"
                       "  return nn.rotary(x, base: 500.0), c, s\n"
                       "}\n";
    ir_graph *g = compile_text("rotary", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    enum { T = 200, D = 8, H = D / 2 };
    cpu_tensor in[2] = {{0}};
    int64_t xs[3] = {2, T, D}, as[1] = {7};
    cpu_tensor_alloc(&in[0], NC_F32, 3, xs, 0);
    cpu_tensor_alloc(&in[1], NC_F32, 1, as, 0);
    random_fill(&in[0], 5);
    const float angles[7] = {0.0f, -1.0f, 3.14159f, -7.5f, 40.25f, -123.0f, 1000.5f};
    memcpy(in[1].f, angles, sizeof angles);
    int64_t tsym[1] = {T};
    cpu_exec_opts o = {.syms = tsym, .inputs = in};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "rotary: %s\n", err);
        failures++;
        goto done;
    }
    const cpu_tensor *y = &res.values[g->outputs[0].value], *c = &res.values[g->outputs[1].value];
    const cpu_tensor *s = &res.values[g->outputs[2].value];
    int bad = 0;
    for (int b = 0; b < 2; b++)
        for (int t = 0; t < T; t++)
            for (int i = 0; i < H; i++) {
                /* the angle as f32 computes it: the rounding of t * freq is part of RoPE's definition in f32 */
                double ang = (double)((float)t * (float)pow(500.0, -2.0 * i / D));
                const float *xr = &in[0].f[(b * T + t) * D], *yr = &y->f[(b * T + t) * D];
                double w0 = xr[i] * cos(ang) - xr[i + H] * sin(ang), w1 = xr[i + H] * cos(ang) + xr[i] * sin(ang);
                if ((fabs(yr[i] - w0) > 2e-5 || fabs(yr[i + H] - w1) > 2e-5) && bad++ < 3)
                    fprintf(stderr, "rotary [%d, %d, %d] = %g, %g, want %g, %g\n", b, t, i, yr[i], yr[i + H], w0, w1);
            }
    for (int k = 0; k < 7; k++)
        if ((fabs(c->f[k] - cos(angles[k])) > 1e-6 || fabs(s->f[k] - sin(angles[k])) > 1e-6) && bad++ < 6)
            fprintf(stderr, "cos, sin(%g) = %g, %g, want %g, %g\n", angles[k], c->f[k], s->f[k], cos(angles[k]), sin(angles[k]));
    if (bad) { fprintf(stderr, "rotary: %d elements differ\n", bad); failures++; }
    cpu_exec_result_free(&res);
done:
    for (int i = 0; i < 2; i++) cpu_tensor_free(&in[i]);
    ir_graph_free(g);
}

/* nn.argmax and nn.flip against torch.argmax and torch.flip (CPU torch
 * 2.15, values written here): a (2, 5, 3) tensor of small integers with
 * ties and NaNs, argmax over each axis (the first of those that tie; a NaN
 * counts as the largest, its first one wins), keepdim, a symbolic B on the
 * last axis, and flip over the first, the middle and the last axis. */
static void check_argmax_flip(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 5, 3], y: f32[B, 4]) -> (a0, a1, a2, k, ay, f0, f1, f2) {\n"
                       "  return nn.argmax(x, 0), nn.argmax(x, axis: 1), nn.argmax(x, -1), nn.argmax(x, 1, keepdim: true),\n"
                       "         nn.argmax(y, axis: -1), nn.flip(x, 0), nn.flip(x, 1), nn.flip(x, axis: -1)\n"
                       "}\n";
    ir_graph *g = compile_text("argmax_flip", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    static const float xv[30] = {2, 1, 0, -1, -1, NAN, -2, -2, -2, 2, 1, NAN, 0, 1, 2,
                                 1, 1, 0, 0, 2, -1, 2, NAN, -2, -1, 2, 0, -2, 1, 1};
    static const float yv[12] = {1, 3, 3, 2, 1, NAN, 3, NAN, -1, -2, -3, -4};
    static const int32_t want_a0[15] = {0, 0, 0, 1, 1, 0, 1, 1, 0, 0, 1, 0, 0, 0, 0};
    static const int32_t want_a1[6] = {0, 0, 1, 2, 2, 4};
    static const int32_t want_a2[10] = {0, 2, 0, 2, 2, 0, 1, 1, 1, 1};
    static const int32_t want_ay[3] = {1, 1, 0};
    static const float want_f1[30] = {0, 1, 2, 2, 1, NAN, -2, -2, -2, -1, -1, NAN, 2, 1, 0,
                                      -2, 1, 1, -1, 2, 0, 2, NAN, -2, 0, 2, -1, 1, 1, 0};
    cpu_tensor in[2] = {{0}};
    int64_t xs[3] = {2, 5, 3}, ys[2] = {3, 4};
    cpu_tensor_alloc(&in[0], NC_F32, 3, xs, 0);
    cpu_tensor_alloc(&in[1], NC_F32, 2, ys, 0);
    memcpy(in[0].f, xv, sizeof xv);
    memcpy(in[1].f, yv, sizeof yv);
    int64_t bsym[1] = {3};
    cpu_exec_opts o = {.syms = bsym, .inputs = in};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "argmax_flip: %s\n", err);
        failures++;
        goto done;
    }
    const cpu_tensor *out[8];
    for (int i = 0; i < 8; i++) out[i] = &res.values[g->outputs[i].value];
    const struct { const cpu_tensor *t; const int32_t *want; int n, rank; } idx[] = {
        {out[0], want_a0, 15, 2}, {out[1], want_a1, 6, 2}, {out[2], want_a2, 10, 2}, {out[3], want_a1, 6, 3}, {out[4], want_ay, 3, 1},
    };
    int bad = 0;
    for (size_t k = 0; k < sizeof idx / sizeof idx[0]; k++) {
        CHECK(idx[k].t->dtype == NC_I32 && idx[k].t->rank == idx[k].rank && idx[k].t->numel == idx[k].n);
        for (int i = 0; i < idx[k].n && idx[k].t->numel == idx[k].n; i++)
            if (idx[k].t->i[i] != idx[k].want[i] && bad++ < 5)
                fprintf(stderr, "argmax %zu [%d] = %d, want %d\n", k, i, idx[k].t->i[i], idx[k].want[i]);
    }
    CHECK(out[3]->shape[1] == 1);
    for (int a = 0; a < 2; a++)
        for (int t = 0; t < 5; t++)
            for (int c = 0; c < 3; c++) {
                int at = (a * 5 + t) * 3 + c;
                float w0 = xv[((1 - a) * 5 + t) * 3 + c], w2 = xv[(a * 5 + t) * 3 + 2 - c];
                if ((!same_bits(out[5]->f[at], w0) || !same_bits(out[6]->f[at], want_f1[at]) || !same_bits(out[7]->f[at], w2)) &&
                    bad++ < 5)
                    fprintf(stderr, "flip [%d] = %g, %g, %g, want %g, %g, %g\n", at, out[5]->f[at], out[6]->f[at], out[7]->f[at], w0,
                            want_f1[at], w2);
            }
    if (bad) { fprintf(stderr, "argmax_flip: %d elements differ\n", bad); failures++; }
    cpu_exec_result_free(&res);
done:
    for (int i = 0; i < 2; i++) cpu_tensor_free(&in[i]);
    ir_graph_free(g);
}

/* The concats and slices of slices in g: how many concats read a concat,
 * how many slices read a slice (along any axis), and the concats. */
static void count_joins(const ir_graph *g, int *concat_of_concat, int *slice_of_slice, int *concats)
{
    *concat_of_concat = *slice_of_slice = *concats = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        *concats += n->op == OP_CONCAT;
        for (int i = 0; i < n->nargs; i++) {
            const ir_node *a = &g->nodes[ir_args(g, n)[i]];
            *concat_of_concat += n->op == OP_CONCAT && a->op == OP_CONCAT;
            *slice_of_slice += n->op == OP_SLICE && a->op == OP_SLICE;
        }
    }
}

/* pass_join: a repeat's `states = concat([states, piece])` over 40 steps
 * is one concat of 41 pieces in three groups (a rank-3 kernel takes 16),
 * not 40 concats copying 1, 2, ..., 40 steps, and a slice of a slice is one
 * slice; the values are x's, bit for bit. nn.gru's training step at T = 24:
 * its forward chain joined, and its gradient's chain of slices of slices
 * (each step's state's gradient sliced out of the previous one's) made
 * slices of the one gradient. */
static void check_join_chains(void)
{
    const char *text = "model m(x: f32[2, 40, 3]) -> (y, z) {\n"
                       "  states = fill(0.0, shape: [2, 1, 3])\n"
                       "  repeat 40 as steps, t {\n"
                       "    states = concat([states, x[:, t:t + 1] * 1.0], axis: 1)\n"
                       "  }\n"
                       "  y = states[:, 1:]\n"
                       "  return y, y[:, 2:][:, 5:]\n"
                       "}\n";
    ir_graph *g = compile_text("join_chain", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    int cc, ss, concats;
    count_joins(g, &cc, &ss, &concats);
    if (concats != 4 || cc != 3 || ss != 0) {
        fprintf(stderr, "join_chain: %d concats, %d reading a concat, %d slices of slices; want 4, 3 (the groups), 0\n",
                concats, cc, ss);
        failures++;
    }
    cpu_tensor in[1] = {{0}};
    int64_t xs[3] = {2, 40, 3};
    cpu_tensor_alloc(&in[0], NC_F32, 3, xs, 0);
    random_fill(&in[0], 11);
    cpu_exec_opts o = {.inputs = in};
    cpu_exec_result res;
    char err[512];
    if (cpu_exec_run(g, &o, &res, err, sizeof err) != 0) {
        fprintf(stderr, "join_chain: %s\n", err);
        failures++;
    } else {
        const cpu_tensor *y = &res.values[g->outputs[0].value], *z = &res.values[g->outputs[1].value];
        CHECK(y->numel == 240 && z->numel == 2 * 33 * 3);
        int bad = 0;
        for (int i = 0; i < 240 && y->numel == 240; i++) bad += !same_bits(y->f[i], in[0].f[i]);
        for (int b = 0; b < 2 && z->numel == 198; b++)
            for (int i = 0; i < 99; i++) bad += !same_bits(z->f[b * 99 + i], in[0].f[b * 120 + 21 + i]);
        if (bad) { fprintf(stderr, "join_chain: %d elements differ\n", bad); failures++; }
        cpu_exec_result_free(&res);
    }
    cpu_tensor_free(&in[0]);
    ir_graph_free(g);

    const char *gru = "import nn\n"
                      "model m(x: f32[2, 24, 3], t: f32[2, 24, 4]) -> (loss: f32) {\n"
                      "  out, _last = nn.gru(x, 4)\n"
                      "  return nn.mse(out, t)\n"
                      "}\n"
                      "train m {\n  optimizer sgd(lr: 0.1)\n}\n";
    driver_opts to = {.verify = true, .train_step = true};
    g = compile_text("join_gru", gru, &to);
    CHECK(g != NULL);
    if (!g) return;
    count_joins(g, &cc, &ss, &concats);
    /* forward: 25 states in two groups and their concat; backward: the
     * 24 gradients of gi[:, t] likewise (autodiff's groups), the gradient
     * of the states' slice [:, 1:] padded by one concat, and the gates'
     * gradients (one concat of three per step, twice) */
    if (cc > 4 || ss != 0) {
        fprintf(stderr, "join_gru: %d concats reading a concat, %d slices of slices (%d concats)\n", cc, ss, concats);
        failures++;
    }
    /* gi's gradient (2, 24, 12) is one concat of its 24 slices' gradients,
     * not each of them zero-padded to gi's size and summed (autodiff's
     * settle, which stopped at 16 pieces): two adds that size, gi's own and
     * its bias's broadcast, not 25 */
    int full_adds = 0;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        int64_t t = 0, w = 0;
        if (n->op == OP_ADD && n->rank == 3 && dim_is_const(&g->dims[n->shape[1]], &t) && dim_is_const(&g->dims[n->shape[2]], &w))
            full_adds += t == 24 && w == 12;
    }
    if (full_adds > 2) { fprintf(stderr, "join_gru: %d adds of gi's size, want 2 at most\n", full_adds); failures++; }
    ir_graph_free(g);
}

/* A parameter's values sin(a i + b) * scale, as the PyTorch scripts that
 * made the expected values wrote them. */
typedef struct sin_param { const char *name; double a, b, scale; } sin_param;

/* Runs g on one f32 input of shape xs, its values sin(0.37 i + 0.1), with
 * every parameter made as made says (each must be named there), into res;
 * false (a failure counted) when it cannot. */
static bool run_sin_params(const char *what, const ir_graph *g, const int64_t xs[3], const sin_param *made, int nmade,
                           cpu_exec_result *res)
{
    cpu_tensor params[8] = {{0}}, x = {0};
    cpu_tensor_alloc(&x, NC_F32, 3, xs, 0);
    for (int64_t i = 0; i < x.numel; i++) x.f[i] = (float)sin(0.37 * (double)i + 0.1);
    bool ok = g->nparams <= 8;
    for (uint32_t p = 0; ok && p < g->nparams; p++) {
        const ir_tensor_decl *d = &g->params[p].decl;
        int64_t shape[NC_MAX_RANK];
        for (int k = 0; k < d->rank; k++) dim_is_const(&g->dims[d->shape[k]], &shape[k]);
        cpu_tensor_alloc(&params[p], NC_F32, d->rank, shape, 0);
        int m = 0;
        while (m < nmade && strcmp(made[m].name, d->name) != 0) m++;
        if (m == nmade) { fprintf(stderr, "%s: no values for parameter %s\n", what, d->name); ok = false; break; }
        for (int64_t i = 0; i < params[p].numel; i++) params[p].f[i] = (float)(sin(made[m].a * i + made[m].b) * made[m].scale);
    }
    char err[512];
    cpu_exec_opts o = {.inputs = &x, .params = params};
    if (ok && cpu_exec_run(g, &o, res, err, sizeof err) != 0) {
        fprintf(stderr, "%s: %s\n", what, err);
        ok = false;
    }
    for (int p = 0; p < 8; p++) cpu_tensor_free(&params[p]);
    cpu_tensor_free(&x);
    if (!ok) failures++;
    return ok;
}

/* Elements of got farther than tol from want (the first three shown). */
static int count_far(const char *what, const cpu_tensor *got, const double *want, int64_t n, double tol)
{
    if (got->numel != n) {
        fprintf(stderr, "%s: %lld elements, want %lld\n", what, (long long)got->numel, (long long)n);
        return 1;
    }
    int bad = 0;
    for (int64_t i = 0; i < n; i++)
        if (fabs(got->f[i] - want[i]) > tol && bad++ < 3)
            fprintf(stderr, "%s [%lld] = %.7g, want %.7g\n", what, (long long)i, got->f[i], want[i]);
    return bad;
}

/* nn.full_self_attention against PyTorch: x (2, 3, 4) and the weights
 * sin(a i + b) (written here as in the script that made the values), two
 * heads; the expected values are torch.nn.functional.scaled_dot_product_attention
 * between the two linears, computed in f64 by CPU torch 2.15:
 *   qkv = x @ w1 + b1; q, k, v = split(qkv, 4) as (B, 2, T, 2) heads;
 *   y = sdpa(q, k, v) as (B, T, 4) @ w2 + b2. */
static void check_full_self_attention(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 3, 4]) -> (y) {\n"
                       "  attn = nn.full_self_attention(x, 2)\n"
                       "  return attn\n"
                       "}\n";
    ir_graph *g = compile_text("full_self_attention", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    static const double want[24] = {-3.04335958, -3.89321451, -4.75799248, -5.47767215, -3.1404684,   -4.00545646,
                                    -4.87599399, -5.59157865, 0.00175924612, 0.581829529, 0.773255784, 0.647853349,
                                    3.71683401,  5.06088279,  5.64223174,  5.50013286,  -2.94825691,  -4.22179253,
                                    -5.4828109,  -6.53819976, -3.75655537, -5.16323297, -6.47877152,  -7.50550564};
    static const sin_param made[] = {
        {"attn.c_attn.weight", 0.53, 0.2, 1.0}, {"attn.c_attn.bias", 0.71, 0.3, 0.5},
        {"attn.c_proj.weight", 0.29, 0.4, 1.0}, {"attn.c_proj.bias", 0.91, 0.5, 0.5},
    };
    CHECK(g->nparams == 4);
    cpu_exec_result res;
    if (run_sin_params("full_self_attention", g, (int64_t[]){2, 3, 4}, made, 4, &res)) {
        int bad = count_far("full_self_attention", &res.values[g->outputs[0].value], want, 24, 2e-5);
        if (bad) { fprintf(stderr, "full_self_attention: %d elements differ\n", bad); failures++; }
        cpu_exec_result_free(&res);
    }
    ir_graph_free(g);
}

/* nn.gru against torch.nn.GRU(3, 4, batch_first=True) with the weights
 * sin(a i + b) * s written here (weight_ih_l0 is weight_ih transposed),
 * computed in f64 by CPU torch 2.15: every step's state and the last, over
 * 5 steps (the states' concat chain joined by pass_join). */
static void check_gru_torch(void)
{
    const char *text = "import nn\n"
                       "model m(x: f32[2, 5, 3]) -> (out, last) {\n"
                       "  out, last = nn.gru(x, 4)\n"
                       "  return out, last\n"
                       "}\n";
    ir_graph *g = compile_text("gru_torch", text, NULL);
    CHECK(g != NULL);
    if (!g) return;
    static const double want_out[40] = {
        -0.228474928, -0.191318846, -0.110305105, 0.0122000792, -0.447239662, -0.52535858, -0.454718605, -0.108441656,
        -0.472261924, -0.405683184, -0.266913263, -0.0234246594, 0.386486039, 0.400862705, 0.252306622, 0.116675138,
        0.772067786, 0.742991486, 0.522223381, 0.202563989, 0.255224722, 0.34215539, 0.267104911, 0.117107175,
        -0.117244465, -0.185685916, -0.187870853, -0.0224055334, -0.368206646, -0.495664261, -0.440543618, -0.108455821,
        -0.184235245, -0.101825627, -0.0705685209, 0.0203387288, 0.599894727, 0.571956788, 0.366910459, 0.141256856};
    static const double want_last[8] = {0.772067786, 0.742991486, 0.522223381, 0.202563989,
                                        0.599894727, 0.571956788, 0.366910459, 0.141256856};
    static const sin_param made[] = {
        {"gru.weight_ih", 0.53, 0.2, 0.5}, {"gru.weight_hh", 0.29, 0.4, 0.5},
        {"gru.bias_ih", 0.71, 0.3, 0.3},   {"gru.bias_hh", 0.91, 0.5, 0.3},
    };
    CHECK(g->nparams == 4);
    cpu_exec_result res;
    if (run_sin_params("gru_torch", g, (int64_t[]){2, 5, 3}, made, 4, &res)) {
        int bad = count_far("gru out", &res.values[g->outputs[0].value], want_out, 40, 1e-5) +
                  count_far("gru last", &res.values[g->outputs[1].value], want_last, 8, 1e-5);
        if (bad) { fprintf(stderr, "gru_torch: %d elements differ\n", bad); failures++; }
        cpu_exec_result_free(&res);
    }
    ir_graph_free(g);
}

int main(void)
{
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_depthwise(&cases[i]);
    check_softmax_axis_and_flatten();
    check_rotary();
    for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++) check_case(&cases[i]);
    for (size_t i = 0; i < sizeof pool_cases / sizeof pool_cases[0]; i++) check_pool(&pool_cases[i]);
    check_sizes_beside_tensors();
    check_padding_reads_x();
    check_conv_forward_reads_x();
    check_size_values();
    check_argmax_flip();
    check_join_chains();
    check_full_self_attention();
    check_gru_torch();
    if (failures) fprintf(stderr, "test_stdlib_conv: %d failures\n", failures);
    return failures != 0;
}
