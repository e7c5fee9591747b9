/*
 * The environment a typed command starts with: the variables the user's
 * [env] selects, sent with Begin (shim_env.c).
 */
#ifndef PROV_SHIM_ENV_H
#define PROV_SHIM_ENV_H

#include "shim_util.h"

/* Takes the selecting patterns from the preparer's answer: its last field,
 * ` env=PAT,PAT,…` (a name, or a prefix ending in `*`). An answer without
 * one (an older preparer) leaves the environment out of Begin. */
void shim_env_patterns(const char *answer);

/* Appends `,"env":"<hex>"` to a Begin message: the selected variables as
 * NAME=VALUE entries each ending in a NUL; nothing when no patterns are
 * known. -1 when out of memory. */
int shim_env_append(struct buf *msg);

#endif
