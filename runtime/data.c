/* data.c - IDX, .npy and text data sets and the batch loader.
 *
 * A set holds its samples at their own width (an f16 in 2 bytes, a pixel in
 * one), as the files give them: a 4-byte copy of Fashion-MNIST would be
 * 188 MB. Rows are widened to cpu_tensor's 4-byte elements, to the same
 * bits, a batch at a time: by data_rows, and by the loader's thread for all
 * but u8 samples, which a batch carries as bytes.
 *
 * zlib's gzread reads both gzip and plain files, so one reader covers
 * "train-images-idx3-ubyte.gz" and its uncompressed twin. The loader's
 * producer thread fills a ring of batch slots; the consumer takes them in
 * order, and the slot it holds is released on its next call. */
#include "data.h"
#include "tensor_io.h"
#include "file_open.h"

#include <errno.h>
#include <math.h>
#include <inttypes.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>
#include <zlib.h>

#define IDX_MAX_SAMPLES ((uint32_t)1 << 26)
#define IDX_MAX_SAMPLE_BYTES ((uint32_t)1 << 24)

/* NULL with *why set when neither file opens (file_open_regular's reasons). */
static gzFile open_idx(const char *dir, const char *split, const char *kind, char *path, size_t cap, const char **why)
{
    struct stat st;
    snprintf(path, cap, "%s/%s-%s-ubyte.gz", dir, split, kind);
    if (stat(path, &st) != 0) snprintf(path, cap, "%s/%s-%s-ubyte", dir, split, kind);
    int fd = file_open_regular_fd(path, why);
    if (fd < 0) return NULL;
    gzFile f = gzdopen(fd, "rb");
    if (!f) {
        *why = "out of memory";
        close(fd);
    }
    return f;
}

static bool read_be32(gzFile f, uint32_t *v)
{
    uint8_t b[4];
    if (gzread(f, b, 4) != 4) return false;
    *v = (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3];
    return true;
}

/* Reads an IDX file of unsigned bytes with the given rank (1 or 3): t gets
 * the dtype (u8) and shape, and *bytes the data, a byte each; t has no storage. */
static int read_idx(gzFile f, const char *path, int rank, cpu_tensor *t, uint8_t **bytes, char *err, size_t errcap)
{
    uint32_t magic = 0, dims[3] = {1, 1, 1};
    if (!read_be32(f, &magic) || magic != (0x800u | (uint32_t)rank)) {
        nc_errf(err, errcap, "%s: not an IDX file of rank %d unsigned bytes (magic 0x%08x)", path, rank, magic);
        return -1;
    }
    for (int d = 0; d < rank; d++)
        if (!read_be32(f, &dims[d])) {
            nc_errf(err, errcap, "%s: truncated header", path);
            return -1;
        }
    uint64_t sample = (uint64_t)dims[1] * dims[2];
    if (dims[0] == 0 || dims[0] > IDX_MAX_SAMPLES || sample == 0 || sample > IDX_MAX_SAMPLE_BYTES) {
        nc_errf(err, errcap, "%s: implausible sizes (%u samples of %" PRIu64 " bytes)", path, dims[0], sample);
        return -1;
    }
    /* Read the bytes first, into a buffer that grows only as data arrives:
     * a 30-byte file that claims 4 GB of images is refused as truncated
     * without a 4 GB allocation. */
    int64_t numel = (int64_t)dims[0] * (int64_t)sample, have = 0, cap = 0;
    uint8_t *raw = NULL;
    while (have < numel) {
        if (have == cap) {
            cap = cap ? cap * 2 : 1 << 16;
            if (cap > numel) cap = numel;
            raw = nc_xrealloc(raw, (size_t)cap);
        }
        int got = gzread(f, raw + have, (unsigned)(cap - have < (1 << 30) ? cap - have : (1 << 30)));
        if (got <= 0) {
            int zerr;
            const char *why = gzerror(f, &zerr);
            nc_errf(err, errcap, "%s: truncated after %" PRId64 " of %" PRId64 " bytes%s%s", path, have, numel,
                     zerr < 0 ? ": " : "", zerr < 0 ? why : "");
            free(raw);
            return -1;
        }
        have += got;
    }
    uint8_t extra;
    if (gzread(f, &extra, 1) != 0) {
        nc_errf(err, errcap, "%s: trailing bytes after %" PRId64 " bytes of data", path, numel);
        free(raw);
        return -1;
    }
    memset(t, 0, sizeof *t);
    t->dtype = NC_U8;
    t->rank = (uint8_t)rank;
    for (int d = 0; d < rank; d++) t->shape[d] = dims[d];
    t->numel = numel;
    *bytes = raw;
    return 0;
}

/* An IDX file's data as bytes (*bytes; t: dtype and shape, no storage), or,
 * with bytes NULL, in t's own storage (labels). */
