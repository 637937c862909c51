/* cpu_kernels.h - the CPU reference kernels, one per op of ops.def (internal
 * to the CPU executor; the semantics are documented in cpu_exec.h and ops.def). */
#ifndef NRT_CPU_KERNELS_H
#define NRT_CPU_KERNELS_H

#include "cpu_exec.h"

typedef void cpu_kernel_fn(const cpu_op_ctx *c);

/* Columns after cpu_kernel are taken as "...", so new columns do not touch this file. */
#define X(e, name, nargs, cat, dt, flags, shape, cpu, ...) cpu_kernel_fn cpu;
#include "ops.def"
#undef X

/* Indexed by nc_op; every entry is set (the table names a kernel for each op). */
extern cpu_kernel_fn *const cpu_kernels[OP_COUNT];

/* Report that a kernel cannot compute its result; the first report wins. */
#if defined(__GNUC__)
__attribute__((format(printf, 2, 3)))
#endif
void cpu_fail(const cpu_op_ctx *c, const char *fmt, ...);

/* Bytes of storage per element: f32 for floats, i32 for the rest. */
#define CPU_ELEM_BYTES 4

#endif
