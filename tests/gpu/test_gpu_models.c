/* test_gpu_models.c - each example model end to end on the GPU against the
 * CPU executor (captured as a CUDA graph and replayed), then 4 random
 * training programs (tests/unit/random_program.h), their new parameters
 * compared too; NETC_RANDOM_PROGRAMS=N[:SEED] runs N of those alone.
 * Exits 77 without a GPU.
 * Then the checker's report of a mismatch it is made to see (mismatch_report),
 * and of a kernel made wrong where rounding decides its tensor (wrong_kernel_report).
 * NETC_GPU_CASE=name[,name...] runs those cases (random_SEED for a random program),
 * NETC_GPU_SEED=n with another seed. */
#include "gpu_check.h"
#include "../unit/random_program.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

/* Whether NETC_GPU_CASE (only: names separated by commas; NULL: every
 * case) names this case. */
static bool selected(const char *only, const char *name)
{
    if (!only) return true;
    size_t n = strlen(name);
    for (const char *at = only; (at = strstr(at, name)) != NULL; at += n)
        if ((at == only || at[-1] == ',') && (at[n] == 0 || at[n] == ',')) return true;
    return false;
}

/* Random training programs, fused but every fourth, at B = 3, 1, 5 or 2 (as
 * test_kernels_host runs them on the host): here through the runtime, its
 * memory plan and a captured graph, with SGD's new parameters compared.
 * Returns 77 when there is no GPU. */
static int check_random_programs(const char *only, const char *seed_env, int *runs, int *fails)
{
    unsigned long long count = 4, first = 1;
    const char *env = getenv("NETC_RANDOM_PROGRAMS");
    if (env && sscanf(env, "%llu:%llu", &count, &first) < 1) {
        fprintf(stderr, "NETC_RANDOM_PROGRAMS=%s: expected N or N:SEED\n", env);
        (*fails)++;
        return 1;
    }
    static char text[RP_TEXT + 4096];
    const char *b[] = {"B"};
    for (unsigned long long s = first; s < first + count; s++) {
        char name[64];
        snprintf(name, sizeof name, "random_%llu", s);
        if (!selected(only, name) || !random_program(s, text, sizeof text)) continue;
        const int64_t batch[] = {(int64_t[]){3, 1, 5, 2}[s / 4 % 4]};
        gpu_check_opts o = {.name = name, .source = text, .dim_names = b, .dim_values = batch, .ndims = 1,
                            .seed = seed_env ? strtoull(seed_env, NULL, 10) : s, .int_range = 10, .use_graph = true,
                            .fuse = s % 4 != 0, .train_step = true, .check_updates = true};
        (*runs)++;
        int rc = gpu_check(&o);
        if (rc == 77) return 77;
        if (rc) {
            (*fails)++;
            fprintf(stderr, "%s (B=%lld%s):\n%s", name, (long long)batch[0], o.fuse ? ", fused" : "", text);
        } else {
            printf("ok %s\n", name);
        }
    }
    return 0;
}

/* An embedding in f32: its gradient's sums depend on the order of their
 * terms (bf16 terms of similar size add exactly in f32, whatever the order). */
static const char *embedding_source =
    "model emb(tokens: i32[B, 8], targets: i32[B, 8]) -> (loss: f32)\n"
    "{\n"
    "  param wte: f32[8, 32] = normal(0.1)\n"
    "  param w: f32[32, 8] = xavier\n"
    "  return cross_entropy(tanh(gather(wte, tokens)) @ w, targets)\n"
    "}\n"
    "train emb { optimizer sgd(lr: 0.1) }\n";

/* A weight of 60,491 elements (241 x 251, under the optimizer's 65,536 for
 * splitting its squares): its norm's sum, one output, is spread over 15
 * blocks of the joined kernel and their results added by a second kernel
 * (cuda_emit.c emit_joined_totals), with 15 biases' 251 in the same concat
 * (the optimizer joins 16 sums a concat). The next concat holds w2's
 * 251 x 2, v's 32 x 5003 (the optimizer's 32 sums of 5,003: 2 blocks each)
 * and u's 8,192 in one sum: spread, it saves less than a launch, but its
 * second kernel joins the first's launch. Clipping at a norm the step
 * exceeds carries the norm into every update. */