static int load_part(const char *dir, const char *split, const char *kind, int rank, cpu_tensor *t, uint8_t **bytes,
                     char *err, size_t errcap)
{
    char path[4096];
    const char *why;
    gzFile f = open_idx(dir, split, kind, path, sizeof path, &why);
    if (!f) {
        nc_errf(err, errcap, "%s: %s%s", path, why,
                 access(path, F_OK) != 0 ? " (is the data set installed? see README: scripts/setup.sh)" : "");
        return -1;
    }
    uint8_t *raw = NULL;
    int rc = read_idx(f, path, rank, t, &raw, err, errcap);
    gzclose(f);
    if (rc || bytes) {
        if (bytes) *bytes = raw;
        return rc;
    }
    cpu_tensor shape = *t;
    if (!cpu_tensor_alloc(t, NC_U8, shape.rank, shape.shape, (int64_t)1 << 34)) {
        nc_errf(err, errcap, "%s: too large to load", path);
        free(raw);
        return -1;
    }
    for (int64_t i = 0; i < t->numel; i++) t->i[i] = raw[i];
    free(raw);
    return 0;
}

/* Labels in [0, max_classes); classes = 1 + the largest. */
static int check_labels(const char *what, data_set *d, int32_t max_classes, char *err, size_t errcap)
{
    for (int64_t i = 0; i < d->y.numel; i++) {
        if (d->y.i[i] < 0 || d->y.i[i] >= max_classes) {
            nc_errf(err, errcap, "%s: sample %" PRId64 "'s label is %d, outside the model's %d classes (labels 0 to %d)", what, i,
                     d->y.i[i], max_classes, max_classes - 1);
            return -1;
        }
        if (d->y.i[i] + 1 > d->classes) d->classes = d->y.i[i] + 1;
    }
    return 0;
}

/* The IDX pair of a split, or its images alone where the model reads no labels. */
static int idx_load(const char *dir, const char *split, bool labels_too, int32_t max_classes, data_set *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (load_part(dir, split, "images-idx3", 3, &out->x, &out->bytes, err, errcap) != 0) return -1;
    out->held = NC_U8;
    out->n = out->x.shape[0];
    if (!labels_too) return 0;
    cpu_tensor labels;
    if (load_part(dir, split, "labels-idx1", 1, &labels, NULL, err, errcap) != 0) {
        data_set_free(out);
        return -1;
    }
    out->y = labels;
    out->y.dtype = NC_I32;
    if (labels.shape[0] != out->n) {
        nc_errf(err, errcap, "%s: %s has %" PRId64 " images but %" PRId64 " labels", dir, split, out->n, labels.shape[0]);
        data_set_free(out);
        return -1;
    }
    char what[4200];
    snprintf(what, sizeof what, "%s/%s", dir, split);
    if (check_labels(what, out, max_classes, err, errcap) != 0) {
        data_set_free(out);
        return -1;
    }
    return 0;
}

int data_load_idx(const char *dir, const char *split, int32_t max_classes, data_set *out, char *err, size_t errcap)
{
    return idx_load(dir, split, true, max_classes, out, err, errcap);
}

/* NumPy's name of a dtype, for the hint that converts a file: what
 * `.astype(np.NAME)` takes. */
static const char *numpy_name(nc_dtype t)
{
    switch (t) {
    case NC_F32: return "float32";
    case NC_F16: return "float16";
    case NC_I32: return "int32";
    case NC_U8: return "uint8";
    case NC_BOOL: return "bool_";
    default: return NULL;
    }
}

/* NumPy's name of what a file holds: its own descr ("<f8": float64). */
static const char *numpy_file_name(const char *descr, nc_dtype read_as)
{
    if (!strcmp(descr, "<f8")) return "float64";
    if (!strcmp(descr, "<f4")) return "float32";
    if (!strcmp(descr, "<i8")) return "int64";
    return numpy_name(read_as);
}

/* Whether a file of descr (read as dtype) holds what an input of type want
 * takes: the same dtype (float64 is read as the input's float dtype, float32
 * as an f16 input's), or for an i32 any integers (NumPy's default int64:
 * every value must fit, npy_read checks). */
static bool npy_fits(const char *descr, nc_dtype read_as, nc_dtype want)
{
    if (want == NC_I32 && (!strcmp(descr, "<i4") || !strcmp(descr, "<i8") || !strcmp(descr, "|u1"))) return true;
    return read_as == want && strcmp(descr, "<i8") != 0;
}

static int npy_dtype_error(const char *path, const char *descr, const cpu_tensor *t, nc_dtype want, const char *input, char *err,
                           size_t errcap)
{
    const char *np = numpy_name(want);
    if (!np) {
        nc_errf(err, errcap, "%s: the model's input %s is %s, which a .npy file cannot hold: declare it f32 (or f16) and cast "
                 "it in the model", path, input, dtype_name(want));
        return -1;
    }
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    nc_errf(err, errcap, "%s holds %s, but the model's input %s is %s (hint: convert the array with NumPy, "
             "np.save('%s', a.astype(np.%s)))", path, numpy_file_name(descr, t->dtype), input, dtype_name(want), base, np);
    return -1;
}

