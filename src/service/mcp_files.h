/* `nsbox mcp`'s files: a call's files moved in and out of its sandbox
 * through private directories. */
#ifndef NSBOX_MCP_FILES_H
#define NSBOX_MCP_FILES_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>

#include "nsbox.h"
#include "util.h"

/* Caps on what one call moves. */
#define NSBOX_MCP_MAX_FILES 64
#define NSBOX_MCP_MAX_INPUT_BYTES (16u << 20) /* decoded, all files of a call */
#define NSBOX_MCP_MAX_OUTPUT_BYTES (8u << 20) /* returned, all files of a call */

/* A call's private directories (0700, mkdtemp), NULL when unused. */
struct nsbox_mcp_files
{
  char *in_path, *out_path;
};

/* Decodes `files` (an array of {"name", "content": base64}, may be NULL)
 * into a private input directory and adds each as run option "inputs"
 * (/mnt/in/NAME in the sandbox); with want_output, makes a private output
 * directory and sets "output-dir". 0; -1 with a short reason for the
 * model in why (the argument's fault: a bad name, bad base64, too large);
 * -2 with the reason in why for the server's log only (the host failed).
 * What was made is removed by nsbox_mcp_files_cleanup in every case. */
int nsbox_mcp_files_prepare (json_t *files, bool want_output, nsbox_run_options *options,
                             struct nsbox_mcp_files *f, char *why, size_t size);

/* Appends the run's collected files to `content` (MCP content items):
 * images (PNG, JPEG, GIF, WebP by their magic bytes) as image items,
 * other files as embedded resources (nsbox://out/NAME, text when valid
 * UTF-8, else a blob), within NSBOX_MCP_MAX_OUTPUT_BYTES; a file past it
 * gets a line in *text (reallocated) instead. 0 or -errno. */
int nsbox_mcp_files_collect (const struct nsbox_mcp_files *f, const nsbox_result *result,
                             json_t *content, char **text);

/* Removes both directories (by fd, no symlink followed). */
void nsbox_mcp_files_cleanup (struct nsbox_mcp_files *f);

/* Standard base64 (RFC 4648, padded). encode: NUL-terminated, caller
 * frees, NULL on OOM. decode: -1 on a malformed text or when the decoded
 * size would pass max; *out is allocated (caller frees). */
char *nsbox_mcp_base64_encode (const void *data, size_t len);
int nsbox_mcp_base64_decode (const char *text, size_t text_len, size_t max, unsigned char **out,
                             size_t *out_len);

#endif
