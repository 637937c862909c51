/* test_inspect.c - `netc inspect`'s report with measured times (--profile),
 * from times made up here, so the report is checked without a GPU: the
 * measured column, a batch's steps shown as part of its launch, the slowest
 * launches in order with their share, and the JSON keys. */
#include "cuda_emit.h"
#include "driver.h"
#include "inspect.h"
#include "module.h"

#include "test_util.h"
#include <jansson.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static char *report(const char *path, const char *const *dn, const int64_t *dv, int nd, bool json, const inspect_profile *prof)
{
    char *buf = NULL;
    size_t n = 0;
    FILE *f = open_memstream(&buf, &n);
    CHECK(inspect_module(path, NULL, dn, dv, nd, json, prof, f) == 0);
    fclose(f);
    return buf;
}

/* GPT-2 with one layer at 2 x 16 tokens, fused, written as a module file:
 * the training step, or the forward pass. */
typedef struct built {
    src_table src;
    ir_graph *g;
    nrt_module_data m;
    const char *path;
} built;

static bool build_gpt2(const char *example, bool train, const char *path, built *b)
{
    char err[1024];
    const char *sn[] = {"L"}, *sv[] = {"1"}, *dn[] = {"B", "T"};
    const int64_t dv[] = {2, 16};
    driver_opts o = {.verify = true, .train_step = train, .fuse = true, .set_names = sn, .set_values = sv, .nsets = 1,
                     .dim_names = dn, .dim_values = dv, .ndims = 2};
    *b = (built){.path = path};
    b->g = compile_file(example, &o, &b->src);
    if (!b->g) return false;
    b->m = (nrt_module_data){.graph = b->g, .nvrtc_version = 13000};
    CHECK(cuda_emit_program_ex(b->g, true, &b->m.program, err, sizeof err));
    CHECK(module_write(path, &b->m, err, sizeof err) == 0);
    return true;
}

static void built_free(built *b)
{
    remove(b->path);
    nrt_program_free(&b->m.program);
    ir_graph_free(b->g);
    src_free(&b->src);
}

/* An inference module: the prepare steps (bf16 weight copies, made once per
 * change of the parameters) are marked `once` and counted apart from the
 * per-run totals, measured or not. */
static void check_prepare_report(const char *example)
{
    built b;
    CHECK(build_gpt2(example, false, "test_inspect_forward.netm", &b));
    if (!b.g) return;
    const char *path = b.path;
    const nrt_program *p = &b.m.program;
    double *t = calloc(p->nsteps + 1, sizeof *t), per_run = 0;
    uint32_t *launch_of = nrt_program_launches(p), prepare = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        prepare += p->steps[k].prepare;
        if (launch_of[k] == k) t[k] = 1e-6, per_run += p->steps[k].prepare ? 0 : 1e-6;
    }
    inspect_profile prof = {.step_seconds = t, .device = "a made-up GPU", .runs = 3};
    char *js = report(path, NULL, NULL, 0, true, &prof), *text = report(path, NULL, NULL, 0, false, NULL);
    json_error_t je;
    json_t *j = js ? json_loads(js, 0, &je) : NULL;
    CHECK(prepare > 0 && j != NULL && text && strstr(text, "once per change of the parameters") && strstr(text, "  once\n"));
    if (j) {
        json_t *steps = json_object_get(j, "steps");
        double run_bytes = 0, prep_bytes = 0;
        uint32_t marked = 0;
        for (size_t i = 0; i < json_array_size(steps); i++) {
            json_t *st = json_array_get(steps, i);
            bool once = json_is_true(json_object_get(st, "prepare"));
            marked += once;
            *(once ? &prep_bytes : &run_bytes) += json_real_value(json_object_get(st, "bytes"));
        }
        CHECK(marked == prepare && json_integer_value(json_object_get(j, "prepare_steps")) == prepare);
        /* the loss's two kernels: the row losses go over the logits, their mean over the rows only */
        double rows_flops = 0, mean_flops = -1;
        for (size_t i = 0; i < json_array_size(steps); i++) {
            json_t *st = json_array_get(steps, i);
            const char *name = json_string_value(json_object_get(st, "name"));
            if (strcmp(json_string_value(json_object_get(st, "op")), "cross_entropy") != 0) continue;
            *(strstr(name, "_mean") ? &mean_flops : &rows_flops) = json_real_value(json_object_get(st, "flops"));
        }
        CHECK(rows_flops > 0 && mean_flops >= 0 && mean_flops * 100 < rows_flops);
        CHECK(fabs(json_real_value(json_object_get(j, "total_bytes_moved")) - run_bytes) < 1 && prep_bytes > 0);
        CHECK(fabs(json_real_value(json_object_get(j, "prepare_bytes")) - prep_bytes) < 1);
        CHECK(fabs(json_real_value(json_object_get(j, "measured_us")) - per_run * 1e6) < 1e-6);
        /* what a session holds: the arena and what the runtime allocates beside it (no staging in inference) */
        CHECK(json_integer_value(json_object_get(j, "session_bytes")) ==
              json_integer_value(json_object_get(j, "peak_memory_bytes")) + nrt_program_side_bytes(p, 0));
        printf("forward: %u prepare steps, %.0f bytes once, %.0f bytes a run\n", prepare, prep_bytes, run_bytes);
        json_decref(j);
    }
    free(js);
    free(text);
    free(t);
    free(launch_of);
    built_free(&b);
}

