/* fuzz_module.c - libFuzzer target for the module reader: any bytes must be
 * refused with a message or read into a valid module, never crash or leak.
 * Seeds: modules written by netc build (see README.md). */
#include "module.h"

#include <stddef.h>
#include <stdint.h>

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size);

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
    nrt_module_data m;
    char err[512];
    if (module_read_buffer(data, size, &m, err, sizeof err) == 0) module_data_free(&m);
    return 0;
}
