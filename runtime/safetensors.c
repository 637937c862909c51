/* safetensors.c - named tensors in one file: an 8-byte little-endian header
 * length, a JSON header {name: {dtype, shape, data_offsets}}, then the raw
 * little-endian data. The reader checks every offset against the file size
 * and every size against dtype x shape before it reads a byte of data. */
#include "tensor_io.h"
#include "atomic_file.h"
#include "file_open.h"

#include <errno.h>
#include <inttypes.h>
#include <jansson.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#define ST_MAX_HEADER ((uint64_t)100 << 20)   /* the format's own limit */

/* tensor_io.h spells the two older results out: it does not include file_open.h */
_Static_assert(ST_LOAD_IO == FILE_OPEN_IO_ERROR, "ST_LOAD_IO is FILE_OPEN_IO_ERROR");
_Static_assert(ST_LOAD_MALFORMED == -1, "ST_LOAD_MALFORMED is the -1 of a malformed file");

static const struct {
    const char *name;
    nc_dtype dtype;
} st_dtypes[] = {
    {"F32", NC_F32}, {"F16", NC_F16}, {"BF16", NC_BF16}, {"I32", NC_I32}, {"U8", NC_U8}, {"BOOL", NC_BOOL},
};

static const char *st_dtype_name(nc_dtype t)
{
    for (size_t k = 0; k < NC_COUNT(st_dtypes); k++)
        if (st_dtypes[k].dtype == t) return st_dtypes[k].name;
    return NULL;
}

static bool st_dtype_from_name(const char *s, nc_dtype *out)
{
    for (size_t k = 0; k < NC_COUNT(st_dtypes); k++)
        if (!strcmp(st_dtypes[k].name, s)) return *out = st_dtypes[k].dtype, true;
    return false;
}

static void encode_element(const cpu_tensor *t, int64_t i, uint8_t *dst)
{
    switch (t->dtype) {
    case NC_F32: memcpy(dst, &t->f[i], 4); break;
    case NC_F16: { uint16_t h = nc_f32_to_f16_bits(t->f[i]); memcpy(dst, &h, 2); break; }
    case NC_BF16: { uint16_t h = nc_f32_to_bf16_bits(t->f[i]); memcpy(dst, &h, 2); break; }
    case NC_I32: memcpy(dst, &t->i[i], 4); break;
    default: dst[0] = (uint8_t)t->i[i]; break;
    }
}

static int write_body(FILE *f, const st_entry *entries, uint32_t n, const char *header, uint64_t hlen)
{
    uint8_t len[8];
    for (int k = 0; k < 8; k++) len[k] = (uint8_t)(hlen >> (8 * k));
    if (fwrite(len, 1, 8, f) != 8 || fwrite(header, 1, (size_t)hlen, f) != hlen) return -1;
    uint8_t buf[4096];
    for (uint32_t e = 0; e < n; e++) {
        const cpu_tensor *t = entries[e].t;
        const size_t es = dtype_size(t->dtype);
        size_t used = 0;
        for (int64_t i = 0; i < t->numel; i++) {
            encode_element(t, i, buf + used);
            used += es;
            if (used + 4 > sizeof buf || i + 1 == t->numel) {
                if (fwrite(buf, 1, used, f) != used) return -1;
                used = 0;
            }
        }
    }
    return 0;
}

/* name with each byte that does not begin a UTF-8 character as \xNN, on
 * the heap: for the error that refuses it. */
static char *st_escaped_name(const char *name)
{
    size_t n = strlen(name), m = 0;
    char *t = nc_xmalloc(4 * n + 1);
    for (size_t i = 0; i < n;) {
        unsigned char c = (unsigned char)name[i];
        size_t len = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
        json_t *one = len && len <= n - i ? json_stringn(name + i, len) : NULL;   /* jansson's own test of one character */
        if (one) memcpy(t + m, name + i, len), m += len, i += len;
        else m += (size_t)sprintf(t + m, "\\x%02x", c), i++;
        json_decref(one);
    }
    t[m] = 0;
    return t;
}

/* A name jansson refuses (not UTF-8: a parameter's in a module made
 * elsewhere) would leave the header without its tensor, silently: the file
 * written, its data there, and the parameter missing when it is loaded. A
 * name cannot be changed (U+FFFD) either, or the file would not load back
 * into the model it came from: refused, named. */
