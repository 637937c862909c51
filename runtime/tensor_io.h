/* tensor_io.h - tensors in and out of files: NumPy .npy arrays, safetensors
 * weight files, and parameter initialisation. Every reader validates every
 * length, offset and shape before use and reports problems as one clear
 * message (never a crash, never an absurd allocation). */
#ifndef NRT_TENSOR_IO_H
#define NRT_TENSOR_IO_H

#include "cpu_exec.h"

/* .npy: reads <f4 <f2 <f8 <i4 <i8 |u1 |b1 (C order); f8 and i8 are converted
 * (values must fit f32 and i32: a finite float64 beyond f32's range is
 * refused). The result's dtype is the file's (f8 -> f32, i8 -> i32).
 * max_bytes bounds the data size. Returns 0, or -1 with err set
 * (FILE_OPEN_IO_ERROR, file_open.h, when the file cannot be opened). */
int npy_read(const char *path, cpu_tensor *out, int64_t max_bytes, char *err, size_t errcap);
/* What npy_read_as saw beside the values. */
typedef struct npy_file_info {
    const char *descr;     /* the file's own dtype ("<f8") */
    int64_t misfit_at;     /* flat index of the first finite float beyond the range of float_as (read as inf), -1 none */
    double misfit;         /* its value */
} npy_file_info;
/* npy_read with a float64 file read as float_as (f32, f16 or bf16), and a
 * float32 file for an f16 or bf16 float_as read as that: each value rounded
 * once to nearest even (as NumPy's astype); the caller decides about a value
 * out of range. A float16 file stays f16. */
int npy_read_as(const char *path, nc_dtype float_as, cpu_tensor *out, int64_t max_bytes, npy_file_info *info, char *err,
                size_t errcap);
/* npy_read_as's values at their dtype's own width, in cpu_tensor_to_native's
 * layout (an f16 in its 2 bytes, a u8 in one): *data (malloc'd, for the
 * caller to free; NULL on an error) holds them, out only their dtype and
 * shape. The same checks and errors, max_bytes (> 0) counting 4 bytes an
 * element as npy_read_as does. */
int npy_read_native(const char *path, nc_dtype float_as, cpu_tensor *out, uint8_t **data, int64_t max_bytes, npy_file_info *info,
                    char *err, size_t errcap);
/* Writes f32 as <f4, f16 as <f2, bf16 as <f4 (NumPy has no bfloat16),
 * i32 as <i4, u8 as |u1, bool as |b1. */
int npy_write(const char *path, const cpu_tensor *t, char *err, size_t errcap);

/* Parameter initialisation, deterministic in (seed, parameter name). Fans:
 * fan_out = last axis, fan_in = product of the others (weights are [in, out]).
 *   xavier_uniform: U(-b, b), b = gain*sqrt(6/(fan_in+fan_out))
 *   xavier_normal:  N(0, gain*sqrt(2/(fan_in+fan_out)))
 *   kaiming_uniform: U(-b, b), b = gain*sqrt(3/fan_in)
 *   kaiming_normal: N(0, gain/sqrt(fan_in))
 *   normal: N(init_b, init_a); uniform: U(init_a, init_b)
 * Allocates t (shape from the declaration, dims must be constant). */
int param_init(const ir_graph *g, uint32_t param_index, uint64_t seed, cpu_tensor *t, char *err, size_t errcap);

/* safetensors: one file holding named tensors. Writing uses the parameters'
 * dtypes (F32, F16, BF16, I32, U8, BOOL) and names; the header is JSON. */
typedef struct st_entry {
    const char *name;
    const cpu_tensor *t;
} st_entry;
int safetensors_write(const char *path, const st_entry *entries, uint32_t n, char *err, size_t errcap);
/* One __metadata__ entry: a name and a string (a checkpoint's optimizer, its model's fingerprint). */
typedef struct st_meta {
    const char *key, *value;
} st_meta;
/* safetensors_write with these __metadata__ entries beside "format": "netc" (an entry "format" is passed over). */
int safetensors_write_meta(const char *path, const st_entry *entries, uint32_t n, const st_meta *meta, uint32_t nmeta, char *err,
                           size_t errcap);

/* What safetensors_load_params returns: 0, or why the file was not loaded.
 * The last four are of a whole file that is not of this graph's
 * parameters (a caller may add a hint of its own, as netc train's resume
 * does); the first two keep the values they had before there were more. */
typedef enum st_load_status {
    ST_LOAD_OK = 0,
    ST_LOAD_MALFORMED = -1,   /* not a safetensors file, or a broken one */
    ST_LOAD_IO = -2,          /* FILE_OPEN_IO_ERROR: cannot be opened or read */
    ST_LOAD_MISSING = -3,     /* a parameter the graph declares is not in the file */
    ST_LOAD_SHAPE = -4,       /* a parameter's shape is not the graph's */
    ST_LOAD_DTYPE = -5,       /* a parameter's dtype cannot convert to the graph's */
    ST_LOAD_EXTRA = -6,       /* a tensor of the file is no parameter of the graph (allow_extra false) */
} st_load_status;

/* Read a safetensors file into the graph's parameters: every parameter must be
 * present with its exact shape; dtypes convert between F32/F16/BF16 (rounding
 * to the parameter's dtype); extra tensors in the file are an error unless
 * allow_extra. params[g->nparams] receive allocated tensors. Returns an
 * st_load_status: 0, ST_LOAD_MALFORMED (-1) for a malformed file,
 * ST_LOAD_IO (FILE_OPEN_IO_ERROR, file_open.h) when it cannot be opened or
 * read, or the way the file is not of g's parameters. */
int safetensors_load_params(const char *path, const ir_graph *g, cpu_tensor *params, bool allow_extra, char *err,
                            size_t errcap);
/* The same for the parameters `wanted` accepts only (all, when NULL): the
 * others are neither required nor read, and their params[] stay empty. */
typedef bool (*st_param_filter)(const ir_param *p);
int safetensors_load_params_if(const char *path, const ir_graph *g, st_param_filter wanted, cpu_tensor *params,
                               bool allow_extra, char *err, size_t errcap);

/* A safetensors file's header alone: its tensors' names and __metadata__
 * entries, no tensor's entry checked. safetensors_read_header returns 0,
 * ST_LOAD_MALFORMED or ST_LOAD_IO with err set; st_header_meta gives an
 * entry's value (NULL: none). */
typedef struct st_header {
    char **names;
    uint32_t nnames;
    st_meta *meta;   /* keys and values allocated, freed by st_header_free */
    uint32_t nmeta;
} st_header;
int safetensors_read_header(const char *path, st_header *h, char *err, size_t errcap);
const char *st_header_meta(const st_header *h, const char *key);
bool st_header_has(const st_header *h, const char *name);
void st_header_free(st_header *h);

#endif
