/* session.c - libnetrt's public API (netrt.h): modules, sessions on the CPU
 * executor or the GPU, inputs, outputs and parameters. */
#include "netrt.h"
#include "cpu_exec.h"
#include "file_open.h"
#include "gpu.h"
#include "module.h"
#include "tensor_io.h"
#include "typecheck.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

struct nrt_module {
    nrt_module_data d;
};

struct nrt_session {
    const nrt_module *m;
    const ir_graph *g;
    char device[256];
    int64_t syms[NC_MAX_SYMS];
    gpu_session *gpu;              /* NULL: the CPU executor */
    cpu_tensor *inputs;            /* CPU: the values; GPU: unused */
    bool *input_set;
    cpu_tensor *params;            /* host copy of every parameter */
    ir_value *input_node, *param_node;   /* IR value of each, IR_NONE if optimised away */
    cpu_exec_result result;
    cpu_pool pool;                 /* CPU: the result's storage, kept from run to run */
    bool have_result;
    bool ran;                      /* the outputs of a run are there to read: values of the run's own,
                                      never an input's or a parameter's memory (netc gives such an output a
                                      copy, the module reader refuses one without), so what is set or updated
                                      after the run leaves them as the run made them */
    /* GPU: the device copy is behind the host's, which holds the value (a
     * copy to the device failed); copied before the next run, which a
     * failing copy refuses. Never a run on some new values and some old. */
    bool *input_stale, *param_stale;
    /* GPU: a training run failed on the device part way, so this parameter,
     * one it updates, may hold some updated values and some old (kernels
     * stop where they are). Until it is set again, nothing reads it: no run,
     * no get_param, no save_weights. Never stale at the same time: a stale
     * parameter refuses the run before it starts. */
    bool *param_torn;
};

/* text into the API's fixed message: whole when it fits, else its start and
 * its end (where a hint or the reason is) around a "..." that shows the cut,
 * each cut between whole UTF-8 characters */
static void fit_message(char *dst, size_t cap, const char *text)
{
    size_t len = strlen(text);
    if (len < cap) {
        memcpy(dst, text, len + 1);
        return;
    }
    size_t tail = (cap - 4) / 3, head = cap - 4 - tail;
    while (head > 0 && ((unsigned char)text[head] & 0xc0) == 0x80) head--;
    const char *end = text + len - tail;
    while (*end && ((unsigned char)*end & 0xc0) == 0x80) end++;
    memcpy(dst, text, head);
    memcpy(dst + head, "...", 3);
    memmove(dst + head + 3, end, strlen(end) + 1);
}

