/* nvrtc_cache.c - run-time NVRTC with an on-disk cache. */
#include "nvrtc_cache.h"
#include "atomic_file.h"
#include "base.h"
#include "file_open.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
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
    bool ok;
    nvrtc_create_fn create;
    nvrtc_compile_fn compile;
    nvrtc_size_fn cubin_size, log_size;
    nvrtc_get_fn cubin, log;
    nvrtc_destroy_fn destroy;
    nvrtc_version_fn version;
} nv;

static void open_nvrtc(void)
{
    const char *names[] = {"libnvrtc.so.13", "libnvrtc.so.12", "libnvrtc.so"};
    void *h = NULL;
    for (size_t i = 0; i < NC_COUNT(names) && !h; i++) h = dlopen(names[i], RTLD_NOW | RTLD_LOCAL);
    if (!h) return;
    nv.create = (nvrtc_create_fn)dlsym(h, "nvrtcCreateProgram");
    nv.compile = (nvrtc_compile_fn)dlsym(h, "nvrtcCompileProgram");
    nv.cubin_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetCUBINSize");
    nv.cubin = (nvrtc_get_fn)dlsym(h, "nvrtcGetCUBIN");
    nv.log_size = (nvrtc_size_fn)dlsym(h, "nvrtcGetProgramLogSize");
    nv.log = (nvrtc_get_fn)dlsym(h, "nvrtcGetProgramLog");
    nv.destroy = (nvrtc_destroy_fn)dlsym(h, "nvrtcDestroyProgram");
    nv.version = (nvrtc_version_fn)dlsym(h, "nvrtcVersion");
    nv.ok = nv.create && nv.compile && nv.cubin_size && nv.cubin && nv.log_size && nv.log && nv.destroy && nv.version;
}

/* Once per process: sessions created on several threads at once all wait
 * for the one load (a second caller read "not available" mid-load). */
static bool load_nvrtc(void)
{
    static pthread_once_t once = PTHREAD_ONCE_INIT;
    pthread_once(&once, open_nvrtc);
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

static uint64_t fnv1a_bytes(const unsigned char *p, size_t n) { return nc_fnv1a(NC_FNV1A_BASIS, p, n); }
static uint64_t fnv1a(const char *s) { return fnv1a_bytes((const unsigned char *)s, strlen(s)); }

/* An entry is this header, then the image: "NETCNVC1", the image's length and
 * its FNV-1a hash, each u64 little-endian. The store is atomic, so a crash
 * leaves no half entry, but a disk error, a full disk on another writer's
 * filesystem or a person can; an entry that fails any check is a miss. */
#define CACHE_MAGIC "NETCNVC1"
enum { CACHE_HEADER = 24 };

static uint64_t get_u64(const unsigned char *p)
{
    uint64_t v = 0;
    for (int k = 0; k < 8; k++) v |= (uint64_t)p[k] << (8 * k);
    return v;
}

static void put_u64(unsigned char *p, uint64_t v)
{
    for (int k = 0; k < 8; k++) p[k] = (unsigned char)(v >> (8 * k));
}

/* NULL when the image looks like its kind: a cubin is an ELF file longer than
 * an ELF64 header; PTX is NUL-terminated text with .version and .target. */
static const char *image_implausible(const unsigned char *p, size_t n, bool ptx)
{
    if (!ptx) return n > 64 && memcmp(p, "\x7f" "ELF", 4) == 0 ? NULL : "not an ELF cubin";
    const char *s = (const char *)p;
    if (n < 2 || p[n - 1] != 0 || strlen(s) != n - 1) return "not PTX text";
    return strstr(s, ".version") && strstr(s, ".target") ? NULL : "not PTX text";
}

static const char *entry_damage(const unsigned char *e, size_t n, bool ptx)
{
    if (n < CACHE_HEADER || memcmp(e, CACHE_MAGIC, 8) != 0) return "no entry header (an older netc's, or overwritten)";
    if (get_u64(e + 8) != n - CACHE_HEADER) return "its length does not match the file (truncated or extended)";
    if (get_u64(e + 16) != fnv1a_bytes(e + CACHE_HEADER, n - CACHE_HEADER)) return "checksum mismatch";
    return image_implausible(e + CACHE_HEADER, n - CACHE_HEADER, ptx);
}

bool nvrtc_cache_load(const char *path, bool ptx, unsigned char **data, size_t *size, const char **damaged)
{
    *damaged = NULL;
    const char *why;
    FILE *f = file_open_regular(path, &why);
    if (!f) return false;
    struct stat st;
    unsigned char *e = NULL;
    size_t n = 0;
    if (fstat(fileno(f), &st) != 0 || st.st_size >= (1 << 30)) *damaged = "unreadable or too large";
    else {
        n = (size_t)st.st_size;
        e = nc_xmalloc(n ? n : 1);
        if (fread(e, 1, n, f) != n) *damaged = "read error";
    }
    fclose(f);
    if (!*damaged) *damaged = entry_damage(e, n, ptx);
    if (!*damaged) {
        *size = n - CACHE_HEADER;
        *data = nc_xmalloc(*size);
        memcpy(*data, e + CACHE_HEADER, *size);
    }
    free(e);
    return !*damaged;
}

/* Best effort: a cache that cannot be written only costs a recompile. */
void nvrtc_cache_store(const char *path, const unsigned char *data, size_t size)
{
    char dir[1024];
    snprintf(dir, sizeof dir, "%s", path);
    char *slash = strrchr(dir, '/');
    if (slash) *slash = 0;
    unsigned char header[CACHE_HEADER];
    memcpy(header, CACHE_MAGIC, 8);
    put_u64(header + 8, size);
    put_u64(header + 16, fnv1a_bytes(data, size));
    atomic_file af;
    char err[256];
    if (atomic_file_make_dir(dir, err, sizeof err) == 0 && atomic_file_open(&af, path, err, sizeof err) == 0)
        atomic_file_commit(&af, path, fwrite(header, 1, sizeof header, af.f) == sizeof header &&
                                          fwrite(data, 1, size, af.f) == size, err, sizeof err);
}

void nvrtc_cache_path(const char *source, const char *arch, int major, int minor, char *buf, size_t cap)
{
    char dir[1024];
    nvrtc_cache_dir(dir, sizeof dir);
    snprintf(buf, cap, "%s/%016llx-%s-nvrtc%d.%d.bin", dir, (unsigned long long)fnv1a(source), arch, major, minor);
}

static int compile_through_cache(const char *source, const char *arch, unsigned char **cubin, size_t *size, char *err,
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
    const char *damaged;   /* a damaged entry is compiled again and overwritten, silently: the library prints nothing */
    if (nvrtc_cache_load(path, false, cubin, size, &damaged)) return 0;
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

/* One compile at a time in the process, the cache looked at inside the
 * lock: sessions created on several threads at once compile a module's
 * kernels once, the others loading what the first stored (each compiled
 * them, and stored them over each other), and NVRTC is never entered by
 * two threads (ThreadSanitizer saw a mutex NVRTC allocates on one thread
 * locked on another without an order it could see). */
int nvrtc_cache_compile(const char *source, const char *arch, unsigned char **cubin, size_t *size, char *err,
                        size_t errcap)
{
    static pthread_mutex_t compiling = PTHREAD_MUTEX_INITIALIZER;
    pthread_mutex_lock(&compiling);
    int rc = compile_through_cache(source, arch, cubin, size, err, errcap);
    pthread_mutex_unlock(&compiling);
    return rc;
}
