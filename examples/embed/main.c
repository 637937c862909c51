/* embed: load a netc module with libnetrt and run it from your own program.
 *   netc build examples/fashion_mlp.net -o mlp.netm
 *   ./embed mlp.netm            # classifies a few synthetic images */
#include <netrt.h>

#include <stdio.h>
#include <stdlib.h>

int main(int argc, char **argv)
{
    if (argc < 2) {
        fprintf(stderr, "usage: %s MODULE.netm [cpu|gpu|auto]\n", argv[0]);
        return 2;
    }
    nrt_error e;
    nrt_module *m;
    if (nrt_module_load(argv[1], &m, &e) != NRT_OK) {
        fprintf(stderr, "embed: %s\n", e.message);
        return 1;
    }
    enum { B = 4 };
    nrt_session_opts o = nrt_session_defaults();
    const char *dim_names[] = {"B"};
    const int64_t dim_values[] = {B};
    o.dim_names = dim_names, o.dim_values = dim_values, o.ndims = 1;
    if (argc > 2) o.device = argv[2][0] == 'c' ? NRT_DEVICE_CPU : argv[2][0] == 'g' ? NRT_DEVICE_GPU : NRT_DEVICE_AUTO;
    nrt_session *s;
    if (nrt_session_create(m, &o, &s, &e) != NRT_OK) {
        fprintf(stderr, "embed: %s\n", e.message);
        nrt_module_free(m);
        return 1;
    }
    printf("device: %s\n", nrt_session_device(s));
    static unsigned char images[B][28][28];
    for (int b = 0; b < B; b++)            /* a bright square of a different size in each */
        for (int y = 0; y < 28; y++)
            for (int x = 0; x < 28; x++) images[b][y][x] = (x < 8 + 4 * b && y < 8 + 4 * b) ? 255 : 0;
    const int64_t shape[] = {B, 28, 28};
    float logits[B][10];
    int rc = 0;
    if (nrt_session_set_input(s, "images", NRT_U8, 3, shape, images, &e) != NRT_OK ||
        nrt_session_run(s, &e) != NRT_OK || nrt_session_get_output(s, "logits", logits, sizeof logits, &e) != NRT_OK) {
        fprintf(stderr, "embed: %s\n", e.message);
        rc = 1;
    }
    for (int b = 0; rc == 0 && b < B; b++) {
        int best = 0;
        for (int k = 1; k < 10; k++) if (logits[b][k] > logits[b][best]) best = k;
        printf("image %d: class %d (logit %.4f)\n", b, best, logits[b][best]);
    }
    nrt_session_free(s);
    nrt_module_free(m);
    return rc;
}
