/* inspect.c - `netc inspect`: what a module will do, step by step: kernels
 * with the bytes they move, their FLOPs and their roofline floor on the
 * target, library calls, the memory plan and its peak, parameter bytes. */
#include "inspect.h"
#include "cuda_emit.h"
#include "launch_dag.h"
#include "module.h"
#include "typecheck.h"

#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* H100 SXM, as measured for DESIGN.md section 9. */
#define FLOOR_BYTES_PER_S 2.9e12
#define FLOOR_MATMUL_LOW 750e12    /* bf16/f16 tensor cores */
#define FLOOR_MATMUL_F32 51e12     /* f32 without tf32 */
#define FLOOR_VECTOR 60e12         /* f32 on the CUDA cores */
#define FLOOR_WARP_ELEMENT_S 2.4e-9 /* one warp adding up a run of f32 alone (30 ms for 12.6M elements on an H200) */

typedef struct step_cost {
    double bytes, flops, floor_s;
} step_cost;

static int64_t buf_bytes(const memplan_buf *b, uint32_t id) { return b[id].bytes; }

/* A key gradient's kernel that computes the value gradient along
 * (cuda_attention.c names it "..._tc_kv"). */
static bool ends_with(const char *s, const char *tail)
{
    size_t n = strlen(s), t = strlen(tail);
    return n >= t && strcmp(s + n - t, tail) == 0;
}

static bool computes_dv(const nrt_program *p, const nrt_step *s)
{
    return s->kind == NRT_STEP_KERNEL && s->kernel < p->nkernels && ends_with(p->kernel_names[s->kernel], "_tc_kv");
}

/* The most elements any buffer of step s holds: what a reduction or row
 * kernel goes over. An op done by several kernels (a sum's partial sums and
 * their total, a loss's row losses and their mean) counts in each what that
 * kernel reads, not the op's whole input again. */
static int64_t largest_buffer(const ir_graph *g, const nrt_program *p, const nrt_step *s, const int64_t *syms)
{
    int64_t most = 0;
    for (int j = 0; j < s->nbufs; j++) {
        int64_t n = 0;
        if (s->bufs[j] < g->nnodes) ir_numel(g, &g->nodes[s->bufs[j]], syms, &n);
        else dim_eval(&g->dims[p->temps[s->bufs[j] - g->nnodes].numel], syms, &n);
        if (n > most) most = n;
    }
    return most;
}

/* FLOPs by the op's category: elementwise one per output element, reductions
 * one per input element, row-wise ops about five, matmul 2*M*N*K, attention
 * 4*(q elements)*(keys), halved when causal (its gradients do about 1.5x
 * that; counted the same). */
static double step_flops(const ir_graph *g, const nrt_program *p, const nrt_step *s, const int64_t *syms)
{
    const ir_node *n = &g->nodes[s->node];
    int64_t out = 0, in = 0;
    ir_numel(g, n, syms, &out);
    if (n->nargs) ir_numel(g, &g->nodes[ir_args(g, n)[0]], syms, &in);
    nc_op_category cat = nc_ops[n->op].category;
    if ((cat == CAT_REDUCTION || cat == CAT_ROWWISE) && s->kind == NRT_STEP_KERNEL) {
        int64_t seen = largest_buffer(g, p, s, syms);
        if (seen < in) in = seen;
    }
    switch (cat) {
    case CAT_ELEMENTWISE: return (double)out;
    case CAT_REDUCTION: return (double)in;
    case CAT_ROWWISE: return 5.0 * (double)in;
    case CAT_CONTRACTION: {
        double f = 2.0;
        for (int k = 0; k < s->nints; k++) {
            int64_t v = 1;
            dim_eval(&g->dims[s->ints[k]], syms, &v);
            f *= (double)v;
        }
        return f;
    }
    case CAT_ATTENTION: {   /* two products over every (query, key) pair a query sees */
        int64_t keys = 1;   /* the tensor-core kernels' ints: heads, tiled length, T, S */
        int at = s->grid == NRT_GRID_TILES ? 3 : 2;
        if (s->nints > at) dim_eval(&g->dims[s->ints[at]], syms, &keys);
        double f = 4.0 * (double)in * (double)keys * (n->attr.causal ? 0.5 : 1.0);
        return computes_dv(p, s) ? f * 4.0 / 3.0 : f;   /* a fourth product: dV */
    }
    default: return 0;
    }
}

/* What a step reads and writes. Attention reads and writes its operands'
 * heads wherever they lie (inside a matmul's result, a concat's columns):
 * their own sizes, not those of the buffers they lie in. */
static double step_bytes(const ir_graph *g, const nrt_program *p, const nrt_step *s, const memplan_buf *b, const int64_t *syms)
{
    if (s->grid == NRT_GRID_TILES && s->node < g->nnodes) {
        const ir_node *n = &g->nodes[s->node];
        double bytes = (double)ir_bytes(g, n, syms);
        for (int i = 0; i < n->nargs; i++) bytes += (double)ir_bytes(g, &g->nodes[ir_args(g, n)[i]], syms);
        if (computes_dv(p, s)) bytes += (double)ir_bytes(g, &g->nodes[ir_args(g, n)[2]], syms);   /* dV, v's shape */
        return bytes;
    }
    if (s->kind == NRT_STEP_COPY) return 2.0 * (double)buf_bytes(b, s->bufs[1]);
    /* a slice's kernel reads only the elements it keeps, a gather only the rows it picks (and their indices) */
    if (s->kind == NRT_STEP_KERNEL && g->nodes[s->node].op == OP_SLICE && s->nbufs == 2) return 2.0 * (double)buf_bytes(b, s->bufs[1]);
    if (s->kind == NRT_STEP_KERNEL && g->nodes[s->node].op == OP_GATHER && s->nbufs == 3)
        return 2.0 * (double)buf_bytes(b, s->bufs[2]) + (double)buf_bytes(b, s->bufs[1]);
    int unused = s->kind == NRT_STEP_MATMUL ? nrt_matmul_slots_of(s).ones : -1;   /* a fallback's (setup_column_sums) */
    /* a per-element kernel reads a value it loads at other offsets (a
     * broadcast's source, the value under a slice it reads through) once
     * an element at most */
    int64_t elements = -1;
    if (s->spread_reads && nrt_step_per_element(g, p, s) && s->nints > 0) dim_eval(&g->dims[s->ints[0]], syms, &elements);
    double bytes = 0;
    for (int j = 0; j < s->nbufs; j++) {
        if (j == unused) continue;
        double whole = (double)buf_bytes(b, s->bufs[j]);
        if (elements >= 0 && (s->spread_reads >> j & 1) && s->bufs[j] < g->nnodes) {
            double read = (double)elements * (double)dtype_size(g->nodes[s->bufs[j]].dtype);
            if (read < whole) whole = read;
        }
        bytes += whole;
    }
    return bytes;
}

