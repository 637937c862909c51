/* npy.c - NumPy .npy arrays (format versions 1-3, little-endian, C order).
 *
 * The header is a Python dict literal; we accept exactly the three keys
 * NumPy writes (descr, fortran_order, shape) in any order and refuse
 * anything else rather than guess. The data size implied by the header must
 * match the file size exactly, so a truncated or padded file is an error. */
#include "tensor_io.h"
#include "cpu_kernels.h"
#include "atomic_file.h"
#include "file_open.h"

#include <ctype.h>
#include <errno.h>
#include <float.h>
#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef enum npy_kind { NPY_F4, NPY_F2, NPY_F8, NPY_I4, NPY_I8, NPY_U1, NPY_B1 } npy_kind;

static const struct {
    const char *descr;
    npy_kind kind;
    int bytes;
    nc_dtype dtype;
} npy_kinds[] = {
    {"<f4", NPY_F4, 4, NC_F32}, {"<f2", NPY_F2, 2, NC_F16}, {"<f8", NPY_F8, 8, NC_F32},
    {"<i4", NPY_I4, 4, NC_I32}, {"<i8", NPY_I8, 8, NC_I32}, {"|u1", NPY_U1, 1, NC_U8},
    {"|b1", NPY_B1, 1, NC_BOOL},
};

typedef struct npy_header {
    int kind;            /* index into npy_kinds, -1 unknown */
    bool fortran;
    uint8_t rank;
    int64_t shape[NC_MAX_RANK];
} npy_header;

static const char *skip_ws(const char *p)
{
    while (*p == ' ' || *p == '\t' || *p == '\n') p++;
    return p;
}

/* Parses a quoted Python string at p into buf; returns the position after it. */
static const char *parse_pystr(const char *p, char *buf, size_t cap)
{
    char q = *p;
    if (q != '\'' && q != '"') return NULL;
    size_t n = 0;
    for (p++; *p && *p != q; p++) {
        if (n + 1 >= cap) return NULL;
        buf[n++] = *p;
    }
    if (*p != q) return NULL;
    buf[n] = 0;
    return p + 1;
}

static const char *parse_shape(const char *p, npy_header *h, char *err, size_t errcap)
{
    if (*p != '(') return NULL;
    p = skip_ws(p + 1);
    h->rank = 0;
    while (*p != ')') {
        if (!isdigit((unsigned char)*p)) return NULL;
        if (h->rank == NC_MAX_RANK) {
            nc_errf(err, errcap, "rank exceeds %d", NC_MAX_RANK);
            return NULL;
        }
        errno = 0;
        char *end;
        long long v = strtoll(p, &end, 10);
        if (errno || v < 0 || v > DIM_MAX_NUMEL) {
            nc_errf(err, errcap, "dimension out of range");
            return NULL;
        }
        h->shape[h->rank++] = v;
        p = skip_ws(end);
        if (*p == ',') p = skip_ws(p + 1);
        else if (*p != ')') return NULL;
    }
    return p + 1;
}

/* Which of the header's keys have been given. */
typedef struct npy_seen {
    bool descr, order, shape;
} npy_seen;

/* The value of key at p into h: the position after it; NULL with err set
 * for a refused one, NULL with err empty for a malformed one. A key given
 * twice is refused: Python's dict would keep the last, which one the writer
 * meant is unknown. */
static const char *parse_entry(const char *p, const char *key, npy_header *h, npy_seen *seen, char *err, size_t errcap)
{
    err[0] = 0;
    bool again = (!strcmp(key, "descr") && seen->descr) || (!strcmp(key, "fortran_order") && seen->order) ||
                 (!strcmp(key, "shape") && seen->shape);
    if (again) {
        nc_errf(err, errcap, "header key '%s' given twice", key);
        return NULL;
    }
    if (!strcmp(key, "descr")) {
        char val[32];
        if (!(p = parse_pystr(p, val, sizeof val))) return NULL;
        for (size_t k = 0; k < NC_COUNT(npy_kinds); k++)
            if (!strcmp(val, npy_kinds[k].descr)) h->kind = (int)k;
        if (h->kind < 0) {
            nc_errf(err, errcap, "unsupported dtype '%s' (supported: <f4 <f2 <f8 <i4 <i8 |u1 |b1)", val);
            return NULL;
        }
        seen->descr = true;
    } else if (!strcmp(key, "fortran_order")) {
        if (!strncmp(p, "False", 5)) h->fortran = false, p += 5;
        else if (!strncmp(p, "True", 4)) h->fortran = true, p += 4;
        else return NULL;
        seen->order = true;
    } else if (!strcmp(key, "shape")) {
        if (!(p = parse_shape(p, h, err, errcap))) return NULL;
        seen->shape = true;
    } else {
        nc_errf(err, errcap, "unexpected header key '%s'", key);
        return NULL;
    }
    return p;
}

