/* test_nvrtc_cache.c - the NVRTC cache's entries: a stored image loads back
 * the same, and an entry that is damaged (overwritten, truncated, extended,
 * a bit flipped, an older netc's headerless file, a cubin that is no ELF,
 * PTX that is no text) is a miss that says why, so the caller compiles again
 * and overwrites it. A FIFO in the entry's place is a miss, not a hang. No
 * NVRTC needed: the images are made up. Threads storing one entry at once
 * (sessions created together, each compiling the same kernels) leave one
 * of their images whole. */
#include "base.h"
#include "nvrtc_cache.h"

#include "test_util.h"
#include <pthread.h>
#include <stdbool.h>
#include <stdint.h>
#include <string.h>
#include <dirent.h>
#include <sys/stat.h>
#include <unistd.h>

static char dir[64];

/* Loads path as ptx or not; true when it loads the image want[n]. */
static bool loads(const char *path, bool ptx, const unsigned char *want, size_t n, const char **damaged)
{
    unsigned char *data = NULL;
    size_t size = 0;
    if (!nvrtc_cache_load(path, ptx, &data, &size, damaged)) return false;
    bool same = size == n && memcmp(data, want, n) == 0;
    free(data);
    return same;
}

/* Rewrites the entry at path as bytes[n], after applying edit at byte at. */
static void damage(const char *path, const unsigned char *bytes, size_t n, size_t at, unsigned char xor_with)
{
    unsigned char *copy = malloc(n);
    memcpy(copy, bytes, n);
    if (at < n) copy[at] ^= xor_with;
    spit(path, copy, n);
    free(copy);
}

enum { WRITERS = 4, IMAGE_BYTES = 1 << 20, ROUNDS = 32 };

typedef struct writer {
    const char *path;
    unsigned char *image;
    pthread_barrier_t *start;
} writer;

static void *store_at_once(void *p)
{
    writer *w = p;
    pthread_barrier_wait(w->start);
    nvrtc_cache_store(w->path, w->image, IMAGE_BYTES);
    return NULL;
}

/* They used to share one temporary (named by the process): one writer
 * truncated it under another, and the entry renamed into place held parts
 * of two images, or none of the last (a checksum mismatch: compiled again
 * by every session after). */
static void check_stores_on_threads(void)
{
    char path[128];
    snprintf(path, sizeof path, "%s/threads-sm_90.bin", dir);
    writer w[WRITERS];
    pthread_barrier_t start;
    for (int i = 0; i < WRITERS; i++) {
        w[i] = (writer){path, malloc(IMAGE_BYTES), &start};
        memcpy(w[i].image, "\x7f" "ELF", 4);
        memset(w[i].image + 4, 'a' + i, IMAGE_BYTES - 4);
    }
    int whole = 0;
    for (int r = 0; r < ROUNDS; r++) {
        pthread_barrier_init(&start, NULL, WRITERS);
        pthread_t t[WRITERS];
        for (int i = 0; i < WRITERS; i++) CHECK(pthread_create(&t[i], NULL, store_at_once, &w[i]) == 0);
        for (int i = 0; i < WRITERS; i++) pthread_join(t[i], NULL);
        pthread_barrier_destroy(&start);
        const char *damaged = NULL;
        for (int i = 0; i < WRITERS; i++) whole += loads(path, false, w[i].image, IMAGE_BYTES, &damaged);
        if (damaged) fprintf(stderr, "round %d: the entry stored by %d threads at once is damaged: %s\n", r, WRITERS, damaged);
    }
    CHECK(whole == ROUNDS);
    for (int i = 0; i < WRITERS; i++) free(w[i].image);
    DIR *d = opendir(dir);   /* no temporary left behind */
    for (struct dirent *e; d && (e = readdir(d));) {
        CHECK(!strstr(e->d_name, ".tmp."));
        if (strstr(e->d_name, ".tmp.")) fprintf(stderr, "left behind: %s\n", e->d_name);
    }
    if (d) closedir(d);
}