static bool st_name_ok(const char *name, char *err, size_t errcap)
{
    json_t *j = json_string(name);
    if (j) {
        json_decref(j);
        return true;
    }
    char *shown = st_escaped_name(name);
    nc_errf(err, errcap, "tensor '%s': the name is not UTF-8, which a safetensors header (JSON) cannot hold; "
            "rename the parameter", shown);
    free(shown);
    return false;
}

/* The caller's __metadata__ entries beside "format" (which they cannot
 * replace: it says who wrote the file). */
static void st_add_meta(json_t *md, const st_meta *meta, uint32_t nmeta)
{
    for (uint32_t k = 0; k < nmeta; k++)
        if (strcmp(meta[k].key, "format") != 0) json_object_set_new(md, meta[k].key, json_string(meta[k].value));
}

/* The header is padded with spaces to a multiple of 8 bytes so the data is aligned. */
static char *build_header(const st_entry *entries, uint32_t n, const st_meta *meta, uint32_t nmeta, uint64_t *hlen, char *err,
                          size_t errcap)
{
    json_t *root = json_object();
    json_object_set_new(root, "__metadata__", json_pack("{s:s}", "format", "netc"));
    st_add_meta(json_object_get(root, "__metadata__"), meta, nmeta);
    uint64_t off = 0;
    for (uint32_t e = 0; e < n; e++) {
        const cpu_tensor *t = entries[e].t;
        const char *dt = st_dtype_name(t->dtype);
        if (!st_name_ok(entries[e].name, err, errcap)) {
            json_decref(root);
            return NULL;
        }
        if (!dt || json_object_get(root, entries[e].name)) {
            nc_errf(err, errcap, "tensor '%s': %s", entries[e].name, dt ? "duplicate name" : "unsupported dtype");
            json_decref(root);
            return NULL;
        }
        json_t *shape = json_array();
        for (int d = 0; d < t->rank; d++) json_array_append_new(shape, json_integer(t->shape[d]));
        uint64_t bytes = (uint64_t)t->numel * dtype_size(t->dtype);
        json_object_set_new(root, entries[e].name,
                            json_pack("{s:s,s:o,s:[I,I]}", "dtype", dt, "shape", shape, "data_offsets",
                                      (json_int_t)off, (json_int_t)(off + bytes)));
        off += bytes;
    }
    char *s = json_dumps(root, JSON_COMPACT | JSON_SORT_KEYS);
    json_decref(root);
    size_t len = strlen(s), padded = (len + 7) / 8 * 8;
    char *out = nc_xmalloc(padded + 1);
    memcpy(out, s, len);
    memset(out + len, ' ', padded - len);
    out[padded] = 0;
    free(s);
    *hlen = padded;
    return out;
}

int safetensors_write(const char *path, const st_entry *entries, uint32_t n, char *err, size_t errcap)
{
    return safetensors_write_meta(path, entries, n, NULL, 0, err, errcap);
}

int safetensors_write_meta(const char *path, const st_entry *entries, uint32_t n, const st_meta *meta, uint32_t nmeta, char *err,
                           size_t errcap)
{
    uint64_t hlen;
    char *header = build_header(entries, n, meta, nmeta, &hlen, err, errcap);
    if (!header) return -1;
    atomic_file af;
    int rc = atomic_file_open(&af, path, err, errcap);
    if (rc == 0) rc = atomic_file_commit(&af, path, write_body(af.f, entries, n, header, hlen) == 0, err, errcap);
    free(header);
    return rc;
}

/* --- reading ------------------------------------------------------------ */

typedef struct st_file {
    FILE *f;
    json_t *header;
    uint64_t data_start, data_len;
} st_file;

