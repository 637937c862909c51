/* module_mutator.c - fuzz_module's structure-aware mutator.
 *
 * A .netm file is a header (magic, version, section count, total bytes), a
 * table of sections (kind, a reserved word, offset, length) and the sections
 * end to end; an entry section is a name and a whole module of its own
 * (runtime/module.c, docs/module-format.md). A byte flipped anywhere in a
 * file the reader would take is almost always caught by the header's total
 * or the table's offsets, or lands in the CUDA source or an image, which the
 * reader copies unread. So this mutator splits the file into its sections,
 * nested entries too, changes one section's bytes (libFuzzer's own
 * mutations, or a u8/u32/u64 field set to a value that sits on a check's
 * edge: counts, ids, dtypes, ranks and flags are all such fields), or the
 * list of sections (one dropped, duplicated, swapped, given another kind),
 * and writes the header and table again, so the change reaches the section
 * readers. One mutation in 16 is libFuzzer's on the raw bytes, unsealed,
 * for the header's own checks. The cross-over puts a section of one module
 * (a program, a graph, a whole entry) into another. */
#include "module_mutator.h"

#include <stdlib.h>
#include <string.h>

size_t LLVMFuzzerMutate(uint8_t *data, size_t size, size_t max_size);
size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed);
size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2, size_t size2, uint8_t *out,
                                 size_t max_out_size, unsigned int seed);

enum { HEADER = 24, ROW = 24, MAX_SECTIONS = 64, SEC_GRAPH = 1, SEC_SOURCE = 3, SEC_IMAGE = 4, SEC_ENTRY = 5 };
static const char magic[8] = "NETCMOD";

typedef struct mm_module mm_module;
typedef struct mm_section {
    uint32_t kind, reserved;
    uint8_t *bytes;            /* the section's own bytes; an entry's: its name */
    size_t n;
    mm_module *nested;         /* an entry's module, NULL when it does not parse */
} mm_section;

struct mm_module {
    uint32_t version;
    uint32_t nsec;
    mm_section sec[MAX_SECTIONS];
};

static uint32_t get32(const uint8_t *p) { return p[0] | p[1] << 8 | p[2] << 16 | (uint32_t)p[3] << 24; }
static uint64_t get64(const uint8_t *p) { return get32(p) | (uint64_t)get32(p + 4) << 32; }
static void put32(uint8_t *p, uint32_t v)
{
    for (int i = 0; i < 4; i++) p[i] = (uint8_t)(v >> 8 * i);
}
static void put64(uint8_t *p, uint64_t v) { put32(p, (uint32_t)v), put32(p + 4, (uint32_t)(v >> 32)); }

static uint8_t *dup_bytes(const uint8_t *p, size_t n)
{
    uint8_t *d = malloc(n + 1);
    if (n) memcpy(d, p, n);
    return d;
}

static void mm_free(mm_module *m)
{
    if (!m) return;
    for (uint32_t i = 0; i < m->nsec; i++) {
        free(m->sec[i].bytes);
        mm_free(m->sec[i].nested);
    }
    free(m);
}

/* Sections are taken where the table says, in range; their order and the
 * total need not be right (the seal fixes them). NULL: not a module. */
static mm_module *mm_parse(const uint8_t *d, size_t n, int depth)
{
    if (n < HEADER || memcmp(d, magic, 8) != 0) return NULL;
    uint32_t nsec = get32(d + 12);
    if (nsec > MAX_SECTIONS || HEADER + (uint64_t)nsec * ROW > n) return NULL;
    mm_module *m = calloc(1, sizeof *m);
    m->version = get32(d + 8);
    for (uint32_t i = 0; i < nsec; i++) {
        const uint8_t *row = d + HEADER + (size_t)i * ROW;
        uint64_t off = get64(row + 8), len = get64(row + 16);
        if (off > n || len > n - off) {
            mm_free(m);
            return NULL;
        }
        mm_section *s = &m->sec[m->nsec++];
        s->kind = get32(row), s->reserved = get32(row + 4);
        const uint8_t *p = d + off;
        size_t name = len >= 4 ? 4 + (size_t)get32(p) : len + 1;
        if (s->kind == SEC_ENTRY && depth == 0 && name <= len && (s->nested = mm_parse(p + name, len - name, 1)))
            len = name;
        s->bytes = dup_bytes(p, len), s->n = len;
    }
    return m;
}

static size_t mm_size(const mm_module *m)
{
    size_t n = HEADER + (size_t)m->nsec * ROW;
    for (uint32_t i = 0; i < m->nsec; i++) n += m->sec[i].n + (m->sec[i].nested ? mm_size(m->sec[i].nested) : 0);
    return n;
}