static nrt_status set_err(nrt_error *e, nrt_status st, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static nrt_status set_err(nrt_error *e, nrt_status st, const char *fmt, ...)
{
    if (e) {
        va_list ap;
        va_start(ap, fmt);
        char *text = nc_xvasprintf(fmt, ap);
        va_end(ap);
        fit_message(e->message, sizeof e->message, text);
        free(text);
        e->status = st;
    }
    return st;
}

/* What the runtime's parts below write their errors into: larger than the
 * API's message, so that a text they cut is one set_err cuts visibly too. */
#define WORK_ERR 4096

/* msg as a part below left it in its buffer of cap bytes: a text that filled
 * it was cut there, and ends in "..." to say so. */
static const char *work_text(char *msg, size_t cap)
{
    if (strlen(msg) + 1 >= cap) nc_text_cut(msg, cap);
    return msg;
}

/* A NULL where a call wants a module, a session, a name or a buffer is the
 * caller's error to report, not a pointer to follow. */
#define NEED(p, err) \
    do { if (!(p)) return set_err(err, NRT_ERR_ARGUMENT, "%s: %s is NULL", __func__, #p); } while (0)

/* An error reported by a call beneath, put in the caller's words:
 * before + the message + after, the status kept. */
static void err_reword(nrt_error *e, const char *before, const char *after)
{
    if (!e) return;
    char *why = nc_xstrdup(e->message);
    set_err(e, e->status, "%s%s%s", before, why, after);
    free(why);
}

static nrt_status ok(nrt_error *e)
{
    if (e) e->status = NRT_OK, e->message[0] = 0;
    return NRT_OK;
}

const char *nrt_dtype_name(nrt_dtype t) { return dtype_name((nc_dtype)t); }
size_t nrt_dtype_size(nrt_dtype t) { return t <= NRT_BOOL ? dtype_size((nc_dtype)t) : 0; }

/* ---- modules -------------------------------------------------------- */

nrt_status nrt_module_load(const char *path, nrt_module **out, nrt_error *err)
{
    NEED(out, err);
    *out = NULL;
    NEED(path, err);
    nrt_module *m = nc_xcalloc(1, sizeof *m);
    char msg[WORK_ERR];
    int rc = module_read(path, &m->d, msg, sizeof msg);
    if (rc != 0) {
        free(m);
        return set_err(err, rc == FILE_OPEN_IO_ERROR ? NRT_ERR_IO : NRT_ERR_FORMAT, "%s", work_text(msg, sizeof msg));
    }
    *out = m;
    return ok(err);
}

nrt_status nrt_module_load_entry(const char *path, const char *entry, nrt_module **out, nrt_error *err)
{
    NEED(out, err);
    *out = NULL;
    NEED(path, err);
    nrt_status st = nrt_module_load(path, out, err);
    if (st != NRT_OK) return st;
    nrt_module_data all = (*out)->d;
    char msg[WORK_ERR];
    if (module_take_entry(&all, entry, &(*out)->d, msg, sizeof msg) != 0) {
        free(*out);
        *out = NULL;
        return set_err(err, NRT_ERR_ARGUMENT, "%s: %s", path, work_text(msg, sizeof msg));
    }
    return ok(err);
}

const ir_graph *nrt_module_graph(const nrt_module *m) { return m->d.graph; }

void nrt_module_free(nrt_module *m)
{
    if (!m) return;
    module_data_free(&m->d);
    free(m);
}

static void decl_info(const ir_graph *g, const ir_tensor_decl *d, nrt_tensor_info *info)
{
    info->name = d->name;
    info->dtype = (nrt_dtype)d->dtype;
    info->rank = d->rank;
    for (int i = 0; i < d->rank; i++) {
        int64_t v;
        info->shape[i] = dim_is_const(&g->dims[d->shape[i]], &v) ? v : -1;
    }
}

int nrt_module_num_inputs(const nrt_module *m) { return m ? (int)m->d.graph->ninputs : 0; }
int nrt_module_num_outputs(const nrt_module *m) { return m ? (int)m->d.graph->noutputs : 0; }
int nrt_module_num_params(const nrt_module *m) { return m ? (int)m->d.graph->nparams : 0; }
int nrt_module_num_dims(const nrt_module *m) { return m ? (int)m->d.graph->nsyms : 0; }
int nrt_module_num_steps(const nrt_module *m) { return m ? (int)m->d.program.nsteps : 0; }
const char *nrt_module_dim_name(const nrt_module *m, int i)
{
    return m && i >= 0 && (uint32_t)i < m->d.graph->nsyms ? m->d.graph->sym_names[i] : NULL;
}

const char *nrt_module_input_dim(const nrt_module *m, int input, int axis)
{
    if (!m) return NULL;
    const ir_graph *g = m->d.graph;
    if (input < 0 || (uint32_t)input >= g->ninputs || axis < 0 || axis >= g->inputs[input].rank) return NULL;
    const dim_expr *d = &g->dims[g->inputs[input].shape[axis]];
    if (d->nterms != 1 || d->term[0].coeff != 1 || d->term[0].nfactors != 1) return NULL;
    return g->sym_names[d->term[0].sym[0]];
}

nrt_status nrt_module_input(const nrt_module *m, int i, nrt_tensor_info *info)
{
    if (!m || !info || i < 0 || (uint32_t)i >= m->d.graph->ninputs) return NRT_ERR_ARGUMENT;
    decl_info(m->d.graph, &m->d.graph->inputs[i], info);
    return NRT_OK;
}

nrt_status nrt_module_param(const nrt_module *m, int i, nrt_tensor_info *info)
{
    if (!m || !info || i < 0 || (uint32_t)i >= m->d.graph->nparams) return NRT_ERR_ARGUMENT;
    decl_info(m->d.graph, &m->d.graph->params[i].decl, info);
    return NRT_OK;
}

nrt_status nrt_module_output(const nrt_module *m, int i, nrt_tensor_info *info)
{
    if (!m || !info) return NRT_ERR_ARGUMENT;
    const ir_graph *g = m->d.graph;
    if (i < 0 || (uint32_t)i >= g->noutputs) return NRT_ERR_ARGUMENT;
    const ir_node *n = &g->nodes[g->outputs[i].value];
    ir_tensor_decl d = {.name = g->outputs[i].name, .dtype = n->dtype, .rank = n->rank};
    memcpy(d.shape, n->shape, sizeof d.shape);
    decl_info(g, &d, info);
    return NRT_OK;
}

/* ---- sessions ------------------------------------------------------- */

nrt_session_opts nrt_session_defaults(void)
{
    return (nrt_session_opts){.device = NRT_DEVICE_AUTO, .use_cuda_graph = 1};
}

const char *nrt_session_device(const nrt_session *s) { return s ? s->device : NULL; }
int64_t nrt_session_arena_bytes(const nrt_session *s) { return s && s->gpu ? gpu_arena_bytes(s->gpu) : 0; }
int64_t nrt_session_device_bytes(const nrt_session *s) { return s && s->gpu ? gpu_device_bytes(s->gpu) : 0; }

/* The option lists themselves: counted, present, and each name once (a
 * second value for a dim would silently win). */
static nrt_status check_dim_opts(const nrt_session_opts *o, nrt_error *err)
{
    if (o->ndims < 0) return set_err(err, NRT_ERR_ARGUMENT, "session options: ndims is %d", o->ndims);
    if (o->ndims > 0 && (!o->dim_names || !o->dim_values))
        return set_err(err, NRT_ERR_ARGUMENT, "session options: ndims is %d but dim_%s is NULL", o->ndims,
                       o->dim_names ? "values" : "names");
    for (int i = 0; i < o->ndims; i++) {
        if (!o->dim_names[i]) return set_err(err, NRT_ERR_ARGUMENT, "session options: dim_names[%d] is NULL", i);
        for (int j = 0; j < i; j++)
            if (strcmp(o->dim_names[i], o->dim_names[j]) == 0)
                return set_err(err, NRT_ERR_ARGUMENT, "session options: dim %s is bound twice (dim_names[%d] and [%d])",
                               o->dim_names[i], j, i);
    }
    return NRT_OK;
}

/* Where d is 0 at syms: a hint naming the symbols a larger value of which
 * makes d larger (T in T - 1, not S in T - S); "" where none does. On the
 * heap: dim names have no length limit. */
static char *raise_hint(const ir_graph *g, const dim_expr *d, const int64_t *syms)
{
    int64_t more[NC_MAX_SYMS], was, now;
    char *names = NULL, *dims = NULL;
    memcpy(more, syms, sizeof more);
    bool known = dim_eval(d, syms, &was);
    for (uint32_t k = 0; known && k < g->nsyms; k++) {
        more[k] = syms[k] + 1;
        if (dim_eval(d, more, &now) && now > was) {
            char *n = nc_xasprintf("%s%s%s", names ? names : "", names ? " or " : "", g->sym_names[k]);
            char *m = nc_xasprintf("%s%s--dim %s=N", dims ? dims : "", dims ? ", " : "", g->sym_names[k]);
            free(names), free(dims);
            names = n, dims = m;
        }
        more[k] = syms[k];
    }
    char *hint = names ? nc_xasprintf("\n  hint: bind a larger %s (netc run: %s)", names, dims) : nc_xasprintf("%s", "");
    free(names), free(dims);
    return hint;
}

/* A symbolic extent that is 0 at these sizes (T - 1 at T = 1): an empty
 * tensor, whose mean or log is a NaN or an inf far from its cause. A
 * constant 0 is the model's own, not the binding's. */
static nrt_status refuse_empty(const ir_graph *g, const ir_node *n, uint32_t dim, const int64_t *syms, nrt_error *err)
{
    char *shape = ir_shape_str(g, n->dtype, n->rank, n->shape), *at = ir_syms_str(g, syms), *size = ir_dim_str(g, dim);
    char *hint = raise_hint(g, &g->dims[dim], syms);
    nrt_status st = set_err(err, NRT_ERR_ARGUMENT, "at %s a tensor of %s would be empty (its size is 0: %s = 0)%s", at, shape, size, hint);
    free(hint);
    free(size);
    free(at);
    free(shape);
    return st;
}

/* Each dim is capped, but products of them (B*T, a tensor's element count)
 * can still overflow, a difference (T - 2) go negative, or be 0 (T - 1 at
 * T = 1); every later size computation, the API's shapes among them,
 * assumes they are sizes, and no run means an empty tensor. */
static nrt_status check_sizes(const nrt_session *s, nrt_error *err)
{
    const ir_graph *g = s->g;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        int64_t bytes = (int64_t)dtype_size(n->dtype), d, c;
        bool fits = true;
        for (int i = 0; i < n->rank && fits; i++) {
            fits = dim_eval(&g->dims[n->shape[i]], s->syms, &d) && !__builtin_mul_overflow(bytes, d, &bytes);
            if (fits && d == 0 && !dim_is_const(&g->dims[n->shape[i]], &c)) return refuse_empty(g, n, n->shape[i], s->syms, err);
        }
        if (fits) continue;
        char *shape = ir_shape_str(g, n->dtype, n->rank, n->shape), *at = ir_syms_str(g, s->syms);
        nrt_status st = set_err(err, NRT_ERR_ARGUMENT, "at %s a tensor of %s has no size (negative, or past 2^63 bytes)", at, shape);
        free(at);
        free(shape);
        return st;
    }
    return NRT_OK;
}

static nrt_status bind_dims(nrt_session *s, const nrt_session_opts *o, nrt_error *err)
{
    const ir_graph *g = s->g;
    nrt_status st = check_dim_opts(o, err);
    if (st) return st;
    /* A misspelt name first: it explains the unbound dim that would follow. */
    for (int i = 0; i < o->ndims; i++)
        if (ir_sym_find(g, o->dim_names[i]) < 0) {
            char *names = ir_sym_names_str(g);
            st = set_err(err, NRT_ERR_ARGUMENT, "the module has no symbolic dim %s%s", o->dim_names[i], names);
            free(names);
            return st;
        }
    for (uint32_t k = 0; k < g->nsyms; k++) {
        int found = -1;
        for (int i = 0; i < o->ndims; i++)
            if (strcmp(o->dim_names[i], g->sym_names[k]) == 0) found = i;
        if (found < 0) return set_err(err, NRT_ERR_ARGUMENT, "symbolic dim %s is not bound (session options dim_names/dim_values; netc run, netc inspect --profile: --dim %s=N)", g->sym_names[k], g->sym_names[k]);
        if (o->dim_values[found] <= 0 || o->dim_values[found] > DIM_MAX_NUMEL)
            return set_err(err, NRT_ERR_ARGUMENT, "dim %s = %lld is not a usable size", g->sym_names[k], (long long)o->dim_values[found]);
        s->syms[k] = o->dim_values[found];
    }
    /* ops' limits on the values (a gather's iota past its table) and the
     * model's requires, here, before they turn into a run's index error or inf */
    tc_error e;
    if (!tc_check_bound_sizes(g, s->syms, &e)) {
        set_err(err, NRT_ERR_ARGUMENT, "%s%s%s", e.msg, e.hint[0] ? "\n  hint: " : "", e.hint);
        tc_error_free(&e);
        return NRT_ERR_ARGUMENT;
    }
    return check_sizes(s, err);
}

static void find_nodes(nrt_session *s)
{
    const ir_graph *g = s->g;
    s->input_node = nc_xmalloc((g->ninputs + 1) * sizeof *s->input_node);
    s->param_node = nc_xmalloc((g->nparams + 1) * sizeof *s->param_node);
    for (uint32_t i = 0; i < g->ninputs; i++) s->input_node[i] = IR_NONE;
    for (uint32_t i = 0; i < g->nparams; i++) s->param_node[i] = IR_NONE;
    for (ir_value v = 0; v < g->nnodes; v++) {
        const ir_node *n = &g->nodes[v];
        if (n->op == OP_INPUT) s->input_node[n->attr.index] = v;
        if (n->op == OP_PARAM) s->param_node[n->attr.index] = v;
    }
}

/* The host's value of IR value v to the device: the device copy stays stale
 * until a copy succeeds (data: the native bytes, or NULL to convert t's). */
static nrt_status upload_value(nrt_session *s, ir_value v, const cpu_tensor *t, const void *data, bool *stale,
                               const char *what, const char *name, nrt_error *err)
{
    if (!s->gpu || v == IR_NONE) return NRT_OK;
    size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
    void *buf = NULL;
    if (!data) {
        buf = nc_xmalloc(bytes ? bytes : 1);
        cpu_tensor_to_native(t, buf);
    }
    char msg[WORK_ERR];
    *stale = true;
    int rc = gpu_upload(s->gpu, v, data ? data : buf, bytes, msg, sizeof msg);
    free(buf);
    if (rc) return set_err(err, NRT_ERR_DEVICE, "%s %s: %s", what, name, work_text(msg, sizeof msg));
    *stale = false;
    return NRT_OK;
}

static nrt_status upload_param(nrt_session *s, uint32_t i, nrt_error *err)
{
    return upload_value(s, s->param_node[i], &s->params[i], NULL, &s->param_stale[i], "parameter",
                        s->g->params[i].decl.name, err);
}

/* Before a run: what an earlier copy left behind on the device. */
static nrt_status upload_stale(nrt_session *s, nrt_error *err)
{
    const ir_graph *g = s->g;
    nrt_status st = NRT_OK;
    for (uint32_t i = 0; i < g->ninputs && st == NRT_OK; i++)
        if (s->input_stale[i])
            st = upload_value(s, s->input_node[i], &s->inputs[i], NULL, &s->input_stale[i], "input", g->inputs[i].name, err);
    for (uint32_t i = 0; i < g->nparams && st == NRT_OK; i++)
        if (s->param_stale[i]) st = upload_param(s, i, err);
    if (st) err_reword(err, "the run is refused: ", " (not on the device since a copy to it failed)");
    return st;
}

nrt_status nrt_session_create(const nrt_module *m, const nrt_session_opts *o, nrt_session **out, nrt_error *err)
{
    NEED(out, err);
    *out = NULL;
    NEED(m, err);
    nrt_session_opts def = nrt_session_defaults();
    if (!o) o = &def;
    if ((unsigned)o->device > NRT_DEVICE_GPU)
        return set_err(err, NRT_ERR_ARGUMENT, "session options: device %d is none of NRT_DEVICE_AUTO, _CPU, _GPU", (int)o->device);
    if (o->gpu_index < 0) return set_err(err, NRT_ERR_ARGUMENT, "session options: gpu_index %d (GPUs count from 0)", o->gpu_index);
    nrt_session *s = nc_xcalloc(1, sizeof *s);
    s->m = m;
    s->g = m->d.graph;
    nrt_status st = bind_dims(s, o, err);
    if (st) { free(s); return st; }
    find_nodes(s);
    const ir_graph *g = s->g;
    s->inputs = nc_xcalloc(g->ninputs + 1, sizeof *s->inputs);
    s->input_set = nc_xcalloc(g->ninputs + 1, sizeof *s->input_set);
    s->params = nc_xcalloc(g->nparams + 1, sizeof *s->params);
    s->input_stale = nc_xcalloc(g->ninputs + 1, sizeof *s->input_stale);
    s->param_stale = nc_xcalloc(g->nparams + 1, sizeof *s->param_stale);
    s->param_torn = nc_xcalloc(g->nparams + 1, sizeof *s->param_torn);
    char msg[WORK_ERR];
    for (uint32_t i = 0; i < g->nparams; i++)
        if (param_init(g, i, o->seed, &s->params[i], msg, sizeof msg) != 0) {
            nrt_session_free(s);
            return set_err(err, NRT_ERR_ARGUMENT, "%s", work_text(msg, sizeof msg));
        }
    char why[256] = "";
    bool want_gpu = o->device == NRT_DEVICE_GPU || (o->device == NRT_DEVICE_AUTO && gpu_probe(why, sizeof why));
    if (want_gpu && !program_check_sizes(g, &m->d.program, s->syms, msg, sizeof msg)) {
        nrt_session_free(s);
        return set_err(err, NRT_ERR_ARGUMENT, "%s", work_text(msg, sizeof msg));
    }
    if (want_gpu) {
        if (gpu_session_create(&m->d, s->syms, o->gpu_index, o->use_cuda_graph != 0, &s->gpu, s->device, sizeof s->device,
                               msg, sizeof msg) != 0) {
            nrt_session_free(s);
            return set_err(err, NRT_ERR_DEVICE, "cannot use the GPU: %s", work_text(msg, sizeof msg));
        }
        for (uint32_t i = 0; i < g->nparams; i++)
            if ((st = upload_param(s, i, err)) != NRT_OK) { nrt_session_free(s); return st; }
    } else {
        nc_errf(s->device, sizeof s->device, "cpu%s%s%s", why[0] ? " (" : "", why, why[0] ? ")" : "");
    }
    *out = s;
    return ok(err);
}

void nrt_session_free(nrt_session *s)
{
    if (!s) return;
    gpu_session_free(s->gpu);
    for (uint32_t i = 0; s->g && i < s->g->ninputs; i++) cpu_tensor_free(&s->inputs[i]);
    for (uint32_t i = 0; s->g && i < s->g->nparams; i++) cpu_tensor_free(&s->params[i]);
    if (s->have_result) cpu_exec_result_free(&s->result);
    cpu_pool_free(&s->pool);
    free(s->inputs);
    free(s->input_set);
    free(s->params);
    free(s->input_stale);
    free(s->param_stale);
    free(s->param_torn);
    free(s->input_node);
    free(s->param_node);
    free(s);
}

/* A declaration's shape at the session's dims. */
static void bound_shape(const nrt_session *s, const ir_tensor_decl *d, int64_t *shape)
{
    for (int i = 0; i < d->rank; i++) {
        shape[i] = -1;
        dim_eval(&s->g->dims[d->shape[i]], s->syms, &shape[i]);
    }
}

static void format_shape(nc_dtype t, int rank, const int64_t *shape, char *buf, size_t cap)
{
    size_t n = (size_t)snprintf(buf, cap, "%s[", dtype_name(t));
    for (int i = 0; i < rank && n < cap; i++) n += (size_t)snprintf(buf + n, cap - n, "%s%lld", i ? ", " : "", (long long)shape[i]);
    if (n < cap) snprintf(buf + n, cap - n, "]");
}

/* A bool is one byte 0 or 1: the CPU executor read any other byte as 1, the
 * GPU's kernels as its value (f32(m) gave 2.0 there, 1.0 here). */
static nrt_status check_bools(const char *what, const char *name, int rank, const int64_t *shape, const void *data,
                              nrt_error *err)
{
    int64_t n = 1;
    for (int i = 0; i < rank; i++) n *= shape[i];
    const unsigned char *p = data;
    for (int64_t i = 0; i < n; i++)
        if (p[i] > 1)
            return set_err(err, NRT_ERR_ARGUMENT, "%s %s: element %lld is byte %u; a bool is one byte 0 or 1", what, name,
                           (long long)i, p[i]);
    return NRT_OK;
}

static nrt_status check_tensor(const nrt_session *s, const char *what, const ir_tensor_decl *d, nrt_dtype dtype, int rank,
                               const int64_t *shape, const void *data, nrt_error *err)
{
    if (!shape && rank > 0) return set_err(err, NRT_ERR_ARGUMENT, "%s %s: shape is NULL (rank %d)", what, d->name, rank);
    if (!data) return set_err(err, NRT_ERR_ARGUMENT, "%s %s: data is NULL", what, d->name);
    int64_t want[NC_MAX_RANK];
    bound_shape(s, d, want);
    bool same = (nc_dtype)dtype == d->dtype && rank == d->rank;
    for (int i = 0; same && i < rank; i++) same = shape[i] == want[i];
    if (same) return dtype == NRT_BOOL ? check_bools(what, d->name, rank, shape, data, err) : NRT_OK;
    char w[256], h[256];
    format_shape(d->dtype, d->rank, want, w, sizeof w);
    if (rank < 0 || rank > NC_MAX_RANK || (unsigned)dtype > NRT_BOOL) snprintf(h, sizeof h, "an invalid shape");
    else format_shape((nc_dtype)dtype, rank, shape, h, sizeof h);
    return set_err(err, NRT_ERR_ARGUMENT, "%s %s: expected %s, got %s", what, d->name, w, h);
}

nrt_status nrt_session_set_input(nrt_session *s, const char *name, nrt_dtype dtype, int rank, const int64_t *shape,
                                 const void *data, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    const ir_graph *g = s->g;
    uint32_t i = 0;
    while (i < g->ninputs && strcmp(g->inputs[i].name, name) != 0) i++;
    if (i == g->ninputs) return set_err(err, NRT_ERR_ARGUMENT, "the module has no input named %s", name);
    nrt_status st = check_tensor(s, "input", &g->inputs[i], dtype, rank, shape, data, err);
    if (st) return st;
    /* the new value is made before the old is let go: a refusal leaves the input as it was */
    cpu_tensor fresh;
    if (!cpu_tensor_alloc(&fresh, (nc_dtype)dtype, (uint8_t)rank, shape, (int64_t)16 << 30))
        return set_err(err, NRT_ERR_MEMORY, "input %s is too large: a session holds an input of up to 2^32 elements, "
                       "where the machine has the memory for it", name);
    cpu_tensor *t = &s->inputs[i];
    cpu_tensor_free(t);
    *t = fresh;
    cpu_tensor_from_native(data, t);
    s->input_set[i] = true;   /* a failed copy below is made again before the next run */
    st = upload_value(s, s->input_node[i], t, data, &s->input_stale[i], "input", g->inputs[i].name, err);
    return st ? st : ok(err);
}

/* After a training run failed on the device: every parameter it updates may
 * be part updated. */
static void tear_updated_params(nrt_session *s, nrt_error *err)
{
    const ir_graph *g = s->g;
    for (uint32_t i = 0; i < g->nupdates; i++) s->param_torn[g->updates[i].param] = true;
    if (g->nupdates)
        err_reword(err, "", "; the parameters this training run updates may now hold some updated values and some not: "
                            "set them again (nrt_session_load_weights, or nrt_session_set_param of each) before going on");
}

static const char torn_why[] = "a training run failed on the device part way, so it may hold some updated values and some not";
static const char torn_fix[] = "set it again first (nrt_session_load_weights, or nrt_session_set_param)";

/* No parameter is part updated by a failed run; else which, in err. */
static nrt_status params_whole(const nrt_session *s, const char *refused, nrt_error *err)
{
    for (uint32_t i = 0; i < s->g->nparams; i++)
        if (s->param_torn[i]) {
            uint32_t more = 0;
            for (uint32_t j = i + 1; j < s->g->nparams; j++) more += s->param_torn[j];
            char others[64] = "";
            if (more) snprintf(others, sizeof others, " (and %u more)", more);
            return set_err(err, NRT_ERR_STATE, "%sparameter %s%s: %s; %s", refused, s->g->params[i].decl.name, others, torn_why,
                           torn_fix);
        }
    return NRT_OK;
}

/* Every input the run reads has been set. */
static nrt_status inputs_ready(const nrt_session *s, nrt_error *err)
{
    const ir_graph *g = s->g;
    for (uint32_t i = 0; i < g->ninputs; i++)
        if (!s->input_set[i] && s->input_node[i] != IR_NONE &&
            (!g->train.present || g->nupdates || i < g->train.first_train_input))
            return set_err(err, NRT_ERR_STATE, "input %s was not set (nrt_session_set_input; netc run: --input %s=%s, "
                           "or --random-inputs SEED for the inputs not given)", g->inputs[i].name, g->inputs[i].name,
                           g->inputs[i].rank ? "FILE.npy" : "NUMBER or FILE.npy");
    return NRT_OK;
}

/* One run of the program on the device, or profile_runs timed ones (the
 * launches' times in step_seconds): the results stay there until read. */
static nrt_status run_on_gpu(nrt_session *s, int profile_runs, double *step_seconds, nrt_error *err)
{
    nrt_status st = upload_stale(s, err);
    if (st != NRT_OK) return st;
    char msg[WORK_ERR];
    int rc = profile_runs ? gpu_profile(s->gpu, profile_runs, step_seconds, msg, sizeof msg)
                          : gpu_run(s->gpu, msg, sizeof msg);
    if (rc) {
        set_err(err, NRT_ERR_DEVICE, "%s", work_text(msg, sizeof msg));
        tear_updated_params(s, err);
        return NRT_ERR_DEVICE;
    }
    s->have_result = false;
    s->ran = true;
    return ok(err);
}

nrt_status nrt_session_run(nrt_session *s, nrt_error *err)
{
    NEED(s, err);
    const ir_graph *g = s->g;
    nrt_status ready = inputs_ready(s, err);
    if (ready || (ready = params_whole(s, "the run is refused: ", err))) return ready;
    s->ran = false;   /* until the run succeeds there is no output to read */
    if (s->gpu) return run_on_gpu(s, 0, NULL, err);
    char msg[WORK_ERR];
    if (s->have_result) cpu_exec_result_free(&s->result);
    s->have_result = false;
    cpu_exec_opts o = {.syms = s->syms, .inputs = s->inputs, .params = s->params, .pool = &s->pool};
    int rc = cpu_exec_run(g, &o, &s->result, msg, sizeof msg);
    if (rc != 0)
        return set_err(err, rc == CPU_EXEC_NO_MEMORY ? NRT_ERR_MEMORY : NRT_ERR_ARGUMENT, "%s",
                       work_text(msg, sizeof msg));
    s->have_result = true;
    s->ran = true;
    cpu_exec_apply_updates(g, &s->result, s->params);   /* a training step moves the parameters */
    return ok(err);
}

nrt_status nrt_session_profile(nrt_session *s, int runs, double *step_seconds, int nsteps, nrt_error *err)
{
    NEED(s, err);
    if (!s->gpu) return set_err(err, NRT_ERR_STATE, "profiling needs a GPU session (this one runs on %s)", s->device);
    if (runs < 1 || runs > 10000) return set_err(err, NRT_ERR_ARGUMENT, "profile: %d runs (1 to 10000)", runs);
    NEED(step_seconds, err);
    if (nsteps != (int)s->m->d.program.nsteps)
        return set_err(err, NRT_ERR_ARGUMENT, "profile: room for %d steps, the program has %u", nsteps, s->m->d.program.nsteps);
    nrt_status ready = inputs_ready(s, err);
    if (ready || (ready = params_whole(s, "profile: ", err))) return ready;
    s->ran = false;
    return run_on_gpu(s, runs, step_seconds, err);
}

nrt_status nrt_session_input_info(const nrt_session *s, const char *name, nrt_tensor_info *info, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    NEED(info, err);
    for (uint32_t i = 0; i < s->g->ninputs; i++) {
        const ir_tensor_decl *d = &s->g->inputs[i];
        if (strcmp(d->name, name) != 0) continue;
        info->name = d->name;
        info->dtype = (nrt_dtype)d->dtype;
        info->rank = d->rank;
        bound_shape(s, d, info->shape);
        return ok(err);
    }
    return set_err(err, NRT_ERR_ARGUMENT, "the module has no input named %s", name);
}

nrt_status nrt_session_input_bound(const nrt_session *s, const char *name, int64_t *bound, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    NEED(bound, err);
    *bound = 0;
    for (uint32_t i = 0; i < s->g->ninputs; i++) {
        if (strcmp(s->g->inputs[i].name, name) != 0) continue;
        if (s->input_node[i] != IR_NONE) *bound = ops_value_bound(s->g, s->input_node[i], s->syms);
        return ok(err);
    }
    return set_err(err, NRT_ERR_ARGUMENT, "the module has no input named %s", name);
}

static int find_output(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->noutputs; i++)
        if (strcmp(g->outputs[i].name, name) == 0) return (int)i;
    return -1;
}

nrt_status nrt_session_output_info(const nrt_session *s, const char *name, nrt_tensor_info *info, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    NEED(info, err);
    int k = find_output(s->g, name);
    if (k < 0) return set_err(err, NRT_ERR_ARGUMENT, "the module has no output named %s", name);
    const ir_node *n = &s->g->nodes[s->g->outputs[k].value];
    info->name = s->g->outputs[k].name;
    info->dtype = (nrt_dtype)n->dtype;
    info->rank = n->rank;
    for (int i = 0; i < n->rank; i++) dim_eval(&s->g->dims[n->shape[i]], s->syms, &info->shape[i]);
    return ok(err);
}

nrt_status nrt_session_get_output(nrt_session *s, const char *name, void *data, size_t bytes, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    nrt_tensor_info info;
    nrt_status st = nrt_session_output_info(s, name, &info, err);
    if (st) return st;
    int64_t numel = 1;
    for (int i = 0; i < info.rank; i++) numel *= info.shape[i];
    size_t want = (size_t)numel * nrt_dtype_size(info.dtype);
    if (bytes != want) return set_err(err, NRT_ERR_ARGUMENT, "output %s has %zu bytes, the buffer %zu", name, want, bytes);
    if (!data) return set_err(err, NRT_ERR_ARGUMENT, "output %s: data is NULL", name);
    if (!s->ran) return set_err(err, NRT_ERR_STATE, "no output yet: call nrt_session_run first");
    ir_value v = s->g->outputs[find_output(s->g, name)].value;
    if (s->gpu) {
        char msg[WORK_ERR];
        if (gpu_download(s->gpu, v, data, bytes, msg, sizeof msg))
            return set_err(err, NRT_ERR_DEVICE, "%s", work_text(msg, sizeof msg));
        return ok(err);
    }
    cpu_tensor_to_native(&s->result.values[v], data);
    return ok(err);
}

static int find_param(const ir_graph *g, const char *name)
{
    for (uint32_t i = 0; i < g->nparams; i++)
        if (strcmp(g->params[i].decl.name, name) == 0) return (int)i;
    return -1;
}

nrt_status nrt_session_set_param(nrt_session *s, const char *name, nrt_dtype dtype, int rank, const int64_t *shape,
                                 const void *data, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    int i = find_param(s->g, name);
    if (i < 0) return set_err(err, NRT_ERR_ARGUMENT, "the module has no parameter named %s", name);
    nrt_status st = check_tensor(s, "parameter", &s->g->params[i].decl, dtype, rank, shape, data, err);
    if (st) return st;
    cpu_tensor_from_native(data, &s->params[i]);
    s->param_torn[i] = false;   /* the host's value is whole: the device's, or the next run, takes it */
    st = upload_param(s, (uint32_t)i, err);
    return st ? st : ok(err);
}

/* On the GPU the device copy is the truth (training updates it), but while
 * it is stale the host's is. */
static nrt_status sync_param_from_gpu(nrt_session *s, uint32_t i, nrt_error *err)
{
    if (!s->gpu || s->param_node[i] == IR_NONE || s->param_stale[i]) return NRT_OK;
    cpu_tensor *t = &s->params[i];
    size_t bytes = (size_t)t->numel * dtype_size(t->dtype);
    void *buf = nc_xmalloc(bytes ? bytes : 1);
    char msg[WORK_ERR];
    int rc = gpu_download(s->gpu, s->param_node[i], buf, bytes, msg, sizeof msg);
    if (rc == 0) cpu_tensor_from_native(buf, t);
    free(buf);
    return rc ? set_err(err, NRT_ERR_DEVICE, "%s", work_text(msg, sizeof msg)) : NRT_OK;
}

nrt_status nrt_session_get_param(nrt_session *s, const char *name, void *data, size_t bytes, nrt_error *err)
{
    NEED(s, err);
    NEED(name, err);
    int i = find_param(s->g, name);
    if (i < 0) return set_err(err, NRT_ERR_ARGUMENT, "the module has no parameter named %s", name);
    cpu_tensor *t = &s->params[i];
    size_t want = (size_t)t->numel * dtype_size(t->dtype);
    if (bytes != want) return set_err(err, NRT_ERR_ARGUMENT, "parameter %s has %zu bytes, the buffer %zu", name, want, bytes);
    if (!data) return set_err(err, NRT_ERR_ARGUMENT, "parameter %s: data is NULL", name);
    if (s->param_torn[i]) return set_err(err, NRT_ERR_STATE, "parameter %s: %s; %s", name, torn_why, torn_fix);
    nrt_status st = sync_param_from_gpu(s, (uint32_t)i, err);
    if (st) return st;
    cpu_tensor_to_native(t, data);
    return ok(err);
}

nrt_status nrt_session_load_weights(nrt_session *s, const char *path, nrt_error *err)
{
    NEED(s, err);
    NEED(path, err);
    const ir_graph *g = s->g;
    cpu_tensor *loaded = nc_xcalloc(g->nparams + 1, sizeof *loaded);
    char msg[WORK_ERR];
    int rc = safetensors_load_params(path, g, loaded, false, msg, sizeof msg);
    if (rc != 0) {
        free(loaded);
        return set_err(err, rc == FILE_OPEN_IO_ERROR ? NRT_ERR_IO : NRT_ERR_FORMAT, "%s", work_text(msg, sizeof msg));
    }
    /* After a failed copy the rest are not tried: they wait for the run,
     * as that one does, and every parameter is the file's. */
    nrt_status st = NRT_OK;
    for (uint32_t i = 0; i < g->nparams; i++) {
        cpu_tensor_free(&s->params[i]);
        s->params[i] = loaded[i];
        s->param_torn[i] = false;
        if (st == NRT_OK) st = upload_param(s, i, err);
        else s->param_stale[i] = s->gpu && s->param_node[i] != IR_NONE;
    }
    free(loaded);
    if (st) err_reword(err, "", "; the parameters hold the file's values, and the next run copies those not on the device yet");
    return st ? st : ok(err);
}

nrt_status nrt_session_save_weights(nrt_session *s, const char *path, nrt_error *err)
{
    NEED(s, err);
    NEED(path, err);
    const ir_graph *g = s->g;
    nrt_status st = params_whole(s, "nothing is saved: ", err);
    if (st) return st;
    st_entry *e = nc_xcalloc(g->nparams + 1, sizeof *e);
    for (uint32_t i = 0; i < g->nparams && st == NRT_OK; i++) {
        st = sync_param_from_gpu(s, i, err);
        e[i] = (st_entry){.name = g->params[i].decl.name, .t = &s->params[i]};
    }
    char msg[WORK_ERR];
    if (st == NRT_OK && safetensors_write(path, e, g->nparams, msg, sizeof msg) != 0)
        st = set_err(err, NRT_ERR_IO, "%s", work_text(msg, sizeof msg));
    free(e);
    return st ? st : ok(err);
}