static int st_open(const char *path, st_file *sf, char *err, size_t errcap)
{
    memset(sf, 0, sizeof *sf);
    const char *why;
    sf->f = file_open_regular(path, &why);
    if (!sf->f) {
        nc_errf(err, errcap, "%s: %s", path, why);
        return FILE_OPEN_IO_ERROR;
    }
    uint8_t len[8];
    if (fseek(sf->f, 0, SEEK_END) != 0) goto bad_io;
    long size = ftell(sf->f);
    rewind(sf->f);
    if (size < 8 || fread(len, 1, 8, sf->f) != 8) {
        nc_errf(err, errcap, "%s: not a safetensors file (too short)", path);
        return -1;
    }
    uint64_t hlen = 0;
    for (int k = 0; k < 8; k++) hlen |= (uint64_t)len[k] << (8 * k);
    if (hlen > ST_MAX_HEADER || hlen > (uint64_t)size - 8) {
        nc_errf(err, errcap, "%s: not a safetensors file (header length %" PRIu64 " exceeds the file's %ld bytes)", path, hlen, size);
        return -1;
    }
    char *text = nc_xmalloc((size_t)hlen + 1);
    if (fread(text, 1, (size_t)hlen, sf->f) != hlen) {
        free(text);
        goto bad_io;
    }
    text[hlen] = 0;
    json_error_t je;
    sf->header = json_loadb(text, (size_t)hlen, JSON_REJECT_DUPLICATES, &je);
    free(text);
    if (!sf->header && json_error_code(&je) == json_error_duplicate_key) {
        /* jansson would keep the last of two entries of one name: which one a
         * reader means is not defined, so the format forbids it */
        nc_errf(err, errcap, "%s: header names a key twice (%s)", path, je.text);
        return -1;
    }
    if (!sf->header || !json_is_object(sf->header)) {
        nc_errf(err, errcap, "%s: header is not a JSON object%s%s", path, sf->header ? "" : ": ",
                 sf->header ? "" : je.text);
        return -1;
    }
    sf->data_start = 8 + hlen;
    sf->data_len = (uint64_t)size - sf->data_start;
    return 0;
bad_io:
    nc_errf(err, errcap, "%s: read error", path);
    return FILE_OPEN_IO_ERROR;
}

static void st_close(st_file *sf)
{
    if (sf->header) json_decref(sf->header);
    if (sf->f) fclose(sf->f);
}

/* Validates one header entry; fills dtype, shape and the byte range. */
static int st_entry_check(const char *path, const char *name, json_t *e, const st_file *sf, nc_dtype *dtype,
                          uint8_t *rank, int64_t *shape, uint64_t *begin, uint64_t *end, char *err, size_t errcap)
{
    json_t *dt = json_object_get(e, "dtype"), *sh = json_object_get(e, "shape"), *off = json_object_get(e, "data_offsets");
    if (!json_is_string(dt) || !json_is_array(sh) || !json_is_array(off) || json_array_size(off) != 2) {
        nc_errf(err, errcap, "%s: tensor '%s': entry needs dtype, shape and data_offsets", path, name);
        return -1;
    }
    if (!st_dtype_from_name(json_string_value(dt), dtype)) {
        /* NumPy's and PyTorch's 64-bit defaults are the usual slip: name the cast that fixes them */
        const char *d = json_string_value(dt), *cast = !strcmp(d, "F64") ? " (hint: save it as float32: t.float() in PyTorch, "
                                                                            "a.astype(np.float32) in NumPy)"
                                                      : !strcmp(d, "I64") ? " (hint: save it as int32: t.int() in PyTorch, "
                                                                            "a.astype(np.int32) in NumPy)"
                                                                          : "";
        nc_errf(err, errcap, "%s: tensor '%s': unsupported dtype %s: netc reads F32, F16, BF16, I32, U8 and BOOL%s", path, name, d,
                cast);
        return -1;
    }
    if (json_array_size(sh) > NC_MAX_RANK) {
        nc_errf(err, errcap, "%s: tensor '%s': rank exceeds %d", path, name, NC_MAX_RANK);
        return -1;
    }
    *rank = (uint8_t)json_array_size(sh);
    uint64_t numel = 1;
    for (uint8_t d = 0; d < *rank; d++) {
        json_t *v = json_array_get(sh, d);
        if (!json_is_integer(v) || json_integer_value(v) < 0 || json_integer_value(v) > (json_int_t)DIM_MAX_NUMEL) {
            nc_errf(err, errcap, "%s: tensor '%s': bad shape", path, name);
            return -1;
        }
        shape[d] = json_integer_value(v);
        numel = numel * (uint64_t)shape[d];
        if (numel > (uint64_t)DIM_MAX_NUMEL) {
            nc_errf(err, errcap, "%s: tensor '%s': too many elements", path, name);
            return -1;
        }
    }
    json_t *b = json_array_get(off, 0), *en = json_array_get(off, 1);
    if (!json_is_integer(b) || !json_is_integer(en) || json_integer_value(b) < 0 ||
        json_integer_value(en) < json_integer_value(b) || (uint64_t)json_integer_value(en) > sf->data_len) {
        nc_errf(err, errcap, "%s: tensor '%s': data_offsets outside the file", path, name);
        return -1;
    }
    *begin = (uint64_t)json_integer_value(b);
    *end = (uint64_t)json_integer_value(en);
    if (*end - *begin != numel * dtype_size(*dtype)) {
        nc_errf(err, errcap, "%s: tensor '%s': data size does not match dtype and shape", path, name);
        return -1;
    }
    return 0;
}

