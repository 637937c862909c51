/* inspect.h - the `netc inspect` report. */
#ifndef NC_INSPECT_H
#define NC_INSPECT_H

#include "base.h"
#include <stdio.h>

/* Print the report of entry point `entry` (NULL: forward) of the module at
 * path (JSON with as_json). Returns the process exit code. */
int inspect_module(const char *path, const char *entry, const char *const *dim_names, const int64_t *dim_values,
                   int ndims, bool as_json, FILE *out);

#endif