/* Whether the program adds up the concat of sums c's blocks' partial sums
 * in a second kernel: the emitter spread it (cuda_emit.c joined_spread). */
static bool joined_sums_spread(const nrt_program *p, ir_value c)
{
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (p->steps[k].kind == NRT_STEP_KERNEL && p->steps[k].node == c && p->steps[k].kernel < p->nkernels &&
            ends_with(p->kernel_names[p->steps[k].kernel], "_concat_totals"))
            return true;
    return false;
}

/* The longest run of elements one warp of a concat of sums adds up alone
 * (emit_joined_sums): a few warps over a large part leave the GPU idle
 * however few bytes the kernel moves. A spread concat's parts have more
 * warps, and its second kernel's warps add up a few partials each. 0 for
 * other steps. */
static int64_t joined_sum_run(const ir_graph *g, const nrt_program *p, const nrt_step *s, const int64_t *syms)
{
    if (s->kind != NRT_STEP_KERNEL || s->grid != NRT_GRID_WARPS || s->kernel >= p->nkernels ||
        !ends_with(p->kernel_names[s->kernel], "_concat_sums") || s->node >= g->nnodes)
        return 0;
    const ir_node *c = &g->nodes[s->node];
    bool spread = joined_sums_spread(p, s->node);
    int64_t most = 0;
    for (int i = 0; i < c->nargs; i++) {
        ir_value sum = ir_args(g, c)[i];
        if (g->nodes[sum].op == OP_RESHAPE) sum = ir_args(g, &g->nodes[sum])[0];
        if (g->nodes[sum].nargs < 1) continue;
        const ir_node *x = &g->nodes[ir_args(g, &g->nodes[sum])[0]];
        int64_t count = 1;
        if (x->rank < 1 || !dim_eval(&g->dims[x->shape[x->rank - 1]], syms, &count) || count < 1) continue;
        int64_t warps = cuda_joined_sum_warps(count, spread), run = (count + warps - 1) / warps;
        if (run > most) most = run;
    }
    return most;
}

static step_cost cost_of(const ir_graph *g, const nrt_program *p, const nrt_step *s, const memplan_buf *b, const int64_t *syms)
{
    step_cost c = {.bytes = step_bytes(g, p, s, b, syms), .flops = step_flops(g, p, s, syms)};
    double rate = s->kind == NRT_STEP_MATMUL ? (s->mm_dtype == NC_F32 ? FLOOR_MATMUL_F32 : FLOOR_MATMUL_LOW)
                : s->grid == NRT_GRID_TILES ? FLOOR_MATMUL_LOW   /* mma.sync */
                                            : FLOOR_VECTOR;
    double tb = c.bytes / FLOOR_BYTES_PER_S, tf = c.flops / rate, tw = (double)joined_sum_run(g, p, s, syms) * FLOOR_WARP_ELEMENT_S;
    c.floor_s = tb > tf ? tb : tf;
    if (tw > c.floor_s) c.floor_s = tw;
    return c;
}

double inspect_floor_seconds(const ir_graph *g, const nrt_program *p, const memplan_buf *bufs, const int64_t *syms)
{
    double total = 0;   /* a run's: prepare steps run when parameters are set */
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (!p->steps[k].prepare) total += cost_of(g, p, &p->steps[k], bufs, syms).floor_s;
    return total;
}

/* A kernel's name; a library call named after what it does ("cublasLt_matmul+bias+gelu"). */
static const char *step_name(const nrt_program *p, const nrt_step *s, char buf[64])
{
    if (s->kind == NRT_STEP_KERNEL) return p->kernel_names[s->kernel];
    if (s->kind == NRT_STEP_COPY) return "copy";
    uint8_t e = s->mm_epilogue;
    snprintf(buf, 64, "cublasLt_matmul%s%s%s%s%s%s%s", e & NRT_EPI_RESIDUAL ? "+residual" : "", e & NRT_EPI_BIAS ? "+bias" : "",
             e & NRT_EPI_RELU ? "+relu" : "", e & NRT_EPI_GELU ? "+gelu" : e & NRT_EPI_DGELU ? "+dgelu" : "",
             e & NRT_EPI_BGRAD ? "+bgrad" : "", (e & NRT_EPI_AUX) && !(e & NRT_EPI_DGELU) ? "+aux" : "",
             s->mm_out_dtype != s->mm_dtype ? "+f32" : "");
    return buf;
}

static void human_bytes(double b, char *buf, size_t cap)
{
    const char *u[] = {"B", "KiB", "MiB", "GiB", "TiB"};
    int i = 0;
    while (b >= 1024 && i < 4) b /= 1024, i++;
    snprintf(buf, cap, i ? "%.2f %s" : "%.0f %s", b, u[i]);
}

/* s[0..n) with each byte that does not begin a UTF-8 character as U+FFFD,
 * on the heap: a name from a module (a source file's in Latin-1) is any
 * bytes, and jansson refuses a string that is not UTF-8, and with it the
 * step or the report the string was in. */