static void decode_into(cpu_tensor *t, int64_t i, nc_dtype src, const uint8_t *p)
{
    switch (src) {
    case NC_F32: { float v; memcpy(&v, p, 4); cpu_set(t, i, v); break; }
    case NC_F16: { uint16_t h; memcpy(&h, p, 2); cpu_set(t, i, nc_f16_bits_to_f32(h)); break; }
    case NC_BF16: { uint16_t h; memcpy(&h, p, 2); cpu_set(t, i, nc_bf16_bits_to_f32(h)); break; }
    case NC_I32: { int32_t v; memcpy(&v, p, 4); t->i[i] = v; break; }
    case NC_U8: t->i[i] = p[0]; break;
    default: t->i[i] = p[0] != 0; break;
    }
}

static int st_read_tensor(st_file *sf, const char *path, const char *name, nc_dtype src, uint64_t begin, cpu_tensor *t,
                          char *err, size_t errcap)
{
    if (fseek(sf->f, (long)(sf->data_start + begin), SEEK_SET) != 0) goto bad;
    const size_t es = dtype_size(src);
    uint8_t buf[4096];
    const int64_t per = (int64_t)(sizeof buf / es);
    for (int64_t i = 0; i < t->numel; i += per) {
        int64_t n = t->numel - i < per ? t->numel - i : per;
        if (fread(buf, es, (size_t)n, sf->f) != (size_t)n) goto bad;
        for (int64_t k = 0; k < n; k++) decode_into(t, i + k, src, buf + k * es);
    }
    return 0;
bad:
    nc_errf(err, errcap, "%s: tensor '%s': read error", path, name);
    return FILE_OPEN_IO_ERROR;
}

/* __metadata__, when present, maps names to strings. */
static int st_check_metadata(const char *path, const st_file *sf, char *err, size_t errcap)
{
    json_t *md = json_object_get(sf->header, "__metadata__");
    const char *key;
    json_t *v;
    if (md && !json_is_object(md)) {
        nc_errf(err, errcap, "%s: __metadata__ is not a map of names to strings", path);
        return -1;
    }
    json_object_foreach(md, key, v) {
        if (!json_is_string(v)) {
            nc_errf(err, errcap, "%s: __metadata__ entry '%s' is not a string", path, key);
            return -1;
        }
    }
    return 0;
}

typedef struct st_range {
    uint64_t begin, end;
    const char *name;
} st_range;

static int by_offset(const void *pa, const void *pb)
{
    const st_range *a = pa, *b = pb;
    if (a->begin != b->begin) return a->begin < b->begin ? -1 : 1;
    return a->end < b->end ? -1 : a->end > b->end;
}

/* Every tensor's entry is valid, and together their byte ranges are the data
 * buffer exactly, as the format requires: no tensor overlaps another, no byte
 * belongs to none (a hole, or bytes after the last). Extra tensors are
 * checked too, even when the caller will not load them. */
static int st_check_layout(const char *path, const st_file *sf, char *err, size_t errcap)
{
    st_range *r = nc_xmalloc((json_object_size(sf->header) + 1) * sizeof *r);
    size_t n = 0;
    const char *key;
    json_t *v;
    int rc = 0;
    json_object_foreach(sf->header, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        nc_dtype dt;
        uint8_t rank;
        int64_t shape[NC_MAX_RANK];
        r[n].name = key;
        rc = st_entry_check(path, key, v, sf, &dt, &rank, shape, &r[n].begin, &r[n].end, err, errcap);
        if (rc != 0) break;
        n++;
    }
    if (rc == 0) qsort(r, n, sizeof *r, by_offset);
    uint64_t at = 0;
    for (size_t i = 0; rc == 0 && i < n; i++) {
        if (r[i].begin < at) {
            nc_errf(err, errcap, "%s: tensor '%s' overlaps tensor '%s' in the data", path, r[i].name, r[i - 1].name);
            rc = -1;
        } else if (r[i].begin > at) {
            nc_errf(err, errcap, "%s: data bytes %" PRIu64 " to %" PRIu64 " (before tensor '%s') belong to no tensor",
                     path, at, r[i].begin, r[i].name);
            rc = -1;
        }
        at = r[i].end;
    }
    if (rc == 0 && at != sf->data_len) {
        nc_errf(err, errcap, "%s: %" PRIu64 " bytes after the last tensor's data", path, sf->data_len - at);
        rc = -1;
    }
    free(r);
    return rc;
}

