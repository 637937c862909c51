/* sema.h - semantic analysis: names, imports, shapes, dtypes, precision rules.
 *
 * Sema elaborates the AST into the graph IR directly: function calls are
 * instantiated at each call site (so each is checked with the shapes it is
 * actually used at), repeat loops are unrolled with per-iteration parameters,
 * and every op goes through the op table's type rules. */
#ifndef NC_SEMA_H
#define NC_SEMA_H

#include "ast.h"
#include "diag.h"
#include "driver.h"
#include "ir.h"

/* Elaborate `model_name` (NULL: the first model of the main file) into a new
 * graph. Returns NULL if errors were reported. */
ir_graph *sema_model(src_table *sources, ast_file *main_file, const char *model_name, const driver_opts *o,
                     diag_ctx *d);

/* Check every model (and its training section) of the file. Returns the
 * number of models checked. */
int sema_check_all(src_table *sources, ast_file *main_file, const driver_opts *o, diag_ctx *d);

#endif
