/* `nsbox run --server`: one run sent to `nsbox serve` over HTTP with libcurl
 * (loaded only on this path, dl.h). */
#ifndef NSBOX_CLIENT_H
#define NSBOX_CLIENT_H

#include <stddef.h>

#include "util.h"

/* POSTs `body` (a JSON object) to SERVER/v1/runs, where SERVER is
 * unix:PATH or http://HOST:PORT; `token` (or NULL) goes in an
 * Authorization: Bearer header, `session` (or NULL; one nsbox_session_valid
 * takes) in X-Nsbox-Session. With on_line, asks for a stream of JSON lines
 * (Accept: application/x-ndjson) and calls it with each whole line (without
 * its newline) as it arrives; the answer still holds every line. On an
 * answer returns 0 with its HTTP status and body (caller frees); when no
 * answer came, -1 with the reason in why[size]. */
int nsbox_client_stream_run (const char *server, const char *token, const char *session,
                             const char *body, size_t body_len,
                             void (*on_line) (void *data, const char *line, size_t len), void *data,
                             long *status, char **answer, size_t *answer_len, char *why,
                             size_t size) NSBOX_INTERNAL;

#endif
