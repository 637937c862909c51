/* nvrtc_cache.h - compiling a module's CUDA source when it carries no image
 * for this GPU: NVRTC loaded at run time, results cached on disk keyed by the
 * source's hash, the architecture and NVRTC's version. */
#ifndef NRT_NVRTC_CACHE_H
#define NRT_NVRTC_CACHE_H

#include <stdbool.h>
#include <stddef.h>

/* The cache directory: $NETC_CACHE_DIR, else $XDG_CACHE_HOME/netc, else
 * ~/.cache/netc. */
void nvrtc_cache_dir(char *buf, size_t cap);

/* A cubin for arch ("sm_90"), from the cache or freshly compiled (and then
 * cached). The caller frees *cubin. 0 or -1 with err. */
int nvrtc_cache_compile(const char *source, const char *arch, unsigned char **cubin, size_t *size, char *err,
                        size_t errcap);

/* The cache file for (source, arch, NVRTC version), and reading/writing it:
 * the compiler uses the same cache at build time. An entry carries its
 * length and a checksum. nvrtc_cache_load: true with the image (the caller
 * frees *data), or false for a miss; *damaged then says why when an entry
 * was there but failed its checks (bad header, length or checksum, or not
 * an ELF cubin, or not PTX text when ptx), for the caller to compile again
 * and store over it. */
void nvrtc_cache_path(const char *source, const char *arch, int nvrtc_major, int nvrtc_minor, char *buf, size_t cap);
bool nvrtc_cache_load(const char *path, bool ptx, unsigned char **data, size_t *size, const char **damaged);
void nvrtc_cache_store(const char *path, const unsigned char *data, size_t size);

#endif
