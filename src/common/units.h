/* Sizes, durations, CPU counts and counts: parsing and formatting for the
 * configuration's values (units.c). */
#ifndef NSBOX_UNITS_H
#define NSBOX_UNITS_H

#include <stdbool.h>
#include <stdint.h>

#include "util.h"

bool nsbox_is_digit (char c) NSBOX_INTERNAL;
/* Decimal digits at *text (advanced past them), overflow checked. */
int nsbox_parse_digits (const char **text, uint64_t *value) NSBOX_INTERNAL;
/* Parses "64m", "1g", "512k", "100" (bytes; k/m/g/t are powers of 1024,
 * optional trailing "b"/"i", case-insensitive). Zero and overflow fail. */
int nsbox_parse_size (const char *text, uint64_t *bytes) NSBOX_INTERNAL;
/* The same, zero allowed. */
int nsbox_parse_size_or_zero (const char *text, uint64_t *bytes) NSBOX_INTERNAL;
/* Parses "500ms", "5s", "1m", "1h", "2.5s", bare numbers are seconds. */
int nsbox_parse_duration (const char *text, uint64_t *ms) NSBOX_INTERNAL;
/* Parses "0.5", "2" into thousandths of a CPU. */
int nsbox_parse_cpus (const char *text, uint64_t *milli) NSBOX_INTERNAL;
/* A whole number. */
int nsbox_parse_count (const char *text, uint64_t *value) NSBOX_INTERNAL;

/* As the configuration shows them back ("256m", "5s", "0.5"): allocated,
 * NULL when out of memory. */
char *nsbox_format_size (uint64_t bytes) NSBOX_INTERNAL;
char *nsbox_format_duration (uint64_t ms) NSBOX_INTERNAL;
char *nsbox_format_cpus (uint64_t milli) NSBOX_INTERNAL;

#endif