/* examples/fashion_resnet.net's training step at B = 8: its largest
 * concat of sums moves ~1 MB (0.4 us by bytes), but a 3x3x64x64 conv
 * weight's 36,864 squares gave a block's 8 warps 4,608 each at ~2.4 ns an
 * element: the floor showed the ~11 us the bytes hide. The step's three
 * concats of sums are now spread over blocks (72 warps for that weight, 512
 * elements each: ~1.2 us; the third's 8,192-element parts 16 warps of 512,
 * not 4 of 2,048, ~4.9 us, since its second kernel shares the others'
 * launch). */
static void check_joined_sums_floor(const char *root)
{
    char example[1024], err[1024];
    snprintf(example, sizeof example, "%s/examples/fashion_resnet.net", root);
    const char *dn[] = {"B"};
    const int64_t dv[] = {8};
    driver_opts o = {.verify = true, .train_step = true, .fuse = true, .dim_names = dn, .dim_values = dv, .ndims = 1};
    built b = {.path = "test_inspect_resnet.netm"};
    b.g = compile_file(example, &o, &b.src);
    CHECK(b.g != NULL);
    if (!b.g) return;
    b.m = (nrt_module_data){.graph = b.g, .nvrtc_version = 13000};
    CHECK(cuda_emit_program_ex(b.g, true, &b.m.program, err, sizeof err));
    CHECK(module_write(b.path, &b.m, err, sizeof err) == 0);
    char *js = report(b.path, NULL, NULL, 0, true, NULL);
    json_error_t je;
    json_t *j = js ? json_loads(js, 0, &je) : NULL, *steps = json_object_get(j, "steps");
    double most = 0, most_bytes = 0, largest = 0, largest_floor = 0;
    for (size_t i = 0; i < json_array_size(steps); i++) {
        json_t *st = json_array_get(steps, i);
        if (!strstr(json_string_value(json_object_get(st, "name")), "_concat_sums")) continue;
        double floor_us = json_real_value(json_object_get(st, "floor_us")), bytes = json_real_value(json_object_get(st, "bytes"));
        if (floor_us > most) most = floor_us, most_bytes = bytes;
        if (bytes > largest) largest = bytes, largest_floor = floor_us;
    }
    printf("fashion_resnet step: the slowest concat of sums %.2f us (%.0f bytes); the largest %.2f us (%.0f bytes)\n", most,
           most_bytes, largest_floor, largest);
    CHECK(most_bytes > 0 && most > 1 && most < 1.5);
    CHECK(largest > 1e6 && largest_floor > 1 && largest_floor < 1.5);
    json_decref(j);
    free(js);
    built_free(&b);
}

/* A one-model module written to b->path from a source file named net (its
 * name is what the tests are about): whether it was built. */
static bool build_named(const char *net, built *b)
{
    char err[1024];
    FILE *f = fopen(net, "w");
    CHECK(f != NULL);
    if (!f) return false;
    fputs("model m(x: f32[B, 4]) -> f32[B, 4] {\n  return relu(x) * 2.0\n}\n", f);
    fclose(f);
    driver_opts o = {.verify = true, .fuse = true};
    b->g = compile_file(net, &o, &b->src);
    remove(net);
    CHECK(b->g != NULL);
    if (!b->g) return false;
    b->m = (nrt_module_data){.graph = b->g, .nvrtc_version = 13000};
    CHECK(cuda_emit_program_ex(b->g, true, &b->m.program, err, sizeof err));
    CHECK(module_write(b->path, &b->m, err, sizeof err) == 0);
    return true;
}

