/* source.c - whole-file source storage for diagnostics. */
#include "source.h"
#include "file_open.h"

#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

uint32_t src_add(src_table *t, const char *path, const char *text, size_t len)
{
    t->files = nc_xrealloc(t->files, (t->nfiles + 1) * sizeof *t->files);
    src_file *f = &t->files[t->nfiles++];
    f->path = nc_xstrdup(path);
    f->text = nc_xmalloc(len + 1);
    if (len) memcpy(f->text, text, len);
    f->text[len] = 0;
    f->len = len;
    f->imported_at = (nc_loc){0};
    f->cycle_at = (nc_loc){0};
    return t->nfiles;
}

uint32_t src_load(src_table *t, const char *path, char *err, size_t errcap)
{
    /* One file, one id: a second compile in the same table (forward, then the
     * training step) reuses what is loaded, so graph locations stay valid. */
    for (uint32_t i = 0; i < t->nfiles; i++)
        if (strcmp(t->files[i].path, path) == 0) return i + 1;
    const char *why;
    FILE *fp = file_open_regular(path, &why);
    if (!fp) {
        nc_errf(err, errcap, "cannot open %s: %s", path, why);
        return 0;
    }
    char *buf = NULL;
    size_t len = 0, cap = 0;
    for (;;) {
        if (len == cap) {
            if (cap >= SRC_MAX_BYTES) {
                nc_errf(err, errcap, "%s: file is larger than %u MiB; refusing to read it", path, SRC_MAX_BYTES >> 20);
                free(buf);
                fclose(fp);
                return 0;
            }
            cap = cap ? cap * 2 : 65536;
            buf = nc_xrealloc(buf, cap);
        }
        size_t got = fread(buf + len, 1, cap - len, fp);
        len += got;
        if (got == 0) break;
    }
    bool bad = ferror(fp);
    fclose(fp);
    if (bad) {
        nc_errf(err, errcap, "cannot read %s: %s", path, strerror(errno));
        free(buf);
        return 0;
    }
    /* a UTF-8 byte-order mark (some editors write one) is not text: columns count from after it */
    size_t bom = len >= 3 && memcmp(buf, "\xef\xbb\xbf", 3) == 0 ? 3 : 0;
    uint32_t id = src_add(t, path, buf + bom, len - bom);
    free(buf);
    return id;
}

const src_file *src_get(const src_table *t, uint32_t id)
{
    return id >= 1 && id <= t->nfiles ? &t->files[id - 1] : NULL;
}

void src_set_imported_at(src_table *t, uint32_t id, nc_loc at)
{
    if (id < 1 || id > t->nfiles || !src_get(t, at.file)) return;
    src_file *f = &t->files[id - 1];
    if (f->imported_at.file) return;
    /* a cycle (the file given to netc imported back by what it imports) would
     * make the chain of imports endless: the file is then no import's, and
     * the import that closed the cycle is kept for the cycle's error */
    for (uint32_t k = at.file, n = 0; k && n <= t->nfiles; k = t->files[k - 1].imported_at.file, n++)
        if (k == id) {
            if (!f->cycle_at.file) f->cycle_at = at;
            return;
        }
    f->imported_at = at;
}

const char *src_line(const src_table *t, uint32_t id, uint32_t line, size_t *len)
{
    const src_file *f = src_get(t, id);
    if (!f || line == 0) return NULL;
    const char *p = f->text, *end = f->text + f->len;
    for (uint32_t l = 1; l < line; l++) {
        const char *nl = memchr(p, '\n', (size_t)(end - p));
        if (!nl) return NULL;
        p = nl + 1;
    }
    const char *nl = memchr(p, '\n', (size_t)(end - p));
    *len = (size_t)((nl ? nl : end) - p);
    return p;
}

void src_free(src_table *t)
{
    for (uint32_t i = 0; i < t->nfiles; i++) {
        free(t->files[i].path);
        free(t->files[i].text);
    }
    free(t->files);
    t->files = NULL;
    t->nfiles = 0;
}

size_t src_utf8_len(const char *s, size_t avail)
{
    const unsigned char *u = (const unsigned char *)s;
    if (avail == 0) return 0;
    unsigned char c = u[0];
    size_t n = c < 0x80 ? 1 : c >= 0xc2 && c <= 0xdf ? 2 : c >= 0xe0 && c <= 0xef ? 3 : c >= 0xf0 && c <= 0xf4 ? 4 : 0;
    if (n == 0 || n > avail) return 0;
    for (size_t k = 1; k < n; k++)
        if ((u[k] & 0xc0) != 0x80) return 0;
    /* the second byte's range is what rules out the overlong, the surrogates and past U+10FFFF */
    if ((c == 0xe0 && u[1] < 0xa0) || (c == 0xed && u[1] >= 0xa0) || (c == 0xf0 && u[1] < 0x90) || (c == 0xf4 && u[1] >= 0x90))
        return 0;
    return n;
}

uint32_t src_utf8_decode(const char *s, size_t n)
{
    const unsigned char *u = (const unsigned char *)s;
    static const unsigned char lead_mask[] = {0, 0x7f, 0x1f, 0x0f, 0x07};
    uint32_t cp = u[0] & lead_mask[n];
    for (size_t k = 1; k < n; k++) cp = cp << 6 | (u[k] & 0x3fu);
    return cp;
}