static int parse_header(const char *s, npy_header *h, char *err, size_t errcap)
{
    memset(h, 0, sizeof *h);
    h->kind = -1;
    npy_seen seen = {0};
    const char *p = skip_ws(s);
    if (*p++ != '{') goto bad;
    for (;;) {
        p = skip_ws(p);
        if (*p == '}') break;
        char key[32];
        if (!(p = parse_pystr(p, key, sizeof key))) goto bad;
        p = skip_ws(p);
        if (*p++ != ':') goto bad;
        p = skip_ws(p);
        if (!(p = parse_entry(p, key, h, &seen, err, errcap))) {
            if (err[0]) return -1;
            goto bad;
        }
        p = skip_ws(p);
        if (*p == ',') p++;
        else if (*p != '}') goto bad;
    }
    if (!seen.descr || !seen.order || !seen.shape) {
        nc_errf(err, errcap, "header lacks descr, fortran_order or shape");
        return -1;
    }
    if (h->fortran) {
        nc_errf(err, errcap, "Fortran-order arrays are not supported (save with np.ascontiguousarray)");
        return -1;
    }
    return 0;
bad:
    nc_errf(err, errcap, "malformed header");
    return -1;
}

/* A float64 (or float32) value as dtype (f32, f16 or bf16), rounded once;
 * false when a finite value lies beyond that dtype's range (it is stored as
 * inf). */
static bool store_narrowed(cpu_tensor *t, int64_t i, nc_dtype dtype, double v)
{
    if (dtype == NC_F16) t->f[i] = nc_f16_bits_to_f32(nc_f64_to_f16_bits(v));
    else if (dtype == NC_BF16) t->f[i] = nc_bf16_bits_to_f32(nc_f64_to_bf16_bits(v));
    /* from the tie above FLT_MAX on, f32 rounds to inf: said so, as C's cast is undefined there */
    else t->f[i] = fabs(v) < 0x1.ffffffp+127 || !isfinite(v) ? (float)v : v < 0 ? -INFINITY : INFINITY;
    return isfinite(t->f[i]) || !isfinite(v);
}

/* One element into t; false for a float beyond float_as (stored as inf). */
static bool store_element(cpu_tensor *t, int64_t i, npy_kind kind, nc_dtype float_as, const uint8_t *p)
{
    switch (kind) {
    case NPY_F4: {
        float v;
        memcpy(&v, p, 4);
        if (float_as != NC_F32) return store_narrowed(t, i, float_as, v);   /* f32 -> f64 is exact: still one rounding */
        t->f[i] = v;
        break;
    }
    case NPY_F2: { uint16_t v; memcpy(&v, p, 2); t->f[i] = nc_f16_bits_to_f32(v); break; }
    case NPY_F8: { double v; memcpy(&v, p, 8); return store_narrowed(t, i, float_as, v); }
    case NPY_I4: { int32_t v; memcpy(&v, p, 4); t->i[i] = v; break; }
    case NPY_I8: { int64_t v; memcpy(&v, p, 8); t->i[i] = (int32_t)v; break; }
    case NPY_U1: t->i[i] = p[0]; break;
    case NPY_B1: t->i[i] = p[0] != 0; break;
    }
    return true;
}

/* The float an element of a float file holds, as a double (for a message). */
static double float_element(npy_kind kind, const uint8_t *p)
{
    if (kind == NPY_F8) {
        double v;
        memcpy(&v, p, 8);
        return v;
    }
    float v;
    memcpy(&v, p, 4);
    return v;
}

/* The dtype a file of kind is read as: a float64 file as float_as, a
 * float32 file for a narrower float_as as that, anything else as itself. */