/* Writes m sealed (total, offsets end to end) at out, which has mm_size(m) bytes. */
static void mm_write(const mm_module *m, uint8_t *out)
{
    size_t total = mm_size(m), at = HEADER + (size_t)m->nsec * ROW;
    memcpy(out, magic, 8);
    put32(out + 8, m->version), put32(out + 12, m->nsec), put64(out + 16, total);
    for (uint32_t i = 0; i < m->nsec; i++) {
        const mm_section *s = &m->sec[i];
        size_t len = s->n + (s->nested ? mm_size(s->nested) : 0);
        uint8_t *row = out + HEADER + (size_t)i * ROW;
        put32(row, s->kind), put32(row + 4, s->reserved), put64(row + 8, at), put64(row + 16, len);
        memcpy(out + at, s->bytes, s->n);
        if (s->nested) mm_write(s->nested, out + at + s->n);
        at += len;
    }
}

static uint32_t rnd(unsigned *state, uint32_t below)
{
    *state = *state * 1103515245u + 12345u;
    return below ? (*state >> 8) % below : 0;
}

/* Every section of m and its entries', for picking one. */
static uint32_t mm_sections(mm_module *m, mm_section **all, mm_module **owner, uint32_t n)
{
    for (uint32_t i = 0; i < m->nsec && n < 2 * MAX_SECTIONS; i++) {
        all[n] = &m->sec[i], owner[n++] = m;
        if (m->sec[i].nested) n = mm_sections(m->sec[i].nested, all, owner, n);
    }
    return n;
}

/* A field at a random place set to a value on some check's edge. */
static void set_field(mm_section *s, unsigned *st)
{
    static const uint64_t edge[] = {0, 1, 2, 3, 4, 5, 7, 8, 9, 15, 16, 17, 31, 32, 63, 64, 65, 127, 128, 255, 256,
                                    4095, 4096, 65535, 65536, 0x7fffffff, 0x80000000u, 0xffffffffu,
                                    0x7fffffffffffffffull, 0xffffffffffffffffull};
    int width = (int[]){1, 4, 8}[rnd(st, 3)];
    if (s->n < (size_t)width) return;
    size_t at = rnd(st, (uint32_t)(s->n - (size_t)width + 1));
    uint64_t old = width == 1 ? s->bytes[at] : width == 4 ? get32(s->bytes + at) : get64(s->bytes + at);
    uint64_t v = rnd(st, 4) == 0 ? old + (rnd(st, 2) ? 1 : (uint64_t)-1) : edge[rnd(st, sizeof edge / sizeof *edge)];
    if (width == 1) s->bytes[at] = (uint8_t)v;
    else if (width == 4) put32(s->bytes + at, (uint32_t)v);
    else put64(s->bytes + at, v);
}

/* libFuzzer's mutations on one section's bytes, growing it by at most room. */
static void mutate_bytes(mm_section *s, size_t room)
{
    size_t cap = s->n + (room < 4096 ? room : 4096);
    uint8_t *b = malloc(cap + 1);
    memcpy(b, s->bytes, s->n);
    size_t n = LLVMFuzzerMutate(b, s->n, cap);
    free(s->bytes);
    s->bytes = b, s->n = n;
}

static void mutate_list(mm_module *m, unsigned *st)
{
    if (!m->nsec) return;
    uint32_t i = rnd(st, m->nsec), j = rnd(st, m->nsec);
    switch (rnd(st, 4)) {
    case 0:   /* drop one */
        free(m->sec[i].bytes), mm_free(m->sec[i].nested);
        memmove(&m->sec[i], &m->sec[i + 1], (m->nsec - i - 1) * sizeof *m->sec);
        m->nsec--;
        break;
    case 1:   /* duplicate one (not an entry: its module would be shared) */
        if (m->nsec < MAX_SECTIONS && !m->sec[i].nested) {
            m->sec[m->nsec] = m->sec[i];
            m->sec[m->nsec++].bytes = dup_bytes(m->sec[i].bytes, m->sec[i].n);
        }
        break;
    case 2: {   /* swap two */
        mm_section t = m->sec[i];
        m->sec[i] = m->sec[j], m->sec[j] = t;
        break;
    }
    default:   /* another kind, or a reserved word that is not 0 */
        if (rnd(st, 4)) m->sec[i].kind = rnd(st, 7);
        else m->sec[i].reserved = rnd(st, 3);
    }
}

static size_t fallback(uint8_t *data, size_t size, size_t max_size) { return LLVMFuzzerMutate(data, size, max_size); }

