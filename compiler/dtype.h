/* dtype.h - element types of tensors and the rounding rules that give f16 and
 * bf16 their meaning on every backend (the CPU executor emulates them exactly). */
#ifndef NC_DTYPE_H
#define NC_DTYPE_H

#include "base.h"

/*       enum     name    bytes float */
#define NC_DTYPES(X)              \
    X(NC_F32,  "f32",  4, true)   \
    X(NC_F16,  "f16",  2, true)   \
    X(NC_BF16, "bf16", 2, true)   \
    X(NC_I32,  "i32",  4, false)  \
    X(NC_U8,   "u8",   1, false)  \
    X(NC_BOOL, "bool", 1, false)

typedef enum nc_dtype {
#define X(e, n, b, f) e,
    NC_DTYPES(X)
#undef X
    NC_DTYPE_COUNT
} nc_dtype;

const char *dtype_name(nc_dtype t);
size_t dtype_size(nc_dtype t);
bool dtype_is_float(nc_dtype t);
/* Lookup by name ("bf16"); returns false if unknown. */
bool dtype_from_name(const char *s, nc_dtype *out);

/* IEEE round-to-nearest-even from f32 to the narrow formats, returned as the
 * f32 value they represent (NaN stays NaN, overflow goes to +-inf, f16
 * subnormals are kept). Raw 16-bit encodings for the module and safetensors. */
float nc_round_bf16(float x);
float nc_round_f16(float x);
uint16_t nc_f32_to_bf16_bits(float x);
uint16_t nc_f32_to_f16_bits(float x);
float nc_bf16_bits_to_f32(uint16_t h);
float nc_f16_bits_to_f32(uint16_t h);
/* float64 to f16 rounded once, as NumPy's astype(np.float16): through f32 by
 * itself, a value just past an f16 tie could land on the tie and round the
 * wrong way. */
uint16_t nc_f64_to_f16_bits(double x);
uint16_t nc_f64_to_bf16_bits(double x);
/* Round an f32 value to what dtype t can store (identity for f32). */
float nc_round_to(nc_dtype t, float x);
/* The largest finite value of float dtype t (f16: 65504). */
double nc_float_max(nc_dtype t);

#endif