/* A source file's name and the entry points' names are shown whole: the
 * step's "source" and the list of entry points (in 96 and 256 bytes, they
 * were cut silently; an entry's name is at most 64 bytes, 5 of them 300). */
static void check_long_names(void)
{
    char net[260], entry[5][61], err[1024];
    snprintf(net, sizeof net, "test_inspect_%0200d.net", 0);
    for (int k = 0; k < 5; k++) memset(entry[k], 'a' + k, 60), entry[k][60] = 0;
    built b = {.path = "test_inspect_long.netm"};
    if (!build_named(net, &b)) return;
    for (int k = 0; k < 5; k++) {
        nrt_module_data sub;
        CHECK(module_read("test_inspect_long.netm", &sub, err, sizeof err) == 0);
        module_add_entry(&b.m, entry[k], &sub);
    }
    CHECK(module_write(b.path, &b.m, err, sizeof err) == 0);
    char *js = report(b.path, NULL, NULL, 0, true, NULL);
    json_error_t je;
    json_t *j = js ? json_loads(js, 0, &je) : NULL, *steps = json_object_get(j, "steps"), *entries = json_object_get(j, "entry_points");
    char want[300];
    snprintf(want, sizeof want, "%s:2", net);
    CHECK(json_array_size(steps) > 0 && !strcmp(json_string_value(json_object_get(json_array_get(steps, 0), "source")), want));
    CHECK(json_array_size(entries) == 6);
    for (int k = 0; k < 5 && json_array_size(entries) == 6; k++) CHECK(!strcmp(json_string_value(json_array_get(entries, k + 1)), entry[k]));
    json_decref(j);
    free(js);
    for (uint32_t k = 0; k < b.m.nentries; k++) {
        module_data_free(&b.m.entries[k].data);
        free(b.m.entries[k].name);
    }
    free(b.m.entries);
    built_free(&b);
}

/* Names that are not UTF-8 (a source file's name in Latin-1, an entry
 * point's name in a module made elsewhere) are shown with U+FFFD for each
 * byte that is not: jansson refuses such a string, and the step it was in,
 * every kernel's step, left the JSON silently (3 of fashion_mlp's 4 steps
 * and no kernel, from a file named "mlp\xff.net"). */
static void check_not_utf8(void)
{
    const char *net = "test_inspect_\xff\xe9.net";
    char err[1024];
    built b = {.path = "test_inspect_utf8.netm"};
    if (!build_named(net, &b)) return;
    nrt_module_data sub;
    CHECK(module_read(b.path, &sub, err, sizeof err) == 0);
    module_add_entry(&b.m, "e\xc3(", &sub);   /* a lead byte without its continuation */
    CHECK(module_write(b.path, &b.m, err, sizeof err) == 0);
    char *js = report(b.path, NULL, NULL, 0, true, NULL);
    json_error_t je;
    json_t *j = js ? json_loads(js, 0, &je) : NULL, *steps = json_object_get(j, "steps");
    const char *src = json_string_value(json_object_get(json_array_get(steps, 0), "source"));
    const char *second = json_string_value(json_array_get(json_object_get(j, "entry_points"), 1));
    CHECK(j != NULL && json_array_size(steps) == b.m.program.nsteps && b.m.program.nsteps > 0);
    CHECK(json_array_size(json_object_get(j, "kernels")) == b.m.program.nkernels);
    CHECK(src && !strcmp(src, "test_inspect_\xef\xbf\xbd\xef\xbf\xbd.net:2"));
    CHECK(second && !strcmp(second, "e\xef\xbf\xbd("));
    json_decref(j);
    free(js);
    free(b.m.entries[0].name);
    module_data_free(&b.m.entries[0].data);
    free(b.m.entries);
    built_free(&b);
}

