/* Real servers on 127.0.0.1 for the registry tests: docker-registry, the
 * token endpoint, the fault proxy and the blob server (Python scripts in
 * this directory). Every server is started on a free port with a bounded
 * wait for it to accept, dies with the test process (PR_SET_PDEATHSIG) and
 * is stopped by servers_stop_all (the suites' .fini). */
#ifndef NSBOX_TEST_SERVERS_H
#define NSBOX_TEST_SERVERS_H

#include <stdbool.h>
#include <stddef.h>
#include <stdint.h>
#include <sys/types.h>

struct server
{
  pid_t pid;
  uint16_t port;
  char log[4096]; /* the request log (JSON lines) of the Python servers */
};

/* A fresh 0700 directory for this test, removed by servers_stop_all. */
const char *test_dir (void);
/* A path inside test_dir (static buffer rotation: valid for a few calls). */
const char *test_path (const char *name);

/* tests/image/NAME, found from the working directory, $NSBOX_SOURCE_DIR
 * or the test binary's location. */
const char *image_test_script (const char *name);

uint16_t free_port (void);
/* "127.0.0.1:PORT/NAME", a reference to a loopback registry (free it). */
char *ref_at (uint16_t port, const char *name);

/* docker-registry serving `storage` on a free port; extra_yaml (may be
 * NULL) is appended to its configuration (auth:, middleware: sections). */
void registry_start (struct server *s, const char *storage, const char *extra_yaml);
/* token_server.py with extra NULL-terminated arguments. */
void token_server_start (struct server *s, const char *const *extra_args);
/* fault_proxy.py in front of 127.0.0.1:upstream_port. */
void proxy_start (struct server *s, uint16_t upstream_port, const char *mode, int count, int rate);
/* The same with extra NULL-terminated arguments ("--realm", URL). */
void proxy_start_with (struct server *s, uint16_t upstream_port, const char *mode, int count,
                       int rate, const char *const *extra_args);
/* blob_server.py serving dir. */
void blob_server_start (struct server *s, const char *dir);
void server_stop (struct server *s);
void servers_stop_all (void);

/* The registry storage with the test images (build-fixtures.sh), copied
 * into test_dir so each test can change it. */
const char *fixture_storage_copy (void);

/* Lines of a JSON-lines request log whose "method" is `method` (NULL: any)
 * and whose "path" contains `path_part` (NULL: any). */
int log_count (const char *log, const char *method, const char *path_part);
/* Whether any logged request carried an Authorization header. */
bool log_any_authorization (const char *log);

/* Runs argv (NULL-terminated) and returns its exit status; output goes to
 * the test's stderr. */
int run_command (const char *const *argv);

/* A file with content in test_dir. */
const char *write_test_file (const char *name, const char *content);

#endif

/* ---- pulling into a per-test store ---- */
struct nsbox_store;
struct nsbox_error;

/* A store in test_dir (opened once per test, closed by servers_stop_all). */
struct nsbox_store *test_store (void);
/* nsbox_image_pull with an optional platform: NULL on success (with the
 * manifest digest in *digest when non-NULL), else the error (free it). */
struct nsbox_error *test_pull (struct nsbox_store *store, const char *ref, const char *platform,
                               char **digest);
/* Every file under blobs/sha256 hashes to its name: nothing unverified got
 * in. Returns the number of blobs. */
int assert_blobs_verified (struct nsbox_store *store);
/* The digest of the first layer of a stored manifest (a static buffer). */
const char *first_layer_digest (struct nsbox_store *store, const char *manifest_digest);
