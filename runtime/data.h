/* data.h - training data: MNIST/Fashion-MNIST IDX files (gzip or not) and
 * .npy arrays, shuffled batches, and a prefetch thread that assembles the
 * next batches while the current step computes. Every reader checks magic,
 * counts, sizes and label ranges before training starts. */
#ifndef NRT_DATA_H
#define NRT_DATA_H

#include "cpu_exec.h"

#define DATA_NOTE_CAP 1200
/* Arrays a data set holds beside its samples and targets: a model's inputs
 * past the first and its train section's past the first. */
#define DATA_MAX_EXTRA 8

/* A set of samples, u8 images [n, h, w] or any sample shape and dtype, and
 * their targets: i32 labels [n], targets of any shape, or none. The loaders
 * keep the samples at their own width (bytes), as the files give them: a u8
 * or bool element in one byte, an f16 in two, not cpu_tensor's four; a
 * batch is widened as it is taken (data_rows, the loader). */
typedef struct data_set {
    cpu_tensor x;          /* samples, first axis = sample; with bytes, their dtype and shape alone (no storage) */
    uint8_t *bytes;        /* the samples in cpu_tensor_to_native's layout of `held`; NULL: x holds them (a set built by hand) */
    nc_dtype held;         /* what bytes holds: x's dtype, or u8 for an i32 input read from a uint8 file */
    cpu_tensor y;          /* targets, first axis = sample; empty (numel 0) when the model reads none */
    cpu_tensor extra[DATA_MAX_EXTRA];   /* data_want's extra arrays, first axis = sample, 4-byte elements as y's */
    int nextra;
    int64_t n;
    int32_t classes;       /* integer targets: 1 + the largest */
    char note[DATA_NOTE_CAP];   /* what loading converted, a line a file (float64 read as f32), for the caller to show; "" none */
} data_set;

/* What the model takes from a data set: its samples' dtype, and whether its
 * loss reads targets and of which dtype (NC_I32: integers, checked to lie in
 * [0, max_classes); a float type: finite values). Names for messages. */
typedef struct data_want {
    nc_dtype x;
    bool has_y;
    nc_dtype y;
    int32_t max_classes;
    const char *x_input, *y_input;
    /* A model of several data inputs: every array is read by its input's
     * name, SPLIT_<name>.npy (x's and y's too, not SPLIT_x/SPLIT_y), and
     * the extra ones (in extra_input's order) must hold as many samples as
     * x. by_name with no extras: one input and a target named alike. */
    bool by_name;
    int nextra;
    nc_dtype extra[DATA_MAX_EXTRA];
    const char *extra_input[DATA_MAX_EXTRA];
} data_want;

/* Load DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte[.gz] (the MNIST
 * layout; split is "train" or "t10k"). Labels must be < max_classes. */
int data_load_idx(const char *dir, const char *split, int32_t max_classes, data_set *out, char *err, size_t errcap);
/* Load DIR/SPLIT_x.npy (first axis = sample) and, where w->has_y,
 * DIR/SPLIT_y.npy (one target row per sample); split is "train" or "test".
 * With w->by_name, DIR/SPLIT_<input>.npy for x, y and each extra array, all
 * of one sample count; another SPLIT_*.npy in DIR is said in out->note.
 * Each must hold w's dtype (an i32 takes any integers, an f32 or f16 also
 * float64, rounded to it as it loads and said in out->note; another dtype is
 * refused with the NumPy call that converts it); float values must be
 * finite, and float64 ones within the range of the dtype they become. */
int data_load_npy(const char *dir, const char *split, const data_want *w, data_set *out, char *err, size_t errcap);
/* Whichever layout DIR holds: the .npy files, else the IDX files (u8 images
 * and, where w->has_y, their labels; "train" / "test" select the split, IDX
 * calls the test split t10k). */
int data_load_dir(const char *dir, const char *split, const data_want *w, data_set *out, char *err, size_t errcap);
/* Whether DIR holds such a set (train_x.npy or the IDX training images) rather than text. */
bool data_dir_has_samples(const char *dir);
/* Whether DIR holds train_NAME.npy: a set read by name (data_want.by_name). */
bool data_dir_has_array(const char *dir, const char *name);
/* Text for a byte-level language model: path is a file, or a directory whose
 * plain files (names without a '.') are read in name order and joined. The
 * bytes are cut into windows of `window` bytes (x: u8 [n, window], each
 * window starting where the last one ended, minus one byte so every byte is
 * once a target); y is all zeros. The last test_fraction of the windows
 * (never fewer than one) is the test set. */
int data_load_text(const char *path, int64_t window, double test_fraction, data_set *train, data_set *test, char *err,
                   size_t errcap);
/* Samples [first, first + count) of d in out (allocated: cpu_tensor's 4-byte
 * elements of x's dtype), from x or bytes, wherever d holds them: the
 * values a 4-byte copy of the whole set would give, bit for bit. */
void data_rows(const data_set *d, int64_t first, int64_t count, cpu_tensor *out);
void data_set_free(data_set *d);

/* Batches in a seeded random order (a new order each epoch); the last
 * partial batch is returned short (count < batch) unless drop_last. The
 * loader owns a thread that fills the next `depth` batches ahead of time. */
typedef struct data_batch {
    const void *x;         /* count samples, row-major: a byte an element for u8 samples, else 4-byte ones (data_rows's) */
    const void *y;         /* count targets, the set's 4-byte elements (i32 labels, floats); NULL: none */
    int64_t x_bytes, y_bytes;   /* per sample */
    const void *extra[DATA_MAX_EXTRA];   /* count rows of each of the set's extra arrays, 4-byte elements */
    int64_t extra_bytes[DATA_MAX_EXTRA]; /* per sample */
    int nextra;
    int64_t count;
    int64_t index;         /* batch number within the epoch */
} data_batch;

typedef struct data_loader data_loader;
data_loader *data_loader_new(const data_set *d, int64_t batch, uint64_t seed, bool shuffle, bool drop_last, int depth);
/* Start an epoch (its order depends on seed and epoch only: resumable). */
void data_loader_epoch(data_loader *l, int64_t epoch, int64_t skip_batches);
/* Next batch, or false at the end of the epoch. The batch stays valid until
 * the next call. *waited_s: how long this call waited for the producer. */
bool data_loader_next(data_loader *l, data_batch *b, double *waited_s);
int64_t data_loader_batches(const data_loader *l);   /* per epoch */
/* For a set built with its samples in x's 4-byte storage: a loader keeps
 * u8 samples as bytes of its own, so the set's copy is then needed no more
 * and this frees it (d->x keeps its dtype and shape, without storage).
 * Nothing for other sets, whose storage the loader reads (the loaders'
 * sets: their bytes). d is l's set; read no samples from it afterwards. */
void data_loader_drop_source(data_loader *l, data_set *d);
void data_loader_free(data_loader *l);

#endif
