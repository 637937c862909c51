/* cli.c - netc's subcommands and their flags. Usage errors are one line on
 * stderr and exit code 2; compile errors exit 1. */
#include "cli.h"
#include "atomic_file.h"
#include "autodiff.h"
#include "driver.h"
#include "passes.h"
#include "cuda_emit.h"
#include "cuda_compile.h"
#include "inspect.h"
#include "train_cmd.h"
#include "module.h"
#include "netrt.h"
#include "tensor_io.h"
#include "mem_budget.h"

#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <stdarg.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAX_LIST 64
#define CLI_OPTIONS_MOST 48   /* the options of cli_options, at most */

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
    const char *first_pass_off;    /* the first --no-PASS as given */
    const char *dump_after;
    bool report;                   /* --report: the optimizer's decisions */
    bool no_memplan;               /* --no-memplan: no buffer sharing (to measure what the plan saves) */
    bool no_fuse;                  /* --no-fuse: one kernel per op (fusion is on by default) */
    const char *model;
    bool werror;
    bool emit_cuda;
    bool json;
    const char *targets;           /* --target sm_80,sm_90a */
    const char *inputs[MAX_LIST];  /* --input NAME=FILE.npy */
    const char *input_files[MAX_LIST];
    int ninputs;
    const char *outdir;
    const char *weights;
    const char *device;
    const char *entry;             /* --entry forward|train */
    long long random_inputs;       /* --random-inputs SEED, -1 = off */
    int profile_runs;              /* inspect --profile [N]: measure each launch N times on the GPU (0: no) */
    train_opts train;              /* netc train */
    const struct cli_option *given[CLI_OPTIONS_MOST];   /* each table option's slot (option_slot) as given last; NULL: not given */
    const char *given_value[CLI_OPTIONS_MOST];   /* and its value (NULL: none) */
    char *owned[MAX_LIST * 3];     /* strings split off NAME=VALUE arguments */
    int nowned;
} cli_opts;