static const char *spread_norm_source =
    "model wide(x: f32[B, 241], z: f32[B, 32], t: f32[B, 2]) -> (loss: f32)\n"
    "{\n"
    "  param w: f32[241, 251] = xavier\n"
    "  param b1: f32[251] = zeros\n"
    "  param b2: f32[251] = zeros\n"
    "  param b3: f32[251] = zeros\n"
    "  param b4: f32[251] = zeros\n"
    "  param b5: f32[251] = zeros\n"
    "  param b6: f32[251] = zeros\n"
    "  param b7: f32[251] = zeros\n"
    "  param b8: f32[251] = zeros\n"
    "  param b9: f32[251] = zeros\n"
    "  param b10: f32[251] = zeros\n"
    "  param b11: f32[251] = zeros\n"
    "  param b12: f32[251] = zeros\n"
    "  param b13: f32[251] = zeros\n"
    "  param b14: f32[251] = zeros\n"
    "  param b15: f32[251] = zeros\n"
    "  param w2: f32[251, 2] = xavier\n"
    "  param v: f32[32, 5003] = xavier\n"
    "  param u: f32[32, 256] = xavier\n"
    "  h = x @ w + b1 + 2.0 * b2 + 3.0 * b3 + 4.0 * b4 + 5.0 * b5 + 6.0 * b6 + 7.0 * b7 + 8.0 * b8 + 9.0 * b9 + 10.0 * b10 + 11.0 * b11 + 12.0 * b12 + 13.0 * b13 + 14.0 * b14 + 15.0 * b15\n"
    "  return mean(square(tanh(h) @ w2 - t)) + mean(square(tanh(z @ v))) + mean(square(tanh(z @ u)))\n"
    "}\n"
    "train wide {\n  optimizer sgd(lr: 0.1)\n  clip_grad_norm 0.01\n}\n";

/* A convolution's bias before batch norm, which subtracts it again: the
 * bias's gradient is 0 in theory, rounding noise on either side, and Adam's
 * first step turns that noise into a step of lr one way or the other. */
static const char *conv_bias_norm_source =
    "import nn\n"
    "model conv_norm(x: f32[B, 6, 6, 3]) -> (logits: f32[B, 4]) {\n"
    "  norm = nn.batch_norm(nn.conv2d(x, 8, 3, padding: 1))\n"
    "  return nn.linear(nn.global_avg_pool(relu(norm)), 4)\n"
    "}\n"
    "train conv_norm(labels: i32[B]) {\n"
    "  loss = cross_entropy(logits, labels)\n"
    "  optimizer adam(lr: 0.01)\n"
    "}\n";

/* Two rotary embeddings of different bases: fusion puts the second one's
 * constant angles (iotas alone) in a kernel beside the input's bf16 cast, a
 * kernel of every run, and the angles' i32 casts after it had been prepare
 * steps, run once before the angles were made: the bf16 result was NaN. */
static const char *rotary_bases_source =
    "import nn\n"
    "model m(x: f32[B, 2, 50, 8]) -> (y: f32[B, 2, 50, 8], z: bf16[B, 2, 50, 8]) {\n"
    "  return nn.rotary(x), nn.rotary(bf16(x), base: 100.0)\n"
    "}\n";

/* A GRU over 24 steps: the join pass's one concat of every state, and the
 * 24 slices of the inputs' projection whose gradients autodiff joins in
 * groups of concats (past 16 pieces). */
static const char *gru_joins_source =
    "import nn\n"
    "model m(x: f32[B, 24, 6]) -> (loss: f32) {\n"
    "  states, h = nn.gru(x, 8)\n"
    "  return mean(states * states) + mean(h)\n"
    "}\n"
    "train m {\n"
    "  loss = loss\n"
    "  optimizer sgd(lr: 0.1)\n"
    "}\n";

/* Runs o with stderr caught into text (cap bytes): gpu_check's exit. */
static int check_quietly(const gpu_check_opts *o, char *text, size_t cap)
{
    FILE *log = tmpfile();
    int saved = dup(2);
    if (!log || saved < 0) { perror(o->name); return 1; }
    fflush(stderr);
    dup2(fileno(log), 2);
    int rc = gpu_check(o);
    fflush(stderr);
    dup2(saved, 2);
    close(saved);
    size_t n = (rewind(log), fread(text, 1, cap - 1, log));
    text[n] = 0;
    fclose(log);
    return rc;
}

