/* Shared by the libFuzzer targets in this directory (built and run by
 * `make fuzz`): a check that stops the run with a message, as a broken
 * invariant is a finding like a crash. */
#ifndef NSBOX_FUZZ_H
#define NSBOX_FUZZ_H

#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>

#define FUZZ_CHECK(cond, ...)                                                                      \
  do                                                                                               \
    {                                                                                              \
      if (!(cond))                                                                                 \
        {                                                                                          \
          fprintf (stderr, "%s:%d: check failed: %s: ", __FILE__, __LINE__, #cond);                \
          fprintf (stderr, __VA_ARGS__);                                                           \
          fputc ('\n', stderr);                                                                    \
          abort ();                                                                                \
        }                                                                                          \
    }                                                                                              \
  while (0)

int LLVMFuzzerTestOneInput (const uint8_t *data, size_t size);

#endif
