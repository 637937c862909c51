/* cuda_compile.c - NVRTC at build time. A kernel that fails to compile is a netc
 * bug, so the report shows NVRTC's log with the generated source around
 * each error line: enough to file or fix it. */
#include "cuda_compile.h"
#include "cuda_emit.h"
#include "module.h"
#include "nvrtc_cache.h"

#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#ifdef NETC_HAVE_NVRTC
#include <nvrtc.h>

bool nvrtc_available(void) { return true; }

int nvrtc_version(void)
{
    int major = 0, minor = 0;
    if (nvrtcVersion(&major, &minor) != NVRTC_SUCCESS) return 0;
    return major * 1000 + minor * 10;
}

bool nvrtc_target_ok(const char *arch, char *err, size_t errcap)
{
    const char *digits = strncmp(arch, "sm_", 3) == 0 ? arch + 3 : strncmp(arch, "compute_", 8) == 0 ? arch + 8 : NULL;
    char *end = NULL;
    long number = digits && *digits >= '0' && *digits <= '9' ? strtol(digits, &end, 10) : -1;
    bool form = number > 0 && end && (*end == 0 || (end[0] == 'a' && end[1] == 0));   /* sm_90, sm_90a */
    int n = 0;
    if (nvrtcGetNumSupportedArchs(&n) != NVRTC_SUCCESS || n <= 0) return true;   /* cannot ask: NVRTC will say */
    int *archs = nc_xcalloc((size_t)n, sizeof *archs);
    bool known = false;
    if (nvrtcGetSupportedArchs(archs) != NVRTC_SUCCESS) known = true;
    for (int i = 0; i < n && form; i++) known |= archs[i] == number;
    if (!known) {
        cg_buf b = {0};
        cg_printf(&b, "'%s' is not a target NVRTC %d.%d compiles for; it knows ", arch, nvrtc_version() / 1000, nvrtc_version() % 1000 / 10);
        for (int i = 0; i < n; i++) cg_printf(&b, "%ssm_%d", i ? ", " : "", archs[i]);
        cg_printf(&b, " (and compute_NN for PTX; sm_90a for Hopper's arch-specific code)");
        snprintf(err, errcap, "%s", b.s);
        free(b.s);
    }
    free(archs);
    return known;
}

/* Append the generated lines around every "(N): error" in the log. */
static void context_lines(cg_buf *out, const char *source, const char *log)
{
    for (const char *p = strstr(log, "): error"); p; p = strstr(p + 1, "): error")) {
        const char *open = p;
        while (open > log && open[-1] != '(') open--;
        long line = strtol(open, NULL, 10);
        if (line <= 0) continue;
        cg_printf(out, "\ngenerated source around line %ld:\n", line);
        long l = 1;
        for (const char *s = source; *s; l++) {
            const char *nl = strchr(s, '\n');
            int len = (int)(nl ? nl - s : (long)strlen(s));
            if (l >= line - 3 && l <= line + 3) cg_printf(out, "%s%5ld | %.*s\n", l == line ? ">" : " ", l, len, s);
            if (!nl) break;
            s = nl + 1;
        }
    }
}

static bool compile_uncached(const char *source, const char *arch, nvrtc_image *out, char **log);

/* Through the same on-disk cache the runtime uses (runtime/nvrtc_cache.c):
 * a rebuild of an unchanged model skips NVRTC. NETC_NO_CACHE=1 disables it. */
bool nvrtc_compile(const char *source, const char *arch, nvrtc_image *out, char **log)
{
    memset(out, 0, sizeof *out);
    *log = NULL;
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    char path[1300];
    nvrtc_cache_path(source, arch, major, minor, path, sizeof path);
    bool use_cache = !getenv("NETC_NO_CACHE");
    size_t size;
    const char *damaged = NULL;
    bool ptx = strncmp(arch, "compute_", 8) == 0;
    if (use_cache && nvrtc_cache_load(path, ptx, &out->data, &size, &damaged)) {
        out->size = size;
        out->is_ptx = ptx;
        snprintf(out->arch, sizeof out->arch, "%s", arch);
        return true;
    }
    if (damaged) fprintf(stderr, "netc: note: NVRTC cache entry %s: %s; compiling it again\n", path, damaged);
    if (!compile_uncached(source, arch, out, log)) return false;
    if (use_cache) nvrtc_cache_store(path, out->data, out->size);
    return true;
}

/* Whether nvrtc_compile will find source for arch in the cache (a damaged
 * entry counts: that is found, and noted, as it is read). */
static bool nvrtc_cached(const char *source, const char *arch)
{
    if (getenv("NETC_NO_CACHE")) return false;
    int major = 0, minor = 0;
    nvrtcVersion(&major, &minor);
    char path[1300];
    nvrtc_cache_path(source, arch, major, minor, path, sizeof path);
    return access(path, R_OK) == 0;
}

