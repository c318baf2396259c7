/* The names of files in and out of a sandbox (file_names.c), and the
 * limits on inputs the configuration checks. */
#ifndef NSBOX_FILE_NAMES_H
#define NSBOX_FILE_NAMES_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "util.h"

/* Inputs: at most this many files, this many bytes in all. */
#define NSBOX_INPUTS_MAX 64
#define NSBOX_INPUTS_BYTES_MAX (UINT64_C (64) << 20)

/* Whether `name` may name a file in /mnt/in or an output directory: 1 to
 * 255 bytes of valid UTF-8, no '/', ':', control character, not "." or
 * "..". On false, *why says what is wrong. */
bool nsbox_file_name_valid (const char *name, size_t len, const char **why) NSBOX_INTERNAL;

/* "PATH[:NAME]" split: NAME is after the last ':' (the basename of PATH
 * when there is none). On success *path and *name are allocated. */
int nsbox_input_spec_parse (const char *spec, char **path, char **name,
                            struct nsbox_error **err) NSBOX_INTERNAL;

#endif