/* A dtype netc does not read (int16, uint32, big-endian floats...): the
 * reader knows only the file, so the input it was meant for and the
 * conversion that makes it readable are added here, as npy_dtype_error
 * gives them for a dtype it reads. */
static void unread_dtype_hint(const char *path, nc_dtype want, const char *input, char *err, size_t errcap)
{
    const char *at = strstr(err, "unsupported dtype '"), *np = numpy_name(want);
    if (!at || !np) return;
    char descr[32];
    if (sscanf(at, "unsupported dtype '%31[^']'", descr) != 1) return;
    const char *base = strrchr(path, '/');
    base = base ? base + 1 : path;
    nc_errf(err, errcap, "%s holds dtype '%s', which netc does not read; the model's input %s is %s (hint: convert the array with "
             "NumPy, np.save('%s', a.astype(np.%s)))", path, descr, input, dtype_name(want), base, np);
}

/* A float array's first NaN or infinity, said with its sample and element;
 * its values in t's storage or, with bytes, there at their own width. */
static int check_finite(const char *path, const cpu_tensor *t, const uint8_t *bytes, char *err, size_t errcap)
{
    if (!dtype_is_float(t->dtype) || t->shape[0] == 0) return 0;
    int64_t per = t->numel / t->shape[0];
    for (int64_t k = 0; k < t->numel; k++) {
        double v = bytes ? cpu_native_get(t->dtype, bytes, k) : t->f[k];
        if (isfinite(v)) continue;
        nc_errf(err, errcap, "%s: sample %" PRId64 " holds %s (at element %" PRId64 " of its %" PRId64 "): clean the data, "
                 "or drop that sample, before training", path, k / per, isnan(v) ? "NaN" : v > 0 ? "inf" : "-inf", k % per, per);
        return -1;
    }
    return 0;
}

/* A float64 (or float32) value the input's dtype cannot hold, said as
 * check_finite says a NaN. */
static int misfit_error(const char *path, const cpu_tensor *t, const npy_file_info *info, char *err, size_t errcap)
{
    int64_t per = t->numel / t->shape[0];
    nc_errf(err, errcap, "%s: sample %" PRId64 " holds %g (at element %" PRId64 " of its %" PRId64 "), beyond %s's range (its "
             "largest is %g, the value would be inf): scale the data, or drop that sample, before training", path,
             info->misfit_at / per, info->misfit, info->misfit_at % per, per, dtype_name(t->dtype),
             nc_float_max(t->dtype));
    return -1;
}

/* One array of the set: the dtype the model takes, a sample axis, finite
 * floats. A float64 file is read as the input's float dtype, a float32 one
 * as an f16 input's, and a line appended to note says so. With bytes, the
 * values stay at their own width there (*held: their dtype, t: the
 * input's dtype and shape, no storage); else in t's 4-byte storage. */
static int read_part(const char *path, nc_dtype want, const char *input, const char *missing_hint, cpu_tensor *t, uint8_t **bytes,
                     nc_dtype *held, char *note, char *err, size_t errcap)
{
    npy_file_info info;
    const nc_dtype float_as = want == NC_F16 ? NC_F16 : NC_F32;
    const int64_t most = (int64_t)1 << 34;
    int rc = bytes ? npy_read_native(path, float_as, t, bytes, most, &info, err, errcap)
                   : npy_read_as(path, float_as, t, most, &info, err, errcap);
    if (rc != 0) {
        if (access(path, F_OK) != 0 && missing_hint) snprintf(err + strlen(err), errcap - strlen(err), " (%s)", missing_hint);
        else unread_dtype_hint(path, want, input, err, errcap);
        return -1;
    }
    if (!npy_fits(info.descr, t->dtype, want)) rc = npy_dtype_error(path, info.descr, t, want, input, err, errcap);
    else if (t->rank < 1 || t->shape[0] == 0) {
        nc_errf(err, errcap, "%s: no samples (want the sample axis first, then each sample's shape)", path);
        rc = -1;
    } else if (info.misfit_at >= 0) rc = misfit_error(path, t, &info, err, errcap);
    else rc = check_finite(path, t, bytes ? *bytes : NULL, err, errcap);
    if (bytes) *held = t->dtype;
    if (rc != 0) {
        cpu_tensor_free(t);
        if (bytes) free(*bytes), *bytes = NULL;
    } else if (want == NC_I32) t->dtype = NC_I32;   /* from int64 or uint8: 4-byte storage is i32 already, bytes keep *held */
    const bool narrowed = !strcmp(info.descr, "<f8") || (!strcmp(info.descr, "<f4") && want == NC_F16);
    if (rc == 0 && narrowed)
        snprintf(note + strlen(note), DATA_NOTE_CAP - strlen(note), "%s%s holds %s: read as %s for the model's input %s, "
                 "each value rounded as a.astype(np.%s) does", note[0] ? "\n" : "", path, numpy_file_name(info.descr, want),
                 dtype_name(want), input, numpy_name(want));
    return rc;
}

