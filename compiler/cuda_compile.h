/* cuda_compile.h - compiling the generated CUDA C with NVRTC, at build time, to
 * cubin for each target architecture and PTX for GPUs newer than all of them. */
#ifndef NC_NVRTC_H
#define NC_NVRTC_H

#include "base.h"

#include <stdio.h>

typedef struct nvrtc_image {
    char arch[16];         /* "sm_90" for a cubin, "compute_90" for PTX */
    bool is_ptx;
    unsigned char *data;
    size_t size;
} nvrtc_image;

/* What `netc build` compiles for: Ampere and Ada (sm_80's cubin runs on 8.x),
 * Hopper (sm_90a: its wgmma attention kernels; loads on 9.0 only) and PTX
 * the driver finishes for anything newer. */
#define NC_DEFAULT_TARGETS "sm_80,sm_90a,compute_90"

/* True when netc was built with NVRTC. */
bool nvrtc_available(void);
/* NVRTC's version as major*1000 + minor*10 (0 when unavailable). */
int nvrtc_version(void);

/* Whether NVRTC compiles for arch ("sm_90", "sm_90a", "compute_90"): its
 * form and its number among nvrtcGetSupportedArchs. If not, err says why
 * and lists what it does compile for. True without NVRTC (nothing to ask). */
bool nvrtc_target_ok(const char *arch, char *err, size_t errcap);

/* Compile source for one architecture ("sm_80", "sm_90", or "compute_90" for
 * PTX). On failure returns false and writes into log a report with NVRTC's
 * messages and the generated lines around each error. */
bool nvrtc_compile(const char *source, const char *arch, nvrtc_image *out, char **log);
void nvrtc_image_free(nvrtc_image *img);

/* nvrtc_compile for n jobs at once, one thread each (NVRTC compiles separate
 * programs concurrently): out[i] is sources[i] compiled for archs[i]. On
 * failure returns false with the first failing job's report in log, and
 * out[] empty. progress (NULL: nothing): where a line goes when some jobs
 * are not in the cache (a cold build of a large model takes a minute or
 * more), and one with the time when they are done. */
bool nvrtc_compile_all(const char *const *sources, const char *const *archs, int n, nvrtc_image *out, char **log,
                       FILE *progress);

/* A module's image (runtime/module.h) made from img, which it takes over. */
struct nrt_image;
void nvrtc_image_to_module(const nvrtc_image *img, struct nrt_image *out);

#endif