static nc_dtype read_dtype(const npy_header *h, nc_dtype float_as)
{
    const npy_kind kind = npy_kinds[h->kind].kind;
    if (kind == NPY_F8 || (kind == NPY_F4 && float_as != NC_F32)) return float_as;
    return npy_kinds[h->kind].dtype;
}

/* Storage for the data: out's own 4-byte elements, or, with native, a
 * buffer at the dtype's width (*native) beside a shape-only out. The same
 * limit either way (max_bytes of 4-byte elements), so a file is refused as
 * too large by both readers alike. */
static bool alloc_data(const npy_header *h, nc_dtype dtype, cpu_tensor *out, uint8_t **native, int64_t max_bytes)
{
    if (!native) return cpu_tensor_alloc(out, dtype, h->rank, h->shape, max_bytes);
    int64_t numel = 1;   /* at most 2^40: npy_read_as checked the header */
    for (int d = 0; d < h->rank; d++) numel *= h->shape[d];
    if (numel > max_bytes / CPU_ELEM_BYTES) return false;
    /* malloc, not nc_xmalloc: a size the machine cannot give is an error to report */
    *native = malloc((size_t)(numel ? numel : 1) * dtype_size(dtype));
    if (!*native) return false;
    *out = (cpu_tensor){.dtype = dtype, .rank = h->rank, .numel = numel};
    memcpy(out->shape, h->shape, sizeof out->shape);
    return true;
}

static void free_data(cpu_tensor *out, uint8_t **native)
{
    cpu_tensor_free(out);
    if (!native) return;
    free(*native);
    *native = NULL;
}

/* Streams the data through a small buffer into out (or *native): a
 * float64 file costs its converted copy only, never a second one of its own
 * width. Each chunk's elements are decoded as 4-byte ones first, into out's
 * storage or a chunk of their own, so both layouts hold the same values. */
static int read_data(FILE *f, const char *path, const npy_header *h, nc_dtype float_as, cpu_tensor *out, uint8_t **native,
                     int64_t max_bytes, npy_file_info *info, char *err, size_t errcap)
{
    const int kind = npy_kinds[h->kind].kind, bytes = npy_kinds[h->kind].bytes;
    const nc_dtype dtype = read_dtype(h, float_as);
    if (!alloc_data(h, dtype, out, native, max_bytes)) {
        nc_errf(err, errcap, "%s: array too large", path);
        return -1;
    }
    uint8_t chunk[1 << 16];
    const int64_t per_chunk = (int64_t)sizeof chunk / bytes;
    cpu_tensor part = {0};
    if (native && !cpu_tensor_alloc(&part, dtype, 1, &per_chunk, 0)) NC_BUG("npy: chunk allocation");
    int rc = 0;
    for (int64_t i = 0; i < out->numel && rc == 0; i += per_chunk) {
        int64_t n = out->numel - i < per_chunk ? out->numel - i : per_chunk;
        if (fread(chunk, (size_t)bytes, (size_t)n, f) != (size_t)n) {
            nc_errf(err, errcap, "%s: file is truncated (expected %" PRId64 " elements)", path, out->numel);
            rc = -1;
            break;
        }
        cpu_tensor into = native ? part : *out;
        if (!native) into.f = out->f ? out->f + i : NULL, into.i = out->i ? out->i + i : NULL;
        into.numel = n;
        for (int64_t k = 0; k < n && rc == 0; k++) {
            const uint8_t *p = chunk + k * bytes;
            if (kind == NPY_I8) {   /* no caller takes an int64 beyond i32 */
                int64_t v;
                memcpy(&v, p, 8);
                if (v < INT32_MIN || v > INT32_MAX) {
                    nc_errf(err, errcap, "%s: element %" PRId64 " = %" PRId64 " does not fit i32", path, i + k, v);
                    rc = -1;
                }
            }
            if (rc == 0 && !store_element(&into, k, kind, float_as, p) && info->misfit_at < 0) {
                info->misfit_at = i + k;
                info->misfit = float_element(kind, p);
            }
        }
        if (rc == 0 && native) cpu_tensor_to_native(&into, *native + i * (int64_t)dtype_size(dtype));
    }
    cpu_tensor_free(&part);
    if (rc == 0 && fgetc(f) != EOF) {
        nc_errf(err, errcap, "%s: trailing bytes after the array data", path);
        rc = -1;
    }
    if (rc != 0) free_data(out, native);
    return rc;
}