/* The file of one array of a split: by its role (x, y) in the one-input
 * layout, by its input's name in a model of several (w->by_name). */
static void array_path(char *path, size_t cap, const char *dir, const char *split, const data_want *w, const char *role,
                       const char *input)
{
    snprintf(path, cap, "%s/%s_%s.npy", dir, split, w->by_name ? input : role);
}

static const char *base_name(const char *path)
{
    const char *b = strrchr(path, '/');
    return b ? b + 1 : path;
}

/* The model's further inputs, each from its own file, as y is read (4-byte
 * elements, the same conversions and checks); each must hold px's n rows,
 * since a batch takes row i of every array together. */
static int load_extras(const char *dir, const char *split, const data_want *w, const char *px, data_set *out, char *err,
                       size_t errcap)
{
    for (int k = 0; k < w->nextra; k++) {
        char path[4096], hint[8800];
        array_path(path, sizeof path, dir, split, w, NULL, w->extra_input[k]);
        snprintf(hint, sizeof hint, "the model's input %s: %s holds it, one row per sample, as %s holds %s", w->extra_input[k],
                 base_name(path), base_name(px), w->x_input);
        if (read_part(path, w->extra[k], w->extra_input[k], hint, &out->extra[k], NULL, NULL, out->note, err, errcap) != 0)
            return -1;
        out->nextra = k + 1;
        if (out->extra[k].shape[0] != out->n) {
            nc_errf(err, errcap, "%s holds %" PRId64 " samples but %s holds %" PRId64 ": every array of a split holds one row "
                     "per sample, row i of each the same sample", px, out->n, path, out->extra[k].shape[0]);
            return -1;
        }
    }
    return 0;
}

/* Whether SPLIT_<name>.npy is one of the arrays w reads by name. */
static bool array_wanted(const data_want *w, const char *name)
{
    if (!strcmp(name, w->x_input) || (w->has_y && !strcmp(name, w->y_input))) return true;
    for (int k = 0; k < w->nextra; k++)
        if (!strcmp(name, w->extra_input[k])) return true;
    return false;
}

static int by_name(const void *a, const void *b);

/* A note for each SPLIT_*.npy of dir that no input reads (a misnamed array
 * is an error already, as the missing one; this one may be a leftover, or
 * train_x.npy of the one-input layout), in name order. */
static void note_unread(const char *dir, const char *split, const data_want *w, char *note)
{
    DIR *d = opendir(dir);
    if (!d) return;
    char **names = NULL;
    size_t n = 0, pre = strlen(split);
    for (struct dirent *e; (e = readdir(d));) {
        size_t len = strlen(e->d_name);
        if (len <= pre + 5 || strncmp(e->d_name, split, pre) || e->d_name[pre] != '_' || strcmp(e->d_name + len - 4, ".npy")) continue;
        names = nc_xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = nc_xstrdup(e->d_name);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);
    for (size_t i = 0; i < n; i++) {
        char input[256];
        snprintf(input, sizeof input, "%.*s", (int)(strlen(names[i]) - pre - 5), names[i] + pre + 1);
        if (!array_wanted(w, input))
            snprintf(note + strlen(note), DATA_NOTE_CAP - strlen(note), "%s%s/%s is not read: the model has no data input "
                     "named %s (a model of several inputs reads %s_<input>.npy for each)", note[0] ? "\n" : "", dir, names[i],
                     input, split);
        free(names[i]);
    }
    free(names);
}

int data_load_npy(const char *dir, const char *split, const data_want *w, data_set *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    char px[4096], py[4096], hint[8800];
    array_path(px, sizeof px, dir, split, w, "x", w->x_input);
    if (w->has_y) array_path(py, sizeof py, dir, split, w, "y", w->y_input);
    if (w->by_name)
        snprintf(hint, sizeof hint, "the model's input %s: %s holds it, one row per sample; a model of several inputs reads "
                 "each array by its input's name", w->x_input, base_name(px));
    int rc = read_part(px, w->x, w->x_input, w->by_name ? hint : NULL, &out->x, &out->bytes, &out->held, out->note, err, errcap);
    out->n = rc == 0 ? out->x.shape[0] : 0;
    if (rc == 0 && w->has_y) {
        snprintf(hint, sizeof hint, "the train section's loss reads its input %s: %s holds it, one row per sample", w->y_input,
                 base_name(py));
        rc = read_part(py, w->y, w->y_input, hint, &out->y, NULL, NULL, out->note, err, errcap);
        if (rc == 0 && out->y.shape[0] != out->n) {
            nc_errf(err, errcap, "%s holds %" PRId64 " samples but %s holds %" PRId64 ": want one target per sample", px, out->n,
                     py, out->y.shape[0]);
            rc = -1;
        }
        if (rc == 0 && out->y.dtype == NC_I32) rc = check_labels(py, out, w->max_classes, err, errcap);
    }
    if (rc == 0) rc = load_extras(dir, split, w, px, out, err, errcap);
    if (rc == 0 && w->by_name) note_unread(dir, split, w, out->note);
    if (rc != 0) data_set_free(out);
    return rc;
}

