/* Libraries loaded only on the path that needs them (sd-bus for a scope,
 * libmicrohttpd for `nsbox serve`, libcurl for `nsbox run --server`): linked
 * in, each would be loaded, with its own dependencies, by every launcher
 * start. Typed through the library's own header: a slot is declared as
 * `__typeof__ (function) *field`. */
#ifndef NSBOX_DL_H
#define NSBOX_DL_H

#include <stddef.h>

#include "util.h"

struct nsbox_dl_symbol
{
  const char *name;
  void **slot;
};

/* dlopen(soname) (kept loaded for the life of the process) and every
 * symbol into its slot. On failure writes why into why[size] and returns
 * -ENOENT (no library) or -ENOSYS (a symbol missing). */
int nsbox_dl_load (const char *soname, const struct nsbox_dl_symbol *symbols, size_t n, char *why,
                   size_t size) NSBOX_INTERNAL;

#endif
