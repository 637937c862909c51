/* data.c - IDX data sets and the batch loader.
 *
 * zlib's gzread reads both gzip and plain files, so one reader covers
 * "train-images-idx3-ubyte.gz" and its uncompressed twin. The loader's
 * producer thread fills a ring of batch slots; the consumer takes them in
 * order, and the slot it holds is released on its next call. */
#include "data.h"
#include "tensor_io.h"
#include "file_open.h"

#include <errno.h>
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

/* Reads an IDX file of unsigned bytes with the given rank (1 or 3) into t (u8). */
static int read_idx(gzFile f, const char *path, int rank, cpu_tensor *t, char *err, size_t errcap)
{
    uint32_t magic = 0, dims[3] = {1, 1, 1};
    if (!read_be32(f, &magic) || magic != (0x800u | (uint32_t)rank)) {
        snprintf(err, errcap, "%s: not an IDX file of rank %d unsigned bytes (magic 0x%08x)", path, rank, magic);
        return -1;
    }
    for (int d = 0; d < rank; d++)
        if (!read_be32(f, &dims[d])) {
            snprintf(err, errcap, "%s: truncated header", path);
            return -1;
        }
    uint64_t sample = (uint64_t)dims[1] * dims[2];
    if (dims[0] == 0 || dims[0] > IDX_MAX_SAMPLES || sample == 0 || sample > IDX_MAX_SAMPLE_BYTES) {
        snprintf(err, errcap, "%s: implausible sizes (%u samples of %" PRIu64 " bytes)", path, dims[0], sample);
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
            snprintf(err, errcap, "%s: truncated after %" PRId64 " of %" PRId64 " bytes%s%s", path, have, numel,
                     zerr < 0 ? ": " : "", zerr < 0 ? why : "");
            free(raw);
            return -1;
        }
        have += got;
    }
    uint8_t extra;
    if (gzread(f, &extra, 1) != 0) {
        snprintf(err, errcap, "%s: trailing bytes after %" PRId64 " bytes of data", path, numel);
        free(raw);
        return -1;
    }
    int64_t shape[3] = {dims[0], dims[1], dims[2]};
    if (!cpu_tensor_alloc(t, NC_U8, (uint8_t)rank, shape, (int64_t)1 << 34)) {
        snprintf(err, errcap, "%s: too large to load", path);
        free(raw);
        return -1;
    }
    for (int64_t i = 0; i < numel; i++) t->i[i] = raw[i];
    free(raw);
    return 0;
}

static int load_part(const char *dir, const char *split, const char *kind, int rank, cpu_tensor *t, char *err,
                     size_t errcap)
{
    char path[4096];
    const char *why;
    gzFile f = open_idx(dir, split, kind, path, sizeof path, &why);
    if (!f) {
        snprintf(err, errcap, "%s: %s%s", path, why,
                 access(path, F_OK) != 0 ? " (is the data set installed? see README: scripts/setup.sh)" : "");
        return -1;
    }
    int rc = read_idx(f, path, rank, t, err, errcap);
    gzclose(f);
    return rc;
}

/* Labels in [0, max_classes); classes = 1 + the largest. */
static int check_labels(const char *what, data_set *d, int32_t max_classes, char *err, size_t errcap)
{
    for (int64_t i = 0; i < d->n; i++) {
        if (d->y.i[i] < 0 || d->y.i[i] >= max_classes) {
            snprintf(err, errcap, "%s: label %" PRId64 " is %d, outside the %d classes allowed", what, i, d->y.i[i], max_classes);
            return -1;
        }
        if (d->y.i[i] + 1 > d->classes) d->classes = d->y.i[i] + 1;
    }
    return 0;
}