/* Whether DIR holds a data set of samples (the .npy layout or IDX files)
 * rather than text. */
bool data_dir_has_samples(const char *dir)
{
    static const char *const names[] = {"train_x.npy", "train-images-idx3-ubyte", "train-images-idx3-ubyte.gz"};
    char path[4096];
    struct stat st;
    for (size_t k = 0; k < sizeof names / sizeof *names; k++) {
        snprintf(path, sizeof path, "%s/%s", dir, names[k]);
        if (stat(path, &st) == 0) return true;
    }
    return false;
}

bool data_dir_has_array(const char *dir, const char *name)
{
    char path[4096];
    struct stat st;
    snprintf(path, sizeof path, "%s/train_%s.npy", dir, name);
    return stat(path, &st) == 0;
}

int data_load_dir(const char *dir, const char *split, const data_want *w, data_set *out, char *err, size_t errcap)
{
    char path[4096];
    struct stat st;
    if (w->by_name) return data_load_npy(dir, split, w, out, err, errcap);   /* IDX files hold one input's images */
    /* a directory of .npy files is one for both splits: a missing test_x.npy is named as such */
    snprintf(path, sizeof path, "%s/%s_x.npy", dir, split);
    bool npy = stat(path, &st) == 0;
    snprintf(path, sizeof path, "%s/train_x.npy", dir);
    bool other = w->x != NC_U8 || (w->has_y && w->y != NC_I32);   /* than IDX files hold */
    if (npy || stat(path, &st) == 0 || (other && !data_dir_has_samples(dir))) return data_load_npy(dir, split, w, out, err, errcap);
    memset(out, 0, sizeof *out);
    if (other) {
        nc_errf(err, errcap, "%s: IDX files hold u8 images and integer labels, but the model's input %s is %s: give the data as "
                 "train_x.npy and test_x.npy (with train_y.npy and test_y.npy for the targets) of the dtypes the model declares",
                 dir, w->x != NC_U8 ? w->x_input : w->y_input, dtype_name(w->x != NC_U8 ? w->x : w->y));
        return -1;
    }
    return idx_load(dir, strcmp(split, "test") == 0 ? "t10k" : split, w->has_y, w->max_classes, out, err, errcap);
}

enum { GZ_NAME_CAP = 1024 };

/* Appends the bytes of one file to *buf: of its text where it is
 * gzip-compressed (gzread reads a plain file as it is), since its
 * compressed bytes would be tokens of no language; gz (GZ_NAME_CAP) gets the
 * first such file's path. */
