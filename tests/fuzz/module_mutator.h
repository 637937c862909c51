/* module_mutator.h - what fuzz_module.c asks of its mutator (module_mutator.c). */
#ifndef FUZZ_MODULE_MUTATOR_H
#define FUZZ_MODULE_MUTATOR_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

/* Whether a and b are the same module up to the order of their sections
 * (which the reader takes in any order but the writer's): the same version,
 * and sections of the same kinds, reserved words and bytes, entries' modules
 * compared alike. */
bool module_mutator_same(const uint8_t *a, size_t na, const uint8_t *b, size_t nb);

#endif