int data_load_idx(const char *dir, const char *split, int32_t max_classes, data_set *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    if (load_part(dir, split, "images-idx3", 3, &out->x, err, errcap) != 0) return -1;
    cpu_tensor labels;
    if (load_part(dir, split, "labels-idx1", 1, &labels, err, errcap) != 0) {
        data_set_free(out);
        return -1;
    }
    out->y = labels;
    out->y.dtype = NC_I32;
    out->n = out->x.shape[0];
    if (labels.shape[0] != out->n) {
        snprintf(err, errcap, "%s: %s has %" PRId64 " images but %" PRId64 " labels", dir, split, out->n, labels.shape[0]);
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

int data_load_npy(const char *dir, const char *split, int32_t max_classes, data_set *out, char *err, size_t errcap)
{
    memset(out, 0, sizeof *out);
    char px[4096], py[4096];
    snprintf(px, sizeof px, "%s/%s_x.npy", dir, split);
    snprintf(py, sizeof py, "%s/%s_y.npy", dir, split);
    if (npy_read(px, &out->x, (int64_t)1 << 34, err, errcap) != 0) return -1;
    int rc = npy_read(py, &out->y, (int64_t)1 << 34, err, errcap);
    if (rc == 0 && (out->x.dtype != NC_U8 || out->x.rank < 2)) {
        snprintf(err, errcap, "%s: samples must be u8 (|u1) with a sample axis first, got %s of rank %d", px,
                 dtype_name(out->x.dtype), out->x.rank);
        rc = -1;
    }
    if (rc == 0 && (out->y.dtype != NC_I32 && out->y.dtype != NC_U8)) {
        snprintf(err, errcap, "%s: labels must be integers (<i4, <i8 or |u1), got %s", py, dtype_name(out->y.dtype));
        rc = -1;
    }
    if (rc == 0 && (out->y.rank != 1 || out->y.shape[0] != out->x.shape[0])) {
        snprintf(err, errcap, "%s: %" PRId64 " samples but %s holds %" PRId64 " labels (want one per sample, rank 1)", px,
                 out->x.shape[0], py, out->y.rank ? out->y.shape[0] : 0);
        rc = -1;
    }
    if (rc == 0 && out->x.shape[0] == 0) {
        snprintf(err, errcap, "%s: no samples", px);
        rc = -1;
    }
    out->y.dtype = NC_I32;
    out->n = out->x.rank ? out->x.shape[0] : 0;
    if (rc == 0) rc = check_labels(py, out, max_classes, err, errcap);
    if (rc != 0) data_set_free(out);
    return rc;
}

int data_load_dir(const char *dir, const char *split, int32_t max_classes, data_set *out, char *err, size_t errcap)
{
    char path[4096];
    struct stat st;
    /* a directory of .npy files is one for both splits: a missing test_x.npy is named as such */
    snprintf(path, sizeof path, "%s/%s_x.npy", dir, split);
    bool npy = stat(path, &st) == 0;
    snprintf(path, sizeof path, "%s/train_x.npy", dir);
    if (npy || stat(path, &st) == 0) return data_load_npy(dir, split, max_classes, out, err, errcap);
    return data_load_idx(dir, strcmp(split, "test") == 0 ? "t10k" : split, max_classes, out, err, errcap);
}

/* Appends the bytes of one file to *buf. */
static int append_file(const char *path, uint8_t **buf, size_t *len, size_t *cap, char *err, size_t errcap)
{
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) {
        snprintf(err, errcap, "%s: %s", path, why);
        return -1;
    }
    for (;;) {
        if (*len == *cap) {
            if (*cap >= ((size_t)1 << 32)) {
                fclose(f);
                snprintf(err, errcap, "%s: more than 4 GiB of text", path);
                return -1;
            }
            *cap = *cap ? *cap * 2 : 1 << 20;
            *buf = nc_xrealloc(*buf, *cap);
        }
        size_t got = fread(*buf + *len, 1, *cap - *len, f);
        *len += got;
        if (got == 0) break;
    }
    bool bad = ferror(f);
    fclose(f);
    if (bad) snprintf(err, errcap, "%s: read error", path);
    return bad ? -1 : 0;
}

static int by_name(const void *a, const void *b) { return strcmp(*(char *const *)a, *(char *const *)b); }

static int read_text(const char *path, uint8_t **buf, size_t *len, char *err, size_t errcap)
{
    struct stat st;
    size_t cap = 0;
    *buf = NULL, *len = 0;
    if (stat(path, &st) != 0) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
        return -1;
    }
    if (!S_ISDIR(st.st_mode)) return append_file(path, buf, len, &cap, err, errcap);
    DIR *d = opendir(path);
    if (!d) {
        snprintf(err, errcap, "%s: %s", path, strerror(errno));
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
        if (rc == 0) rc = append_file(names[i], buf, len, &cap, err, errcap);
        free(names[i]);
    }
    free(names);
    if (rc == 0 && n == 0) {
        if (dotted[0])
            snprintf(err, errcap, "%s: no text files in this directory (and no IDX or .npy data set): a directory's text is "
                     "its files named without a '.', and %s has one; give a file itself, --data %s/%s", path, dotted, path, dotted);
        else snprintf(err, errcap, "%s: no text files in this directory (and no IDX or .npy data set)", path);
        rc = -1;
    }
    return rc;
}

