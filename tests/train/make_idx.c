/* make_idx.c - a small, learnable data set in the MNIST IDX layout for the
 * training tests: 8x8 u8 images of a bright bar whose row is the class (4
 * classes), plus noise. Writes DIR/{train,t10k}-{images-idx3,labels-idx1}-ubyte.
 *   make_idx DIR NTRAIN NTEST */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

static void be32(FILE *f, uint32_t v)
{
    unsigned char b[4] = {(unsigned char)(v >> 24), (unsigned char)(v >> 16), (unsigned char)(v >> 8), (unsigned char)v};
    fwrite(b, 1, 4, f);
}

static int write_split(const char *dir, const char *split, int n, uint32_t seed)
{
    char path[4096];
    snprintf(path, sizeof path, "%s/%s-images-idx3-ubyte", dir, split);
    FILE *fi = fopen(path, "wb");
    snprintf(path, sizeof path, "%s/%s-labels-idx1-ubyte", dir, split);
    FILE *fl = fopen(path, "wb");
    if (!fi || !fl) return 1;
    be32(fi, 0x803), be32(fi, (uint32_t)n), be32(fi, 8), be32(fi, 8);
    be32(fl, 0x801), be32(fl, (uint32_t)n);
    uint32_t x = seed;
    for (int i = 0; i < n; i++) {
        x = x * 1664525u + 1013904223u;
        int label = (int)(x >> 28) & 3;
        for (int r = 0; r < 8; r++)
            for (int c = 0; c < 8; c++) {
                x = x * 1664525u + 1013904223u;
                int noise = (int)(x >> 26);   /* 0..63 */
                fputc(r / 2 == label ? 192 + noise : noise, fi);
            }
        fputc(label, fl);
    }
    fclose(fi);
    fclose(fl);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc != 4) { fprintf(stderr, "usage: make_idx DIR NTRAIN NTEST\n"); return 2; }
    return write_split(argv[1], "train", atoi(argv[2]), 1) || write_split(argv[1], "t10k", atoi(argv[3]), 2);
}