static char *utf8_text(const char *s, size_t n)
{
    char *t = nc_xmalloc(3 * n + 1);
    size_t m = 0;
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)s[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        json_t *one = len && len <= n - i ? json_stringn(s + i, len) : NULL;   /* jansson's own test of one character */
        if (one) memcpy(t + m, s + i, len), m += len, i += len;
        else memcpy(t + m, "\xef\xbf\xbd", 3), m += 3, i++;
        json_decref(one);
    }
    t[m] = 0;
    return t;
}

/* s (NULL: "") as a JSON string, utf8_text's where it is not UTF-8. */
static json_t *json_textn(const char *s, size_t n)
{
    json_t *j = json_stringn(s ? s : "", s ? n : 0);
    if (j) return j;
    char *t = utf8_text(s, n);
    j = json_string(t);
    free(t);
    return j;
}

static json_t *json_text(const char *s) { return json_textn(s, s ? strlen(s) : 0); }

/* o[key] = value, the key made UTF-8 as json_text makes a value. */
static void json_set_text_key(json_t *o, const char *key, json_t *value)
{
    char *k = utf8_text(key, strlen(key));
    json_object_set_new(o, k, value);
    free(k);
}

static json_t *decls_json(const ir_graph *g, const ir_tensor_decl *d, uint32_t n)
{
    json_t *a = json_array();
    for (uint32_t i = 0; i < n; i++) {
        char *type = ir_shape_str(g, d[i].dtype, d[i].rank, d[i].shape);
        json_array_append_new(a, json_pack("{s:o, s:o}", "name", json_text(d[i].name), "type", json_text(type)));
        free(type);
    }
    return a;
}

/* "file.net:12", where n came from (the file's name without its folders;
 * "" for none), on the heap: a file's name is of any length. */
static char *source_of(const ir_graph *g, const ir_node *n)
{
    if (!n->loc.file || n->loc.file > g->nfiles) return nc_xstrdup("");
    const char *f = g->files[n->loc.file - 1], *slash = strrchr(f, '/');
    return nc_xasprintf("%s:%u", slash ? slash + 1 : f, n->loc.line);
}

/* The buffers alive at the step where the most bytes are, biggest first:
 * what a memory budget has to cut. Buffers sharing memory (in place) count
 * once. */
static void print_peak_live_set(FILE *out, const ir_graph *g, const nrt_program *p, const memplan_buf *b)
{
    uint32_t nbuf = g->nnodes + p->ntemps;
    int64_t best = -1;
    uint32_t at = 0;
    for (uint32_t k = 0; k < p->nsteps; k++) {
        int64_t live = 0;
        for (uint32_t i = 0; i < nbuf; i++)
            if (b[i].bytes > 0 && b[i].first <= (int32_t)k && (int32_t)k <= b[i].last) live += b[i].bytes;
        if (live > best) best = live, at = k;
    }
    if (best <= 0) return;
    fprintf(out, "largest live set: at step %u, biggest buffers:\n", at);
    bool *shown = nc_xcalloc(nbuf + 1, sizeof *shown);
    for (int row = 0; row < 8; row++) {
        uint32_t pick = UINT32_MAX;
        for (uint32_t i = 0; i < nbuf; i++)
            if (!shown[i] && b[i].bytes > 0 && b[i].first <= (int32_t)at && (int32_t)at <= b[i].last &&
                (pick == UINT32_MAX || b[i].bytes > b[pick].bytes))
                pick = i;
        if (pick == UINT32_MAX) break;
        for (uint32_t i = 0; i < nbuf; i++)   /* its in-place partners: the same memory */
            if (b[i].offset == b[pick].offset && b[i].bytes == b[pick].bytes) shown[i] = true;
        char size[32];
        human_bytes((double)b[pick].bytes, size, sizeof size);
        if (pick < g->nnodes) {
            const ir_node *n = &g->nodes[pick];
            char *type = ir_shape_str(g, n->dtype, n->rank, n->shape), *loc = source_of(g, n);
            fprintf(out, "  %10s  %%%u %s %s %s (steps %d-%d)\n", size, pick, nc_ops[n->op].name, type, loc, b[pick].first,
                    b[pick].last);
            free(type);
            free(loc);
        } else {
            fprintf(out, "  %10s  scratch (steps %d-%d)\n", size, b[pick].first, b[pick].last);
        }
    }
    free(shown);
}

/* Each launch's floor at its first step: a batch's is the sum of its steps'. */
static double *launch_floors(const ir_graph *g, const nrt_program *p, const memplan_buf *b, const int64_t *syms)
{
    double *f = nc_xcalloc(p->nsteps + 1, sizeof *f);
    uint32_t *launch_of = nrt_program_launches(p);
    for (uint32_t k = 0; k < p->nsteps; k++) f[launch_of[k]] += cost_of(g, p, &p->steps[k], b, syms).floor_s;
    free(launch_of);
    return f;
}

/* What running independent launches side by side (NETC_STREAMS; a
 * cuBLASLt workspace a stream) could win at most: the longest chain of
 * dependent launches' floors against their sum. */
static void print_streams(FILE *out, const ir_graph *g, const nrt_program *p, const memplan_buf *b, const double *floors)
{
    uint32_t nbuf = g->nnodes + p->ntemps;
    int64_t *off = nc_xmalloc((nbuf + 1) * sizeof *off), *bytes = nc_xmalloc((nbuf + 1) * sizeof *bytes);
    for (uint32_t i = 0; i < nbuf; i++) off[i] = b[i].offset, bytes[i] = b[i].bytes;
    dag_memory mem = {off, bytes, nbuf, false};
    for (uint32_t n = 2; n <= 4; n += 2) {
        dag_plan d;
        if (dag_plan_build(p, &mem, false, n, &d, NULL, 0) != 0) continue;
        double *cost = nc_xcalloc(d.nlaunches + 1, sizeof *cost), sum = 0;
        for (uint32_t j = 0; j < d.nlaunches; j++) sum += cost[j] = floors[d.first_step[j]];
        fprintf(out, "%s %u streams %.1f us of %.1f (%u waits)", n == 2 ? "side by side (NETC_STREAMS=N), the longest chain of floors:" : ";", n,
                dag_plan_span(&d, cost) * 1e6, sum * 1e6, d.nwaits);
        free(cost);
        dag_plan_free(&d);
    }
    fprintf(out, "\n");
    free(off);
    free(bytes);
}