static bool compile_uncached(const char *source, const char *arch, nvrtc_image *out, char **log)
{
    nvrtcProgram prog;
    if (nvrtcCreateProgram(&prog, source, "netc_kernels.cu", 0, NULL, NULL) != NVRTC_SUCCESS) {
        *log = nc_xstrdup("nvrtcCreateProgram failed");
        return false;
    }
    char archopt[48];
    snprintf(archopt, sizeof archopt, "--gpu-architecture=%s", arch);
    const char *opts[] = {archopt, "--std=c++17", "-default-device", "-lineinfo"};
    nvrtcResult rc = nvrtcCompileProgram(prog, (int)NC_COUNT(opts), opts);
    size_t logsize = 0;
    nvrtcGetProgramLogSize(prog, &logsize);
    char *text = nc_xmalloc(logsize + 1);
    text[0] = 0;
    if (logsize) nvrtcGetProgramLog(prog, text);
    if (rc != NVRTC_SUCCESS) {
        cg_buf b = {0};
        cg_printf(&b, "NVRTC failed for %s (%s); this is a bug in netc's code generator.\n%s", arch,
                  nvrtcGetErrorString(rc), text);
        context_lines(&b, source, text);
        *log = b.s;
        free(text);
        nvrtcDestroyProgram(&prog);
        return false;
    }
    free(text);
    bool ptx = strncmp(arch, "compute_", 8) == 0;
    size_t size = 0;
    rc = ptx ? nvrtcGetPTXSize(prog, &size) : nvrtcGetCUBINSize(prog, &size);
    if (rc == NVRTC_SUCCESS) {
        out->data = nc_xmalloc(size);
        rc = ptx ? nvrtcGetPTX(prog, (char *)out->data) : nvrtcGetCUBIN(prog, (char *)out->data);
    }
    nvrtcDestroyProgram(&prog);
    if (rc != NVRTC_SUCCESS) {
        free(out->data);
        out->data = NULL;
        *log = nc_xstrdup("NVRTC produced no code");
        return false;
    }
    out->size = size;
    out->is_ptx = ptx;
    snprintf(out->arch, sizeof out->arch, "%s", arch);
    return true;
}

#else

bool nvrtc_available(void) { return false; }
int nvrtc_version(void) { return 0; }
static bool nvrtc_cached(const char *source, const char *arch) { return (void)source, (void)arch, true; }   /* nothing to wait for */

bool nvrtc_target_ok(const char *arch, char *err, size_t errcap)
{
    (void)arch, (void)err, (void)errcap;
    return true;
}

bool nvrtc_compile(const char *source, const char *arch, nvrtc_image *out, char **log)
{
    (void)source, (void)arch;
    memset(out, 0, sizeof *out);
    *log = nc_xstrdup("netc was built without the CUDA toolkit: no NVRTC");
    return false;
}

#endif

void nvrtc_image_to_module(const nvrtc_image *img, nrt_image *out)
{
    _Static_assert(sizeof out->arch == sizeof img->arch, "arch names");
    memcpy(out->arch, img->arch, sizeof out->arch);
    out->is_ptx = img->is_ptx;
    out->data = img->data;
    out->size = img->size;
}

void nvrtc_image_free(nvrtc_image *img)
{
    free(img->data);
    img->data = NULL;
}

typedef struct compile_job {
    const char *source, *arch;
    nvrtc_image image;
    char *log;
    bool ok;
} compile_job;

static void *compile_one(void *arg)
{
    compile_job *j = arg;
    j->ok = nvrtc_compile(j->source, j->arch, &j->image, &j->log);
    return NULL;
}

static double seconds_now(void)
{
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + t.tv_nsec * 1e-9;
}

/* The line before a cold compile: which targets, and that it happens once. */
static bool say_cold(const char *const *sources, const char *const *archs, int n, FILE *progress)
{
    char cold[256] = "";
    size_t len = 0, bytes = 0;
    for (int i = 0; i < n; i++) {
        if (nvrtc_cached(sources[i], archs[i]) || len >= sizeof cold) continue;
        len += (size_t)snprintf(cold + len, sizeof cold - len, "%s%s", len ? ", " : "", archs[i]);
        bool again = false;   /* one source for several targets counts once */
        for (int k = 0; k < i; k++) again |= sources[k] == sources[i];
        if (!again) bytes += strlen(sources[i]);
    }
    if (!len || !progress) return false;
    fprintf(progress, "netc: NVRTC: compiling %zu KiB of CUDA C for %s (once: later builds take it from the cache)\n",
            (bytes + 1023) / 1024, cold);
    fflush(progress);
    return true;
}

bool nvrtc_compile_all(const char *const *sources, const char *const *archs, int n, nvrtc_image *out, char **log,
                       FILE *progress)
{
    double start = seconds_now();
    bool cold = say_cold(sources, archs, n, progress);
    compile_job *jobs = nc_xcalloc((size_t)n + 1, sizeof *jobs);
    pthread_t *threads = nc_xcalloc((size_t)n + 1, sizeof *threads);
    bool *started = nc_xcalloc((size_t)n + 1, sizeof *started);
    for (int i = 0; i < n; i++) {
        jobs[i] = (compile_job){.source = sources[i], .arch = archs[i]};
        started[i] = pthread_create(&threads[i], NULL, compile_one, &jobs[i]) == 0;
        if (!started[i]) compile_one(&jobs[i]);   /* no thread to be had: compile here */
    }
    bool ok = true;
    *log = NULL;
    for (int i = 0; i < n; i++) {
        if (started[i]) pthread_join(threads[i], NULL);
        if (!jobs[i].ok && ok) *log = jobs[i].log, jobs[i].log = NULL, ok = false;
        free(jobs[i].log);
        out[i] = jobs[i].image;
    }
    for (int i = 0; i < n && !ok; i++) nvrtc_image_free(&out[i]);
    if (cold && ok) fprintf(progress, "netc: NVRTC: done in %.1f s\n", seconds_now() - start);
    free(started);
    free(threads);
    free(jobs);
    return ok;
}