static bool dtypes_compatible(nc_dtype file, nc_dtype want)
{
    return file == want || (dtype_is_float(file) && dtype_is_float(want));
}

static int load_param(st_file *sf, const char *path, const ir_graph *g, uint32_t i, cpu_tensor *t, char *err,
                      size_t errcap)
{
    const ir_param *p = &g->params[i];
    json_t *e = json_object_get(sf->header, p->decl.name);
    if (!e) {
        static const char *why[] = {
            [IR_ROLE_STATE] = " (optimizer state: netc train --save writes the weights only; a checkpoint of --checkpoint-dir "
                              "holds it too)",
            [IR_ROLE_ACCUMULATOR] = " (optimizer state: netc train --save writes the weights only; a checkpoint of "
                                    "--checkpoint-dir holds it too)",
            [IR_ROLE_BUFFER] = " (a buffer, such as batch norm's running statistics: netc train --save writes it with the "
                               "weights; a file without it was saved from another model)",
        };
        nc_errf(err, errcap, "%s: %s '%s' is missing%s", path, p->role == IR_ROLE_BUFFER ? "buffer" : "parameter", p->decl.name,
                 p->role != IR_ROLE_WEIGHT ? why[p->role] : "");
        return ST_LOAD_MISSING;
    }
    nc_dtype dt;
    uint8_t rank;
    int64_t shape[NC_MAX_RANK];
    uint64_t begin, end;
    if (st_entry_check(path, p->decl.name, e, sf, &dt, &rank, shape, &begin, &end, err, errcap) != 0) return -1;
    bool same = rank == p->decl.rank;
    for (uint8_t d = 0; same && d < rank; d++) {
        int64_t v;
        same = dim_is_const(&g->dims[p->decl.shape[d]], &v) && v == shape[d];
    }
    if (!same) {
        char *want = ir_shape_str(g, p->decl.dtype, p->decl.rank, p->decl.shape);
        char got[160];
        size_t n = (size_t)snprintf(got, sizeof got, "%s[", json_string_value(json_object_get(e, "dtype")));
        for (uint8_t d = 0; d < rank && n < sizeof got; d++)
            n += (size_t)snprintf(got + n, sizeof got - n, "%s%" PRId64, d ? ", " : "", shape[d]);
        if (n < sizeof got) snprintf(got + n, sizeof got - n, "]");
        nc_errf(err, errcap, "%s: parameter '%s': the file has %s, the model declares %s", path, p->decl.name, got, want);
        free(want);
        return ST_LOAD_SHAPE;
    }
    if (!dtypes_compatible(dt, p->decl.dtype)) {
        nc_errf(err, errcap, "%s: parameter '%s': dtype %s cannot be loaded into %s", path, p->decl.name,
                 st_dtype_name(dt), dtype_name(p->decl.dtype));
        return ST_LOAD_DTYPE;
    }
    if (!cpu_tensor_alloc(t, p->decl.dtype, rank, shape, 0)) {
        nc_errf(err, errcap, "%s: parameter '%s': too large", path, p->decl.name);
        return -1;
    }
    int rc = st_read_tensor(sf, path, p->decl.name, dt, begin, t, err, errcap);
    if (rc != 0) cpu_tensor_free(t);
    return rc;
}

/* Whether key is a parameter's state in a checkpoint of netc train: NAME.adam_m for a parameter NAME. */
static bool state_of_param(const ir_graph *g, const char *key)
{
    for (uint32_t i = 0; i < g->nparams; i++) {
        size_t n = strlen(g->params[i].decl.name);
        if (!strncmp(key, g->params[i].decl.name, n) && key[n] == '.' && key[n + 1] && !strchr(key + n + 1, '.')) return true;
    }
    return false;
}