int npy_read(const char *path, cpu_tensor *out, int64_t max_bytes, char *err, size_t errcap)
{
    npy_file_info info;
    int rc = npy_read_as(path, NC_F32, out, max_bytes, &info, err, errcap);
    if (rc != 0) return rc;
    if (info.misfit_at >= 0) {
        nc_errf(err, errcap, "%s: element %" PRId64 " = %g does not fit f32 (its largest is %g)", path, info.misfit_at, info.misfit,
                 (double)FLT_MAX);
        cpu_tensor_free(out);
        return -1;
    }
    return 0;
}

/* The header's text after the magic and version (on the heap), or NULL
 * with err set; f is left at the data. */
static char *read_header_text(FILE *f, const char *path, char *err, size_t errcap)
{
    uint8_t pre[10];
    if (fread(pre, 1, 8, f) != 8 || memcmp(pre, "\x93NUMPY", 6) != 0) {
        nc_errf(err, errcap, "%s: not a .npy file (bad magic)", path);
        return NULL;
    }
    uint32_t hlen;
    if (pre[6] == 1) {
        if (fread(pre + 8, 1, 2, f) != 2) goto trunc;
        hlen = (uint32_t)pre[8] | (uint32_t)pre[9] << 8;
    } else if (pre[6] == 2 || pre[6] == 3) {
        uint8_t l[4];
        if (fread(l, 1, 4, f) != 4) goto trunc;
        hlen = (uint32_t)l[0] | (uint32_t)l[1] << 8 | (uint32_t)l[2] << 16 | (uint32_t)l[3] << 24;
    } else {
        nc_errf(err, errcap, "%s: unsupported .npy version %d", path, pre[6]);
        return NULL;
    }
    if (hlen > (1u << 20)) {
        nc_errf(err, errcap, "%s: header length %u is implausible", path, hlen);
        return NULL;
    }
    char *hdr = nc_xmalloc(hlen + 1);
    if (fread(hdr, 1, hlen, f) != hlen) {
        free(hdr);
        goto trunc;
    }
    hdr[hlen] = 0;
    if (strlen(hdr) != hlen) {
        nc_errf(err, errcap, "%s: NUL byte in header", path);
        free(hdr);
        return NULL;
    }
    return hdr;
trunc:
    nc_errf(err, errcap, "%s: file is truncated in the header", path);
    return NULL;
}

/* The data the header announces must be what the file holds: checked
 * before allocating, so a tiny file cannot ask for gigabytes. f is at the
 * data, and left there. */
static int check_data_size(FILE *f, const char *path, const npy_header *h, char *err, size_t errcap)
{
    const int64_t most = DIM_MAX_NUMEL;
    int64_t numel = 1;
    for (int d = 0; d < h->rank; d++) numel = h->shape[d] == 0 ? 0 : numel;
    for (int d = 0; d < h->rank && numel > 0; d++) {
        if (numel > most / h->shape[d]) {
            nc_errf(err, errcap, "%s: the header's shape holds more than 2^40 elements", path);
            return -1;
        }
        numel *= h->shape[d];
    }
    long here = ftell(f);
    if (here < 0 || fseek(f, 0, SEEK_END) != 0) return 0;   /* not seekable: read_data finds a short or long file */
    long end = ftell(f);
    int64_t want = numel * npy_kinds[h->kind].bytes;
    if (fseek(f, here, SEEK_SET) != 0) {
        nc_errf(err, errcap, "%s: file is truncated in the header", path);
        return -1;
    }
    if (end - here != want) {
        nc_errf(err, errcap, "%s: %s (the header announces %" PRId64 " bytes of data, the file holds %ld)", path,
                 end - here < want ? "file is truncated" : "trailing bytes after the array data", want, end - here);
        return -1;
    }
    return 0;
}