static void windows_into(data_set *d, const uint8_t *text, int64_t first, int64_t count, int64_t window)
{
    int64_t shape[2] = {count, window};
    if (!cpu_tensor_alloc(&d->x, NC_U8, 2, shape, (int64_t)1 << 36) || !cpu_tensor_alloc(&d->y, NC_I32, 1, shape, 0))
        NC_BUG("text windows: allocation");
    for (int64_t w = 0; w < count; w++)
        for (int64_t k = 0; k < window; k++) d->x.i[w * window + k] = text[(first + w) * (window - 1) + k];
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
    if (read_text(path, &text, &len, err, errcap) != 0) {
        free(text);
        return -1;
    }
    int64_t nwin = window >= 2 && len >= (size_t)window ? (int64_t)(len - 1) / (window - 1) : 0;
    if (nwin < 2) {
        snprintf(err, errcap, "%s: %zu bytes of text are too few for windows of %lld bytes", path, len, (long long)window);
        free(text);
        return -1;
    }
    int64_t ntest = (int64_t)((double)nwin * test_fraction);
    if (ntest < 1) ntest = 1;
    windows_into(train, text, 0, nwin - ntest, window);
    windows_into(test, text, nwin - ntest, ntest, window);
    free(text);
    return 0;
}

void data_set_free(data_set *d)
{
    cpu_tensor_free(&d->x);
    cpu_tensor_free(&d->y);
    memset(d, 0, sizeof *d);
}

/* --- loader ------------------------------------------------------------- */

typedef struct loader_slot {
    uint8_t *x;
    int32_t *y;
    int64_t count;
    int64_t index;
    bool filled;
} loader_slot;

struct data_loader {
    const data_set *d;
    uint8_t *packed;             /* the set's samples as bytes */
    int64_t sample_bytes, batch, nbatches;
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
        memcpy(s->x + k * l->sample_bytes, l->packed + src * l->sample_bytes, (size_t)l->sample_bytes);
        s->y[k] = l->d->y.i[src];
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
    l->sample_bytes = d->x.numel / d->n;
    l->nbatches = drop_last ? d->n / batch : (d->n + batch - 1) / batch;
    l->packed = nc_xmalloc((size_t)d->x.numel);
    for (int64_t i = 0; i < d->x.numel; i++) l->packed[i] = (uint8_t)d->x.i[i];
    l->order = nc_xmalloc((size_t)d->n * sizeof *l->order);
    l->slots = nc_xcalloc((size_t)depth, sizeof *l->slots);
    for (int k = 0; k < depth; k++) {
        l->slots[k].x = nc_xmalloc((size_t)(batch * l->sample_bytes));
        l->slots[k].y = nc_xmalloc((size_t)batch * sizeof(int32_t));
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
    *b = (data_batch){.x = s->x, .y = s->y, .count = s->count, .index = s->index};
    return true;
}

int64_t data_loader_batches(const data_loader *l) { return l->nbatches; }

void data_loader_free(data_loader *l)
{
    if (!l) return;
    stop_producer(l);
    for (int k = 0; k < l->depth; k++) {
        free(l->slots[k].x);
        free(l->slots[k].y);
    }
    free(l->slots);
    free(l->order);
    free(l->packed);
    pthread_mutex_destroy(&l->mu);
    pthread_cond_destroy(&l->cv);
    free(l);
}
