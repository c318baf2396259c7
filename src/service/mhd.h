/* libmicrohttpd, loaded when `nsbox serve` starts (dl.h), so that
 * `nsbox run` never pays for it. */
#ifndef NSBOX_MHD_H
#define NSBOX_MHD_H

#include <stddef.h>

#include <microhttpd.h>

#include "util.h"

/* libmicrohttpd, loaded by nsbox_serve (dl.h). */
struct nsbox_mhd_api
{
  __typeof__ (MHD_start_daemon) *start_daemon;
  __typeof__ (MHD_stop_daemon) *stop_daemon;
  __typeof__ (MHD_create_response_from_buffer) *create_response_from_buffer;
  __typeof__ (MHD_create_response_from_callback) *create_response_from_callback;
  __typeof__ (MHD_add_response_header) *add_response_header;
  __typeof__ (MHD_queue_response) *queue_response;
  __typeof__ (MHD_destroy_response) *destroy_response;
  __typeof__ (MHD_lookup_connection_value) *lookup_connection_value;
  __typeof__ (MHD_get_connection_info) *get_connection_info;
  __typeof__ (MHD_get_connection_values) *get_connection_values;
  __typeof__ (MHD_add_connection) *add_connection;
};
extern struct nsbox_mhd_api nsbox_mhd NSBOX_INTERNAL;

/* Loads libmicrohttpd.so.12 into nsbox_mhd: 0, or -1 with why. */
int nsbox_mhd_load (char *why, size_t size) NSBOX_INTERNAL;

#endif