typedef struct launch_time {
    uint32_t step;
    double seconds;
} launch_time;

static int slowest_first(const void *x, const void *y)
{
    double a = ((const launch_time *)x)->seconds, b = ((const launch_time *)y)->seconds;
    return a > b ? -1 : a < b;
}

/* The measured total and the ten slowest launches, each with its share of
 * the run and how close it comes to its floor. */
static void print_profile(FILE *out, const ir_graph *g, const nrt_program *p, const double *floors, const inspect_profile *prof)
{
    launch_time *t = nc_xcalloc(p->nsteps + 1, sizeof *t);
    uint32_t n = 0;
    double total = 0, floor_total = 0;
    for (uint32_t k = 0; k < p->nsteps; k++)
        if (prof->step_seconds[k] > 0 && !p->steps[k].prepare)
            t[n++] = (launch_time){k, prof->step_seconds[k]}, total += prof->step_seconds[k];
    for (uint32_t k = 0; k < p->nsteps; k++) floor_total += p->steps[k].prepare ? 0 : floors[k];
    qsort(t, n, sizeof *t, slowest_first);
    fprintf(out, "measured: %.1f us a run, the sum of %u launches' device times (median of %d runs each, launched one by one, "
                 "no CUDA graph) on %s; the floor is %.0f%% of it\n",
            total * 1e6, n, prof->runs, prof->device, total > 0 ? 100 * floor_total / total : 0);
    fprintf(out, "slowest launches:\n%-4s %-34s %-34s %10s %7s %9s\n", "step", "kernel / call", "computes", "us", "share", "floor %");
    for (uint32_t i = 0; i < n && i < 10; i++) {
        const nrt_step *s = &p->steps[t[i].step];
        const ir_node *nd = &g->nodes[s->node];
        char name[64], what[64];
        snprintf(what, sizeof what, "%%%u %s%s", s->node, nc_ops[nd->op].name, s->batch >= 2 ? " (a batch)" : "");
        fprintf(out, "%-4u %-34.34s %-34.34s %10.1f %6.1f%% %8.0f%%\n", t[i].step,
                s->batch >= 2 ? p->kernel_names[s->batch_kernel] : step_name(p, s, name), what, t[i].seconds * 1e6,
                100 * t[i].seconds / total, 100 * floors[t[i].step] / t[i].seconds);
    }
    free(t);
}

/* "a, b, c": the texts joined, on the heap. */
static char *join_list(char *list, const char *more)
{
    char *joined = nc_xasprintf("%s%s%s", list ? list : "", list ? ", " : "", more);
    free(list);
    return joined;
}

/* The module's entry points, "forward, train", for the report (names of any length). */
static char *entry_points_text(const nrt_module_data *all)
{
    char *text = join_list(NULL, module_main_entry_name(all));
    for (uint32_t i = 0; i < all->nentries; i++) text = join_list(text, all->entries[i].name);
    return text;
}

/* The dims not given with --dim, "B, T" ("" for none). */
static char *defaulted_names(const ir_graph *g, const bool *sym_defaulted)
{
    char *text = NULL;
    for (uint32_t k = 0; k < g->nsyms; k++)
        if (sym_defaulted[k]) text = join_list(text, g->sym_names[k]);
    return text ? text : nc_xstrdup("");
}

/* The check of the bound sizes a session makes first refuses (a node's
 * binding rule, or a require: nnodes + its index), -1 when it refuses none. */
static int64_t first_refusal(const ir_graph *g, const int64_t *syms, tc_error *e)
{
    for (ir_value v = 0; v < g->nnodes; v++)
        if (!tc_check_binding(g, &g->nodes[v], syms, e)) return v;
    for (uint32_t i = 0; i < g->nrequires; i++)
        if (!ir_require_holds(g, &g->requires[i], syms)) return tc_check_requires(g, syms, e) ? -1 : (int64_t)(g->nnodes + i);
    return -1;
}

/* Dims not given with --dim are taken as 1, unless a session refuses that
 * binding (batch norm's N > 1 in a training step): then each such dim in
 * turn goes to the least value up to INSPECT_MAX_DEFAULT that gets past the
 * refusal, so that the report is of a step a session runs; where that ends
 * in a refusal still (T > 1 and B > T: T's 2 leaves B > T, and B was tried
 * alone before; B * T > 1024), search_together tries them together. */
#define INSPECT_MAX_DEFAULT 1024
#define INSPECT_SEARCH_BINDINGS 16384   /* bindings search_together tries dim by dim, before only equal values */

/* Whether a session accepts the binding syms. */
static bool accepted(const ir_graph *g, const int64_t *syms)
{
    tc_error e = {0};
    bool ok = first_refusal(g, syms, &e) < 0;
    tc_error_free(&e);
    return ok;
}

/* Each defaulted dim in turn raised alone while that moves the first
 * refusal (at): the first refusal left, -1 for none. */
static int64_t raise_one_by_one(const ir_graph *g, int64_t *syms, const bool *defaulted, int64_t at)
{
    tc_error e = {0};
    for (uint32_t k = 0; k < g->nsyms && at >= 0; k++) {
        if (!defaulted[k]) continue;
        int64_t moved = at;
        for (syms[k] = 2; syms[k] <= INSPECT_MAX_DEFAULT && moved == at; syms[k]++) {
            moved = first_refusal(g, syms, &e);
            tc_error_free(&e);
        }
        if (moved == at) { syms[k] = 1; continue; }
        syms[k]--;
        at = moved;
    }
    return at;
}

