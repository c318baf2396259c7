/* `nsbox mcp`: a Model Context Protocol server on stdin/stdout
 * (newline-delimited JSON-RPC 2.0), offering one tool, run_python, served
 * by a warm pool. mcp.c owns the process (the protocol, the threads, the
 * shutdown); mcp_files.h moves a call's files in and out of its sandbox. */
#ifndef NSBOX_MCP_H
#define NSBOX_MCP_H

#include <jansson.h>
#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>

#include "nsbox.h"
#include "util.h"

/* What `nsbox mcp` was asked for (cli.c fills it). */
struct nsbox_mcp_options
{
  const char *version; /* serverInfo.version */
  uint64_t max_concurrent;
  uint64_t max_queue;
  nsbox_pool_options *pool_options;
};

/* Serves until stdin closes (or SIGTERM, SIGINT, SIGHUP): 0, or 125 when
 * the server could not start (the reason printed on stderr). Takes the
 * config. */
int nsbox_mcp (nsbox_config *config, const struct nsbox_mcp_options *options);

#endif
