/* cli.c - netc's subcommands and their flags. Usage errors are one line on
 * stderr and exit code 2; compile errors exit 1. */
#include "cli.h"
#include "driver.h"
#include "passes.h"
#include "cuda_emit.h"
#include "cuda_compile.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define MAX_LIST 64

typedef struct cli_opts {
    const char *files[MAX_LIST];
    int nfiles;
    const char *output;
    const char *dim_names[MAX_LIST];
    int64_t dim_values[MAX_LIST];
    int ndims;
    const char *set_names[MAX_LIST];
    const char *set_values[MAX_LIST];
    int nsets;
    const char *disabled[MAX_LIST];
    int ndisabled;
    const char *dump_after;
    const char *model;
    bool werror;
    bool emit_cuda;
    const char *targets;           /* --target sm_80,sm_90 */
    char *owned[MAX_LIST * 2];     /* strings split off NAME=VALUE arguments */
    int nowned;
} cli_opts;

static int usage_error(const char *fmt, const char *arg)
{
    fprintf(stderr, "netc: ");
    fprintf(stderr, fmt, arg);
    fprintf(stderr, " (see netc --help)\n");
    return 2;
}

static void print_help(FILE *out)
{
    fprintf(out,
            "usage: netc <command> [options] FILE...\n"
            "\n"
            "commands:\n"
            "  check FILE...        parse and type-check; diagnostics only\n"
            "  build FILE           compile a model (and print the IR with --dump-ir)\n"
            "  help                 this text\n"
            "\n"
            "options:\n"
            "  --model NAME         which model of the file (default: the first)\n"
            "  --dim NAME=VALUE     bind a symbolic dimension at build time\n"
            "  --set NAME=VALUE     override a config constant\n"
            "  --dump-ir            print the final IR\n"
            "  --dump-ir=after:PASS print the IR after a pass (sema");
    for (int i = 0; i < pass_count; i++) fprintf(out, ", %s", pass_pipeline[i].name);
    fprintf(out, ")\n");
    for (int i = 0; i < pass_count; i++)
        fprintf(out, "  --no-%-15s skip: %s\n", pass_pipeline[i].name, pass_pipeline[i].what);
    fprintf(out,
            "  -Werror              treat warnings as errors\n"
            "  -o FILE              output file\n");
}

/* NAME=VALUE into two strings owned by o. */
static bool split_assign(cli_opts *o, const char *arg, const char **name, const char **value)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1] || o->nowned + 1 >= MAX_LIST * 2) return false;
    char *n = nc_xstrdup(arg);
    n[eq - arg] = 0;
    o->owned[o->nowned++] = n;
    *name = n;
    *value = n + (eq - arg) + 1;
    return true;
}

static int parse_args(int argc, char **argv, cli_opts *o)
{
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i];
        const char *next = i + 1 < argc ? argv[i + 1] : NULL;
        if (strcmp(a, "-o") == 0 || strcmp(a, "--dim") == 0 || strcmp(a, "--set") == 0 || strcmp(a, "--model") == 0) {
            if (!next) return usage_error("%s needs a value", a);
            i++;
            if (a[1] == 'o') o->output = next;
            else if (strcmp(a, "--model") == 0) o->model = next;
            else if (strcmp(a, "--dim") == 0) {
                const char *name, *value;
                char *end;
                if (o->ndims == MAX_LIST || !split_assign(o, next, &name, &value))
                    return usage_error("--dim wants NAME=VALUE, got '%s'", next);
                errno = 0;
                long long v = strtoll(value, &end, 10);
                if (*end || errno || v <= 0 || v > (1ll << 40))
                    return usage_error("--dim: '%s' is not a positive size", next);
                o->dim_names[o->ndims] = name;
                o->dim_values[o->ndims++] = v;
            } else {
                if (o->nsets == MAX_LIST || !split_assign(o, next, &o->set_names[o->nsets], &o->set_values[o->nsets]))
                    return usage_error("--set wants NAME=VALUE, got '%s'", next);
                o->nsets++;
            }
        } else if (strcmp(a, "--dump-ir") == 0) {
            o->dump_after = "";
        } else if (strncmp(a, "--dump-ir=after:", 16) == 0) {
            o->dump_after = a + 16;
            if (strcmp(o->dump_after, "sema") != 0 && !pass_find(o->dump_after))
                return usage_error("--dump-ir: no pass named '%s'", o->dump_after);
        } else if (strncmp(a, "--no-", 5) == 0 && pass_find(a + 5)) {
            if (o->ndisabled == MAX_LIST) return usage_error("too many %s flags", "--no-");
            o->disabled[o->ndisabled++] = a + 5;
        } else if (strcmp(a, "--emit-cuda") == 0) {
            o->emit_cuda = true;
        } else if (strcmp(a, "--target") == 0) {
            if (!next) return usage_error("%s needs a value, like sm_80,sm_90", a);
            o->targets = next;
            i++;
        } else if (strcmp(a, "-Werror") == 0) {
            o->werror = true;
        } else if (a[0] == '-' && a[1]) {
            return usage_error("unknown option '%s'", a);
        } else {
            if (o->nfiles == MAX_LIST) return usage_error("too many files (the limit is 64): %s", a);
            o->files[o->nfiles++] = a;
        }
    }
    return 0;
}