/* The bindings of the dims ks[0..n) to values up to top with one at top,
 * the first dim slowest: true at the first accepted, in syms. */
static bool search_shell(const ir_graph *g, int64_t *syms, const uint32_t *ks, uint32_t n, int64_t top)
{
    int64_t v[NC_MAX_SYMS];
    for (uint32_t i = 0; i < n; i++) v[i] = 1;
    for (;;) {
        bool at_top = false;
        for (uint32_t i = 0; i < n; i++) at_top |= v[i] == top;
        for (uint32_t i = 0; i < n && at_top; i++) syms[ks[i]] = v[i];
        if (at_top && accepted(g, syms)) return true;
        uint32_t i = n;
        while (i > 0 && v[i - 1] == top) v[--i] = 1;
        if (i == 0) return false;
        v[i - 1]++;
    }
}

/* How many bindings of n dims to values up to top have one at top (capped
 * past INSPECT_SEARCH_BINDINGS). */
static int64_t shell_size(uint32_t n, int64_t top)
{
    int64_t all = 1, below = 1;
    for (uint32_t i = 0; i < n && all <= INSPECT_SEARCH_BINDINGS; i++) all *= top, below *= top - 1;
    return all <= INSPECT_SEARCH_BINDINGS ? all - below : INSPECT_SEARCH_BINDINGS + 1;
}

/* The defaulted dims ks[0..n) together: every binding with values up to 2,
 * then 3..., while INSPECT_SEARCH_BINDINGS lasts, then all of them equal up
 * to INSPECT_MAX_DEFAULT; the binding found, each dim then lowered to the
 * least value still accepted, in syms. false (the dims at 1) where none is. */
static bool search_together(const ir_graph *g, int64_t *syms, const uint32_t *ks, uint32_t n)
{
    bool found = false;
    int64_t top = 2, tried = 0;
    for (; !found && top <= INSPECT_MAX_DEFAULT && tried + shell_size(n, top) <= INSPECT_SEARCH_BINDINGS; top++) {
        tried += shell_size(n, top);
        found = search_shell(g, syms, ks, n, top);
    }
    for (; !found && top <= INSPECT_MAX_DEFAULT; top++) {
        for (uint32_t i = 0; i < n; i++) syms[ks[i]] = top;
        found = accepted(g, syms);
    }
    if (!found) {
        for (uint32_t i = 0; i < n; i++) syms[ks[i]] = 1;
        return false;
    }
    for (uint32_t i = 0; i < n; i++) {
        int64_t keep = syms[ks[i]];   /* accepted, the dims before it lowered: the search stops there at the latest */
        for (syms[ks[i]] = 1; syms[ks[i]] < keep && !accepted(g, syms);) syms[ks[i]]++;
    }
    return true;
}

/* syms with the defaulted dims taken as above, raised[k] where dim k is not
 * 1; false, with the first refusal of all 1s in bad, where no binding tried
 * is accepted. */
static bool bind_defaults(const ir_graph *g, int64_t *syms, const bool *defaulted, bool *raised, tc_error *bad)
{
    int64_t at = first_refusal(g, syms, bad);
    if (at >= 0 && raise_one_by_one(g, syms, defaulted, at) >= 0) {
        uint32_t ks[NC_MAX_SYMS], n = 0;
        for (uint32_t k = 0; k < g->nsyms; k++)
            if (defaulted[k]) syms[k] = 1, ks[n++] = k;
        if (n == 0 || !search_together(g, syms, ks, n)) return false;
    }
    for (uint32_t k = 0; k < g->nsyms; k++) raised[k] = defaulted[k] && syms[k] != 1;
    return true;
}

/* "(... taken as 1, but B as 2, the least a session accepts: the require at ...)": its
 * length, written into out as far as cap allows. */
static size_t defaults_note_text(const ir_graph *g, const int64_t *syms, const bool *raised, const tc_error *why, char *out,
                                 size_t cap)
{
    size_t n = nc_appendf(out, cap, 0, "(symbolic dims not bound with --dim are taken as 1");
    bool any = false;
    for (uint32_t k = 0; k < g->nsyms; k++)
        if (raised[k]) n = nc_appendf(out, cap, n, "%s %s as %lld", any ? "," : ", but", g->sym_names[k], (long long)syms[k]), any = true;
    if (any) n = nc_appendf(out, cap, n, ", the least a session accepts: %s", why->msg);
    return nc_appendf(out, cap, n, ")");
}

/* defaults_note_text's text on the heap: it names dims and quotes a require's message, of any length. */
static char *defaults_note(const ir_graph *g, const int64_t *syms, const bool *raised, const tc_error *why)
{
    size_t n = defaults_note_text(g, syms, raised, why, NULL, 0) + 1;
    char *note = nc_xmalloc(n);
    defaults_note_text(g, syms, raised, why, note, n);
    return note;
}

/* The --dim values of the module's symbolic dims in syms, each dim not
 * given at 1 and marked in sym_defaulted: whether any was not given. */
static bool bind_given_dims(const ir_graph *g, const char *const *dim_names, const int64_t *dim_values, int ndims,
                            int64_t *syms, bool *sym_defaulted)
{
    bool defaulted = false;
    for (uint32_t k = 0; k < g->nsyms; k++) {
        syms[k] = -1;
        for (int i = 0; i < ndims; i++)
            if (strcmp(dim_names[i], g->sym_names[k]) == 0) syms[k] = dim_values[i];
        sym_defaulted[k] = syms[k] < 0;
        if (syms[k] < 0) syms[k] = 1, defaulted = true;
    }
    return defaulted;
}

/* Whether the module has every dim given with --dim: a misspelt name is an
 * error, with the names it has, not a size silently left at 1. */
static bool given_dims_known(const ir_graph *g, const char *const *dim_names, int ndims)
{
    for (int i = 0; i < ndims; i++)
        if (ir_sym_find(g, dim_names[i]) < 0) {
            char *names = ir_sym_names_str(g);
            fprintf(stderr, "netc: the module has no symbolic dim %s%s\n", dim_names[i], names);
            free(names);
            return false;
        }
    return true;
}

