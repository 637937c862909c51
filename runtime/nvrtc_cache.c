/* nvrtc_cache.c - run-time NVRTC with an on-disk cache. */
#include "nvrtc_cache.h"
#include "atomic_file.h"
#include "base.h"
#include "file_open.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

/* NVRTC's C API, declared here so libnetrt needs no CUDA headers to build. */
typedef int (*nvrtc_create_fn)(void **, const char *, const char *, int, const char *const *, const char *const *);
typedef int (*nvrtc_compile_fn)(void *, int, const char *const *);
typedef int (*nvrtc_size_fn)(void *, size_t *);
typedef int (*nvrtc_get_fn)(void *, char *);
typedef int (*nvrtc_destroy_fn)(void **);
typedef int (*nvrtc_version_fn)(int *, int *);

static struct {
    bool tried, ok;
    nvrtc_create_fn create;
    nvrtc_compile_fn compile;
    nvrtc_size_fn cubin_size, log_size;
    nvrtc_get_fn cubin, log;
    nvrtc_destroy_fn destroy;
    nvrtc_version_fn version;
} nv;

static bool load_nvrtc(void)
{
    if (nv.tried) return nv.ok;
    nv.tried = true;
    const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    void *h = NULL;
    for (size_t i = 0; i < NC_COUNT(names) && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return false;
    nv.create = (nvrtc_create_fn)dlsym(h, "nvrtcCreateProgram");
    nv.compile = (nvrtc_compile_fn)dlsym(h, "nvrtcCompileProgram");
    nv.cubin_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetCUBINSize");
    nv.cubin = (nvrtc_get_fn)dlsym(h, "nvrtcGetCUBIN");
    nv.log_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetProgramLogSize");
    nv.log = (nvrtc_get_fn)dlsym(h, "nvrtcGetProgramLog");
    nv.destroy = (nvrtc_destroy_fn)dlsym(h, "nvrtcDestroyProgram");
    nv.version = (nvrtc_version_fn)dlsym(h, "nvrtcVersion");
    nv.ok = nv.create && nv.compile && nv.cubin_size && nv.cubin && nv.log_size && nv.log && nv.destroy && nv.version;
    return nv.ok;
}

void nvrtc_cache_dir(char *buf, size_t cap)
{
    const char *d = getenv("NETC_CACHE_DIR");
    if (d && *d) { snprintf(buf, cap, "%s", d); return; }
    const char *x = getenv("XDG_CACHE_HOME"), *home = getenv("HOME");
    if (x && *x) snprintf(buf, cap, "%s/netc", x);
    else snprintf(buf, cap, "%s/.cache/netc", home && *home ? home : "/tmp");
}

static uint64_t fnv1a(const char *s)
{
    uint64_t h = 0xcbf29ce484222325ull;
    for (; *s; s++) h = (h ^ (unsigned char)*s) * 0x100000001b3ull;
    return h;
}

bool nvrtc_cache_load(const char *path, unsigned char **data, size_t *size)
{
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) return false;
    struct stat st;
    bool ok = fstat(fileno(f), &st) == 0 && st.st_size > 0 && st.st_size < (1 << 30);
    if (ok) {
        *size = (size_t)st.st_size;
        *data = nc_xmalloc(*size);
        ok = fread(*data, 1, *size, f) == *size;
        if (!ok) free(*data);
    }
    fclose(f);
    return ok;
}

/* Best effort: a cache that cannot be written only costs a recompile. */
void nvrtc_cache_store(const char *path, const unsigned char *data, size_t size)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    atomic_file af;
    char err[256];
    if (atomic_file_make_dir(dir, err, sizeof err) == 0 && atomic_file_open(&af, path, err, sizeof err) == 0)
        atomic_file_commit(&af, path, fwrite(data, 1, size, af.f) == size, err, sizeof err);
}

void nvrtc_cache_path(const char *source, const char *arch, int major, int minor, char *buf, size_t cap)
{
    char dir[1024];
    nvrtc_cache_dir(dir, sizeof dir);
    snprintf(buf, cap, "%s/%016llx-%s-nvrtc%d.%d.bin", dir, (unsigned long long)fnv1a(source), arch, major, minor);
}

int nvrtc_cache_compile(const char *source, const char *arch, unsigned char **cubin, size_t *size, char *err,
                        size_t errcap)
{
    if (!load_nvrtc()) {
        snprintf(err, errcap, "the module has no image for %s and NVRTC (libnvrtc.so.13) is not available to compile one",
                 arch);
        return -1;
    }
    int major = 0, minor = 0;
    nv.version(&major, &minor);
    char path[1200];
    nvrtc_cache_path(source, arch, major, minor, path, sizeof path);
    if (nvrtc_cache_load(path, cubin, size)) return 0;
    void *prog = NULL;
    if (nv.create(&prog, source, "netc_kernels.cu", 0, NULL, NULL) != 0) {
        snprintf(err, errcap, "nvrtcCreateProgram failed");
        return -1;
    }
    char opt[48];
    snprintf(opt, sizeof opt, "--gpu-architecture=%s", arch);
    const char *opts[] = {opt, "--std=c++17", "-default-device"};
    int rc = nv.compile(prog, 3, opts);
    if (rc != 0) {
        size_t n = 0;
        nv.log_size(prog, &n);
        char *log = nc_xmalloc(n + 1);
        log[0] = 0;
        if (n) nv.log(prog, log);
        snprintf(err, errcap, "NVRTC failed for %s: %.900s", arch, log);
        free(log);
        nv.destroy(&prog);
        return -1;
    }
    nv.cubin_size(prog, size);
    *cubin = nc_xmalloc(*size ? *size : 1);
    nv.cubin(prog, (char *)*cubin);
    nv.destroy(&prog);
    nvrtc_cache_store(path, *cubin, *size);
    return 0;
}
