/* param_init.c - initial values of parameters.
 *
 * Draws come from the counter-based RNG keyed by (seed, hash of the
 * parameter's name, element index), so a parameter's values do not depend on
 * the order parameters are declared in or on how many others exist: adding a
 * layer to a model leaves the other layers' initial weights unchanged. */
#include "tensor_io.h"

#include <inttypes.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static uint64_t name_stream(const char *name) { return nc_fnv1a(NC_FNV1A_BASIS, name, strlen(name)); }

/* Open interval (0, 1): safe under log(). */
static double uniform01(uint64_t seed, uint64_t stream, uint64_t index)
{
    return ((double)nc_rng_uniform(seed, stream, index) + 0.5 / 16777216.0);
}

/* Box-Muller with a fresh pair of uniforms per element: one draw per index
 * keeps every element a pure function of its position. */
static double standard_normal(uint64_t seed, uint64_t stream, uint64_t i)
{
    double u1 = uniform01(seed, stream, 2 * i), u2 = uniform01(seed, stream, 2 * i + 1);
    return sqrt(-2.0 * log(u1)) * cos(6.283185307179586 * u2);
}

static void fans(const cpu_tensor *t, double *fan_in, double *fan_out)
{
    double in = 1;
    for (int d = 0; d + 1 < t->rank; d++) in *= (double)t->shape[d];
    *fan_out = t->rank ? (double)t->shape[t->rank - 1] : 1;
    *fan_in = t->rank > 1 ? in : *fan_out;
}

int param_init(const ir_graph *g, uint32_t param_index, uint64_t seed, cpu_tensor *t, char *err, size_t errcap)
{
    const ir_param *p = &g->params[param_index];
    int64_t shape[NC_MAX_RANK];
    for (int d = 0; d < p->decl.rank; d++) {
        if (!dim_is_const(&g->dims[p->decl.shape[d]], &shape[d]) || shape[d] < 0) {
            char *dim = ir_dim_str(g, p->decl.shape[d]);
            nc_errf(err, errcap, "parameter '%s': dimension %d (%s) is not a constant", p->decl.name, d, dim);
            free(dim);
            return -1;
        }
    }
    if (!cpu_tensor_alloc(t, p->decl.dtype, p->decl.rank, shape, 0)) {
        nc_errf(err, errcap, "parameter '%s': too large to allocate", p->decl.name);
        return -1;
    }
    const uint64_t stream = name_stream(p->decl.name);
    double fan_in, fan_out;
    fans(t, &fan_in, &fan_out);
    const double gain = p->init_a;
    for (int64_t i = 0; i < t->numel; i++) {
        double v;
        switch (p->init) {
        case IR_INIT_ZEROS: v = 0; break;
        case IR_INIT_ONES: v = 1; break;
        case IR_INIT_NORMAL: v = p->init_b + p->init_a * standard_normal(seed, stream, (uint64_t)i); break;
        case IR_INIT_UNIFORM:
            v = p->init_a + (p->init_b - p->init_a) * nc_rng_uniform(seed, stream, (uint64_t)i);
            break;
        case IR_INIT_XAVIER_UNIFORM: {
            double b = gain * sqrt(6.0 / (fan_in + fan_out));
            v = -b + 2 * b * nc_rng_uniform(seed, stream, (uint64_t)i);
            break;
        }
        case IR_INIT_XAVIER_NORMAL:
            v = gain * sqrt(2.0 / (fan_in + fan_out)) * standard_normal(seed, stream, (uint64_t)i);
            break;
        case IR_INIT_KAIMING_UNIFORM: {
            double b = gain * sqrt(3.0 / fan_in);
            v = -b + 2 * b * nc_rng_uniform(seed, stream, (uint64_t)i);
            break;
        }
        case IR_INIT_KAIMING_NORMAL:
            v = gain / sqrt(fan_in) * standard_normal(seed, stream, (uint64_t)i);
            break;
        default: NC_BUG("initializer %d", (int)p->init);
        }
        cpu_set(t, i, v);
    }
    return 0;
}
