/* fuzz_parse.c - libFuzzer target: the input bytes are a .net source file, run
 * through the front end exactly as `netc check` runs it (driver_check: lexer,
 * parser, imports, semantic analysis). Any input must end in diagnostics or
 * success, never in a crash, a sanitizer report, a leak or a hang.
 * See README.md here for how to run it and reproduce a crash. */
#include "diag.h"
#include "driver.h"
#include "source.h"

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

/* Diagnostics are not what is under test: they go to /dev/null, opened once
 * and kept for the life of the process. */
static FILE *null_out(void)
{
    static FILE *out;
    if (!out) {
        out = fopen("/dev/null", "w");
        if (!out) {
            perror("fuzz_parse: /dev/null");
            abort();
        }
    }
    return out;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    FILE *out = null_out();
    if (size > SRC_MAX_BYTES)
        return 0; /* the loader refuses these before the lexer sees them */

    src_table sources = {0};
    uint32_t id = src_add(&sources, "fuzz.net", (const char *)data, size);

    diag_ctx diag;
    diag_init(&diag, &sources, out);

    driver_opts opts = {0};
    opts.stdlib_dir = NULL; /* the built-in stdlib: `import nn` works */
    opts.verify = true;

    (void)driver_check(&sources, id, &opts, &diag);

    src_free(&sources);
    return 0;
}