/* A checkpoint of netc train (it holds @train_state) loads as weights: its
 * optimizer state and loop state are passed over, every parameter still
 * required with its shape. So is the optimizer state of any file (NAME.adam_m
 * for a parameter NAME): what a train entry's session saves
 * (nrt_session_save_weights) loads into a forward entry's. */
static int check_extras(st_file *sf, const char *path, const ir_graph *g, char *err, size_t errcap)
{
    const char *key;
    json_t *v;
    const bool checkpoint = json_object_get(sf->header, "@train_state") != NULL;
    json_object_foreach(sf->header, key, v) {
        if (!strcmp(key, "__metadata__")) continue;
        bool known = (checkpoint && !strcmp(key, "@train_state")) || state_of_param(g, key);
        for (uint32_t i = 0; i < g->nparams && !known; i++) known = !strcmp(g->params[i].decl.name, key);
        if (!known) {
            nc_errf(err, errcap, "%s: tensor '%s' is not a parameter of model '%s'", path, key, g->name ? g->name : "?");
            return ST_LOAD_EXTRA;
        }
    }
    return 0;
}

int safetensors_load_params(const char *path, const ir_graph *g, cpu_tensor *params, bool allow_extra, char *err,
                            size_t errcap)
{
    return safetensors_load_params_if(path, g, NULL, params, allow_extra, err, errcap);
}

int safetensors_load_params_if(const char *path, const ir_graph *g, st_param_filter wanted, cpu_tensor *params,
                               bool allow_extra, char *err, size_t errcap)
{
    st_file sf;
    if (g->nparams) memset(params, 0, sizeof *params * g->nparams);
    int rc = st_open(path, &sf, err, errcap);
    if (rc == 0) rc = st_check_metadata(path, &sf, err, errcap);
    if (rc == 0 && !allow_extra) rc = check_extras(&sf, path, g, err, errcap);
    uint32_t loaded = 0;
    for (; rc == 0 && loaded < g->nparams; loaded++)
        if (!wanted || wanted(&g->params[loaded])) rc = load_param(&sf, path, g, loaded, &params[loaded], err, errcap);
    /* after the parameters, so that a missing one is reported as such, not as
     * the hole its data left */
    if (rc == 0) rc = st_check_layout(path, &sf, err, errcap);
    if (rc != 0)
        for (uint32_t i = 0; i < g->nparams; i++) cpu_tensor_free(&params[i]);
    st_close(&sf);
    return rc;
}

/* Only the header: no tensor's entry is checked (the loader does that). */
int safetensors_read_header(const char *path, st_header *h, char *err, size_t errcap)
{
    memset(h, 0, sizeof *h);
    st_file sf;
    int rc = st_open(path, &sf, err, errcap);
    if (rc == 0) rc = st_check_metadata(path, &sf, err, errcap);
    if (rc != 0) {
        st_close(&sf);
        return rc;
    }
    json_t *md = json_object_get(sf.header, "__metadata__");
    h->names = nc_xcalloc(json_object_size(sf.header) + 1, sizeof *h->names);
    h->meta = nc_xcalloc(json_object_size(md) + 1, sizeof *h->meta);
    const char *key;
    json_t *v;
    json_object_foreach(sf.header, key, v) {
        if (strcmp(key, "__metadata__") != 0) h->names[h->nnames++] = nc_xstrdup(key);
    }
    json_object_foreach(md, key, v) {
        h->meta[h->nmeta++] = (st_meta){.key = nc_xstrdup(key), .value = nc_xstrdup(json_string_value(v))};
    }
    st_close(&sf);
    return 0;
}

const char *st_header_meta(const st_header *h, const char *key)
{
    for (uint32_t k = 0; k < h->nmeta; k++)
        if (!strcmp(h->meta[k].key, key)) return h->meta[k].value;
    return NULL;
}

bool st_header_has(const st_header *h, const char *name)
{
    for (uint32_t k = 0; k < h->nnames; k++)
        if (!strcmp(h->names[k], name)) return true;
    return false;
}

void st_header_free(st_header *h)
{
    for (uint32_t k = 0; k < h->nnames; k++) free(h->names[k]);
    for (uint32_t k = 0; k < h->nmeta; k++) free((char *)h->meta[k].key), free((char *)h->meta[k].value);
    free(h->names);
    free(h->meta);
    memset(h, 0, sizeof *h);
}
