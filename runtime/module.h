/* module.h - the .netm module file: one self-describing, versioned file with
 * the graph (for the CPU executor and for reports), the GPU program (steps,
 * temporaries, kernel names), the CUDA source and the compiled images.
 * Layout in docs/module-format.md. The reader checks every length, offset,
 * index and enum before use. */
#ifndef NRT_MODULE_H
#define NRT_MODULE_H

#include "ir.h"
#include "program.h"

#define NRT_MODULE_MAGIC "NETCMOD\0"
#define NRT_MODULE_VERSION 20  /* 2: entry sections (forward + train in one file); 3: 16 buffers a kernel;
                                  4: 64 buffers a kernel, kernels of several loops; 5: matmul epilogues;
                                  6: batched launches; 7: prepare steps; 8: dropout reads the @step input
                                  (a training step's kernels before it read a step nothing set);
                                  9: GELU's backward matmul may store a bias's gradient (epilogue bit 6);
                                  10: a matmul or scatter_add of f16/bf16 operands may store an f32
                                  result (attribute flag bit 4, f32_result); 11: op gelu_grad (GELU's
                                  backward as one op), which renumbers the ops after it;
                                  12: a kernel step's mask of the buffers it stores to;
                                  13: every kernel waits for its grid dependencies at its entry
                                  (NETC_PDL launches kernels early only into such images);
                                  14: op copy: an output that is an input or a parameter is a copy of
                                  it (before, the GPU read the tensor as set or updated after the run);
                                  15: parameter role 2, --accumulate's gradient accumulators (role 1,
                                  optimizer state, before);
                                  16: prepare steps of temporaries alone (a scatter-add's sort of
                                  constant indices), which a reader of 15 refused as corrupt;
                                  17: parameter role 3, a model's buffer (batch norm's running
                                  statistics), which a reader of 16 refused as corrupt; and the op
                                  dim_value (a symbolic size's value, at the end of ops.def), which a
                                  reader of 16 did not know;
                                  18: the graph's conditions on sizes (a require on symbolic sizes,
                                  checked when a session binds them), after its updates; and
                                  attention's key lengths, one more operand of attention (its
                                  4th), attention_lse (3rd) and attention_grad (7th), which a
                                  reader of 17 refused as corrupt;
                                  19: a require's hint after its message, and size spans in both
                                  (IR_SIZES_MARK, ir.h), which a reader of 18 misread;
                                  20: the ops sin and cos (appended to ops.def), which a reader
                                  of 19 took for a corrupt op number */
#define NRT_MODULE_MAX_BYTES ((uint64_t)4 << 30)   /* refuse larger files outright */

typedef struct nrt_image {
    char arch[16];             /* "sm_90" (cubin) or "compute_90" (PTX) */
    bool is_ptx;
    unsigned char *data;
    uint64_t size;
} nrt_image;

typedef struct nrt_module_entry nrt_module_entry;

typedef struct nrt_module_data {
    ir_graph *graph;
    nrt_program program;
    nrt_image *images;
    uint32_t nimages;
    int nvrtc_version;         /* of the compiler that made the images */
    /* The file's other entry points ("train": the training step), each a
     * whole module of its own; entries do not nest. The top level is the
     * entry point "forward". */
    nrt_module_entry *entries;
    uint32_t nentries;
} nrt_module_data;

struct nrt_module_entry {
    char *name;
    nrt_module_data data;
};

#define NRT_ENTRY_MAX 8
/* The most sections a module file has, for the writer and the reader alike:
 * its graph, program and source, one an image (netc build makes at most 16)
 * and one an entry point. module_write refuses a module that would need more
 * (an error, not a file the reader would call corrupt). */
#define NRT_MODULE_SECTIONS_MAX 64

/* The graph of a module libnetrt loaded (netrt.h's nrt_module_load_entry):
 * for netc itself, which reads more of it (the train section) than the
 * public API says; not in netrt.h. */
struct nrt_module;
const ir_graph *nrt_module_graph(const struct nrt_module *m);

/* Write atomically (temporary file, fsync, rename). 0 or -1 with err. */
int module_write(const char *path, const nrt_module_data *m, char *err, size_t errcap);
/* Read and validate. 0, or -1 with err (FILE_OPEN_IO_ERROR, file_open.h, when
 * the file cannot be opened or read); on success the caller owns m. */
int module_read(const char *path, nrt_module_data *m, char *err, size_t errcap);
int module_read_buffer(const unsigned char *data, size_t size, nrt_module_data *m, char *err, size_t errcap);
void module_data_free(nrt_module_data *m);

/* Which of m's images a device of compute capability major.minor loads: the
 * cubin for its very architecture (the architecture-specific "sm_90a" before
 * "sm_90"), else a cubin of an earlier minor version of the same major one
 * ("sm_80" on 8.6; never an "a" cubin, which runs on its own architecture
 * only), else the newest PTX not newer than the device. -1: none fits, and
 * the source must be compiled for module_best_arch. */
int module_image_for(const nrt_module_data *m, int major, int minor);
/* The architecture to compile for when no image fits: "sm_90a" on 9.0, the
 * one architecture whose specific image netc's code uses (wgmma attention,
 * NC_WGMMA in the prelude), else "sm_XY". */
void module_best_arch(int major, int minor, char *arch, size_t cap);
/* Add an entry point to m (which takes ownership of *entry's contents). */
void module_add_entry(nrt_module_data *m, const char *name, nrt_module_data *entry);
/* The main image's entry name: "train" for a module built with --entry train
 * (its graph updates parameters), "forward" otherwise. */
const char *module_main_entry_name(const nrt_module_data *m);
/* Move the entry named name (NULL or the main entry's name: the top level)
 * into *out, freeing the rest of m. 0, or -1 with err naming the entries. */
int module_take_entry(nrt_module_data *m, const char *name, nrt_module_data *out, char *err, size_t errcap);

#endif
