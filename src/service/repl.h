/* nsbox repl: a live sandbox at a terminal (or fed by a pipe), each block
 * of code a run. */
#ifndef NSBOX_REPL_H
#define NSBOX_REPL_H

#include <stdbool.h>

#include "config.h"
#include "util.h"

/* Reads blocks from `in_fd` (a block ends at an empty line or at EOF),
 * runs each in one live sandbox built from `config` (which it frees), and
 * prints each result: with `json` one JSON object per line on stdout, else
 * the program's stdout and stderr, then the value of the last expression
 * on stdout as a Python prompt shows it. A prompt goes to stderr when
 * in_fd is a terminal. Returns the process's exit status: 0, or 125 when
 * the sandbox could not be opened or a run could not run. */
int nsbox_repl (nsbox_config *config, int in_fd, bool json) NSBOX_INTERNAL;

#endif