static int read_file(const char *path, nc_dtype float_as, cpu_tensor *out, uint8_t **native, int64_t max_bytes,
                     npy_file_info *info, char *err, size_t errcap)
{
    NC_ASSERT(float_as == NC_F32 || float_as == NC_F16 || float_as == NC_BF16);
    memset(out, 0, sizeof *out);
    if (native) *native = NULL;
    *info = (npy_file_info){.descr = "", .misfit_at = -1};
    const char *reason;
    FILE *f = file_open_regular(path, &reason);
    if (!f) {
        nc_errf(err, errcap, "%s: %s", path, reason);
        return FILE_OPEN_IO_ERROR;
    }
    int rc = -1;
    char *hdr = read_header_text(f, path, err, errcap);
    npy_header h;
    char why[160];
    if (hdr && parse_header(hdr, &h, why, sizeof why) != 0) nc_errf(err, errcap, "%s: %s", path, why);
    else if (hdr && check_data_size(f, path, &h, err, errcap) == 0)
        rc = read_data(f, path, &h, float_as, out, native, max_bytes, info, err, errcap);
    if (rc == 0) info->descr = npy_kinds[h.kind].descr;
    free(hdr);
    fclose(f);
    return rc;
}

int npy_read_as(const char *path, nc_dtype float_as, cpu_tensor *out, int64_t max_bytes, npy_file_info *info, char *err,
                size_t errcap)
{
    return read_file(path, float_as, out, NULL, max_bytes, info, err, errcap);
}

int npy_read_native(const char *path, nc_dtype float_as, cpu_tensor *out, uint8_t **data, int64_t max_bytes, npy_file_info *info,
                    char *err, size_t errcap)
{
    NC_ASSERT(max_bytes > 0);
    return read_file(path, float_as, out, data, max_bytes, info, err, errcap);
}

static const char *npy_descr_for(nc_dtype t, int *bytes)
{
    switch (t) {
    case NC_F16: *bytes = 2; return "<f2";
    case NC_I32: *bytes = 4; return "<i4";
    case NC_U8: *bytes = 1; return "|u1";
    case NC_BOOL: *bytes = 1; return "|b1";
    default: *bytes = 4; return "<f4";   /* f32 and bf16 (NumPy has no bfloat16) */
    }
}

int npy_write(const char *path, const cpu_tensor *t, char *err, size_t errcap)
{
    int bytes;
    const char *descr = npy_descr_for(t->dtype, &bytes);
    char dict[256], shape[200] = "";
    size_t n = 0;
    for (int d = 0; d < t->rank; d++)
        n += (size_t)snprintf(shape + n, sizeof shape - n, "%" PRId64 "%s", t->shape[d],
                              t->rank == 1 || d + 1 < t->rank ? ", " : "");
    int len = snprintf(dict, sizeof dict, "{'descr': '%s', 'fortran_order': False, 'shape': (%s), }", descr, shape);
    /* Pad so the data starts on a 64-byte boundary, ending the header with \n. */
    size_t total = 10 + (size_t)len + 1;
    size_t pad = (64 - total % 64) % 64;
    uint32_t hlen = (uint32_t)((size_t)len + pad + 1);

    atomic_file af;
    if (atomic_file_open(&af, path, err, errcap) != 0) return -1;
    FILE *f = af.f;
    uint8_t pre[10] = {0x93, 'N', 'U', 'M', 'P', 'Y', 1, 0, (uint8_t)(hlen & 0xff), (uint8_t)(hlen >> 8)};
    bool ok = fwrite(pre, 1, 10, f) == 10 && fwrite(dict, 1, (size_t)len, f) == (size_t)len;
    for (size_t k = 0; ok && k < pad; k++) ok = fputc(' ', f) != EOF;
    ok = ok && fputc('\n', f) != EOF;
    for (int64_t i = 0; ok && i < t->numel; i++) {
        uint8_t buf[4];
        double v = cpu_get(t, i);
        switch (t->dtype) {
        case NC_F16: { uint16_t h = nc_f32_to_f16_bits((float)v); memcpy(buf, &h, 2); break; }
        case NC_I32: { int32_t x = (int32_t)v; memcpy(buf, &x, 4); break; }
        case NC_U8: case NC_BOOL: buf[0] = (uint8_t)v; break;
        default: { float x = (float)v; memcpy(buf, &x, 4); break; }
        }
        ok = fwrite(buf, 1, (size_t)bytes, f) == (size_t)bytes;
    }
    return atomic_file_commit(&af, path, ok, err, errcap);
}