/* Why there is no report: the binding a session refuses (bad), and the
 * --dim that gives sizes it accepts. */
static void print_refusal(const ir_graph *g, const bool *sym_defaulted, bool defaulted, const tc_error *bad)
{
    char *names = defaulted_names(g, sym_defaulted);
    const char *first = NULL;
    for (uint32_t k = 0; k < g->nsyms && !first; k++)
        if (sym_defaulted[k]) first = g->sym_names[k];
    if (defaulted)
        fprintf(stderr, "netc: a session refuses this binding, with %s taken as 1 (not given with --dim) and no value up to %d "
                        "of %s accepted either: %s\n", names, INSPECT_MAX_DEFAULT, names, bad->msg);
    else fprintf(stderr, "netc: a session refuses this binding: %s\n", bad->msg);
    if (bad->hint[0]) fprintf(stderr, "  hint: %s\n", bad->hint);
    if (first) fprintf(stderr, "  hint: give the sizes to inspect with --dim (--dim %s=N)\n", first);
    free(names);
}

/* One entry point of a module, its dims bound and its memory planned: what
 * the report's parts read. */
typedef struct inspect_view {
    const char *path, *entry, *entries;   /* the file; the entry shown; all of them, "forward, train" */
    const nrt_module_data *m;
    const ir_graph *g;
    const nrt_program *p;
    const int64_t *syms;
    const bool *sym_defaulted, *raised;   /* not given with --dim; of those, not left at 1 */
    bool defaulted;                       /* some dim was not given */
    const char *note;                     /* what the defaulted dims were taken as */
    const memplan_result *plan;
    const memplan_buf *b;
    const double *floors;                 /* launch_floors */
    const inspect_profile *prof;
} inspect_view;

/* The report's sums: a run's steps, and apart from them the prepare steps,
 * which run once per change of the parameters. */
typedef struct inspect_totals {
    double bytes, flops, floor, recompute_flops;
    double prep_bytes, prep_floor;
    uint32_t launches, prep_steps, prep_launches;
    double param_bytes;
    int64_t staged, session_bytes;   /* landing buffers of a training loop's inputs; all a session holds */
} inspect_totals;

/* The totals known before the steps are costed: parameters, session
 * memory, launches (prepare launches apart). */
static inspect_totals totals_of_plan(const inspect_view *v)
{
    const ir_graph *g = v->g;
    inspect_totals t = {0};
    for (uint32_t n = 0; n < g->nnodes; n++)
        if (g->nodes[n].op == OP_PARAM) t.param_bytes += (double)v->b[n].bytes;
    t.staged = nrt_program_staged_bytes(g, v->syms);   /* a training loop's inputs travel through landing buffers */
    t.session_bytes = v->plan->arena_bytes + nrt_program_side_bytes(v->p, t.staged);
    t.launches = nrt_program_num_launches(v->p);
    for (uint32_t k = 0; k < v->p->nsteps; k += nrt_step_launch_len(&v->p->steps[k])) t.prep_launches += v->p->steps[k].prepare;
    t.launches -= t.prep_launches;
    return t;
}

static void print_text_head(const inspect_view *v, const inspect_totals *t, FILE *out)
{
    fprintf(out, "module %s: model %s, entry %s (entry points: %s), %u steps, %u launches, %u kernels\n", v->path, v->g->name,
            v->entry, v->entries, v->p->nsteps, t->launches, v->p->nkernels);
    if (v->defaulted) fprintf(out, "%s\n", v->note);
    fprintf(out, "%-4s %-34s %-34s %12s %12s %10s%s\n", "step", "kernel / call", "computes", "bytes", "flops", "floor us",
            v->prof ? "   measured us" : "");
}

/* Step k as a JSON object; launch_step: the step whose launch runs it. */
static json_t *step_json(const inspect_view *v, uint32_t k, const step_cost *c, const char *loc, uint32_t launch_step)
{
    const nrt_step *s = &v->p->steps[k];
    const ir_node *n = &v->g->nodes[s->node];
    char name[64];
    json_t *o = json_pack("{s:o, s:f, s:f, s:f, s:s, s:o}", "name", json_text(step_name(v->p, s, name)), "bytes", c->bytes, "flops",
                          c->flops, "floor_us", c->floor_s * 1e6, "op", nc_ops[n->op].name, "source", json_text(loc));
    json_object_set_new(o, "prepare", json_boolean(s->prepare));
    json_object_set_new(o, "launch_step", json_integer(launch_step));   /* the step whose launch runs it (a batch's first) */
    if (v->prof) json_object_set_new(o, "measured_us", launch_step == k ? json_real(v->prof->step_seconds[k] * 1e6) : json_null());
    return o;
}

/* Step k's row of the text report. */
static void print_step_row(const inspect_view *v, uint32_t k, const step_cost *c, const char *loc, uint32_t launch_step, FILE *out)
{
    const nrt_step *s = &v->p->steps[k];
    const ir_node *n = &v->g->nodes[s->node];
    char what[128] = "", name[64];   /* what: shown in 34 columns */
    snprintf(what, sizeof what, "%%%u %s %s", s->node, nc_ops[n->op].name, loc);
    fprintf(out, "%-4u %-34.34s %-34.34s %12.0f %12.0f %10.2f", k, step_name(v->p, s, name), what, c->bytes, c->flops,
            c->floor_s * 1e6);
    if (launch_step != k) {
        fprintf(out, "   (in step %u's launch)", launch_step);
    } else {
        if (v->prof) fprintf(out, " %13.2f", v->prof->step_seconds[k] * 1e6);
        if (s->batch >= 2) fprintf(out, " (one launch: steps %u-%u)", k, k + s->batch - 1u);
    }
    fprintf(out, "%s\n", s->prepare ? "  once" : "");
}

/* Each step costed into t, as a row of the text (as_json false) and an
 * object of steps_j (and of kernels, for a kernel's). */