static int usage_error(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
static int usage_error(const char *fmt, ...)
{
    va_list ap;
    va_start(ap, fmt);
    fprintf(stderr, "netc: ");
    vfprintf(stderr, fmt, ap);
    fprintf(stderr, " (see netc --help)\n");
    va_end(ap);
    return 2;
}

#define TARGETS_MOST 16   /* build_kernels' images */

#define TARGETS_TEXT 256   /* a --target list's characters, its NUL among them */

/* A --target list's names, cut at every comma in copy (of TARGETS_TEXT):
 * how many (none for ""), or -1 past TARGETS_MOST. Not strtok: "sm_80,,sm_90"
 * has an empty name, which strtok would pass over. */
static int split_targets(const char *list, char *copy, const char *archs[TARGETS_MOST])
{
    int n = 0;
    snprintf(copy, TARGETS_TEXT, "%s", list);
    for (char *arch = *copy ? copy : NULL, *comma; arch; arch = comma ? comma + 1 : NULL) {
        if ((comma = strchr(arch, ','))) *comma = 0;
        if (n == TARGETS_MOST) return -1;
        archs[n++] = arch;
    }
    return n;
}

/* Every architecture of a --target list NVRTC compiles for; else says which
 * is not, with what NVRTC knows. */
static bool bad_target(const char *list)
{
    char copy[TARGETS_TEXT], err[512];
    const char *archs[TARGETS_MOST];
    if (strlen(list) >= sizeof copy) return usage_error("--target: the list is too long (%zu characters)", strlen(list)), true;
    int n = split_targets(list, copy, archs);
    for (int k = 0; k < (n < 0 ? TARGETS_MOST : n); k++) {
        const char *arch = archs[k];
        if (!*arch) return usage_error("--target: an empty name in the list '%s'", list), true;
        for (int i = 0; i < k; i++)
            if (!strcmp(archs[i], arch)) return usage_error("--target: %s is in the list '%s' twice", arch, list), true;
        if (!nvrtc_target_ok(arch, err, sizeof err)) {
            fprintf(stderr, "netc: --target: %s\n", err);
            return true;
        }
    }
    return n < 0 && (usage_error("--target: more than %d targets in '%s'", TARGETS_MOST, list), true);
}

/* '-' as a file: netc reads and writes named files only (a file named '-'
 * is ./-); what is an option's value (e.g. -o) or a command's file. */
static int stdio_refused(const char *what)
{
    return usage_error("%s%s'-': netc reads and writes named files, not standard input or output; ./- names a file '-'", what,
                       *what ? " " : "");
}

/* File names are joined with others (D/checkpoint.safetensors, DIR/NAME.npy)
 * in buffers of PATH_MAX and shown in messages of 1 KiB: a longer one
 * would be cut there, a file of another name written or a reason lost, so
 * it is refused before any work. what: the option, or "" for a command's file. */
#define PATH_MOST 960

static bool path_too_long(const char *what, const char *path)
{
    size_t n = strlen(path);
    if (n <= PATH_MOST) return false;
    usage_error("%s%s%.40s...: a name of %zu bytes; netc takes file names of up to %d bytes", what, *what ? " " : "", path, n, PATH_MOST);
    return true;
}

/* An output (option out) that names a file the command reads (in, said as
 * what): writing it would destroy what was read (netc build m.net -o m.net
 * wrote the module over its source). 0, or usage_error's status. */
static int refuse_overwrite(const char *option, const char *out, const char *in, const char *what)
{
    struct stat a, b;
    if (!out || !in || stat(out, &a) != 0 || stat(in, &b) != 0 || a.st_dev != b.st_dev || a.st_ino != b.st_ino) return 0;
    return usage_error("%s %s is %s, which this command reads: give another file name", option, out, what);
}

/* An output (option out) that is a file netc train reads from the --data
 * directory data: a data set's (train_x.npy, train-images-idx3-ubyte, ...)
 * or, as a directory of text reads them, one named without a '.'
 * (--metrics data/train-images-idx3-ubyte wrote the metrics over the images). */
static int refuse_data_file(const char *option, const char *out, const char *data)
{
    static const char *const names[] = {"train_x.npy", "train_y.npy", "test_x.npy", "test_y.npy",
                                        "train-images-idx3-ubyte.gz", "train-labels-idx1-ubyte.gz",
                                        "t10k-images-idx3-ubyte.gz", "t10k-labels-idx1-ubyte.gz"};
    struct stat d, f, p;
    if (!out || !data || stat(data, &d) != 0 || !S_ISDIR(d.st_mode) || stat(out, &f) != 0 || !S_ISREG(f.st_mode)) return 0;
    char parent[PATH_MOST + 8];
    snprintf(parent, sizeof parent, "%s", out);
    char *slash = strrchr(parent, '/');
    const char *base = slash ? out + (slash - parent) + 1 : out;
    if (slash) slash == parent ? (void)(parent[1] = 0) : (void)(*slash = 0);
    if (stat(slash ? parent : ".", &p) != 0 || p.st_dev != d.st_dev || p.st_ino != d.st_ino) return 0;
    bool read = !strchr(base, '.');
    for (size_t i = 0; i < NC_COUNT(names); i++) read |= !strcmp(base, names[i]);
    return read ? usage_error("%s %s is a file of the --data directory, which this command reads: give another file name", option, out) : 0;
}

/* --accumulate: more micro-batches than this would each be a fraction of a sample. */
#define ACCUMULATE_MOST 65536

/* A count from low to high, written in decimal digits only: strtoull alone
 * would also take a sign, leading spaces and "-1" as 2^64 - 1. */
static bool parse_count(const char *text, uint64_t low, uint64_t high, uint64_t *value)
{
    if (!(text[0] >= '0' && text[0] <= '9')) return false;
    char *end;
    errno = 0;
    unsigned long long n = strtoull(text, &end, 10);
    if (*end || errno || n < low || n > high) return false;
    *value = n;
    return true;
}

/* NAME=VALUE into two strings owned by o. */
static bool split_assign(cli_opts *o, const char *arg, const char **name, const char **value)
{
    const char *eq = strchr(arg, '=');
    if (!eq || eq == arg || !eq[1]) return false;
    NC_ASSERT(o->nowned < MAX_LIST * 3);   /* one for each --dim, --set and --input, MAX_LIST of each */
    char *n = nc_xstrdup(arg);
    n[eq - arg] = 0;
    o->owned[o->nowned++] = n;
    *name = n;
    *value = n + (eq - arg) + 1;
    return true;
}

/* Whether name is among the first n of names: a NAME=VALUE option given
 * twice for one name is a mistake (which one was meant is unknown). */
static bool name_given(const char *const *names, int n, const char *name)
{
    for (int i = 0; i < n; i++)
        if (strcmp(names[i], name) == 0) return true;
    return false;
}

/* The options whose values need more than a store: each checks its value
 * and returns 0, or usage_error's exit status. */
static int opt_dim(cli_opts *o, const char *v)
{
    const char *name, *value;
    uint64_t n;
    if (o->ndims == MAX_LIST) return usage_error("at most %d --dim options", MAX_LIST);
    if (!split_assign(o, v, &name, &value)) return usage_error("--dim wants NAME=VALUE, got '%s'", v);
    if (name_given(o->dim_names, o->ndims, name)) return usage_error("--dim %s is given twice", name);
    if (!parse_count(value, 1, (uint64_t)DIM_MAX_NUMEL, &n)) return usage_error("--dim %s: '%s' is not a size from 1 to 2^40", name, value);
    o->dim_names[o->ndims] = name;
    o->dim_values[o->ndims++] = (int64_t)n;
    return 0;
}

static int opt_config(cli_opts *o, const char *v)
{
    if (o->nsets == MAX_LIST) return usage_error("at most %d --set options", MAX_LIST);
    if (!split_assign(o, v, &o->set_names[o->nsets], &o->set_values[o->nsets]))
        return usage_error("--set wants NAME=VALUE, got '%s'", v);
    driver_set_value unused;
    const char *name = o->set_names[o->nsets], *value = o->set_values[o->nsets], *problem = driver_set_value_parse(value, &unused);
    if (name_given(o->set_names, o->nsets, name)) return usage_error("--set %s is given twice", name);
    if (problem) return usage_error("--set %s=%s: %s", name, value, problem);
    o->nsets++;
    return 0;
}

static int opt_input(cli_opts *o, const char *v)
{
    if (o->ninputs == MAX_LIST) return usage_error("at most %d --input options", MAX_LIST);
    if (!split_assign(o, v, &o->inputs[o->ninputs], &o->input_files[o->ninputs]))
        return usage_error("--input wants NAME=FILE.npy, got '%s'", v);
    if (name_given(o->inputs, o->ninputs, o->inputs[o->ninputs])) return usage_error("--input %s is given twice", o->inputs[o->ninputs]);
    if (!strcmp(o->input_files[o->ninputs], "-")) return stdio_refused("--input");
    if (path_too_long("--input", o->input_files[o->ninputs])) return 2;
    o->ninputs++;
    return 0;
}

static int opt_no_fuse(cli_opts *o, const char *v)
{
    (void)v;
    o->no_fuse = o->train.no_fuse = true;
    return 0;
}

static int opt_no_chunk_loss(cli_opts *o, const char *v)
{
    (void)v;
    o->train.loss_slices = 1;
    return 0;
}

static int opt_loss_slices(cli_opts *o, const char *v)
{
    uint64_t n;
    if (!parse_count(v, 1, LOSS_SLICES_MOST, &n)) return usage_error("--loss-slices wants a count from 1 to %d, got '%s'", LOSS_SLICES_MOST, v);
    o->train.loss_slices = (int)n;
    return 0;
}

static int opt_accumulate(cli_opts *o, const char *v)
{
    uint64_t n;
    if (!parse_count(v, 1, ACCUMULATE_MOST, &n))
        return usage_error("--accumulate wants a count of micro-batches from 1 to %d, got '%s'", ACCUMULATE_MOST, v);
    o->train.accumulate = (int64_t)n;
    return 0;
}

static int opt_memory_budget(cli_opts *o, const char *v)
{
    return mem_budget_parse(v, &o->train.memory_budget) ? 0
                                                         : usage_error("--memory-budget wants a size such as 4GiB or 512MiB, got '%s'", v);
}

static int opt_entry(cli_opts *o, const char *v)
{
    if (strcmp(v, "forward") && strcmp(v, "train")) return usage_error("--entry is forward or train, not '%s'", v);
    o->entry = v;
    return 0;
}

static int opt_device(cli_opts *o, const char *v)
{
    if (strcmp(v, "cpu") && strcmp(v, "gpu") && strcmp(v, "auto")) return usage_error("--device is cpu, gpu or auto, not '%s'", v);
    o->device = v;
    return 0;
}

static int opt_random_inputs(cli_opts *o, const char *v)
{
    uint64_t seed;
    if (!parse_count(v, 0, INT64_MAX, &seed)) return usage_error("--random-inputs wants a seed (a non-negative integer), got '%s'", v);
    o->random_inputs = (long long)seed;
    return 0;
}

static int opt_seed(cli_opts *o, const char *v)
{
    if (!parse_count(v, 0, UINT64_MAX, &o->train.seed)) return usage_error("--seed needs a non-negative integer, got '%s'", v);
    return 0;
}

static int opt_lr(cli_opts *o, const char *v)
{
    driver_set_value n;   /* written as --set takes numbers: no hex, inf or nan */
    bool number = !driver_set_value_parse(v, &n) && n.kind != DRIVER_SET_BOOL;
    double lr = !number ? 0 : n.kind == DRIVER_SET_INT ? (double)n.i : n.f;
    if (!number || !(lr > 0 && lr <= 1e3)) return usage_error("--lr needs a number in (0, 1000], got '%s'", v);
    o->train.lr = lr;
    return 0;
}

static int opt_profile(cli_opts *o, const char *v)   /* v: an optional run count */
{
    o->profile_runs = 20;
    if (!v) return 0;
    uint64_t runs;
    if (!parse_count(v, 1, 10000, &runs)) return usage_error("--profile takes a run count from 1 to 10000, got '%s'", v);
    o->profile_runs = (int)runs;
    return 0;
}

static int opt_target(cli_opts *o, const char *v)
{
    if (bad_target(v)) return 2;
    o->targets = v;
    return 0;
}

/* Every option: what it sets, whether a value follows it, and its line of
 * `netc help`. */
typedef enum { OPT_FLAG, OPT_TEXT, OPT_COUNT, OPT_FN, OPT_FN_VALUE, OPT_FN_OPTIONAL_COUNT } opt_kind;

/* The commands that take options, as bits of cli_option.commands. */
enum { CMD_CHECK = 1, CMD_BUILD = 2, CMD_RUN = 4, CMD_INSPECT = 8, CMD_TRAIN = 16 };
static const char *const command_names[] = {"check", "build", "run", "inspect", "train"};
/* The options outside the table, from the pass pipeline: --dump-ir[=after:PASS]
 * and --no-PASS (train compiles too, but prints no IR). */
enum { DUMP_IR_COMMANDS = CMD_CHECK | CMD_BUILD, PASS_OFF_COMMANDS = CMD_CHECK | CMD_BUILD | CMD_TRAIN };

/* cmd's bit; 0 for a command without options (or none: its error comes later) */
static unsigned command_bit(const char *cmd)
{
    for (size_t i = 0; i < NC_COUNT(command_names); i++)
        if (strcmp(cmd, command_names[i]) == 0) return 1u << i;
    return 0;
}

/* The commands of a CMD_* set as a list into buf: "build, run" with sep ", "
 * between all, or "build and run" with last " and ". */
static const char *command_list(unsigned commands, const char *last, char *buf, size_t size)
{
    size_t len = 0;
    int n = 0, total = __builtin_popcount(commands);
    buf[0] = 0;
    for (size_t i = 0; i < NC_COUNT(command_names); i++) {
        if (!(commands & (1u << i))) continue;
        n++;
        len += (size_t)snprintf(buf + len, size - len, "%s%s", n == 1 ? "" : n == total ? last : ", ", command_names[i]);
    }
    return buf;
}

/* An option the command does not read would be ignored without a word
 * (netc run --epochs 2): a usage error naming the commands it is for. */
static int refuse_for_command(const char *option, unsigned commands, const char *cmd)
{
    char list[64];
    return usage_error("netc %s does not take %s: it is an option of %s", cmd, option, command_list(commands, " and ", list, sizeof list));
}

typedef struct cli_option {
    const char *name;
    opt_kind kind;
    size_t field;   /* offsetof(cli_opts, ...): OPT_FLAG a bool, OPT_TEXT a const char *, OPT_COUNT an int64_t */
    int least;      /* OPT_COUNT: the smallest value that means what it says */
    int (*set)(cli_opts *o, const char *value);   /* OPT_FN*: value NULL for OPT_FN, or an optional count left out */
    const char *wants;                            /* what the value is, for "needs ..." */
    const char *arg;                              /* the value in the help, "NAME=VALUE"; NULL for none */
    unsigned commands;                            /* CMD_*: the commands that read it; any other refuses it */
    const char *help;                             /* what it does: lines (the help adds the commands) */
} cli_option;

/* A field of the wrong type for its kind does not compile (no _Generic association). */
#define FIELD(f, type) _Generic(((cli_opts *)0)->f, type: offsetof(cli_opts, f))
#define FLAG(cmds, n, f, help) {n, OPT_FLAG, FIELD(f, bool), 0, NULL, NULL, NULL, cmds, help}
#define TEXT(cmds, n, f, w, arg, help) {n, OPT_TEXT, FIELD(f, const char *), 0, NULL, w, arg, cmds, help}
#define COUNT(cmds, n, f, least, arg, help) {n, OPT_COUNT, FIELD(f, int64_t), least, NULL, NULL, arg, cmds, help}
#define CALL(cmds, n, fn, help) {n, OPT_FN, 0, 0, fn, NULL, NULL, cmds, help}
#define CALL_WITH(cmds, n, fn, w, arg, help) {n, OPT_FN_VALUE, 0, 0, fn, w, arg, cmds, help}

static const cli_option cli_options[] = {
    TEXT(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--model", model, "a model's name", "NAME", "which model of the file (default: the first; check: every model)"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_RUN | CMD_INSPECT | CMD_TRAIN, "--dim", opt_dim, "NAME=VALUE", "NAME=VALUE", "bind a symbolic dimension"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--set", opt_config, "NAME=VALUE", "NAME=VALUE", "override a config constant: a decimal number, true or false"),
    CALL_WITH(CMD_BUILD | CMD_TRAIN, "--target", opt_target, "a list of targets, like sm_80,sm_90a", "LIST",
              "NVRTC targets (default sm_80,sm_90a,compute_90: sm_90a is the "
              "Hopper image, with wgmma attention); train: one target "
              "(default: the device's own architecture)"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_RUN | CMD_INSPECT, "--entry", opt_entry, "forward or train", "forward|train",
              "build: the forward pass only, or the training step only (default: "
              "forward, plus a train entry point when the model has a train section); "
              "run, inspect: which entry point of the module (default forward)"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--accumulate", opt_accumulate, "a count of micro-batches", "N",
              "N micro-batches per optimizer step (build: to its training step, built unless --entry forward)"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--memory-budget", opt_memory_budget, "a size such as 4GiB or 512MiB", "SIZE",
              "recompute forward values until the training step's planned "
              "peak fits SIZE (4GiB, 512MiB; all dims bound; build: to its training step, built unless "
              "--entry forward)"),
    FLAG(CMD_BUILD, "--emit-cuda", emit_cuda, "print the generated CUDA C"),
    CALL(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--no-fuse", opt_no_fuse, "one kernel per op: no elementwise fusion"),
    FLAG(CMD_BUILD, "--no-memplan", no_memplan, "give every buffer its own memory: what the plan saves"),
    CALL_WITH(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--loss-slices", opt_loss_slices, "a count from 1 to 8", "N",
              "compute a large-vocabulary cross entropy and its logits in N "
              "slices of the rows, each with its backward (1-8; default: as few "
              "as keep a slice's logits within 512 MiB, 8 under --memory-budget)"),
    CALL(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "--no-chunk-loss", opt_no_chunk_loss, "the same as --loss-slices 1"),
    FLAG(CMD_CHECK | CMD_BUILD, "--report", report,
         "print the optimizer's decisions: casts moved and the bytes they "
         "save, values merged or dropped, what is recomputed, with source lines"),
    FLAG(CMD_CHECK | CMD_BUILD | CMD_TRAIN, "-Werror", werror,
         "treat warnings as errors, netc's own about the command line too (exit status 2)"),
    TEXT(CMD_BUILD, "-o", output, "a file name", "FILE", "the module file to write"),
    /* netc run and inspect */
    CALL_WITH(CMD_RUN, "--input", opt_input, "NAME=FILE.npy", "NAME=FILE.npy",
              "an input's value, from a .npy file (a scalar's: or a number, @lr=1e-3)"),
    TEXT(CMD_RUN, "--output", outdir, "a directory", "DIR", "where the outputs go, NAME.npy each (made if missing)"),
    TEXT(CMD_RUN, "--weights", weights, "a safetensors file", "W.safetensors", "the parameters to load (names as in the .net file)"),
    CALL_WITH(CMD_RUN | CMD_TRAIN, "--device", opt_device, "cpu, gpu or auto", "cpu|gpu|auto", "where to run (default auto: the GPU when usable)"),
    CALL_WITH(CMD_RUN, "--random-inputs", opt_random_inputs, "a seed", "SEED", "fill the inputs not given with seeded random values"),
    FLAG(CMD_INSPECT, "--json", json, "the report as JSON"),
    {"--profile", OPT_FN_OPTIONAL_COUNT, 0, 0, opt_profile, NULL, "[RUNS]", CMD_INSPECT,
     "each launch timed on the GPU (median of RUNS, default 20)"},
    /* netc train */
    TEXT(CMD_TRAIN, "--data", train.data_dir, "a data set's directory or a text file", "DIR",
         "the data: a data set's directory (Fashion-MNIST) or a text file"),
    /* 0 is never checkpointing between epochs; a count of 0 elsewhere would
     * quietly mean the default (batch, epochs, accumulate) or no limit (max-steps) */
    COUNT(CMD_TRAIN, "--epochs", train.epochs, 1, "N", "passes over the data (default 1)"),
    COUNT(CMD_TRAIN, "--batch", train.batch, 1, "B", "samples a step (default 128)"),
    CALL_WITH(CMD_TRAIN, "--lr", opt_lr, "a positive number", "X", "the learning rate (default: the train section's)"),
    CALL_WITH(CMD_TRAIN, "--seed", opt_seed, "a non-negative integer", "S", "the seed of the initial weights and the shuffling (default 0)"),
    COUNT(CMD_TRAIN, "--max-steps", train.max_steps, 1, "N", "stop after N steps"),
    COUNT(CMD_TRAIN, "--eval-samples", train.eval_samples, 1, "N",
          "score the test set's first N samples after each epoch (default: all of them)"),
    TEXT(CMD_TRAIN, "--checkpoint-dir", train.checkpoint_dir, "a directory", "D", "keep checkpoints in D (made if missing)"),
    COUNT(CMD_TRAIN, "--checkpoint-every", train.checkpoint_every, 0, "N",
          "a checkpoint every N steps (default 0: at the end of each epoch)"),
    FLAG(CMD_TRAIN, "--resume", train.resume, "continue from the checkpoint in --checkpoint-dir"),
    TEXT(CMD_TRAIN, "--metrics", train.metrics_path, "a file name", "F.jsonl", "metrics every 10 steps and each epoch (and F.svg)"),
    TEXT(CMD_TRAIN, "--save", train.save_path, "a file name", "W.safetensors", "the final weights"),
};

_Static_assert(NC_COUNT(cli_options) <= CLI_OPTIONS_MOST, "raise CLI_OPTIONS_MOST");

/* The index of the option named name in cli_options. */
static size_t option_index(const char *name)
{
    size_t i = 0;
    while (i + 1 < NC_COUNT(cli_options) && strcmp(cli_options[i].name, name)) i++;
    NC_ASSERT(!strcmp(cli_options[i].name, name));
    return i;
}

/* --no-chunk-loss is --loss-slices 1: the two share one slot of cli_opts.given. */
static size_t option_slot(size_t k)
{
    return strcmp(cli_options[k].name, "--no-chunk-loss") ? k : option_index("--loss-slices");
}

/* The options read once: each given again with another value is read at
 * its last, and a warning says the first was not (--epochs 2 ... --epochs 3).
 * A flag given twice asks for the same; the NAME=VALUE lists refuse a name
 * given twice (opt_dim). */
static bool read_once(const cli_option *opt)
{
    if (opt->set == opt_no_chunk_loss) return true;   /* against --loss-slices N */
    return opt->kind != OPT_FLAG && opt->kind != OPT_FN && opt->set != opt_dim && opt->set != opt_config && opt->set != opt_input;
}

static int note_given(cli_opts *o, size_t k, const char *value)
{
    const cli_option *opt = &cli_options[k];
    if (!read_once(opt)) return 0;
    const size_t slot = option_slot(k);
    const cli_option *last = o->given[slot];
    const char *was = o->given_value[slot];
    /* what each asks for: --no-chunk-loss is a count of 1 */
    const char *asked = opt->set == opt_no_chunk_loss ? "1" : value ? value : "";
    const char *asked_before = last && last->set == opt_no_chunk_loss ? "1" : was ? was : "";
    o->given[slot] = opt;
    o->given_value[slot] = value;
    if (!last || !strcmp(asked, asked_before)) return 0;
    char hint[128];
    if (last == opt) snprintf(hint, sizeof hint, "give %s once: only the last one given is read", opt->name);
    else snprintf(hint, sizeof hint, "give one of %s and %s: only the last one given is read", last->name, opt->name);
    return diag_cli_warning(stderr, o->werror, hint, "%s%s%s is overridden by %s%s%s, given after it", last->name, was ? " " : "",
                            was ? was : "", opt->name, value ? " " : "", value ? value : "") ? 2 : 0;
}

/* An option's help: its name and value, the commands that take it, then
 * its text, wrapped at HELP_WIDTH columns with each further line indented to
 * the first's column. */
enum { HELP_INDENT = 23, HELP_WIDTH = 96 };

static void print_option_help(FILE *out, const char *name, const char *arg, unsigned commands, const char *help)
{
    char head[64], list[64], text[512];
    snprintf(head, sizeof head, "%s%s%s", name, arg ? " " : "", arg ? arg : "");
    snprintf(text, sizeof text, "(%s) %s", command_list(commands, ", ", list, sizeof list), help);
    int col = fprintf(out, "  %-20s %s", head, strlen(head) > 20 ? " " : "");
    bool line_start = true;
    for (const char *p = text; *p; p += *p == ' ') {
        int n = (int)strcspn(p, " ");
        if (!line_start && col + 1 + n > HELP_WIDTH) col = fprintf(out, "\n%*s", HELP_INDENT, "") - 1, line_start = true;
        if (!line_start) col += fprintf(out, " ");
        col += fprintf(out, "%.*s", n, p);
        line_start = false;
        p += n;
    }
    fputc('\n', out);
}

/* Each command's lines of the help, so that `netc help CMD` can print one. */
static const struct {
    const char *name;
    const char *usage;
} command_usage[] = {
    {"check", "  check FILE...        parse and type-check; diagnostics only\n"},
    {"build", "  build FILE -o M.netm compile a model into a module (CUDA kernels inside)\n"},
    {"run", "  run M.netm           run a module: --input NAME=FILE.npy ... --output DIR\n"
            "                       [--weights W.safetensors] [--device cpu|gpu|auto] [--random-inputs SEED]\n"},
    {"inspect", "  inspect M.netm       kernels, bytes moved, FLOPs, memory plan, peak memory [--json]\n"
                "                       [--profile [RUNS]]: each launch timed on the GPU (median of RUNS, default 20)\n"},
    {"train", "  train FILE --data DIR [--epochs N] [--batch B] [--device cpu|gpu|auto] [--seed S] [--lr X]\n"
              "        [--checkpoint-dir D] [--checkpoint-every N] [--resume] [--metrics F.jsonl]\n"
              "        [--save W.safetensors] [--max-steps N]\n"
              "        Ctrl-C or SIGTERM: stop after the step, save the checkpoint, --save and metrics; status 130/143\n"},
    {"help", "  help [COMMAND]       this text; with a command, only its lines and the options it takes\n"},
    {"version", "  version              netc's version, its module format and NVRTC's\n"},
};

/* The help: every command and option, or with only set one command's lines
 * and the options it takes. */
static void print_help(FILE *out, const char *only)
{
    unsigned bit = only ? command_bit(only) : ~0u;
    fputs(only ? "usage:\n" : "usage: netc <command> [options] FILE...\n\ncommands:\n", out);
    for (size_t i = 0; i < NC_COUNT(command_usage); i++)
        if (!only || !strcmp(only, command_usage[i].name)) fputs(command_usage[i].usage, out);
    if (!bit) return;
    fputs("\noptions:\n", out);
    if (bit & DUMP_IR_COMMANDS) {
        print_option_help(out, "--dump-ir", NULL, DUMP_IR_COMMANDS, "print the final IR");
        char passes[160] = "print the IR after a pass (sema";
        for (int i = 0; i < pass_count; i++) snprintf(passes + strlen(passes), sizeof passes - strlen(passes), ", %s", pass_pipeline[i].name);
        snprintf(passes + strlen(passes), sizeof passes - strlen(passes), ")");
        print_option_help(out, "--dump-ir=after:PASS", NULL, DUMP_IR_COMMANDS, passes);
    }
    for (int i = 0; i < pass_count && (bit & PASS_OFF_COMMANDS); i++) {
        char name[64], what[160];
        snprintf(name, sizeof name, "--no-%s", pass_pipeline[i].name);
        snprintf(what, sizeof what, "skip: %s", pass_pipeline[i].what);
        print_option_help(out, name, NULL, PASS_OFF_COMMANDS, what);
    }
    for (size_t i = 0; i < NC_COUNT(cli_options); i++) {
        const cli_option *opt = &cli_options[i];
        if (opt->commands & bit) print_option_help(out, opt->name, opt->arg, opt->commands, opt->help);
    }
}

/* "check, build, ..., version": the commands of the help, into buf. */
static const char *command_names_list(char *buf, size_t cap)
{
    buf[0] = 0;
    for (size_t i = 0; i < NC_COUNT(command_usage); i++) nc_appendf(buf, cap, strlen(buf), "%s%s", i ? ", " : "", command_usage[i].name);
    return buf;
}

/* `netc help CMD` and `netc CMD --help`: CMD's help; an unknown CMD is a bad command line. */
static int help_for_command(const char *cmd)
{
    for (size_t i = 0; i < NC_COUNT(command_usage); i++)
        if (!strcmp(cmd, command_usage[i].name)) {
            print_help(stdout, command_usage[i].name);
            return 0;
        }
    char names[128];
    return usage_error("netc help %s: no such command (the commands: %s)", cmd, command_names_list(names, sizeof names));
}

static bool is_help_word(const char *arg) { return !strcmp(arg, "--help") || !strcmp(arg, "-h") || !strcmp(arg, "help"); }

/* What an OPT_COUNT option's value must be, for its errors. */
static const char *count_wanted(const cli_option *opt) { return opt->least ? "a positive integer" : "a non-negative integer"; }

static int opt_count(cli_opts *o, const cli_option *opt, const char *v)
{
    uint64_t n;
    /* the size limit: --batch binds the dim B, and the other counts (steps,
     * samples) share it; a huge count is not "not positive": its range */
    if (!parse_count(v, (uint64_t)opt->least, (uint64_t)DIM_MAX_NUMEL, &n))
        return usage_error("%s needs %s%s, got '%s'", opt->name, count_wanted(opt),
                           parse_count(v, (uint64_t)opt->least, UINT64_MAX, &n) || (isdigit((unsigned char)v[0]) && errno == ERANGE)
                               ? " up to 2^40" : "", v);
    *(int64_t *)((char *)o + opt->field) = (int64_t)n;
    return 0;
}

/* Applies option opt; *used: whether it took next as its value. */
static int apply_option(cli_opts *o, const cli_option *opt, const char *next, bool *used)
{
    *used = opt->kind == OPT_TEXT || opt->kind == OPT_COUNT || opt->kind == OPT_FN_VALUE ||
            (opt->kind == OPT_FN_OPTIONAL_COUNT && next && (isdigit((unsigned char)next[0]) ||
                                                            (next[0] == '-' && isdigit((unsigned char)next[1]))));
    if (*used && !next)
        return opt->kind == OPT_COUNT ? usage_error("%s needs %s", opt->name, count_wanted(opt))
                                      : usage_error("%s needs a value: %s", opt->name, opt->wants);
    if (opt->kind == OPT_TEXT && !*next) return usage_error("%s needs a value: %s, got ''", opt->name, opt->wants);
    if (opt->kind == OPT_TEXT && !strcmp(next, "-") && opt->field != offsetof(cli_opts, model))   /* a file '-' was made without a word */
        return stdio_refused(opt->name);
    if (opt->kind == OPT_TEXT && opt->field != offsetof(cli_opts, model) && path_too_long(opt->name, next)) return 2;
    char *base = (char *)o;
    switch (opt->kind) {
    case OPT_FLAG: *(bool *)(base + opt->field) = true; return 0;
    case OPT_TEXT: *(const char **)(base + opt->field) = next; return 0;
    case OPT_COUNT: return opt_count(o, opt, next);
    case OPT_FN: return opt->set(o, NULL);
    case OPT_FN_VALUE: return opt->set(o, next);
    case OPT_FN_OPTIONAL_COUNT: return opt->set(o, *used ? next : NULL);
    }
    return 0;
}

/* ", cast-hoist, cse, ..." of the pass pipeline, into buf. */
static const char *pass_names(char *buf, size_t cap)
{
    buf[0] = 0;
    for (int i = 0; i < pass_count; i++) nc_appendf(buf, cap, strlen(buf), ", %s", pass_pipeline[i].name);
    return buf;
}

/* The options not in the table: --dump-ir[=after:PASS] and --no-PASS. */
static int apply_pass_option(cli_opts *o, const char *a, bool *known)
{
    *known = true;
    if (strcmp(a, "--dump-ir") == 0) {
        o->dump_after = "";
    } else if (strncmp(a, "--dump-ir=after:", 16) == 0) {
        o->dump_after = a + 16;
        char names[160];
        if (strcmp(o->dump_after, "sema") != 0 && !pass_find(o->dump_after))
            return usage_error("--dump-ir: no pass named '%s' (the passes: sema%s)", o->dump_after, pass_names(names, sizeof names));
    } else if (strncmp(a, "--no-", 5) == 0 && pass_find(a + 5)) {
        if (o->ndisabled == MAX_LIST) return usage_error("too many --no- flags");
        if (!o->first_pass_off) o->first_pass_off = a;
        o->disabled[o->ndisabled++] = a + 5;
    } else if (strncmp(a, "--no-", 5) == 0) {   /* --no-cs (the table's --no-fuse never comes here): the passes there are */
        char names[160];
        return usage_error("unknown option '%s' (--no-PASS skips a pass: %s)", a, pass_names(names, sizeof names) + 2);
    } else {
        *known = false;
    }
    return 0;
}

/* Whether argv gives -Werror as an option (not as another's value, -o
 * -Werror): it covers the warnings of the options before it too. */
static bool werror_given(int argc, char **argv)
{
    for (int i = 0; i < argc; i++) {
        size_t k = 0;
        while (k < NC_COUNT(cli_options) && strcmp(argv[i], cli_options[k].name)) k++;
        if (k == NC_COUNT(cli_options)) continue;
        if (cli_options[k].field == offsetof(cli_opts, werror) && cli_options[k].kind == OPT_FLAG) return true;
        opt_kind kind = cli_options[k].kind;
        i += kind == OPT_TEXT || kind == OPT_COUNT || kind == OPT_FN_VALUE;
    }
    return false;
}

/* The options of netc cmd, from argv. */
static int parse_args(int argc, char **argv, const char *cmd, cli_opts *o)
{
    const unsigned bit = command_bit(cmd);
    o->werror = (cli_options[option_index("-Werror")].commands & bit) && werror_given(argc, argv);
    for (int i = 0; i < argc; i++) {
        const char *a = argv[i], *next = i + 1 < argc ? argv[i + 1] : NULL;
        size_t k = 0;
        while (k < NC_COUNT(cli_options) && strcmp(a, cli_options[k].name)) k++;
        const cli_option *opt = k < NC_COUNT(cli_options) ? &cli_options[k] : NULL;
        if (opt && bit && !(opt->commands & bit)) return refuse_for_command(a, opt->commands, cmd);
        bool used = false, known = opt != NULL;
        int rc = opt ? apply_option(o, opt, next, &used) : apply_pass_option(o, a, &known);
        if (!rc && opt) rc = note_given(o, k, used ? next : NULL);
        if (rc) return rc;
        /* --dump-ir and --no-PASS, outside the table */
        unsigned pass_commands = strncmp(a, "--dump-ir", 9) ? PASS_OFF_COMMANDS : DUMP_IR_COMMANDS;
        if (!opt && known && bit && !(pass_commands & bit)) return refuse_for_command(a, pass_commands, cmd);
        i += used;
        if (known) continue;
        if (a[0] == '-' && a[1]) return usage_error("unknown option '%s'", a);
        if (!*a || !strcmp(a, "-")) return *a ? stdio_refused("") : usage_error("a file name is empty ('')");
        if (o->nfiles == MAX_LIST) return usage_error("too many files (the limit is 64): %s", a);
        if (path_too_long("", a)) return 2;
        o->files[o->nfiles++] = a;
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
        .train_step = o->entry && strcmp(o->entry, "train") == 0,
        .accumulate = (int)o->train.accumulate,
        .memory_budget = o->train.memory_budget,
        .loss_slices = o->train.loss_slices,
        .fuse = !o->no_fuse,
        .report = o->report ? stdout : NULL,
    };
}

/* Load a source; on failure print one line and return 0. */
static uint32_t load(src_table *t, const char *path)
{
    char err[4096 + 512];   /* a path of PATH_MAX bytes and why: the why was cut off a long path's line */
    uint32_t id = src_load(t, path, err, sizeof err);
    if (!id) fprintf(stderr, "netc: %s\n", err);
    return id;
}

/* The options check reads only with --dump-ir (they shape the compiled
 * graph it dumps; a plain check stops at types): the first one given, or NULL. */
static const char *needs_dump_ir(const cli_opts *o)
{
    return o->report ? "--report" : o->entry ? "--entry" : o->train.accumulate ? "--accumulate"
         : o->train.memory_budget ? "--memory-budget" : o->no_fuse ? "--no-fuse" : o->train.loss_slices ? "--loss-slices (or --no-chunk-loss)"
         : o->first_pass_off;
}

static int cmd_check(cli_opts *o)
{
    if (o->nfiles == 0) return usage_error("check: no input files");
    const char *lone = o->dump_after ? NULL : needs_dump_ir(o);
    if (lone)   /* it was read by nothing: the check said nothing of it */
        return usage_error("netc check reads %s only with --dump-ir (it shapes the compiled graph that prints); "
                           "without it, check stops at the types", lone);
    int failed = 0;
    loss_chunk_tally tally = {0};
    driver_opts dopts = to_driver(o);
    dopts.loss_tally = &tally;
    for (int i = 0; i < o->nfiles; i++) {
        src_table t = {0};
        uint32_t id = load(&t, o->files[i]);
        if (!id) { failed = 1; continue; }
        diag_ctx d;
        diag_init(&d, &t, stderr);
        d.werror = o->werror;
        /* --dump-ir needs the optimised graph: compile the model, not just check the file */
        if (o->dump_after) {
            ir_graph *g = driver_compile(&t, id, &dopts, &d);
            if (!g) failed = 1;
            ir_graph_free(g);
        } else {
            driver_check(&t, id, &dopts, &d);
        }
        if (diag_failed(&d)) failed = 1;
        src_free(&t);
    }
    if (!failed && o->dump_after && loss_chunk_warnings(o->train.loss_slices, &tally, o->werror, stderr)) failed = 2;
    return failed;
}

/* Generate CUDA C for the graph and compile it with NVRTC for every target,
 * into *m, which takes ownership of g. */
static int build_kernels(const cli_opts *o, ir_graph *g, nrt_module_data *m)
{
    *m = (nrt_module_data){.graph = g, .nvrtc_version = nvrtc_version()};
    char err[1024];
    if (!cuda_emit_program_ex(g, !o->no_fuse, &m->program, err, sizeof err)) {
        fprintf(stderr, "netc: code generation failed: %s\n", err);
        return 1;
    }
    if (o->no_memplan) m->program.plan_flags |= NRT_PLAN_NO_REUSE;
    if (o->report) cuda_report(g, &m->program, !o->no_fuse, stdout);
    if (o->emit_cuda) fputs(m->program.source, stdout);
    if (!nvrtc_available()) return 0;
    char targets[TARGETS_TEXT];
    const char *archs[TARGETS_MOST], *sources[TARGETS_MOST];
    int n = split_targets(o->targets ? o->targets : NC_DEFAULT_TARGETS, targets, archs);   /* checked by bad_target */
    for (int i = 0; i < n; i++) sources[i] = m->program.source;
    nvrtc_image imgs[TARGETS_MOST];
    char *log;
    if (!nvrtc_compile_all(sources, archs, n, imgs, &log, stderr)) {   /* every target at once */
        fprintf(stderr, "netc: %s\n", log);
        free(log);
        return 1;
    }
    m->images = nc_xcalloc((size_t)n + 1, sizeof *m->images);
    for (int i = 0; i < n; i++) nvrtc_image_to_module(&imgs[i], &m->images[m->nimages++]);
    return 0;
}

/* A model with a train section gets a second entry point, "train": the
 * training step (forward, backward, update), for libnetrt users who train. */
static int add_train_entry(const cli_opts *o, src_table *t, uint32_t id, diag_ctx *d, nrt_module_data *m,
                           const driver_opts *forward)
{
    driver_opts dopts = to_driver(o);
    dopts.loss_tally = forward->loss_tally;
    dopts.train_step = true;
    dopts.dump_after = NULL;
    ir_graph *tg = driver_compile(t, id, &dopts, d);
    if (!tg || diag_failed(d)) {
        ir_graph_free(tg);
        fprintf(stderr, "netc: the train section does not build a training step (see above); "
                        "--entry forward builds the forward pass alone\n");
        return 1;
    }
    nrt_module_data tm;
    int rc = build_kernels(o, tg, &tm);
    if (rc == 0) module_add_entry(m, "train", &tm);
    module_data_free(&tm);
    return rc;
}

static int cmd_build(cli_opts *o)
{
    if (o->nfiles != 1) return usage_error("build: expects one .net file, got %s", o->nfiles ? "several" : "none");
    if (refuse_overwrite("-o", o->output, o->files[0], "the .net file built")) return 2;
    const char *step_only = o->train.accumulate ? "--accumulate" : o->train.memory_budget ? "--memory-budget" : NULL;
    if (step_only && o->entry && strcmp(o->entry, "forward") == 0)   /* read by nothing: there is no step */
        return usage_error("%s shapes the training step, and --entry forward builds none", step_only);
    src_table t = {0};
    uint32_t id = load(&t, o->files[0]);
    if (!id) return 1;
    diag_ctx d;
    diag_init(&d, &t, stderr);
    d.werror = o->werror;
    loss_chunk_tally tally = {0};
    driver_opts dopts = to_driver(o);
    dopts.loss_tally = &tally;
    ir_graph *g = driver_compile(&t, id, &dopts, &d);
    nrt_module_data m = {0};
    int rc = g && !diag_failed(&d) ? 0 : 1;
    if (rc == 0) rc = build_kernels(o, g, &m);
    else ir_graph_free(g);
    bool forward_only = o->entry && strcmp(o->entry, "forward") == 0;
    if (rc == 0 && !dopts.train_step && !forward_only && m.graph->train.present) rc = add_train_entry(o, &t, id, &d, &m, &dopts);
    if (rc == 0 && step_only && !m.graph->train.present && !m.nentries) {
        fprintf(stderr, "netc: %s shapes a training step, and %s has no train section\n", step_only, o->files[0]);
        rc = 2;
    }
    if (rc == 0 && loss_chunk_warnings(o->train.loss_slices, &tally, o->werror, stderr)) rc = 2;
    if (rc == 0 && o->output && !nvrtc_available())
        fprintf(stderr, "netc: note: built without NVRTC: the module carries CUDA source only\n");
    char err[1024];
    if (rc == 0 && o->output && module_write(o->output, &m, err, sizeof err) != 0) {
        fprintf(stderr, "netc: %s\n", err);
        rc = 1;
    }
    module_data_free(&m);
    src_free(&t);
    return rc;
}

static int cmd_train(cli_opts *o)
{
    if (o->nfiles != 1) return usage_error("train: expects one .net file");
    train_opts t = o->train;
    t.model_path = o->files[0];
    t.model = o->model;
    t.device = o->device ? o->device : "auto";
    if (o->targets && (strchr(o->targets, ',') || !*o->targets))
        return usage_error("train: --target takes one architecture (the device's, e.g. sm_90a), not '%s'", o->targets);
    t.target = o->targets;
    for (int k = 0; k < 2; k++) {   /* the outputs over the inputs */
        const char *option = k ? "--metrics" : "--save", *out = k ? t.metrics_path : t.save_path;
        if (refuse_overwrite(option, out, t.model_path, "the .net file trained") ||
            refuse_overwrite(option, out, t.data_dir, "the --data file") || refuse_data_file(option, out, t.data_dir))
            return 2;
    }
    if (!t.epochs) t.epochs = 1;
    if (!t.batch) t.batch = 128;
    t.set_names = o->set_names, t.set_values = o->set_values, t.nsets = o->nsets;
    t.dim_names = o->dim_names, t.dim_values = o->dim_values, t.ndims = o->ndims;
    t.disabled_passes = o->disabled, t.ndisabled = o->ndisabled;
    t.werror = o->werror;
    const size_t every = option_index("--checkpoint-every");
    if (o->given[every] && !t.checkpoint_dir &&   /* not an error: a script may give the directory only sometimes */
        diag_cli_warning(stderr, o->werror, "give --checkpoint-dir D to keep checkpoints in D, or drop --checkpoint-every",
                         "--checkpoint-every %s has no effect without --checkpoint-dir: no checkpoint is written", o->given_value[every]))
        return 2;
    return train_main(&t);
}

/* The train section of a loaded module's entry point; NULL where it has none. */
static const ir_train_spec *entry_train_spec(const nrt_module *m)
{
    const ir_train_spec *t = &nrt_module_graph(m)->train;
    return t->present ? t : NULL;
}

/* Whether name is an input the train section declares (a forward entry
 * keeps them in its interface). */
static bool train_section_input(const nrt_module *m, const char *name)
{
    const ir_graph *g = nrt_module_graph(m);
    for (uint32_t i = g->train.present ? g->train.first_train_input : g->ninputs; i < g->ninputs; i++)
        if (!strcmp(g->inputs[i].name, name)) return true;
    return false;
}

/* Whether the module's entry point reads its input name: a forward pass
 * keeps the train section's inputs (labels) in its interface, read by no op. */
static bool entry_reads(const nrt_module *m, const char *name)
{
    const ir_graph *g = nrt_module_graph(m);
    for (ir_value v = 0; v < g->nnodes; v++)
        if (g->nodes[v].op == OP_INPUT && !strcmp(g->inputs[g->nodes[v].attr.index].name, name)) return true;
    return false;
}

/* Seeded random values for every input not given with --input: floats in
 * [-1, 1), bytes in [0, 256), integers in the range their uses accept (class
 * labels below the classes, indices below their table's rows: the smallest
 * such bound), [0, 10) where none bounds them; with sane_scalars (inspect
 * --profile's), a rank-0 float in [0.5, 1). A training step's scalars (@lr,
 * @bias1, ...) get the values netc train feeds its first step
 * (train_first_point) from train (NULL: none), not random ones: a negative
 * learning rate runs a nonsense step. Returns non-zero after printing the
 * error. */
static int set_random_inputs(nrt_module *m, nrt_session *s, const cli_opts *o, uint64_t seed, bool sane_scalars,
                             const ir_train_spec *train)
{
    char note[256] = "";
    int filled = 0;
    const train_point first_point = train ? train_first_point(train) : (train_point){0};
    for (int i = 0; i < nrt_module_num_inputs(m); i++) {
        nrt_tensor_info decl, info;
        nrt_error e;
        nrt_module_input(m, i, &decl);
        bool given = false;
        for (int k = 0; k < o->ninputs; k++) given |= strcmp(o->inputs[k], decl.name) == 0;
        if (given) continue;
        if (!entry_reads(m, decl.name) || nrt_session_input_info(s, decl.name, &info, &e)) continue;   /* not read by this entry */
        int64_t bound = 0;
        if (!dtype_is_float((nc_dtype)info.dtype) && nrt_session_input_bound(s, decl.name, &bound, &e)) bound = 0;
        double ints = info.dtype == NRT_U8 ? 256.0 : bound > 0 ? (double)bound : 10.0;
        cpu_tensor t = {0};
        /* unchecked, its values were read from a one-byte buffer */
        if (!cpu_tensor_alloc(&t, (nc_dtype)info.dtype, (uint8_t)info.rank, info.shape, (int64_t)8 << 30)) {
            int64_t values = 1;
            for (int a = 0; a < info.rank; a++)
                values = values > INT64_MAX / (info.shape[a] ? info.shape[a] : 1) ? INT64_MAX : values * info.shape[a];
            fprintf(stderr, "netc: input %s holds %lld values at these dims, too many to fill with random values (8 GiB as "
                            "netc holds them, at most): give it with --input, or bind smaller dims\n", decl.name, (long long)values);
            return 1;
        }
        double first;
        filled++;
        bool step_scalar = train && info.rank == 0 && train_scalar_value(train, &first_point, decl.name, &first);
        if (step_scalar) snprintf(note + strlen(note), sizeof note - strlen(note), "%s%s %g", *note ? ", " : "", decl.name, first);
        for (int64_t j = 0; j < t.numel; j++) {
            float u = nc_rng_uniform(seed, (uint64_t)i, (uint64_t)j);
            double v = step_scalar ? first
                     : !dtype_is_float(t.dtype) ? ints * u
                     : sane_scalars && info.rank == 0 ? 0.5 + 0.5 * u : 2.0 * u - 1.0;
            cpu_set(&t, j, v);
        }
        size_t bytes = (size_t)t.numel * dtype_size(t.dtype);
        void *buf = nc_xmalloc(bytes ? bytes : 1);
        cpu_tensor_to_native(&t, buf);
        nrt_status st = nrt_session_set_input(s, info.name, info.dtype, info.rank, info.shape, buf, &e);
        free(buf);
        cpu_tensor_free(&t);
        if (st) { fprintf(stderr, "netc: %s\n", e.message); return 1; }
    }
    if (*note) fprintf(stderr, "netc: %s: a training step's first values: %s\n", sane_scalars ? "--profile" : "--random-inputs", note);
    if (!filled && !sane_scalars)   /* netc run's (no -Werror): --profile fills what it must, and says nothing of it */
        diag_cli_warning(stderr, false, "drop --random-inputs", "--random-inputs %llu has no effect: every input the entry point "
                         "reads is given with --input", (unsigned long long)seed);
    return 0;
}

/* The first of the inputs' symbolic dims that pick(dim, ctx) picks, or NULL. */
static const char *input_dim_where(const nrt_module *m, bool (*pick)(const char *, const void *), const void *ctx)
{
    for (int i = 0; i < nrt_module_num_inputs(m); i++) {
        nrt_tensor_info info;
        nrt_module_input(m, i, &info);
        for (int axis = 0; axis < info.rank; axis++) {
            const char *dim = nrt_module_input_dim(m, i, axis);
            if (dim && pick(dim, ctx)) return dim;
        }
    }
    return NULL;
}

typedef struct {
    const char *const *names;
    int n;
} dim_list;

static bool not_in_list(const char *dim, const void *ctx)
{
    const dim_list *l = ctx;
    for (int j = 0; j < l->n; j++)
        if (strcmp(l->names[j], dim) == 0) return false;
    return true;
}

static bool same_name(const char *dim, const void *name) { return strcmp(dim, name) == 0; }

/* An input's symbolic dim not bound by names (NULL where all are): the
 * command names --dim for it, where the session's error would name its
 * options (dim_names/dim_values), an API a command-line user does not see.
 * A name that is no input's dim is the session's to refuse first (it lists
 * the module's dims). */
static const char *unbound_dim(const nrt_module *m, const char *const *names, int n)
{
    for (int j = 0; j < n; j++)
        if (!input_dim_where(m, same_name, names[j])) return NULL;
    return input_dim_where(m, not_in_list, &(dim_list){names, n});
}

/* inspect --profile: a GPU session at the --dim binding, seeded random
 * inputs, three warm-up runs, then each launch timed (nrt_session_profile). */
static int profile_module(const cli_opts *o, double **step_seconds, char *device, size_t devcap)
{
    nrt_module *m;
    nrt_error e;
    if (nrt_module_load_entry(o->files[0], o->entry, &m, &e)) { fprintf(stderr, "netc: %s\n", e.message); return 1; }
    nrt_session_opts so = nrt_session_defaults();
    so.device = NRT_DEVICE_GPU;
    so.dim_names = o->dim_names, so.dim_values = o->dim_values, so.ndims = o->ndims;
    const char *unbound = unbound_dim(m, o->dim_names, o->ndims);
    if (unbound) {
        fprintf(stderr, "netc: --profile measures on a GPU at bound sizes: symbolic dim %s is not bound: give --dim %s=N\n", unbound, unbound);
        nrt_module_free(m);
        return 1;
    }
    nrt_session *s;
    int rc = 1;
    if (nrt_session_create(m, &so, &s, &e)) {
        fprintf(stderr, "netc: --profile measures on a GPU: %s\n", e.message);
        nrt_module_free(m);
        return 1;
    }
    snprintf(device, devcap, "%s", nrt_session_device(s));
    fprintf(stderr, "netc: profiling on %s, %d runs a launch\n", device, o->profile_runs);
    int n = nrt_module_num_steps(m);
    *step_seconds = nc_xcalloc((size_t)n + 1, sizeof **step_seconds);
    if (set_random_inputs(m, s, o, 1, true, entry_train_spec(m))) goto done;
    for (int i = 0; i < 3; i++)
        if (nrt_session_run(s, &e)) { fprintf(stderr, "netc: %s\n", e.message); goto done; }
    if (nrt_session_profile(s, o->profile_runs, *step_seconds, n, &e)) { fprintf(stderr, "netc: %s\n", e.message); goto done; }
    rc = 0;
done:
    nrt_session_free(s);
    nrt_module_free(m);
    return rc;
}

static int cmd_inspect(cli_opts *o)
{
    if (o->nfiles != 1) return usage_error("inspect: expects one module file");
    if (!o->profile_runs) return inspect_module(o->files[0], o->entry, o->dim_names, o->dim_values, o->ndims, o->json, NULL, stdout);
    double *times = NULL;
    char device[256] = "";
    int rc = profile_module(o, &times, device, sizeof device);
    inspect_profile prof = {.step_seconds = times, .device = device, .runs = o->profile_runs};
    if (rc == 0) rc = inspect_module(o->files[0], o->entry, o->dim_names, o->dim_values, o->ndims, o->json, &prof, stdout);
    free(times);
    return rc;
}

/* The length of decl_text's text, written into buf as far as cap allows. */
static size_t decl_text(const nrt_module *m, int input, const nrt_tensor_info *info, char *buf, size_t cap)
{
    size_t n = nc_appendf(buf, cap, 0, "%s[", nrt_dtype_name(info->dtype));
    for (int a = 0; a < info->rank; a++) {
        const char *dim = nrt_module_input_dim(m, input, a);
        if (dim) n = nc_appendf(buf, cap, n, "%s%s", a ? ", " : "", dim);
        else n = nc_appendf(buf, cap, n, "%s%lld", a ? ", " : "", (long long)info->shape[a]);
    }
    return nc_appendf(buf, cap, n, "]");
}

/* "u8[B, 28, 28]" for a module input, "f32[3, 4]" for a loaded array, on
 * the heap (free it): dims are names of any length. */
static char *format_decl(const nrt_module *m, int input, const nrt_tensor_info *info)
{
    size_t n = decl_text(m, input, info, NULL, 0) + 1;
    char *text = nc_xmalloc(n);
    decl_text(m, input, info, text, n);
    return text;
}

/* The module input named name (its index, -1 with a line saying which
 * inputs there are). */
static int find_input(const nrt_module *m, const char *name, nrt_tensor_info *info)
{
    for (int i = 0; i < nrt_module_num_inputs(m); i++) {
        nrt_module_input(m, i, info);
        if (strcmp(info->name, name) == 0) return i;
    }
    fprintf(stderr, "netc: the module has no input '%s' (its inputs: ", name);   /* every name, whole */
    for (int i = 0; i < nrt_module_num_inputs(m); i++) {
        nrt_module_input(m, i, info);
        fprintf(stderr, "%s%s", i ? ", " : "", info->name);
    }
    fprintf(stderr, ")\n");
    return -1;
}

/* What a .npy file holds as the messages say it (netc's names, NumPy's
 * for float64 and int64, which read as f32 and i32 but are not that). */
static const char *file_dtype_name(const char *descr)
{
    static const char *const names[][2] = {{"<f8", "float64"}, {"<i8", "int64"}, {"<f4", "f32"}, {"<f2", "f16"},
                                           {"<i4", "i32"}, {"|u1", "u8"}, {"|b1", "bool"}};
    for (size_t k = 0; k < NC_COUNT(names); k++)
        if (!strcmp(descr, names[k][0])) return names[k][1];
    return descr;
}

/* A finite value the input's dtype cannot hold (NumPy's astype would make
 * it inf), said with where it is, as netc train refuses one in its data. */
static int misfit_error(const char *input, const char *path, const cpu_tensor *x, const npy_file_info *fi)
{
    int64_t idx[NC_MAX_RANK], rest = fi->misfit_at;
    for (int a = x->rank; a-- > 0; rest /= x->shape[a]) idx[a] = rest % x->shape[a];
    char at[256] = "[";
    for (int a = 0; a < x->rank; a++)
        snprintf(at + strlen(at), sizeof at - strlen(at), "%s%lld", a ? ", " : "", (long long)idx[a]);
    snprintf(at + strlen(at), sizeof at - strlen(at), "]");
    fprintf(stderr, "netc: input '%s': %s holds %g at %s (element %lld), beyond %s's range (its largest is %g, the value "
            "would be inf): scale the data first\n", input, path, fi->misfit, at, (long long)fi->misfit_at, dtype_name(x->dtype),
            nc_float_max(x->dtype));
    return 1;
}

/* --input NAME=NUMBER, NUMBER no file's name: a rank-0 input's value (a
 * training step's @lr), written as --set takes numbers and finite (a NaN
 * learning rate runs a step of NaNs), in the input's dtype's range.
 * Returns -1 where text is no number (a file's name), else 0 or 1 after the
 * error. */
static int read_scalar_input(const nrt_module *m, int found, const nrt_tensor_info *info, const char *text, cpu_tensor *x)
{
    char *end;
    const double v = strtod(text, &end);
    if (end == text || *end || access(text, F_OK) == 0) return -1;
    const nc_dtype want = (nc_dtype)info->dtype;
    driver_set_value n = {0};
    const char *problem = !isfinite(v) ? "a finite number is needed"
                        : driver_set_value_parse(text, &n) ? "a decimal number is needed (1.5e-3), not hex" : NULL;
    char *decl = format_decl(m, found, info);
    if (!problem && info->rank != 0) problem = "a number gives a scalar input only; give a .npy file";
    else if (!problem && !dtype_is_float(want) && n.kind != DRIVER_SET_INT) problem = "the input takes an integer";
    else if (!problem && (dtype_is_float(want) ? fabs(v) > nc_float_max(want) : want == NC_U8 ? v < 0 || v > 255 : fabs(v) > INT32_MAX))
        problem = "out of the input's dtype's range";
    if (problem) {
        fprintf(stderr, "netc: --input %s=%s: %s (input '%s' is %s)\n", info->name, text, problem, info->name, decl);
        free(decl);
        return 1;
    }
    free(decl);
    cpu_tensor_alloc(x, want, 0, NULL, 64);
    cpu_set(x, 0, v);
    return 0;
}

/* A training step's scalar (@lr, @scale, ...) from a file: finite, as the
 * command line's must be (1 after the error). */
static int check_step_scalar(const char *name, const char *path, const cpu_tensor *x)
{
    if (name[0] != '@' || x->rank != 0 || !dtype_is_float(x->dtype) || isfinite(cpu_get(x, 0))) return 0;
    fprintf(stderr, "netc: input '%s': %s holds %g: a training step's %s must be a finite number\n", name, path, cpu_get(x, 0), name);
    return 1;
}

/* The k-th --input, read for its module input: floats of another float
 * dtype rounded once to the input's (npy_read_as: NumPy writes no bf16, and
 * a float64 file is NumPy's default), as netc train reads its data; then it
 * must have the input's dtype and rank, one clear line otherwise, before any
 * dim is inferred from it. */
static int read_given_input(const nrt_module *m, const cli_opts *o, int k, cpu_tensor *x)
{
    const char *name = o->inputs[k], *path = o->input_files[k];
    nrt_tensor_info info;
    int found = find_input(m, name, &info);
    if (found < 0) return 1;
    const nc_dtype want = (nc_dtype)info.dtype;
    const int scalar = read_scalar_input(m, found, &info, path, x);
    if (scalar >= 0) return scalar;
    npy_file_info fi;
    char err[1024];
    if (npy_read_as(path, dtype_is_float(want) ? want : NC_F32, x, (int64_t)8 << 30, &fi, err, sizeof err) != 0) {
        fprintf(stderr, "netc: %s\n", err);
        return 1;
    }
    const char *holds = file_dtype_name(fi.descr);
    const bool rounded = dtype_is_float(want) && (holds[0] == 'f') && strcmp(holds, dtype_name(want)) != 0;
    if (x->dtype == NC_F16 && want != NC_F16 && dtype_is_float(want)) {   /* a float16 file: its values widen, or round once to bf16 */
        x->dtype = want;
        for (int64_t j = 0; j < x->numel; j++) cpu_set(x, j, x->f[j]);
    }
    if (info.rank != x->rank || want != x->dtype) {
        char got[256];   /* numbers only: NC_MAX_RANK of them fit */
        char *decl = format_decl(m, found, &info);
        size_t n = (size_t)snprintf(got, sizeof got, "%s[", holds);
        for (int a = 0; a < x->rank && n < sizeof got; a++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%lld", a ? ", " : "", (long long)x->shape[a]);
        if (n < sizeof got) snprintf(got + n, sizeof got - n, "]");
        fprintf(stderr, "netc: input '%s' is %s but %s holds %s\n", name, decl, path, got);
        free(decl);
        return 1;
    }
    if (fi.misfit_at >= 0) return misfit_error(name, path, x, &fi);
    if (check_step_scalar(name, path, x)) return 1;
    if (rounded)   /* as netc train's note says a float64 file read as f32 */
        fprintf(stderr, "netc: input '%s': %s's %s values rounded to %s\n", name, path, holds, dtype_name(want));
    return 0;
}

/* Bind symbolic dims from the shapes of the given inputs where --dim did not. */
static void infer_dims(const nrt_module *m, const cli_opts *o, const cpu_tensor *loaded, const char **names,
                       int64_t *values, int *n)
{
    for (int k = 0; k < o->ninputs; k++)
        for (int i = 0; i < nrt_module_num_inputs(m); i++) {
            nrt_tensor_info info;
            nrt_module_input(m, i, &info);
            if (strcmp(info.name, o->inputs[k]) != 0 || info.rank != loaded[k].rank) continue;
            for (int axis = 0; axis < info.rank; axis++) {
                const char *dim = nrt_module_input_dim(m, i, axis);
                bool bound = false;
                for (int j = 0; dim && j < *n; j++) bound |= strcmp(names[j], dim) == 0;
                if (dim && !bound && *n < NC_MAX_SYMS + MAX_LIST) names[*n] = dim, values[(*n)++] = loaded[k].shape[axis];
            }
        }
}

static int write_outputs(nrt_session *s, const nrt_module *m, const char *dir)
{
    for (int i = 0; dir && i < nrt_module_num_outputs(m); i++) {   /* a damaged module's dir/../x would go outside dir */
        nrt_tensor_info info;
        nrt_module_output(m, i, &info);
        if (info.name[0] && !strchr(info.name, '/')) continue;
        fprintf(stderr, "netc: the module's output '%s' is no file name to write in %s (is the module damaged?)\n", info.name, dir);
        return 1;
    }
    for (int i = 0; i < nrt_module_num_outputs(m); i++) {
        nrt_tensor_info info;
        nrt_module_output(m, i, &info);
        nrt_error e;
        if (nrt_session_output_info(s, info.name, &info, &e)) { fprintf(stderr, "netc: %s\n", e.message); return 1; }
        int64_t numel = 1;
        for (int k = 0; k < info.rank; k++) numel *= info.shape[k];
        size_t bytes = (size_t)numel * nrt_dtype_size(info.dtype);
        void *buf = nc_xmalloc(bytes ? bytes : 1);
        if (nrt_session_get_output(s, info.name, buf, bytes, &e)) {
            fprintf(stderr, "netc: %s\n", e.message);
            free(buf);
            return 1;
        }
        cpu_tensor t = {0};
        if (!cpu_tensor_alloc(&t, (nc_dtype)info.dtype, (uint8_t)info.rank, info.shape, DIM_MAX_NUMEL * (int64_t)sizeof(float))) {   /* any output (4 bytes an element): the machine's memory */
            fprintf(stderr, "netc: cannot hold output %s (%lld values) to write it: out of memory\n", info.name, (long long)numel);
            free(buf);
            return 1;
        }
        for (int64_t j = 0; j < numel; j++) {   /* native bytes to values, for the summary and .npy */
            const unsigned char *p = buf;
            double v = 0;
            switch (info.dtype) {
            case NRT_F32: { float f; memcpy(&f, p + 4 * j, 4); v = f; break; }
            case NRT_F16: { uint16_t h; memcpy(&h, p + 2 * j, 2); v = nc_f16_bits_to_f32(h); break; }
            case NRT_BF16: { uint16_t h; memcpy(&h, p + 2 * j, 2); v = nc_bf16_bits_to_f32(h); break; }
            case NRT_I32: { int32_t x; memcpy(&x, p + 4 * j, 4); v = x; break; }
            default: v = p[j]; break;
            }
            cpu_set(&t, j, v);
        }
        double sum = 0;
        for (int64_t j = 0; j < numel; j++) sum += cpu_get(&t, j);
        printf("output %s: %s[", info.name, nrt_dtype_name(info.dtype));
        for (int k = 0; k < info.rank; k++) printf("%s%lld", k ? ", " : "", (long long)info.shape[k]);
        printf("] mean %.6g first", numel ? sum / (double)numel : 0.0);
        for (int64_t j = 0; j < numel && j < 4; j++) printf(" %.6g", cpu_get(&t, j));
        printf("\n");
        if (dir) {
            char *path = nc_xasprintf("%s/%s.npy", dir, info.name), err[1024];   /* a cut path would name another file */
            int wrote = npy_write(path, &t, err, sizeof err);
            free(path);
            if (wrote != 0) {
                fprintf(stderr, "netc: %s\n", err);
                cpu_tensor_free(&t);
                free(buf);
                return 1;
            }
        }
        cpu_tensor_free(&t);
        free(buf);
    }
    return 0;
}

static int cmd_run(cli_opts *o)
{
    if (o->nfiles != 1) return usage_error("run: expects one module file (.netm)");
    char err[1024];
    if (o->outdir && atomic_file_make_dir(o->outdir, err, sizeof err)) {   /* before the run, not after it */
        fprintf(stderr, "netc: --output %s\n", err);
        return 1;
    }
    nrt_module *m;
    nrt_error e;
    if (nrt_module_load_entry(o->files[0], o->entry, &m, &e)) { fprintf(stderr, "netc: %s\n", e.message); return 1; }
    int rc = 1;
    cpu_tensor loaded[MAX_LIST] = {{0}};
    const char *dn[NC_MAX_SYMS + MAX_LIST];
    int64_t dv[NC_MAX_SYMS + MAX_LIST];
    int nd = 0;
    for (int i = 0; i < o->ndims; i++) dn[nd] = o->dim_names[i], dv[nd++] = o->dim_values[i];
    for (int k = 0; k < o->ninputs; k++)
        if (read_given_input(m, o, k, &loaded[k])) goto done;
    infer_dims(m, o, loaded, dn, dv, &nd);
    nrt_session_opts so = nrt_session_defaults();
    so.device = !o->device || !strcmp(o->device, "auto") ? NRT_DEVICE_AUTO : !strcmp(o->device, "cpu") ? NRT_DEVICE_CPU : NRT_DEVICE_GPU;
    so.dim_names = dn, so.dim_values = dv, so.ndims = nd;
    const char *unbound = unbound_dim(m, dn, nd);
    if (unbound) {
        fprintf(stderr, "netc: symbolic dim %s is not bound: give --dim %s=N (or an --input whose shape has it)\n", unbound, unbound);
        goto done;
    }
    nrt_session *s;
    if (nrt_session_create(m, &so, &s, &e)) { fprintf(stderr, "netc: %s\n", e.message); goto done; }
    fprintf(stderr, "netc: running on %s\n", nrt_session_device(s));
    if (o->weights && nrt_session_load_weights(s, o->weights, &e)) { fprintf(stderr, "netc: %s\n", e.message); goto free_session; }
    for (int k = 0; k < o->ninputs; k++) {
        if (!entry_reads(m, o->inputs[k])) {   /* set for nothing */
            char *hint = nc_xasprintf("drop --input %s%s", o->inputs[k],
                                      train_section_input(m, o->inputs[k]) ? ", or give --entry train: it is the train section's input" : "");
            diag_cli_warning(stderr, false, hint, "--input %s has no effect: the %s entry point does not read it", o->inputs[k],
                             o->entry ? o->entry : "forward");
            free(hint);
        }
        size_t bytes = (size_t)loaded[k].numel * dtype_size(loaded[k].dtype);
        void *buf = nc_xmalloc(bytes ? bytes : 1);
        cpu_tensor_to_native(&loaded[k], buf);
        nrt_status st = nrt_session_set_input(s, o->inputs[k], (nrt_dtype)loaded[k].dtype, loaded[k].rank, loaded[k].shape, buf, &e);
        free(buf);
        if (st) { fprintf(stderr, "netc: %s\n", e.message); goto free_session; }
    }
    if (o->random_inputs >= 0) {
        if (set_random_inputs(m, s, o, (uint64_t)o->random_inputs, false, entry_train_spec(m))) goto free_session;
    }
    if (nrt_session_run(s, &e)) { fprintf(stderr, "netc: %s\n", e.message); goto free_session; }
    rc = write_outputs(s, m, o->outdir);
free_session:
    nrt_session_free(s);
done:
    for (int k = 0; k < o->ninputs; k++) cpu_tensor_free(&loaded[k]);
    nrt_module_free(m);
    return rc;
}

/* A first argument that is no command: an option given before the command
 * (netc --dim B=2 build ...), a command in other case (Build), or a word. */
static int unknown_command(const char *cmd)
{
    char names[128];
    command_names_list(names, sizeof names);
    if (cmd[0] == '-')
        return usage_error("'%s' is not a command: the command comes first, then its options (netc COMMAND [options] FILE...; "
                           "the commands: %s)", cmd, names);
    for (size_t i = 0; i < NC_COUNT(command_usage); i++)
        if (!strcasecmp(cmd, command_usage[i].name)) return usage_error("unknown command '%s' (did you mean '%s'?)", cmd, command_usage[i].name);
    return usage_error("unknown command '%s' (the commands: %s)", cmd, names);
}

int cli_main(int argc, char **argv)
{
    const bool help = argc >= 2 && is_help_word(argv[1]);
    if (help && argc == 3 && is_help_word(argv[2])) argc = 2;   /* netc help --help: the help */
    if (help && argc == 3) return help_for_command(argv[2]);
    for (int i = 2; i < argc && command_bit(argv[1]); i++)   /* netc build m.net --help: the help, not an unknown option */
        if (!strcmp(argv[i], "--help") || !strcmp(argv[i], "-h")) return help_for_command(argv[1]);
    if ((help || (argc >= 2 && (!strcmp(argv[1], "--version") || !strcmp(argv[1], "version")))) && argc > 2)   /* read by nothing */
        return usage_error("netc %s takes nothing more, got '%s'", argv[1], argv[help ? 3 : 2]);
    if (argc < 2 || help) {
        print_help(argc < 2 ? stderr : stdout, NULL);
        return argc < 2 ? 2 : 0;
    }
    if (strcmp(argv[1], "--version") == 0 || strcmp(argv[1], "version") == 0) {
        int nv = nvrtc_version();
        printf("netc %s (module format %d; ", NETC_VERSION, NRT_MODULE_VERSION);
        if (nv) printf("NVRTC %d.%d)\n", nv / 1000, nv % 1000 / 10);
        else printf("built without NVRTC: CUDA source only)\n");
        return 0;
    }
    if (!command_bit(argv[1])) return unknown_command(argv[1]);
    cli_opts o = {.random_inputs = -1};
    int rc = parse_args(argc - 2, argv + 2, argv[1], &o);
    if (rc) { free_opts(&o); return rc; }
    const char *cmd = argv[1];
    if (strcmp(cmd, "check") == 0) rc = cmd_check(&o);
    else if (strcmp(cmd, "build") == 0) rc = cmd_build(&o);
    else if (strcmp(cmd, "run") == 0) rc = cmd_run(&o);
    else if (strcmp(cmd, "train") == 0) rc = cmd_train(&o);
    else rc = cmd_inspect(&o);
    free_opts(&o);
    return strcmp(cmd, "train") == 0 ? train_exit(rc) : rc;
}
