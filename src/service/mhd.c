/* libmicrohttpd's entry points, looked up when the server starts. */
#include "mhd.h"

#include "dl.h"

struct nsbox_mhd_api nsbox_mhd;

#define MHD_SYMBOL(field)                                                                          \
  {                                                                                                \
    "MHD_" #field, (void **)&nsbox_mhd.field                                                       \
  }
static const struct nsbox_dl_symbol mhd_symbols[] = {
  MHD_SYMBOL (start_daemon),
  MHD_SYMBOL (stop_daemon),
  MHD_SYMBOL (create_response_from_buffer),
  MHD_SYMBOL (create_response_from_callback),
  MHD_SYMBOL (add_response_header),
  MHD_SYMBOL (queue_response),
  MHD_SYMBOL (destroy_response),
  MHD_SYMBOL (lookup_connection_value),
  MHD_SYMBOL (get_connection_info),
  MHD_SYMBOL (get_connection_values),
  MHD_SYMBOL (add_connection),
};

int
nsbox_mhd_load (char *why, size_t size)
{
  return nsbox_dl_load ("libmicrohttpd.so.12", mhd_symbols, ARRAY_SIZE (mhd_symbols), why, size);
}