static int append_file(const char *path, uint8_t **buf, size_t *len, size_t *cap, char *gz, char *err, size_t errcap)
{
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) {
        nc_errf(err, errcap, "%s: %s", path, why);
        return -1;
    }
    int fd = dup(fileno(f));
    fclose(f);
    gzFile g = fd >= 0 ? gzdopen(fd, "rb") : NULL;
    if (!g) {
        if (fd >= 0) close(fd);
        nc_errf(err, errcap, "%s: %s", path, strerror(errno ? errno : ENOMEM));
        return -1;
    }
    int got = 0;
    for (;;) {
        if (*len == *cap) {
            if (*cap >= ((size_t)1 << 32)) {
                gzclose(g);
                nc_errf(err, errcap, "%s: more than 4 GiB of text", path);
                return -1;
            }
            *cap = *cap ? *cap * 2 : 1 << 20;
            *buf = nc_xrealloc(*buf, *cap);
        }
        size_t room = *cap - *len;
        got = gzread(g, *buf + *len, (unsigned)(room < (1u << 30) ? room : (1u << 30)));
        if (got <= 0) break;
        *len += (size_t)got;
    }
    if (!gzdirect(g) && !gz[0]) snprintf(gz, GZ_NAME_CAP, "%s", path);
    int zerr;
    const char *zwhy = gzerror(g, &zerr);   /* a cut stream ends with a short read and Z_BUF_ERROR, not -1 */
    if (!strncmp(zwhy, "<fd:", 4) && strstr(zwhy, ": ")) zwhy = strstr(zwhy, ": ") + 2;   /* gzdopen's name for the file */
    if (got < 0 || (zerr != Z_OK && zerr != Z_STREAM_END))
        nc_errf(err, errcap, "%s: %s%s", path, zerr == Z_ERRNO ? "read error" : "damaged or truncated gzip stream: ",
                zerr == Z_ERRNO ? "" : zwhy);
    else zerr = Z_OK;
    gzclose(g);
    return zerr == Z_OK && got >= 0 ? 0 : -1;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int read_text(const char *path, uint8_t **buf, size_t *len, char *gz, char *err, size_t errcap)
{
    struct stat st;
    size_t cap = 0;
    *buf = NULL, *len = 0;
    if (stat(path, &st) != 0) {
        nc_errf(err, errcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return append_file(path, buf, len, &cap, gz, err, errcap);
    DIR *d = opendir(path);
    if (!d) {
        nc_errf(err, errcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    char **names = NULL, dotted[256] = "";   /* dotted: a file passed over for its name, for the message */
    size_t n = 0;
    for (struct dirent *e; (e = readdir(d));) {
        if (strchr(e->d_name, '.')) {   /* ., .., index files such as fortune's .dat */
            if (e->d_name[0] != '.' && (!dotted[0] || strcmp(e->d_name, dotted) < 0)) snprintf(dotted, sizeof dotted, "%s", e->d_name);
            continue;
        }
        char full[4096];
        snprintf(full, sizeof full, "%s/%s", path, e->d_name);
        if (stat(full, &st) != 0 || !S_ISREG(st.st_mode)) continue;
        names = nc_xrealloc(names, (n + 1) * sizeof *names);
        names[n++] = nc_xstrdup(full);
    }
    closedir(d);
    if (n) qsort(names, n, sizeof *names, by_name);   /* names is NULL when none: qsort may not take it */
    int rc = 0;
    for (size_t i = 0; i < n; i++) {
        if (rc == 0) rc = append_file(names[i], buf, len, &cap, gz, err, errcap);
        free(names[i]);
    }
    free(names);
    if (rc == 0 && n == 0) {
        if (dotted[0])
            nc_errf(err, errcap, "%s: no text files in this directory (and no IDX or .npy data set): a directory's text is "
                     "its files named without a '.', and %s has one; give a file itself, --data %s/%s", path, dotted, path, dotted);
        else nc_errf(err, errcap, "%s: no text files in this directory (and no IDX or .npy data set)", path);
        rc = -1;
    }
    return rc;
}

/* Each window a byte an element (bytes): text is bytes already. */
static void windows_into(data_set *d, const uint8_t *text, int64_t first, int64_t count, int64_t window)
{
    int64_t shape[2] = {count, window};
    if (!cpu_tensor_alloc(&d->y, NC_I32, 1, shape, 0)) NC_BUG("text windows: allocation");
    d->x = (cpu_tensor){.dtype = NC_U8, .rank = 2, .shape = {count, window}, .numel = count * window};
    d->bytes = nc_xmalloc((size_t)(count * window));
    d->held = NC_U8;
    for (int64_t w = 0; w < count; w++) memcpy(d->bytes + w * window, text + (first + w) * (window - 1), (size_t)window);
    d->n = count;
    d->classes = 256;
}

int data_load_text(const char *path, int64_t window, double test_fraction, data_set *train, data_set *test, char *err,
                   size_t errcap)
{
    memset(train, 0, sizeof *train);
    memset(test, 0, sizeof *test);
    uint8_t *text;
    size_t len;
    char gz[GZ_NAME_CAP] = "";
    if (read_text(path, &text, &len, gz, err, errcap) != 0) {
        free(text);
        return -1;
    }
    int64_t nwin = window >= 2 && len >= (size_t)window ? (int64_t)(len - 1) / (window - 1) : 0;
    if (nwin < 2) {
        /* two windows, one to train on and one to test, share a byte */
        nc_errf(err, errcap, "%s: %zu byte%s of text, too few for windows of %lld bytes: a training and a test window need %lld "
                 "at least", path, len, len == 1 ? "" : "s", (long long)window, 2 * (long long)window - 1);
        free(text);
        return -1;
    }
    int64_t ntest = (int64_t)((double)nwin * test_fraction);
    if (ntest < 1) ntest = 1;
    windows_into(train, text, 0, nwin - ntest, window);
    windows_into(test, text, nwin - ntest, ntest, window);
    free(text);
    if (gz[0]) snprintf(train->note, DATA_NOTE_CAP, "%s is gzip-compressed: its text is read, decompressed", gz);
    return 0;
}

/* n elements held at their own width (cpu_tensor_to_native's layout of
 * held) as 4-byte ones in dst: cpu_tensor_from_native over dst (an f16 as
 * the f32 of the same value, a byte as an i32). */
static void widen(nc_dtype held, const uint8_t *src, int64_t n, void *dst)
{
    cpu_tensor t = {.dtype = held, .rank = 1, .shape = {n}, .numel = n};
    if (dtype_is_float(held)) t.f = dst;
    else t.i = dst;
    cpu_tensor_from_native(src, &t);
}

void data_rows(const data_set *d, int64_t first, int64_t count, cpu_tensor *out)
{
    int64_t shape[NC_MAX_RANK];
    memcpy(shape, d->x.shape, sizeof shape);
    shape[0] = count;
    if (!cpu_tensor_alloc(out, d->x.dtype, d->x.rank, shape, (int64_t)1 << 34)) NC_BUG("data rows: allocation");
    int64_t per = count ? out->numel / count : 0;
    void *dst = out->f ? (void *)out->f : (void *)out->i;
    if (d->bytes) {
        widen(d->held, d->bytes + first * per * (int64_t)dtype_size(d->held), out->numel, dst);
        return;
    }
    const void *src = d->x.f ? (const void *)(d->x.f + first * per) : (const void *)(d->x.i + first * per);
    memcpy(dst, src, (size_t)out->numel * 4);
}

void data_set_free(data_set *d)
{
    free(d->bytes);
    cpu_tensor_free(&d->x);
    cpu_tensor_free(&d->y);
    for (int k = 0; k < d->nextra; k++) cpu_tensor_free(&d->extra[k]);
    memset(d, 0, sizeof *d);
}

/* --- loader ------------------------------------------------------------- */

typedef struct loader_slot {
    unsigned char *x, *y, *e[DATA_MAX_EXTRA];
    int64_t count;
    int64_t index;
    bool filled;
} loader_slot;

struct data_loader {
    const data_set *d;
    uint8_t *packed;             /* u8 samples of a set's 4-byte storage as bytes (a quarter of it); NULL for others */
    const unsigned char *xs, *ys;   /* each sample's x and y: the set's bytes, packed, else the set's own 4-byte elements */
    int64_t x_row;               /* bytes of a sample in xs */
    nc_dtype x_held;             /* with widen: the dtype of xs's elements */
    bool widen;                  /* xs holds the set's bytes of other than u8 samples: batches get them as 4-byte elements */
    int64_t x_bytes, y_bytes;    /* per sample in a batch (y_bytes 0: no targets) */
    const unsigned char *es[DATA_MAX_EXTRA];   /* each extra array's rows, the set's 4-byte elements */
    int64_t e_bytes[DATA_MAX_EXTRA];           /* per sample */
    int nextra;
    int64_t batch, nbatches;
    uint64_t seed;
    bool shuffle;
    int64_t *order;
    int depth;
    loader_slot *slots;
    pthread_t thread;
    bool running, stop;
    pthread_mutex_t mu;
    pthread_cond_t cv;
    int64_t next;                /* batch the consumer takes next */
    int64_t held;                /* slot index the consumer holds, -1 none */
    int64_t first;               /* first batch of this epoch (skip) */
};

static void fill_slot(data_loader *l, loader_slot *s, int64_t b)
{
    int64_t start = b * l->batch, end = start + l->batch < l->d->n ? start + l->batch : l->d->n;
    s->count = end - start;
    for (int64_t k = 0; k < s->count; k++) {
        int64_t src = l->order[start + k];
        const unsigned char *row = l->xs + src * l->x_row;
        if (l->widen) widen(l->x_held, row, l->x_bytes / 4, s->x + k * l->x_bytes);
        else memcpy(s->x + k * l->x_bytes, row, (size_t)l->x_bytes);
        if (l->y_bytes) memcpy(s->y + k * l->y_bytes, l->ys + src * l->y_bytes, (size_t)l->y_bytes);
        for (int e = 0; e < l->nextra; e++)   /* the same row src of every array: a sample's parts stay together */
            memcpy(s->e[e] + k * l->e_bytes[e], l->es[e] + src * l->e_bytes[e], (size_t)l->e_bytes[e]);
    }
    s->index = b;
}

static void *producer(void *arg)
{
    data_loader *l = arg;
    for (int64_t b = l->first; b < l->nbatches; b++) {
        loader_slot *s = &l->slots[b % l->depth];
        pthread_mutex_lock(&l->mu);
        while (s->filled && !l->stop) pthread_cond_wait(&l->cv, &l->mu);
        bool stop = l->stop;
        pthread_mutex_unlock(&l->mu);
        if (stop) break;
        fill_slot(l, s, b);
        pthread_mutex_lock(&l->mu);
        s->filled = true;
        pthread_cond_broadcast(&l->cv);
        pthread_mutex_unlock(&l->mu);
    }
    return NULL;
}

static void stop_producer(data_loader *l)
{
    if (!l->running) return;
    pthread_mutex_lock(&l->mu);
    l->stop = true;
    pthread_cond_broadcast(&l->cv);
    pthread_mutex_unlock(&l->mu);
    pthread_join(l->thread, NULL);
    l->running = false;
    l->stop = false;
}

data_loader *data_loader_new(const data_set *d, int64_t batch, uint64_t seed, bool shuffle, bool drop_last, int depth)
{
    NC_ASSERT(batch > 0 && depth > 0 && d->n > 0);
    data_loader *l = nc_xcalloc(1, sizeof *l);
    l->d = d;
    l->batch = batch;
    l->seed = seed;
    l->shuffle = shuffle;
    l->depth = depth;
    l->nbatches = drop_last ? d->n / batch : (d->n + batch - 1) / batch;
    const int64_t per = d->x.numel / d->n;
    if (d->bytes) {
        NC_ASSERT(d->x.dtype != NC_U8 || d->held == NC_U8);
        l->xs = d->bytes;
        l->x_row = per * (int64_t)dtype_size(d->held);
        l->x_held = d->held;
        l->widen = d->x.dtype != NC_U8;   /* the batch's layout: a byte each for u8 samples only */
        l->x_bytes = l->widen ? 4 * per : per;
    } else if (d->x.dtype == NC_U8) {
        l->packed = nc_xmalloc((size_t)d->x.numel);
        for (int64_t i = 0; i < d->x.numel; i++) l->packed[i] = (uint8_t)d->x.i[i];
        l->xs = l->packed;
        l->x_row = l->x_bytes = per;
    } else {
        l->xs = d->x.f ? (const unsigned char *)d->x.f : (const unsigned char *)d->x.i;
        l->x_row = l->x_bytes = 4 * per;
    }
    l->ys = d->y.f ? (const unsigned char *)d->y.f : (const unsigned char *)d->y.i;
    l->y_bytes = l->ys ? 4 * (d->y.numel / d->n) : 0;
    l->nextra = d->nextra;
    for (int e = 0; e < d->nextra; e++) {
        const cpu_tensor *a = &d->extra[e];
        l->es[e] = a->f ? (const unsigned char *)a->f : (const unsigned char *)a->i;
        l->e_bytes[e] = 4 * (a->numel / d->n);
    }
    l->order = nc_xmalloc((size_t)d->n * sizeof *l->order);
    l->slots = nc_xcalloc((size_t)depth, sizeof *l->slots);
    for (int k = 0; k < depth; k++) {
        l->slots[k].x = nc_xmalloc((size_t)(batch * l->x_bytes));
        l->slots[k].y = nc_xmalloc((size_t)(batch * l->y_bytes) + 1);
        for (int e = 0; e < d->nextra; e++) l->slots[k].e[e] = nc_xmalloc((size_t)(batch * l->e_bytes[e]) + 1);
    }
    pthread_mutex_init(&l->mu, NULL);
    pthread_cond_init(&l->cv, NULL);
    l->held = -1;
    return l;
}

void data_loader_epoch(data_loader *l, int64_t epoch, int64_t skip_batches)
{
    stop_producer(l);
    for (int64_t i = 0; i < l->d->n; i++) l->order[i] = i;
    /* Fisher-Yates with draws keyed by (seed, epoch): the order of any epoch
     * can be rebuilt on resume without replaying earlier ones. */
    for (int64_t i = l->d->n - 1; l->shuffle && i > 0; i--) {
        int64_t j = (int64_t)(nc_rng_hash(l->seed, 0xda7a0000ull + (uint64_t)epoch, (uint64_t)i) % (uint64_t)(i + 1));
        int64_t t = l->order[i];
        l->order[i] = l->order[j];
        l->order[j] = t;
    }
    for (int k = 0; k < l->depth; k++) l->slots[k].filled = false;
    l->first = l->next = skip_batches < 0 ? 0 : skip_batches;
    l->held = -1;
    if (l->next >= l->nbatches) return;
    l->running = pthread_create(&l->thread, NULL, producer, l) == 0;
    NC_ASSERT(l->running);
}

static double now_seconds(void)
{
    struct timespec ts;
    clock_gettime(CLOCK_MONOTONIC, &ts);
    return (double)ts.tv_sec + 1e-9 * (double)ts.tv_nsec;
}

bool data_loader_next(data_loader *l, data_batch *b, double *waited_s)
{
    if (waited_s) *waited_s = 0;
    pthread_mutex_lock(&l->mu);
    if (l->held >= 0) {
        l->slots[l->held].filled = false;
        l->held = -1;
        pthread_cond_broadcast(&l->cv);
    }
    if (!l->running || l->next >= l->nbatches) {
        pthread_mutex_unlock(&l->mu);
        return false;
    }
    loader_slot *s = &l->slots[l->next % l->depth];
    double t0 = now_seconds();
    while (!s->filled) pthread_cond_wait(&l->cv, &l->mu);
    if (waited_s) *waited_s = now_seconds() - t0;
    l->held = l->next % l->depth;
    l->next++;
    pthread_mutex_unlock(&l->mu);
    *b = (data_batch){.x = s->x, .y = l->y_bytes ? s->y : NULL, .x_bytes = l->x_bytes, .y_bytes = l->y_bytes, .count = s->count,
                      .index = s->index, .nextra = l->nextra};
    for (int e = 0; e < b->nextra; e++) b->extra[e] = s->e[e], b->extra_bytes[e] = l->e_bytes[e];
    return true;
}

int64_t data_loader_batches(const data_loader *l) { return l->nbatches; }

void data_loader_drop_source(data_loader *l, data_set *d)
{
    NC_ASSERT(l->d == d);
    if (l->packed) cpu_tensor_free(&d->x);
}

void data_loader_free(data_loader *l)
{
    if (!l) return;
    stop_producer(l);
    for (int k = 0; k < l->depth; k++) {
        free(l->slots[k].x);
        free(l->slots[k].y);
        for (int e = 0; e < l->nextra; e++) free(l->slots[k].e[e]);
    }
    free(l->slots);
    free(l->order);
    free(l->packed);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}