/* The checker's own report of a mismatch: batch_norm's training step with
 * its first parameter's first element one larger on the GPU (skew_param)
 * must fail, and say step by step which launch first differs. Its running
 * statistics' updates live in their buffers' memory, which the report read
 * as the updates' own ("expected 0 bytes, got 32", then a launch named for
 * that). Returns 1 when the report is not that, 77 without a GPU. */
static int check_mismatch_report(void)
{
    const char *b[] = {"B"};
    const int64_t v[] = {5};
    gpu_check_opts o = {.name = "mismatch_report", .path = NETC_SOURCE_DIR "/tests/gpu/batch_norm.net", .dim_names = b,
                        .dim_values = v, .ndims = 1, .int_range = 4, .use_graph = true, .train_step = true, .fuse = true,
                        .check_updates = true, .seed = 65, .skew_param = true};
    char text[16384];
    int rc = check_quietly(&o, text, sizeof text);
    if (rc == 77) return 77;
    bool named = strstr(text, "mismatch_report: step by step, the first launch that differs: step ") != NULL;
    if (rc == 1 && named && !strstr(text, "expected ")) return 0;
    fprintf(stderr, "FAIL mismatch_report: a parameter made to differ on the GPU gave exit %d and this report:\n%s", rc, text);
    return 1;
}

/* The checker against a wrong kernel where rounding decides the tensor: the
 * conv's bias gradient (conv_bias_norm_train's, rounding noise on either
 * side) with one element's sum a term off must still fail, the sum's
 * launch named (the noise let through must not let that through). Returns 1
 * when it passes or the report is not that, 77 without a GPU. */
static int check_wrong_kernel(void)
{
    const char *b[] = {"B"};
    const int64_t v[] = {3};
    gpu_check_opts o = {.name = "wrong_kernel_report", .source = conv_bias_norm_source, .dim_names = b, .dim_values = v,
                        .ndims = 1, .int_range = 4, .use_graph = true, .train_step = true, .fuse = true,
                        .check_updates = true, .seed = 75, .wrong_after = "(nn.net:184)",
                        .wrong_from = "if (lane == 0) nc_st(y, o, acc);",
                        .wrong_to = "if (lane == 0) nc_st(y, o, o == 3 ? acc + nc_ld(x, 3) : acc);"};
    char text[16384];
    int rc = check_quietly(&o, text, sizeof text);
    if (rc == 77) return 77;
    if (rc == 1 && strstr(text, "wrong_kernel_report: step by step, the first launch that differs: ") && strstr(text, " sum\n"))
        return 0;
    fprintf(stderr, "FAIL wrong_kernel_report: a conv's bias gradient made wrong in one element gave exit %d and this report:\n%s",
            rc, text);
    return 1;
}