static void report_steps(const inspect_view *v, bool as_json, inspect_totals *t, json_t *kernels, json_t *steps_j, FILE *out)
{
    uint32_t *launch_of = nrt_program_launches(v->p);
    for (uint32_t k = 0; k < v->p->nsteps; k++) {
        const nrt_step *s = &v->p->steps[k];
        step_cost c = cost_of(v->g, v->p, s, v->b, v->syms);
        if (s->prepare) t->prep_bytes += c.bytes, t->prep_floor += c.floor_s, t->prep_steps++;
        else t->bytes += c.bytes, t->flops += c.flops, t->floor += c.floor_s;
        const ir_node *n = &v->g->nodes[s->node];
        if (n->flags & IR_FLAG_RECOMPUTE) t->recompute_flops += c.flops;
        char *loc = source_of(v->g, n);   /* whole in the JSON, cut to its column in the text */
        json_t *o = step_json(v, k, &c, loc, launch_of[k]);
        json_array_append(steps_j, o);
        if (s->kind == NRT_STEP_KERNEL) json_array_append(kernels, o);
        json_decref(o);
        if (!as_json) print_step_row(v, k, &c, loc, launch_of[k], out);
        free(loc);
    }
    free(launch_of);
}

/* The entry points "forward, train" as a JSON array of names. */
static json_t *entry_points_json(const char *entries)
{
    json_t *a = json_array();
    for (const char *e = entries, *next; e; e = next) {
        next = strstr(e, ", ");
        json_array_append_new(a, json_textn(e, next ? (size_t)(next - e) : strlen(e)));
        if (next) next += 2;
    }
    return a;
}

static json_t *outputs_json(const ir_graph *g)
{
    json_t *outs = json_array();
    for (uint32_t i = 0; i < g->noutputs; i++) {
        const ir_node *n = &g->nodes[g->outputs[i].value];
        char *type = ir_shape_str(g, n->dtype, n->rank, n->shape);
        json_array_append_new(outs, json_pack("{s:o, s:o}", "name", json_text(g->outputs[i].name), "type", json_text(type)));
        free(type);
    }
    return outs;
}

/* The report's figures as a JSON object (kernels and steps_j: report_steps'). */
static json_t *report_json(const inspect_view *v, const inspect_totals *t, json_t *kernels, json_t *steps_j)
{
    const ir_graph *g = v->g;
    const memplan_result *plan = v->plan;
    json_t *targets = json_array();
    for (uint32_t i = 0; i < v->m->nimages; i++) json_array_append_new(targets, json_text(v->m->images[i].arch));
    json_t *dims = json_object();
    for (uint32_t k = 0; k < g->nsyms; k++) json_set_text_key(dims, g->sym_names[k], json_integer(v->syms[k]));
    return json_pack("{s:o, s:o, s:o, s:o, s:o, s:I, s:f, s:f, s:f, s:f, s:I, s:I, s:I, s:f, s:o, s:o}", "model", json_text(g->name),
                     "targets", targets, "dims", dims, "kernels", kernels, "steps", steps_j, "launches",
                     (json_int_t)t->launches, "total_bytes_moved", t->bytes, "total_flops", t->flops, "recompute_flops",
                     t->recompute_flops, "floor_us", t->floor * 1e6, "peak_memory_bytes", (json_int_t)plan->arena_bytes,
                     "peak_lower_bound_bytes", (json_int_t)plan->lower_bound, "in_place_steps", (json_int_t)plan->in_place,
                     "param_bytes", t->param_bytes, "inputs", decls_json(g, g->inputs, g->ninputs), "outputs", outputs_json(g));
}

/* What the text's first lines and its closing lines say beside the figures:
 * which entry point this is, which dims were not given (taken as 1), the
 * session's memory, the prepare steps, the measured times. */
static void add_json_context(const inspect_view *v, const inspect_totals *t, json_t *root)
{
    const ir_graph *g = v->g;
    json_t *unbound = json_array(), *chosen = json_object();   /* chosen: every dim not given, at its value: 1, or what a session accepts */
    for (uint32_t k = 0; k < g->nsyms; k++) {
        if (v->sym_defaulted[k] && !v->raised[k]) json_array_append_new(unbound, json_text(g->sym_names[k]));
        if (v->sym_defaulted[k]) json_set_text_key(chosen, g->sym_names[k], json_integer(v->syms[k]));
    }
    json_object_set_new(root, "entry", json_text(v->entry));
    json_object_set_new(root, "entry_points", entry_points_json(v->entries));
    json_object_set_new(root, "dims_taken_as_1", unbound);
    json_object_set_new(root, "dims_defaulted", chosen);
    json_object_set_new(root, "session_bytes", json_integer(t->session_bytes));
    json_object_set_new(root, "kept_bytes", json_integer(v->plan->kept_bytes));
    json_object_set_new(root, "prepare_steps", json_integer(t->prep_steps));
    json_object_set_new(root, "prepare_launches", json_integer(t->prep_launches));
    json_object_set_new(root, "prepare_bytes", json_real(t->prep_bytes));
    json_object_set_new(root, "prepare_floor_us", json_real(t->prep_floor * 1e6));
    if (v->prof) {
        double measured = 0;
        for (uint32_t k = 0; k < v->p->nsteps; k++) measured += v->p->steps[k].prepare ? 0 : v->prof->step_seconds[k];
        json_object_set_new(root, "measured_us", json_real(measured * 1e6));
        json_object_set_new(root, "profile_device", json_text(v->prof->device));
        json_object_set_new(root, "profile_runs", json_integer(v->prof->runs));
    }
}

static void print_json(const inspect_view *v, const inspect_totals *t, json_t *kernels, json_t *steps_j, FILE *out)
{
    json_t *root = report_json(v, t, kernels, steps_j);
    add_json_context(v, t, root);
    char *text = json_dumps(root, JSON_INDENT(2) | JSON_PRESERVE_ORDER);
    fprintf(out, "%s\n", text);
    free(text);
    json_decref(root);
}