static size_t seal(mm_module *m, uint8_t *out, size_t max_size)
{
    size_t n = mm_size(m);
    if (n > max_size) return 0;
    mm_write(m, out);
    return n;
}

/* Sections in the writer's order (graph, program, source, images, entries),
 * keeping the order of those of one kind. */
static void mm_sort(mm_module *m)
{
    for (uint32_t i = 1; i < m->nsec; i++)
        for (uint32_t j = i; j > 0 && m->sec[j - 1].kind > m->sec[j].kind; j--) {
            mm_section t = m->sec[j];
            m->sec[j] = m->sec[j - 1], m->sec[j - 1] = t;
        }
}

static bool mm_same(mm_module *a, mm_module *b)
{
    if (a->version != b->version || a->nsec != b->nsec) return false;
    mm_sort(a), mm_sort(b);
    for (uint32_t i = 0; i < a->nsec; i++) {
        const mm_section *x = &a->sec[i], *y = &b->sec[i];
        if (x->kind != y->kind || x->reserved != y->reserved || x->n != y->n || memcmp(x->bytes, y->bytes, x->n) != 0 ||
            !x->nested != !y->nested || (x->nested && !mm_same(x->nested, y->nested)))
            return false;
    }
    return true;
}

bool module_mutator_same(const uint8_t *a, size_t na, const uint8_t *b, size_t nb)
{
    mm_module *x = mm_parse(a, na, 0), *y = mm_parse(b, nb, 0);
    bool same = x && y && mm_same(x, y);
    mm_free(x);
    mm_free(y);
    return same;
}

/* The CUDA source is most of a module's bytes (90% of the one-layer
 * GPT-2's), and neither the reader nor the CPU reads it: a short one makes
 * every input cheaper to copy, mutate and read. */
static void mm_short_sources(mm_module *m)
{
    static const uint8_t stub[] = {4, 0, 0, 0, '/', '/', ' ', 'x'};
    for (uint32_t i = 0; i < m->nsec; i++) {
        mm_section *s = &m->sec[i];
        if (s->nested) mm_short_sources(s->nested);
        if (s->kind != SEC_SOURCE || s->n <= 64) continue;
        free(s->bytes);
        s->bytes = dup_bytes(stub, sizeof stub), s->n = sizeof stub;
    }
}

size_t LLVMFuzzerCustomMutator(uint8_t *data, size_t size, size_t max_size, unsigned int seed)
{
    unsigned st = seed;
    mm_module *m = rnd(&st, 16) ? mm_parse(data, size, 0) : NULL;
    if (!m) return fallback(data, size, max_size);
    mm_short_sources(m);
    mm_section *all[2 * MAX_SECTIONS];
    mm_module *owner[2 * MAX_SECTIONS];
    uint32_t n = mm_sections(m, all, owner, 0), pick = rnd(&st, n), how = rnd(&st, 16);
    mm_section *s = n ? all[pick] : NULL;
    /* the CUDA source and images are copied unread: rarely worth a mutation */
    if (s && (s->kind == SEC_SOURCE || s->kind == SEC_IMAGE) && rnd(&st, 8)) s = all[rnd(&st, n)];
    if (!s || how == 0) mutate_list(n ? owner[pick] : m, &st);
    else if (how < 8) {
        for (uint32_t k = 1 + rnd(&st, 3); k > 0; k--) set_field(s, &st);
    } else mutate_bytes(s, max_size > size ? max_size - size : 0);
    size_t out = seal(m, data, max_size);
    mm_free(m);
    return out ? out : fallback(data, size, max_size);
}

size_t LLVMFuzzerCustomCrossOver(const uint8_t *data1, size_t size1, const uint8_t *data2, size_t size2, uint8_t *out,
                                 size_t max_out_size, unsigned int seed)
{
    unsigned st = seed;
    mm_module *a = mm_parse(data1, size1, 0), *b = mm_parse(data2, size2, 0);
    size_t n = 0;
    if (a && b && a->nsec && b->nsec) {
        /* a section of b, with its entry module, in place of one of a's */
        uint32_t i = rnd(&st, a->nsec), j = rnd(&st, b->nsec);
        free(a->sec[i].bytes), mm_free(a->sec[i].nested);
        a->sec[i] = b->sec[j];
        b->sec[j] = (mm_section){0};
        n = seal(a, out, max_out_size);
    }
    mm_free(a);
    mm_free(b);
    if (n) return n;
    n = size1 < max_out_size ? size1 : max_out_size;
    memcpy(out, data1, n);
    return n;
}