int main(void)
{
    setvbuf(stdout, NULL, _IOLBF, 0);   /* each case's line as it ends, also into a pipe: a run cut short shows how far it got */
    const char *b64[] = {"B"};
    const int64_t v64[] = {64}, v2[] = {2}, v200[] = {200}, v40[] = {40}, v3[] = {3}, v5[] = {5}, v4[] = {4};
    const char *bt[] = {"B", "T"};
    const int64_t vbt[] = {2, 64}, vbt70[] = {2, 70}, vbt80[] = {1, 80};
    const char *small_gpt2[] = {"L", "V", "C", "H", "MAXT"};
    const char *d64_v[] = {"1", "256", "128", "2", "80"}, *d128_v[] = {"1", "256", "128", "1", "80"};
    const char *bt32[] = {"B", "T"};
    const int64_t vbt32[] = {8, 32};
    const char *mid[] = {"V", "C", "L", "H", "MAXT"};
    const char *mid_v[] = {"512", "256", "2", "4", "32"};
    const char *small[] = {"L"};
    const char *small_v[] = {"2"};
    gpu_check_opts models[] = {
        {.name = "fashion_mlp", .path = NETC_SOURCE_DIR "/examples/fashion_mlp.net", .dim_names = b64, .dim_values = v64,
         .ndims = 1, .int_range = 10, .use_graph = true},
        {.name = "cast_chain", .path = NETC_SOURCE_DIR "/examples/cast_chain.net", .dim_names = b64, .dim_values = v2,
         .ndims = 1, .int_range = 4096, .use_graph = true},
        {.name = "gpt2_2layers", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt, .dim_values = vbt, .ndims = 2,
         .set_names = small, .set_values = small_v, .nsets = 1, .int_range = 50304, .use_graph = true},
        /* training steps: forward, fused cross-entropy backward, optimizer update */
        {.name = "fashion_mlp_train", .path = NETC_SOURCE_DIR "/examples/fashion_mlp.net", .dim_names = b64,
         .dim_values = v64, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true},
        {.name = "gpt2_2layers_train", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt, .dim_values = vbt,
         .ndims = 2, .set_names = small, .set_values = small_v, .nsets = 1, .int_range = 50304, .use_graph = true,
         .train_step = true},
        /* the row-wise backward ops (softmax, log_softmax, rmsnorm) */
        {.name = "rowwise_train", .path = NETC_SOURCE_DIR "/tests/gpu/rowwise.net", .dim_names = b64, .dim_values = v64,
         .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true},
        /* reductions over leading, trailing and middle axes (two kernels for 200 rows) */
        {.name = "reduce", .path = NETC_SOURCE_DIR "/tests/gpu/reduce.net", .dim_names = b64, .dim_values = v200,
         .ndims = 1, .use_graph = true},
        {.name = "reduce_fused", .path = NETC_SOURCE_DIR "/tests/gpu/reduce.net", .dim_names = b64, .dim_values = v200,
         .ndims = 1, .use_graph = true, .fuse = true, .profile = true},
        /* the same training steps with elementwise fusion (netc build --fuse) */
        {.name = "fashion_mlp_train_fused", .path = NETC_SOURCE_DIR "/examples/fashion_mlp.net", .dim_names = b64,
         .dim_values = v64, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true},
        /* inputs prefetched as netc train does: pinned memory, a copy stream, the next run's inputs
           travelling while one runs */
        {.name = "fashion_mlp_staged", .path = NETC_SOURCE_DIR "/examples/fashion_mlp.net", .dim_names = b64,
         .dim_values = v64, .ndims = 1, .int_range = 10, .use_graph = true, .stage_inputs = true},
        {.name = "fashion_mlp_train_staged", .path = NETC_SOURCE_DIR "/examples/fashion_mlp.net", .dim_names = b64,
         .dim_values = v64, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true,
         .stage_inputs = true},
        /* under a memory budget: the forward pass recomputed in segments for the backward pass */
        {.name = "gpt2_train_budget", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt32, .dim_values = vbt32,
         .ndims = 2, .set_names = mid, .set_values = mid_v, .nsets = 5, .int_range = 512, .use_graph = true,
         .train_step = true, .fuse = true, .memory_budget = (int64_t)(59.5 * 1048576)},
        /* GELU's backward matmul and the bias's gradient: the new parameters of plain SGD carry the
           gradients; 40 rows of 64 (not square: a sum over the wrong axis shows). By default the sums
           are a second product; then cuBLASLt's DGELU_BGRAD asked for, then asked for where (on the
           mock GPU) cuBLASLt has no algorithm for it */
        {.name = "mlp_gelu_train", .path = NETC_SOURCE_DIR "/tests/gpu/mlp_gelu.net", .dim_names = b64, .dim_values = v40,
         .ndims = 1, .int_range = 16, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
        {.name = "mlp_gelu_train_bgrad", .path = NETC_SOURCE_DIR "/tests/gpu/mlp_gelu.net", .dim_names = b64,
         .dim_values = v40, .ndims = 1, .int_range = 16, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true, .bgrad_epilogue = true},
        {.name = "mlp_gelu_train_no_bgrad", .path = NETC_SOURCE_DIR "/tests/gpu/mlp_gelu.net", .dim_names = b64,
         .dim_values = v40, .ndims = 1, .int_range = 16, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true, .bgrad_epilogue = true, .mock_refuse = "208"},
        /* the embedding's backward after cast hoisting: a scatter-add reading the bf16 gradient and
           storing its f32 sum (f32_result); the updated table carries it */
        {.name = "narrow_lm_train", .path = NETC_SOURCE_DIR "/tests/train/narrow_lm.net", .dim_names = b64,
         .dim_values = v64, .ndims = 1, .int_range = 256, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        /* an f32 embedding of 8 rows, each picked about 64 times: the step run twice gives the same
           bits (f32 atomic adds into the rows would not on a GPU, nor on the mock, whose launches of a
           kernel alternate between two orders of threads) */
        {.name = "embedding_train_same_bits", .source = embedding_source, .dim_names = b64, .dim_values = v64, .ndims = 1,
         .int_range = 8, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true, .same_bits = true},
        /* fused kernels reading through transposes and slices, forward and backward */
        {.name = "movement_train", .path = NETC_SOURCE_DIR "/tests/gpu/movement.net", .dim_names = b64, .dim_values = v2,
         .ndims = 1, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
        /* the forward attention kernel moving its softmax base in the middle of a row */
        {.name = "attention_jump", .path = NETC_SOURCE_DIR "/tests/gpu/attention_jump.net", .dim_names = bt, .dim_values = vbt70,
         .ndims = 2, .use_graph = true, .fuse = true},
        /* key lengths: none seen, part of a tile, all, past T (tests/gpu/attention_lengths.net) */
        {.name = "attention_lengths_train", .path = NETC_SOURCE_DIR "/tests/gpu/attention_lengths.net", .dim_names = b64,
         .dim_values = v4, .ndims = 1, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
        /* convolutions as a gather of pixel rows (nn.windows), their gradient a scatter-add in which
           each pixel is picked by up to 9 windows; 3 images, the padding's zero row among the picks */
        {.name = "fashion_cnn", .path = NETC_SOURCE_DIR "/examples/fashion_cnn.net", .dim_names = b64, .dim_values = v3,
         .ndims = 1, .int_range = 10, .use_graph = true, .fuse = true},
        {.name = "fashion_cnn_train", .path = NETC_SOURCE_DIR "/examples/fashion_cnn.net", .dim_names = b64,
         .dim_values = v3, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true, .same_bits = true},
        /* the pools with strides and paddings: max_pool2d's padding a row of -inf among the picks */
        {.name = "pools_train", .path = NETC_SOURCE_DIR "/tests/gpu/pools.net", .dim_names = b64, .dim_values = v3,
         .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
        /* batch norm: the training step assigns the running statistics (buffers), the forward pass reads them */
        {.name = "batch_norm", .path = NETC_SOURCE_DIR "/tests/gpu/batch_norm.net", .dim_names = b64, .dim_values = v5,
         .ndims = 1, .int_range = 4, .use_graph = true, .fuse = true},
        {.name = "batch_norm_train", .path = NETC_SOURCE_DIR "/tests/gpu/batch_norm.net", .dim_names = b64,
         .dim_values = v5, .ndims = 1, .int_range = 4, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        /* 40 channels: the column sums' kernels, the bias gradient's sum with the weight's */
        {.name = "batch_norm_wide_train", .path = NETC_SOURCE_DIR "/tests/gpu/batch_norm_wide.net", .dim_names = b64,
         .dim_values = v5, .ndims = 1, .int_range = 4, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        {.name = "gpt2_2layers_train_fused", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt, .dim_values = vbt,
         .ndims = 2, .set_names = small, .set_values = small_v, .nsets = 1, .int_range = 50304, .use_graph = true,
         .train_step = true, .fuse = true, .profile = true},
        /* sm_90a images: attention's heads of 64 multiply with wgmma from swizzled tiles (on the mock
           GPU, the shim's emulation; on a device other than sm_90 the source compiled for it) */
        {.name = "attention_jump_wgmma", .path = NETC_SOURCE_DIR "/tests/gpu/attention_jump.net", .dim_names = bt,
         .dim_values = vbt70, .ndims = 2, .use_graph = true, .fuse = true, .arch = "sm_90a"},
        {.name = "attention_lengths_train_wgmma", .path = NETC_SOURCE_DIR "/tests/gpu/attention_lengths.net", .dim_names = b64,
         .dim_values = v4, .ndims = 1, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true,
         .arch = "sm_90a"},
        /* GPT-2's blocks made small, heads of 64 and of 128 (a tile of 128 columns: two swizzled
           halves), over 80 positions: a whole tile and a part, every attention kernel */
        {.name = "gpt2_d64_train_wgmma", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt, .dim_values = vbt80,
         .ndims = 2, .set_names = small_gpt2, .set_values = d64_v, .nsets = 5, .int_range = 256, .use_graph = true,
         .train_step = true, .fuse = true, .arch = "sm_90a"},
        {.name = "gpt2_d128_train_wgmma", .path = NETC_SOURCE_DIR "/examples/gpt2.net", .dim_names = bt, .dim_values = vbt80,
         .ndims = 2, .set_names = small_gpt2, .set_values = d128_v, .nsets = 5, .int_range = 256, .use_graph = true,
         .train_step = true, .fuse = true, .arch = "sm_90a"},
        /* a gradient norm's sum spread over blocks: the same bits twice (the mock alternates the
           blocks' order), the norm and the clipped updates as on the CPU */
        {.name = "spread_norm_train_same_bits", .source = spread_norm_source, .dim_names = b64, .dim_values = v5, .ndims = 1,
         .use_graph = true, .train_step = true, .fuse = true, .check_updates = true, .same_bits = true},
        /* a residual network's step: each convolution's bias is followed by batch norm, which
           subtracts it again, so its gradient is 0 but for rounding on either side */
        {.name = "fashion_resnet_train", .path = NETC_SOURCE_DIR "/examples/fashion_resnet.net", .dim_names = b64,
         .dim_values = v2, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        {.name = "conv_bias_norm_train", .source = conv_bias_norm_source, .dim_names = b64, .dim_values = v3, .ndims = 1,
         .int_range = 4, .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
        {.name = "rotary_bases", .source = rotary_bases_source, .dim_names = b64, .dim_values = v2, .ndims = 1,
         .use_graph = true, .fuse = true},
        /* a ViT's step: patches by reshape and transpose, a class token broadcast and joined, unmasked attention */
        {.name = "fashion_vit_train", .path = NETC_SOURCE_DIR "/examples/fashion_vit.net", .dim_names = b64,
         .dim_values = v2, .ndims = 1, .int_range = 10, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        /* an encoder-decoder's step: cross-attention over 8 keys, the target a gather of the source reversed */
        {.name = "reverse_seq2seq_train", .path = NETC_SOURCE_DIR "/examples/reverse_seq2seq.net", .dim_names = b64,
         .dim_values = v3, .ndims = 1, .int_range = 256, .use_graph = true, .train_step = true, .fuse = true,
         .check_updates = true},
        {.name = "gru_joins_train", .source = gru_joins_source, .dim_names = b64, .dim_values = v3, .ndims = 1,
         .use_graph = true, .train_step = true, .fuse = true, .check_updates = true},
    };
    const char *only = getenv("NETC_GPU_CASE"), *seed_env = getenv("NETC_GPU_SEED");
    int fails = 0, runs = 0;
    for (size_t i = 0; i < sizeof models / sizeof models[0] && !getenv("NETC_RANDOM_PROGRAMS"); i++) {
        if (!selected(only, models[i].name)) continue;
        models[i].seed = seed_env ? strtoull(seed_env, NULL, 10) : 42 + i;
        runs++;
        int rc = gpu_check(&models[i]);
        if (rc == 77) { printf("no GPU: skipped\n"); return 77; }
        if (rc) fails++;
        else printf("ok %s\n", models[i].name);
    }
    /* checks that a wrong result is reported as it must be */
    static const struct { const char *name; int (*check)(void); } reports[] = {
        {"mismatch_report", check_mismatch_report},
        {"wrong_kernel_report", check_wrong_kernel},
    };
    for (size_t i = 0; i < sizeof reports / sizeof *reports; i++) {
        if (!selected(only, reports[i].name) || getenv("NETC_RANDOM_PROGRAMS")) continue;
        runs++;
        int rrc = reports[i].check();
        if (rrc == 77) { printf("no GPU: skipped\n"); return 77; }
        if (rrc) fails++;
        else printf("ok %s\n", reports[i].name);
    }
    int rc = check_random_programs(only, seed_env, &runs, &fails);
    if (rc == 77) { printf("no GPU: skipped\n"); return 77; }
    printf("%d passed, %d failed\n", runs - fails, fails);
    return fails != 0 || runs == 0;
}