/* The text report's totals: bytes, FLOPs and floor of a run, of the prepare
 * steps, the memory plan and what a session holds. */
static void print_text_totals(const inspect_view *v, const inspect_totals *t, FILE *out)
{
    const memplan_result *plan = v->plan;
    char pb[32], tb[32], lb[32], par[32];
    human_bytes(plan->arena_bytes, pb, sizeof pb);
    human_bytes(plan->lower_bound, lb, sizeof lb);
    human_bytes(t->bytes, tb, sizeof tb);
    human_bytes(t->param_bytes, par, sizeof par);
    fprintf(out, "\ntotal: %s moved, %.3g FLOPs (%.3g recomputing @checkpoint blocks), roofline floor %.1f us on an H100\n", tb,
            t->flops, t->recompute_flops, t->floor * 1e6);
    if (t->prep_steps) {
        char ppb[32];
        human_bytes(t->prep_bytes, ppb, sizeof ppb);
        fprintf(out, "once per change of the parameters (steps marked once, not in the total): %u steps in %u launches, "
                     "%s moved, floor %.1f us\n", t->prep_steps, t->prep_launches, ppb, t->prep_floor * 1e6);
    }
    char kb[32];
    human_bytes((double)plan->kept_bytes, kb, sizeof kb);
    fprintf(out, "memory plan: peak %s (lower bound %s: the largest live set), parameters %s; %u steps in place; "
                 "%s kept between runs, the rest free for another session's runs (netc train's evaluation)\n", pb,
            lb, par, plan->in_place, kb);
    char sb[32];
    human_bytes((double)t->session_bytes, sb, sizeof sb);
    fprintf(out, "a GPU session holds %s: the arena, cuBLASLt's workspace, kernel-argument tables%s (what "
                 "--memory-budget bounds)\n", sb, t->staged ? " and the landing buffers of prefetched inputs" : "");
}

/* The text report after its step rows. */
static void print_text_tail(const inspect_view *v, const inspect_totals *t, FILE *out)
{
    print_text_totals(v, t, out);
    print_peak_live_set(out, v->g, v->p, v->b);
    print_streams(out, v->g, v->p, v->b, v->floors);
    if (v->prof) print_profile(out, v->g, v->p, v->floors, v->prof);
    fprintf(out, "targets:");
    for (uint32_t i = 0; i < v->m->nimages; i++) fprintf(out, " %s%s", v->m->images[i].arch, v->m->images[i].is_ptx ? "(ptx)" : "");
    fprintf(out, "%s\n", v->m->nimages ? "" : " none (CUDA source only)");
}

/* The report of v, its memory planned, as text or JSON. */
static void print_report(inspect_view *v, bool as_json, FILE *out)
{
    inspect_totals t = totals_of_plan(v);
    json_t *kernels = json_array(), *steps_j = json_array();
    if (!as_json) print_text_head(v, &t, out);
    double *floors = launch_floors(v->g, v->p, v->b, v->syms);
    v->floors = floors;
    report_steps(v, as_json, &t, kernels, steps_j, out);
    if (as_json) {
        print_json(v, &t, kernels, steps_j, out);
    } else {
        json_decref(kernels);
        json_decref(steps_j);
        print_text_tail(v, &t, out);
    }
    v->floors = NULL;
    free(floors);
}

/* v's dims bound (the --dim values, the rest as bind_defaults takes them)
 * and its memory planned, then its report: the process exit code. */
static int report_entry(inspect_view *v, const char *const *dim_names, const int64_t *dim_values, int ndims, bool as_json,
                        FILE *out)
{
    const ir_graph *g = v->g;
    int64_t syms[NC_MAX_SYMS];
    bool sym_defaulted[NC_MAX_SYMS] = {0}, raised[NC_MAX_SYMS] = {0};
    bool defaulted = bind_given_dims(g, dim_names, dim_values, ndims, syms, sym_defaulted);
    if (!given_dims_known(g, dim_names, ndims)) return 2;
    tc_error bad = {0};   /* a binding a session refuses has no numbers to show */
    if (!bind_defaults(g, syms, sym_defaulted, raised, &bad)) {
        print_refusal(g, sym_defaulted, defaulted, &bad);
        tc_error_free(&bad);
        return 1;
    }
    char *note = defaults_note(g, syms, raised, &bad);
    tc_error_free(&bad);
    char err[1024];
    memplan_result plan;
    memplan_buf *b = program_plan_memory(g, v->p, syms, &plan, err, sizeof err);
    if (!b) {
        fprintf(stderr, "netc: %s\n", err);
        free(note);
        return 1;
    }
    v->syms = syms, v->sym_defaulted = sym_defaulted, v->raised = raised, v->defaulted = defaulted;
    v->note = note, v->plan = &plan, v->b = b;
    print_report(v, as_json, out);
    *v = (inspect_view){0};   /* it pointed into this frame */
    free(b);
    free(note);
    return 0;
}

int inspect_module(const char *path, const char *entry, const char *const *dim_names, const int64_t *dim_values,
                   int ndims, bool as_json, const inspect_profile *prof, FILE *out)
{
    nrt_module_data all, m;
    char err[1024];
    if (module_read(path, &all, err, sizeof err) != 0) {
        fprintf(stderr, "netc: %s\n", err);
        return 1;
    }
    char *entries = entry_points_text(&all);
    const char *shown = entry ? entry : module_main_entry_name(&all);   /* a literal: it outlives all */
    if (module_take_entry(&all, entry, &m, err, sizeof err) != 0) {
        fprintf(stderr, "netc: %s\n", err);
        free(entries);
        return 1;
    }
    inspect_view v = {.path = path, .entry = shown, .entries = entries, .m = &m, .g = m.graph, .p = &m.program, .prof = prof};
    int rc = report_entry(&v, dim_names, dim_values, ndims, as_json, out);
    module_data_free(&m);
    free(entries);
    return rc;
}