int main(void)
{
    snprintf(dir, sizeof dir, "/tmp/netc_cache_XXXXXX");
    if (!mkdtemp(dir)) return 1;
    char cubin_path[128], ptx_path[128];
    snprintf(cubin_path, sizeof cubin_path, "%s/sub/a-sm_80.bin", dir);
    snprintf(ptx_path, sizeof ptx_path, "%s/sub/a-compute_80.bin", dir);
    unsigned char cubin[200] = {0x7f, 'E', 'L', 'F', 2, 1, 1};
    for (size_t i = 7; i < sizeof cubin; i++) cubin[i] = (unsigned char)(i * 37);
    const char ptx[] = "//\n.version 9.0\n.target sm_80\n.address_size 64\n";   /* sizeof: with its NUL, as NVRTC gives it */
    const char *damaged = "unset";

    CHECK(!nvrtc_cache_load(cubin_path, false, &(unsigned char *){NULL}, &(size_t){0}, &damaged) && !damaged);
    nvrtc_cache_store(cubin_path, cubin, sizeof cubin);
    nvrtc_cache_store(ptx_path, (const unsigned char *)ptx, sizeof ptx);
    CHECK(loads(cubin_path, false, cubin, sizeof cubin, &damaged) && !damaged);
    CHECK(loads(ptx_path, true, (const unsigned char *)ptx, sizeof ptx, &damaged) && !damaged);

    size_t n = 0;
    unsigned char *entry = slurp(cubin_path, &n);
    CHECK(entry && n == 24 + sizeof cubin);
    static const struct { size_t len, at; unsigned char x; const char *why; } cases[] = {
        {7, 99999, 0, "no entry header"},                   /* garbage, as a person might leave */
        {24 + 100, 99999, 0, "length"},                     /* truncated */
        {24 + 200, 0, 0x01, "no entry header"},             /* the magic */
        {24 + 200, 9, 0x01, "length"},                      /* the length field */
        {24 + 200, 24 + 150, 0x10, "checksum"},             /* a bit of the image */
    };
    for (size_t i = 0; entry && i < NC_COUNT(cases); i++) {
        damage(cubin_path, entry, cases[i].len, cases[i].at, cases[i].x);
        damaged = NULL;
        CHECK(!loads(cubin_path, false, cubin, sizeof cubin, &damaged) && damaged && strstr(damaged, cases[i].why));
    }
    /* a file one byte longer than its header says */
    if (entry) {
        unsigned char *longer = calloc(n + 1, 1);
        memcpy(longer, entry, n);
        spit(cubin_path, longer, n + 1);
        CHECK(!loads(cubin_path, false, cubin, sizeof cubin, &damaged) && damaged && strstr(damaged, "length"));
        free(longer);
    }
    /* the headerless entries an older netc wrote: the bare cubin */
    spit(cubin_path, cubin, sizeof cubin);
    CHECK(!loads(cubin_path, false, cubin, sizeof cubin, &damaged) && damaged && strstr(damaged, "no entry header"));
    /* intact entries of the wrong kind: a checksum guards the bytes, not what they are */
    nvrtc_cache_store(cubin_path, (const unsigned char *)"garbage", 7);
    CHECK(!loads(cubin_path, false, (const unsigned char *)"garbage", 7, &damaged) && damaged && strstr(damaged, "ELF"));
    CHECK(!loads(ptx_path, false, (const unsigned char *)ptx, sizeof ptx, &damaged) && damaged && strstr(damaged, "ELF"));
    nvrtc_cache_store(ptx_path, cubin, sizeof cubin);
    CHECK(!loads(ptx_path, true, cubin, sizeof cubin, &damaged) && damaged && strstr(damaged, "PTX"));
    nvrtc_cache_store(ptx_path, (const unsigned char *)"no directives\n", 15);
    CHECK(!loads(ptx_path, true, (const unsigned char *)"no directives\n", 15, &damaged) && damaged && strstr(damaged, "PTX"));
    /* storing over a damaged entry repairs it */
    nvrtc_cache_store(cubin_path, cubin, sizeof cubin);
    CHECK(loads(cubin_path, false, cubin, sizeof cubin, &damaged) && !damaged);
    /* a FIFO where the entry should be: a miss, at once */
    char fifo[160];
    snprintf(fifo, sizeof fifo, "%s/sub/fifo-sm_80.bin", dir);
    CHECK(mkfifo(fifo, 0600) == 0);
    CHECK(!loads(fifo, false, cubin, sizeof cubin, &damaged));
    free(entry);
    check_stores_on_threads();

    char cmd[128];
    snprintf(cmd, sizeof cmd, "rm -rf %s", dir);
    if (system(cmd) != 0) fprintf(stderr, "could not remove %s\n", dir);
    if (failures) fprintf(stderr, "%d checks failed\n", failures);
    else printf("test_nvrtc_cache: all checks passed\n");
    return failures != 0;
}