static void free_opts(cli_opts *o)
{
    for (int i = 0; i < o->nowned; i++) free(o->owned[i]);
}

static driver_opts to_driver(const cli_opts *o)
{
    return (driver_opts){
        .dim_names = o->dim_names, .dim_values = o->dim_values, .ndims = o->ndims,
        .set_names = o->set_names, .set_values = o->set_values, .nsets = o->nsets,
        .model = o->model, .verify = true, .dump_after = o->dump_after, .dump_out = stdout,
        .disabled_passes = o->disabled, .ndisabled = o->ndisabled,
    };
}

/* Load a source; on failure print one line and return 0. */
static uint32_t load(src_table *t, const char *path)
{
    char err[512];
    uint32_t id = src_load(t, path, err, sizeof err);
    if (!id) fprintf(stderr, "netc: %s\n", err);
    return id;
}

static int cmd_check(cli_opts *o)
{
    if (o->nfiles == 0) return usage_error("check: no input files%s", "");
    int failed = 0;
    driver_opts dopts = to_driver(o);
    for (int i = 0; i < o->nfiles; i++) {
        src_table t = {0};
        uint32_t id = load(&t, o->files[i]);
        if (!id) { failed = 1; continue; }
        diag_ctx d;
        diag_init(&d, &t, stderr);
        d.werror = o->werror;
        driver_check(&t, id, &dopts, &d);
        if (diag_failed(&d)) failed = 1;
        src_free(&t);
    }
    return failed;
}

/* Generate CUDA C for the graph and compile it with NVRTC for every target. */
static int build_kernels(const cli_opts *o, const ir_graph *g)
{
    nrt_program prog;
    char err[1024];
    if (!cuda_emit_program(g, &prog, err, sizeof err)) {
        fprintf(stderr, "netc: code generation failed: %s\n", err);
        return 1;
    }
    if (o->emit_cuda) fputs(prog.source, stdout);
    int rc = 0;
    if (nvrtc_available()) {
        char targets[256];
        snprintf(targets, sizeof targets, "%s", o->targets ? o->targets : "sm_80,sm_90,compute_90");
        for (char *save = NULL, *arch = strtok_r(targets, ",", &save); arch; arch = strtok_r(NULL, ",", &save)) {
            nvrtc_image img;
            char *log;
            if (!nvrtc_compile(prog.source, arch, &img, &log)) {
                fprintf(stderr, "netc: %s\n", log);
                free(log);
                rc = 1;
                break;
            }
            nvrtc_image_free(&img);
        }
    }
    nrt_program_free(&prog);
    return rc;
}

static int cmd_build(cli_opts *o)
{
    if (o->nfiles != 1) return usage_error("build: expects one .net file, got %s", o->nfiles ? "several" : "none");
    src_table t = {0};
    uint32_t id = load(&t, o->files[0]);
    if (!id) return 1;
    diag_ctx d;
    diag_init(&d, &t, stderr);
    d.werror = o->werror;
    driver_opts dopts = to_driver(o);
    ir_graph *g = driver_compile(&t, id, &dopts, &d);
    int rc = g && !diag_failed(&d) ? 0 : 1;
    if (rc == 0) rc = build_kernels(o, g);
    ir_graph_free(g);
    src_free(&t);
    return rc;
}

int cli_main(int argc, char **argv)
{
    if (argc < 2 || strcmp(argv[1], "--help") == 0 || strcmp(argv[1], "-h") == 0 || strcmp(argv[1], "help") == 0) {
        print_help(argc < 2 ? stderr : stdout);
        return argc < 2 ? 2 : 0;
    }
    cli_opts o = {0};
    int rc = parse_args(argc - 2, argv + 2, &o);
    if (rc) { free_opts(&o); return rc; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "check") == 0) rc = cmd_check(&o);
    else if (strcmp(cmd, "build") == 0) rc = cmd_build(&o);
    else rc = usage_error("unknown command '%s'", cmd);
    free_opts(&o);
    return rc;
}