int main(int argc, char **argv)
{
    check_long_names();
    check_not_utf8();
    const char *root = argc > 1 ? argv[1] : ".";
    char example[1024];
    snprintf(example, sizeof example, "%s/examples/gpt2.net", root);
    built b;
    if (!build_gpt2(example, true, "test_inspect.netm", &b)) return 1;
    const char *path = b.path;

    /* made-up times: 1 us at each launch, 100 us at the second batch's (of a run's, not the
     * parameters' copies'), none inside batches */
    const nrt_program *p = &b.m.program;
    uint32_t *launch_of = nrt_program_launches(p), batches = 0, slow = UINT32_MAX, member = UINT32_MAX;
    double *t = calloc(p->nsteps + 1, sizeof *t), total = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        if (launch_of[k] != k) {
            member = member == UINT32_MAX ? k : member;
            continue;
        }
        t[k] = 1e-6;
        if (p->steps[k].prepare) continue;   /* the parameters' copies: not every run's, not in the measured run */
        if (p->steps[k].batch >= 2 && ++batches == 2) slow = k, t[k] = 100e-6;
        total += t[k];
    }
    CHECK(slow != UINT32_MAX && member != UINT32_MAX);
    inspect_profile prof = {.step_seconds = t, .device = "a made-up GPU", .runs = 7};

    char *text = report(path, NULL, NULL, 0, false, &prof);
    if (getenv("NETC_TEST_SHOW") && text) fputs(text, stdout);
    CHECK(text && strstr(text, "measured us") && strstr(text, "'s launch)") && strstr(text, "a made-up GPU"));
    const char *slowest = text ? strstr(text, "slowest launches:") : NULL;
    CHECK(slowest != NULL);
    if (slowest) {   /* the made-up slow batch first, with its share of the run */
        char first[64], share[32];
        snprintf(first, sizeof first, "\n%-4u k_batch_step%u", slow, slow);
        snprintf(share, sizeof share, "%.1f%%", 100 * 100e-6 / total);
        const char *row = strstr(slowest, first);
        const char *header_end = strchr(strchr(slowest, '\n') + 1, '\n');
        CHECK(row == header_end);
        CHECK(row && strstr(row, share) && strstr(row, share) < strchr(row + 1, '\n'));
        CHECK(strstr(slowest, "(median of 7 runs") == NULL && strstr(text, "median of 7 runs each"));
    }
    free(text);

    char *js = report(path, NULL, NULL, 0, true, &prof);
    json_error_t je;
    json_t *j = js ? json_loads(js, 0, &je) : NULL;
    CHECK(j != NULL);
    if (j) {
        CHECK(fabs(json_real_value(json_object_get(j, "measured_us")) - total * 1e6) < 1e-6);
        CHECK(strcmp(json_string_value(json_object_get(j, "profile_device")), "a made-up GPU") == 0);
        json_t *steps = json_object_get(j, "steps");
        CHECK(json_array_size(steps) == p->nsteps);
        CHECK(json_is_null(json_object_get(json_array_get(steps, member), "measured_us")));
        CHECK(fabs(json_real_value(json_object_get(json_array_get(steps, slow), "measured_us")) - 100) < 1e-9);
        json_decref(j);
    }
    free(js);

    /* without --profile: no measured column, keys or section; the batches still shown as launches */
    char *plain = report(path, NULL, NULL, 0, false, NULL);
    char one_launch[64], in_launch[64];
    snprintf(one_launch, sizeof one_launch, "(one launch: steps %u-%u)", slow, slow + p->steps[slow].batch - 1u);
    snprintf(in_launch, sizeof in_launch, "(in step %u's launch)", launch_of[member]);
    CHECK(plain && !strstr(plain, "measured") && !strstr(plain, "slowest launches"));
    CHECK(plain && strstr(plain, one_launch) && strstr(plain, in_launch));
    free(plain);
    js = report(path, NULL, NULL, 0, true, NULL);
    j = js ? json_loads(js, 0, &je) : NULL;
    CHECK(j && json_integer_value(json_object_get(json_array_get(json_object_get(j, "steps"), member), "launch_step")) == launch_of[member]);
    json_decref(j);
    free(js);

    check_prepare_report(example);
    check_joined_sums_floor(root);
    printf("test_inspect: %u steps, %u batches, the report %s\n", p->nsteps, batches, failures ? "differs" : "as expected");
    free(t);
    free(launch_of);
    built_free(&b);
    return failures != 0;
}
