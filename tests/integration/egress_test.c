/* network: proxy, by effect. Real servers on this machine's loopback
 * (tests/fixtures/egress/origin.py, plain and TLS with a test CA) stand
 * for the outside; the tests name them *.nsbox.test and pin those names to
 * 127.0.0.1 with egress-resolve. What reached a server is read from the
 * server's own log, never from nsbox's report; what the program saw is
 * what it printed. No outside address is ever contacted: every name the
 * proxy would resolve is refused before or pinned. Under runsc the mode is
 * refused with its reason, and nothing reaches a server. */
#include <arpa/inet.h>
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sched.h>
#include <sys/mount.h>
#include <netinet/in.h>
#include <sys/prctl.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include "harness.h"

#define FIXTURES "tests/fixtures/egress"

struct origin
{
  pid_t pid;
  unsigned port;
  char dir[64];
  char log[128];
};

/* A directory every launcher (root or the test user) can read. */
static void
make_dir (char *dir, size_t size)
{
  snprintf (dir, size, "/tmp/nsbox-egress.XXXXXX");
  cr_assert_not_null (mkdtemp (dir), "mkdtemp: %s", strerror (errno));
  cr_assert (chmod (dir, 0755) == 0);
}

/* The test CA and a certificate for tls.nsbox.test and other.nsbox.test. */
static void
make_certs (const char *dir)
{
  char cmd[512];
  snprintf (cmd, sizeof cmd, FIXTURES "/ca.sh %s tls.nsbox.test other.nsbox.test >/dev/null 2>&1",
            dir);
  cr_assert (system (cmd) == 0, "%s failed", cmd);
  snprintf (cmd, sizeof cmd, "chmod a+r %s/ca.pem", dir);
  cr_assert (system (cmd) == 0);
}

static pid_t
spawn_python (const char *const *argv)
{
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  if (pid == 0)
    {
      /* A failed assertion ends the test without the stop. */
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      execvp ("python3", (char **)argv);
      _exit (127);
    }
  return pid;
}

static unsigned
wait_port (const char *port_file)
{
  for (int i = 0; i < 200; i++)
    {
      char buf[32];
      size_t len = 0;
      if (read_whole (port_file, buf, sizeof buf, &len) && len > 0 && strtoul (buf, NULL, 10))
        return (unsigned)strtoul (buf, NULL, 10);
      sleep_seconds (0.05);
    }
  return 0;
}

static void
origin_start_with (struct origin *o, bool tls, bool index)
{
  make_dir (o->dir, sizeof o->dir);
  char port_file[128], cert[128], key[128];
  snprintf (port_file, sizeof port_file, "%s/port", o->dir);
  snprintf (o->log, sizeof o->log, "%s/log", o->dir);
  snprintf (cert, sizeof cert, "%s/server.pem", o->dir);
  snprintf (key, sizeof key, "%s/server.key", o->dir);
  if (tls)
    make_certs (o->dir);
  char index_dir[128];
  snprintf (index_dir, sizeof index_dir, "%s/index", o->dir);
  if (index)
    {
      char cmd[256];
      snprintf (cmd, sizeof cmd, "python3 " FIXTURES "/index.py %s >/dev/null", index_dir);
      cr_assert (system (cmd) == 0, "%s failed", cmd);
    }
  const char *argv[12]
      = { "python3", FIXTURES "/origin.py", "--port-file", port_file, "--log", o->log };
  size_t n = 6;
  if (tls)
    {
      argv[n++] = "--tls";
      argv[n++] = cert;
      argv[n++] = key;
    }
  if (index)
    {
      argv[n++] = "--index";
      argv[n++] = index_dir;
    }
  o->pid = spawn_python (argv);
  o->port = wait_port (port_file);
  cr_assert (o->port, "origin.py did not start");
}

static void
origin_start (struct origin *o, bool tls)
{
  origin_start_with (o, tls, false);
}

static void
origin_stop (struct origin *o)
{
  if (o->pid > 0)
    {
      kill (o->pid, SIGTERM);
      waitpid (o->pid, NULL, 0);
    }
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf %s", o->dir);
  if (system (cmd) != 0)
    cr_log_warn ("could not remove %s", o->dir);
}

/* Lines of the server's log that contain `needle`. */
static int
origin_count (const struct origin *o, const char *needle)
{
  size_t len = 0;
  char *text = read_file (o->log, &len);
  int n = 0;
  for (const char *p = text; p && (p = strstr (p, needle)); p += strlen (needle))
    n++;
  free (text);
  return n;
}

/* A run with network: proxy and these extra arguments (NULL-terminated),
 * the origin's port allowed. Returns false under runsc, after checking
 * that the mode was refused there with its reason. */
static bool
egress_run (enum run_mode mode, const struct origin *o, const char *code, const char *const *extra,
            struct run_out *out)
{
  char port[16];
  snprintf (port, sizeof port, "%u", o ? o->port : 80);
  const char *args[64] = { "--network", "proxy", "--egress-ports", port, "--timeout", "20s" };
  char pins[8][96];
  size_t n = 6, n_pins = 0;
  for (size_t i = 0; extra && extra[i]; i++)
    {
      args[n++] = extra[i];
      /* Every *.nsbox.test name allowed is pinned to the origin. */
      const char *dot = strstr (extra[i], ".nsbox.test");
      if (i > 0 && strcmp (extra[i - 1], "--egress-allow") == 0 && dot && !dot[11] && n_pins < 8)
        {
          snprintf (pins[n_pins], sizeof pins[n_pins], "%s=127.0.0.1", extra[i]);
          args[n++] = "--egress-resolve";
          args[n++] = pins[n_pins++];
        }
    }
  args[n] = NULL;
  run_mode (mode, code, args, out);
  if (!harness_is_runsc ())
    return true;
  RUN_ASSERT (out, out->exit_status == 125, "runsc: expected network: proxy to be refused");
  RUN_ASSERT (out, strstr (out->err, "not available with runtime runsc") != NULL,
              "runsc: the refusal does not say why");
  if (o)
    RUN_ASSERT (out, origin_count (o, "\"connection\"") == 0, "runsc: a server was reached");
  return false;
}

/* Python: ask(data) sends raw bytes to the proxy and returns its answer as
 * "STATUS LINE | BODY" (the status line without its parenthesised reason). */
#define ASK_PY                                                                                     \
  "import socket\n"                                                                                \
  "def ask(data):\n"                                                                               \
  "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"                            \
  "    s.sendall(data)\n"                                                                          \
  "    r = b''\n"                                                                                  \
  "    while True:\n"                                                                              \
  "        b = s.recv(4096)\n"                                                                     \
  "        if not b: break\n"                                                                      \
  "        r += b\n"                                                                               \
  "    s.close()\n"                                                                                \
  "    r = r.decode(errors='replace')\n"                                                           \
  "    return r.split(' (')[0] + ' | ' + r.split('\\r\\n\\r\\n', 1)[-1].strip()\n"

static json_t *
egress_log (struct run_out *out)
{
  json_t *e = json_object_get (run_json (out), "egress");
  RUN_ASSERT (out, json_is_object (e), "the result has no egress report");
  return json_object_get (e, "log");
}

MODE_TEST (egress, an_allowed_name_is_reached_and_another_is_refused, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  char code[1024];
  snprintf (code, sizeof code,
            "import urllib.request, urllib.error\n"
            "print(urllib.request.urlopen('http://web.nsbox.test:%u/hello', timeout=10)"
            ".read().decode().strip())\n"
            "try:\n"
            "    urllib.request.urlopen('http://other.nsbox.test:%u/hello', timeout=10)\n"
            "    print('other reached')\n"
            "except urllib.error.HTTPError as e:\n"
            "    print('other', e.code, e.read().decode().strip())\n",
            o.port, o.port);
  const char *const extra[] = { "--egress-allow", "web.nsbox.test", NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      char want[128];
      snprintf (want, sizeof want, "hello from web.nsbox.test:%u /hello\n", o.port);
      RUN_ASSERT (&out, strncmp (s, want, strlen (want)) == 0, "the allowed name was not reached");
      RUN_ASSERT (&out,
                  strstr (s, "other 403 nsbox egress proxy: other.nsbox.test is not on the egress "
                             "allowlist")
                      != NULL,
                  "the other name was not refused with its reason");
      /* The server saw one connection and one request, for the allowed name. */
      RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 1, "server connections: %d",
                  origin_count (&o, "\"connection\""));
      RUN_ASSERT (&out, origin_count (&o, "\"host\": \"other.nsbox.test") == 0,
                  "the refused name reached the server");
      json_t *log = egress_log (&out);
      RUN_ASSERT (&out, json_array_size (log) == 2, "expected two records");
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, ip_addresses_are_refused_in_every_disguise, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  char code[2048];
  snprintf (code, sizeof code,
            "import socket\n"
            "hosts = ['127.0.0.1', '127.1', '2130706433', '0x7f.1', '0x7f000001', '0177.0.0.1',\n"
            "         '[::ffff:127.0.0.1]', '[::1]', '127.0.0.1.', 'web.nsbox.test.0x7f']\n" ASK_PY
            "for h in hosts:\n"
            "    print('GET', h, ask(('GET http://%%s:%u/hello HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'\n"
            "                         %% h).encode()))\n"
            "    print('CONNECT', h, ask(('CONNECT %%s:%u HTTP/1.1\\r\\nHost: x\\r\\n\\r\\n'\n"
            "                             %% h).encode()))\n",
            o.port, o.port);
  const char *const extra[] = { "--egress-allow", "web.nsbox.test", NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      int refused = 0, lines = 0;
      for (const char *line = s; *line; line = strchr (line, '\n') ? strchr (line, '\n') + 1 : "")
        {
          lines++;
          if (strstr (line,
                      "HTTP/1.1 403 Forbidden | nsbox egress proxy: the host is an IP address")
              && strstr (line, "\n") > strstr (line, "IP address"))
            refused++;
        }
      RUN_ASSERT (&out, lines == 20 && refused == 20, "%d of %d lines refused as an IP address",
                  refused, lines);
      RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 0, "an address reached the server");
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, a_listed_name_that_resolves_to_loopback_needs_a_pin, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  char code[1024];
  /* localhost is on the list but not pinned: the host's resolver says
   * 127.0.0.1, which the proxy refuses. */
  snprintf (code, sizeof code,
            "import urllib.request, urllib.error\n"
            "try:\n"
            "    urllib.request.urlopen('http://localhost:%u/hello', timeout=10)\n"
            "    print('reached')\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code, e.read().decode().strip())\n",
            o.port);
  const char *const extra[] = { "--egress-allow", "localhost", NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      RUN_ASSERT (&out,
                  strstr (s, "403 nsbox egress proxy: localhost resolves to") != NULL
                      && strstr (s, "a loopback address") != NULL,
                  "expected a loopback refusal");
      RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 0, "the server was reached");
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, tls_goes_through_connect_only_with_the_connect_host_as_sni, .timeout = 60)
{
  struct origin o;
  origin_start (&o, true);
  char input[160];
  snprintf (input, sizeof input, "%s/ca.pem:ca.pem", o.dir);
  char code[2048];
  snprintf (
      code, sizeof code,
      "import socket, ssl, urllib.request\n"
      "ctx = ssl.create_default_context(cafile='/mnt/in/ca.pem')\n"
      "print(urllib.request.urlopen('https://tls.nsbox.test:%u/hello', context=ctx,\n"
      "      timeout=10).read().decode().strip())\n"
      "def tunnel(sni):\n"
      "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
      "    s.sendall(b'CONNECT tls.nsbox.test:%u HTTP/1.1\\r\\nHost: tls.nsbox.test\\r\\n\\r\\n')\n"
      "    head = s.recv(4096)\n"
      "    assert head.startswith(b'HTTP/1.1 200'), head\n"
      "    c = ssl.create_default_context(cafile='/mnt/in/ca.pem')\n"
      "    if sni is None:\n"
      "        c.check_hostname = False\n"
      "    try:\n"
      "        t = c.wrap_socket(s, server_hostname=sni)\n"
      "        t.sendall(b'GET /hello HTTP/1.0\\r\\nHost: x\\r\\n\\r\\n')\n"
      "        print(sni, 'tunnel', t.recv(4096).decode(errors='replace').split()[1])\n"
      "    except (OSError, ssl.SSLError) as e:\n"
      "        print(sni, 'failed', type(e).__name__)\n"
      "tunnel('other.nsbox.test')\n"
      "tunnel(None)\n",
      o.port, o.port);
  const char *const extra[] = { "--egress-allow",
                                "tls.nsbox.test",
                                "--egress-allow",
                                "other.nsbox.test",
                                "--inputs",
                                input,
                                NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      char want[128];
      snprintf (want, sizeof want, "hello from tls.nsbox.test:%u /hello\n", o.port);
      RUN_ASSERT (&out, strncmp (s, want, strlen (want)) == 0, "https through CONNECT failed");
      RUN_ASSERT (&out, strstr (s, "other.nsbox.test failed") != NULL,
                  "a tunnel with another SNI worked");
      RUN_ASSERT (&out, strstr (s, "None failed") != NULL, "a tunnel without SNI worked");
      /* One request reached the server: the good one, with its SNI. */
      RUN_ASSERT (&out, origin_count (&o, "\"event\": \"request\"") == 1, "server requests: %d",
                  origin_count (&o, "\"event\": \"request\""));
      RUN_ASSERT (&out, origin_count (&o, "\"sni\": \"tls.nsbox.test\"") == 1,
                  "the request did not carry the CONNECT host as SNI");
      char *text = json_dumps (egress_log (&out), 0);
      RUN_ASSERT (&out,
                  text
                      && strstr (text, "the TLS server name 'other.nsbox.test' is not the CONNECT "
                                       "host 'tls.nsbox.test'")
                      && strstr (text, "no server name (SNI)"),
                  "the refusals are not in the report: %s", text);
      free (text);
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, other_ports_and_other_protocols_are_refused, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  char code[1536];
  snprintf (
      code, sizeof code,
      ASK_PY
      "print('port', ask(b'CONNECT web.nsbox.test:%u HTTP/1.1\\r\\n\\r\\n'))\n"
      "print('ssh', ask(b'SSH-2.0-OpenSSH_9.2\\r\\n'))\n"
      "print('tls', ask(bytes([22, 3, 1, 0, 5, 1, 0, 0, 1, 0])))\n"
      "print('origin-form', ask(b'GET /hello HTTP/1.1\\r\\nHost: web.nsbox.test\\r\\n\\r\\n'))\n",
      o.port);
  /* The origin's port is not among the allowed ones here. */
  const char *const extra[] = { "--egress-allow", "web.nsbox.test", "--egress-ports", "", NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      char want[128];
      snprintf (want, sizeof want,
                "port HTTP/1.1 403 Forbidden | nsbox egress proxy: port %u is "
                "not allowed (egress-ports)",
                o.port);
      RUN_ASSERT (&out, strstr (s, want) != NULL, "the port was not refused");
      RUN_ASSERT (&out,
                  strstr (s, "ssh HTTP/1.1 400 Bad Request | nsbox egress proxy: not an HTTP")
                      != NULL,
                  "SSH was not refused");
      RUN_ASSERT (&out,
                  strstr (s, "tls HTTP/1.1 400 Bad Request | nsbox egress proxy: not an HTTP")
                      != NULL,
                  "raw TLS was not refused");
      RUN_ASSERT (&out,
                  strstr (s, "origin-form HTTP/1.1 400 Bad Request | nsbox egress proxy: the proxy "
                             "needs an absolute http:// URL")
                      != NULL,
                  "an origin-form request was not refused");
      RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 0, "the server was reached");
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, nothing_but_the_proxy_is_reachable, .timeout = 60)
{
  uint16_t port;
  int listener = tcp_listener (&port);
  char code[1536];
  snprintf (code, sizeof code,
            "import socket\n"
            "for addr in [('127.0.0.1', %u), ('10.0.2.2', 80), ('8.8.8.8', 53)]:\n"
            "    s = socket.socket()\n"
            "    s.settimeout(2)\n"
            "    try:\n"
            "        s.connect(addr)\n"
            "        print('tcp reached', addr)\n"
            "    except OSError as e:\n"
            "        print('tcp failed', addr[0])\n"
            "u = socket.socket(socket.AF_INET, socket.SOCK_DGRAM)\n"
            "u.settimeout(2)\n"
            "try:\n"
            "    u.sendto(b'\\x12\\x34\\x01\\x00\\x00\\x01\\x00\\x00\\x00\\x00\\x00\\x00'\n"
            "             b'\\x07example\\x03com\\x00\\x00\\x01\\x00\\x01', ('8.8.8.8', 53))\n"
            "    print('udp answered', u.recv(512))\n"
            "except OSError as e:\n"
            "    print('udp failed')\n"
            "try:\n"
            "    print('resolved', socket.getaddrinfo('web.nsbox.test', 80))\n"
            "except OSError:\n"
            "    print('dns failed')\n",
            (unsigned)port);
  const char *const extra[] = { "--egress-allow", "web.nsbox.test", NULL };
  struct run_out out;
  if (egress_run (*mode, NULL, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      RUN_ASSERT (&out,
                  strstr (s, "tcp failed 127.0.0.1\ntcp failed 10.0.2.2\ntcp failed 8.8.8.8\n"
                             "udp failed\ndns failed\n")
                      == s,
                  "something besides the proxy was reachable");
    }
  bool connected = listener_was_connected (listener);
  close (listener);
  RUN_ASSERT (&out, !connected, "the host's listener saw a connection");
  run_out_free (&out);
}

MODE_TEST (egress, the_byte_limit_cuts_a_download, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  char code[1024];
  snprintf (
      code, sizeof code,
      "import urllib.request\n"
      "n = 0\n"
      "try:\n"
      "    r = urllib.request.urlopen('http://web.nsbox.test:%u/bytes/20000000', timeout=10)\n"
      "    while True:\n"
      "        b = r.read(65536)\n"
      "        if not b:\n"
      "            break\n"
      "        n += len(b)\n"
      "except Exception as e:\n"
      "    print('cut', type(e).__name__)\n"
      "print('read', n)\n",
      o.port);
  const char *const extra[]
      = { "--egress-allow", "web.nsbox.test", "--egress-bytes", "300k", NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      const char *read = strstr (s, "read ");
      RUN_ASSERT (&out, read != NULL, "no count");
      long n = strtol (read + 5, NULL, 10);
      RUN_ASSERT (&out, n < 300 * 1024, "the program read %ld bytes past a 300k limit", n);
      json_t *e = json_object_get (run_json (&out), "egress");
      RUN_ASSERT (&out,
                  json_is_string (json_object_get (e, "limit"))
                      && strcmp (json_string_value (json_object_get (e, "limit")), "egress-bytes")
                             == 0,
                  "the result does not name the byte limit");
    }
  run_out_free (&out);
  origin_stop (&o);
}

/* The reason the log gives for the first connection of `method`. */
static const char *
log_reason (struct run_out *out, const char *method)
{
  json_t *log = egress_log (out), *r;
  size_t i;
  json_array_foreach (log, i, r)
  {
    if (strcmp (json_string_value (json_object_get (r, "method")) ?: "", method) == 0)
      return json_string_value (json_object_get (r, "reason")) ?: "";
  }
  return "(none)";
}

/* The byte limit counts each way. A POST that spends the upload budget is
 * cut; a tunnel that only downloads goes on to its end. */
MODE_TEST (egress, a_spent_upload_budget_cuts_only_what_uploads, .timeout = 60)
{
  struct origin o, plain;
  origin_start (&o, true);
  origin_start (&plain, false);
  char input[160], port[16];
  snprintf (input, sizeof input, "%s/ca.pem:ca.pem", o.dir);
  snprintf (port, sizeof port, "%u", plain.port);
  char code[2048];
  snprintf (
      code, sizeof code,
      "import socket, ssl\n"
      "s = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "s.sendall(b'CONNECT tls.nsbox.test:%u HTTP/1.1\\r\\nHost: tls.nsbox.test\\r\\n\\r\\n')\n"
      "assert s.recv(4096).startswith(b'HTTP/1.1 200')\n"
      "ctx = ssl.create_default_context(cafile='/mnt/in/ca.pem')\n"
      "t = ctx.wrap_socket(s, server_hostname='tls.nsbox.test')\n"
      "t.sendall(b'GET /slow/40000 HTTP/1.0\\r\\nHost: tls.nsbox.test\\r\\n\\r\\n')\n"
      "data = t.recv(65536)\n"
      "b = socket.create_connection(('127.0.0.1', 3128), timeout=20)\n"
      "b.sendall(b'POST http://web.nsbox.test:%u/echo HTTP/1.1\\r\\n'\n"
      "          b'Host: web.nsbox.test:%u\\r\\nContent-Length: 200000\\r\\n\\r\\n')\n"
      "answer = b''\n"
      "try:\n"
      "    b.sendall(b'z' * 200000)\n"
      "    while True:\n"
      "        d = b.recv(65536)\n"
      "        if not d:\n"
      "            break\n"
      "        answer += d\n"
      "except OSError:\n"
      "    pass\n"
      "b.close()\n"
      "print('post answer', answer[:12])\n"
      "while True:\n"
      "    d = t.recv(65536)\n"
      "    if not d:\n"
      "        break\n"
      "    data += d\n"
      "print('tunnel body', len(data.split(b'\\r\\n\\r\\n', 1)[1]))\n",
      o.port, plain.port, plain.port);
  const char *const extra[] = { "--egress-allow",
                                "tls.nsbox.test",
                                "--egress-allow",
                                "web.nsbox.test",
                                "--egress-ports",
                                port,
                                "--inputs",
                                input,
                                "--egress-bytes",
                                "64k",
                                NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      /* The program's own view: no answer to the POST, the whole download. */
      RUN_ASSERT (&out,
                  strcmp (run_stdout (&out, NULL), "post answer b''\ntunnel body 40000\n") == 0,
                  "the POST was answered or the tunnel did not get its whole download");
      RUN_ASSERT (&out,
                  strcmp (log_reason (&out, "POST"), "cut at the byte limit (egress-bytes)") == 0,
                  "the POST was not cut at the byte limit: %s", log_reason (&out, "POST"));
      /* Not cut: its whole download arrived (above). Its record ends
       * "closed", or "the run ended" when the program's exit came before
       * the relay saw the program's side of the tunnel close (seen once
       * in CI). */
      const char *tunnel = log_reason (&out, "CONNECT");
      RUN_ASSERT (&out, strcmp (tunnel, "closed") == 0 || strcmp (tunnel, "the run ended") == 0,
                  "the tunnel ended otherwise: %s", tunnel);
    }
  run_out_free (&out);
  origin_stop (&plain);
  origin_stop (&o);
}

/* A program reading a download slowly, 16 KiB per 20 ms: the relay waits
 * for it, however the bytes arrive, and however long the kernel's socket
 * buffers take to drain. `path` is /drip/N (96-byte segments: a pipe fills
 * by pages before bytes; 96 keeps the pattern) or /bytes/N (64 KiB writes:
 * megabytes wait in the relay's socket while it has nothing to do). The
 * program's segments are 1460 bytes, as on a real network: with
 * loopback's 64 KiB segments a slow reader's window stays below one
 * segment and TCP waits on its persist timer, really idle. */
static void
slow_reader (enum run_mode mode, const char *path, const char *idle)
{
  struct origin o;
  origin_start (&o, false);
  char code[1536];
  snprintf (code, sizeof code,
            "import socket, time\n"
            "s = socket.socket()\n"
            "s.setsockopt(socket.IPPROTO_TCP, socket.TCP_MAXSEG, 1460)\n"
            "s.settimeout(20)\n"
            "s.connect(('127.0.0.1', 3128))\n"
            "s.sendall(b'GET http://web.nsbox.test:%u%s HTTP/1.1\\r\\n'\n"
            "          b'Host: web.nsbox.test:%u\\r\\n\\r\\n')\n"
            "data = bytearray()\n"
            "while True:\n"
            "    d = s.recv(16384)\n"
            "    if not d:\n"
            "        break\n"
            "    data += d\n"
            "    time.sleep(0.02)\n"
            "body = bytes(data.split(b'\\r\\n\\r\\n', 1)[1])\n"
            "print('body', len(body), body == b'0123456789abcdef' * (len(body) // 16))\n",
            o.port, path, o.port);
  const char *const extra[] = {
    "--egress-allow", "web.nsbox.test", "--timeout", "40s", "--egress-idle-timeout", idle, NULL
  };
  struct run_out out;
  if (egress_run (mode, &o, code, extra, &out))
    {
      long want = strtol (strrchr (path, '/') + 1, NULL, 10);
      char expected[64];
      snprintf (expected, sizeof expected, "body %ld True\n", want);
      RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), expected) == 0,
                  "the slow reader did not get the whole download");
      RUN_ASSERT (&out, strcmp (log_reason (&out, "GET"), "closed") == 0,
                  "the connection ended otherwise: %s", log_reason (&out, "GET"));
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, a_slow_reader_of_small_segments_gets_every_byte, .timeout = 60)
{
  slow_reader (*mode, "/drip/3000000", "30s");
}

MODE_TEST (egress, bytes_draining_from_a_socket_are_not_idle, .timeout = 60)
{
  slow_reader (*mode, "/bytes/4000000", "500ms");
}

MODE_TEST (egress, a_thousand_connections_are_bounded_by_the_connection_limit, .timeout = 120)
{
  struct origin o;
  origin_start (&o, false);
  char code[1024];
  snprintf (code, sizeof code,
            "import socket\n"
            "ok = refused = other = 0\n"
            "for i in range(1000):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
            "    s.sendall(b'GET http://web.nsbox.test:%u/hello HTTP/1.1\\r\\n'\n"
            "              b'Host: web.nsbox.test:%u\\r\\n\\r\\n')\n"
            "    r = b''\n"
            "    while True:\n"
            "        b = s.recv(4096)\n"
            "        if not b: break\n"
            "        r += b\n"
            "    s.close()\n"
            "    if r.startswith(b'HTTP/1.0 200') or r.startswith(b'HTTP/1.1 200'): ok += 1\n"
            "    elif b'connection limit' in r: refused += 1\n"
            "    else: other += 1\n"
            "print(ok, refused, other)\n",
            o.port, o.port);
  const char *const extra[] = {
    "--egress-allow", "web.nsbox.test", "--egress-connections", "25", "--timeout", "90s", NULL
  };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), "25 975 0\n") == 0,
                  "expected 25 answered and 975 refused");
      RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 25, "the server saw %d connections",
                  origin_count (&o, "\"connection\""));
      json_t *e = json_object_get (run_json (&out), "egress");
      RUN_ASSERT (&out, json_integer_value (json_object_get (e, "connections")) == 1000,
                  "the report does not count 1000 connections");
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, a_none_sandbox_has_nothing_of_the_proxy, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "15s", NULL };
  run_mode (*mode,
            "import os, socket\n"
            "print(sorted(k for k in os.environ if 'proxy' in k.lower()))\n"
            "s = socket.socket()\n"
            "try:\n"
            "    s.connect(('127.0.0.1', 3128))\n"
            "    print('connected')\n"
            "except OSError as e:\n"
            "    print('refused', e.errno)\n",
            args, &out);
  RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), "[]\nrefused 111\n") == 0,
              "a none sandbox has a proxy or its environment");
  RUN_ASSERT (&out, json_is_null (json_object_get (run_json (&out), "egress")),
              "a none sandbox reports egress");
  run_out_free (&out);
}

Test (egress, bad_egress_configurations_are_refused_before_a_sandbox, .timeout = 30)
{
  struct
  {
    const char *const args[8];
    const char *message;
  } cases[] = {
    { { "--network", "proxy", NULL }, "network: proxy needs egress-allow" },
    { { "--egress-allow", "pypi.org", NULL },
      "egress-allow and egress-resolve need network: proxy" },
    { { "--network", "proxy", "--egress-allow", "pypi.org", "--egress-resolve",
        "mirror.internal=10.1.2.3", NULL },
      "egress-resolve pins 'mirror.internal', which egress-allow does not list" },
    { { "--network", "proxy", "--egress-allow", "10.1.2.3", NULL }, "an IP address" },
  };
  for (size_t i = 0; i < sizeof cases / sizeof cases[0]; i++)
    {
      struct run_out out;
      run_cli ("print(1)\n", 9, cases[i].args, &out);
      RUN_ASSERT (&out, out.exit_status == 125, "case %zu: expected 125", i);
      RUN_ASSERT (&out, strstr (out.err, cases[i].message) != NULL, "case %zu: expected '%s'", i,
                  cases[i].message);
      RUN_ASSERT (&out, !out.json, "case %zu: the code ran", i);
      RUN_ASSERT (&out, refusal_stage (&out), "case %zu: expected the JSON error", i);
      run_out_free (&out);
    }
}

MODE_TEST (egress, the_audit_log_records_every_connection, .timeout = 60)
{
  struct origin o;
  origin_start (&o, false);
  /* A directory of the launcher's user (maybe the test user): nsbox
   * creates the log there. */
  char *dir = user_dir ();
  char audit[160], audit_arg[200];
  snprintf (audit, sizeof audit, "%s/audit.log", dir);
  snprintf (audit_arg, sizeof audit_arg, "%s", audit);
  char code[768];
  snprintf (code, sizeof code,
            "import urllib.request, urllib.error\n"
            "urllib.request.urlopen('http://web.nsbox.test:%u/hello', timeout=10).read()\n"
            "try:\n"
            "    urllib.request.urlopen('http://other.nsbox.test:%u/x', timeout=10)\n"
            "except urllib.error.HTTPError as e:\n"
            "    print(e.code)\n",
            o.port, o.port);
  const char *const extra[]
      = { "--egress-allow", "web.nsbox.test", "--audit-log", audit_arg, NULL };
  struct run_out out;
  if (egress_run (*mode, &o, code, extra, &out))
    {
      size_t len = 0;
      char *text = read_file (audit, &len);
      RUN_ASSERT (&out, text && len > 0, "no audit record");
      json_error_t jerr;
      json_t *rec = json_loadb (text, strcspn (text, "\n"), 0, &jerr);
      RUN_ASSERT (&out, rec != NULL, "the record is not JSON: %s", jerr.text);
      json_t *allow = json_object_get (json_object_get (rec, "limits"), "egress_allow");
      RUN_ASSERT (&out,
                  json_array_size (allow) == 1
                      && strcmp (json_string_value (json_array_get (allow, 0)), "web.nsbox.test")
                             == 0,
                  "the record does not name the allowlist");
      json_t *log
          = json_object_get (json_object_get (json_object_get (rec, "outcome"), "egress"), "log");
      RUN_ASSERT (&out, json_array_size (log) == 2, "the record does not hold both connections");
      json_t *first = json_array_get (log, 0), *second = json_array_get (log, 1);
      RUN_ASSERT (
          &out,
          strcmp (json_string_value (json_object_get (first, "host")), "web.nsbox.test") == 0
              && strcmp (json_string_value (json_object_get (first, "decision")), "allowed") == 0
              && strcmp (json_string_value (json_object_get (first, "address")), "127.0.0.1") == 0
              && json_integer_value (json_object_get (first, "bytes_received")) > 0,
          "the allowed connection is not recorded as it happened");
      RUN_ASSERT (
          &out,
          strcmp (json_string_value (json_object_get (second, "host")), "other.nsbox.test") == 0
              && strcmp (json_string_value (json_object_get (second, "decision")), "refused") == 0,
          "the refused connection is not recorded");
      /* What the server saw agrees: one request. */
      RUN_ASSERT (&out, origin_count (&o, "\"event\": \"request\"") == 1, "server requests: %d",
                  origin_count (&o, "\"event\": \"request\""));
      json_decref (rec);
      free (text);
    }
  run_out_free (&out);
  origin_stop (&o);
  unlink (audit);
  rmdir (dir);
  free (dir);
}

/* pip, unchanged, through the proxy to an HTTPS index (CONNECT, the test
 * CA given with --cert): the index's name is allowed (and pinned to the
 * local index server), or it is not. */
static void
pip_install (enum run_mode mode, bool allowed)
{
  struct origin o;
  origin_start_with (&o, true, true);
  char input[160];
  snprintf (input, sizeof input, "%s/ca.pem:ca.pem", o.dir);
  char code[1024];
  snprintf (code, sizeof code,
            "import subprocess, sys\n"
            "r = subprocess.run([sys.executable, '-m', 'pip', 'install', '--no-cache-dir',\n"
            "    '--disable-pip-version-check', '--retries', '1', '--timeout', '10',\n"
            "    '--target', '/tmp/pkgs', '--cert', '/mnt/in/ca.pem', '--index-url',\n"
            "    'https://tls.nsbox.test:%u/simple', 'nsbox-probe'],\n"
            "    capture_output=True, text=True)\n"
            "print('pip exit', r.returncode)\n"
            "print(r.stdout[-3000:])\n"
            "print(r.stderr[-3000:])\n"
            "sys.path.insert(0, '/tmp/pkgs')\n"
            "try:\n"
            "    import nsbox_probe\n"
            "    print(nsbox_probe.MARKER)\n"
            "except ImportError:\n"
            "    print('not installed')\n",
            o.port);
  const char *const extra[] = { "--egress-allow",
                                allowed ? "tls.nsbox.test" : "other.nsbox.test",
                                "--inputs",
                                input,
                                "--timeout",
                                "90s",
                                "--memory",
                                "512m",
                                "--cpus",
                                "1",
                                NULL };
  struct run_out out;
  if (egress_run (mode, &o, code, extra, &out))
    {
      const char *s = run_stdout (&out, NULL);
      if (allowed)
        {
          RUN_ASSERT (&out, strstr (s, "pip exit 0\n") == s, "pip failed");
          RUN_ASSERT (&out, strstr (s, "\nnsbox-probe-installed\n") != NULL,
                      "the package is not importable");
          RUN_ASSERT (&out, origin_count (&o, "nsbox_probe-1.0-py3-none-any.whl") >= 1,
                      "the server did not serve the wheel");
        }
      else
        {
          RUN_ASSERT (&out, strstr (s, "pip exit 0\n") != s, "pip succeeded");
          RUN_ASSERT (&out, strstr (s, "\nnot installed\n") != NULL, "the package is installed");
          RUN_ASSERT (&out, strstr (s, "tls.nsbox.test is not on the egress allowlist") != NULL,
                      "pip's output does not carry the proxy's reason");
          RUN_ASSERT (&out, origin_count (&o, "\"connection\"") == 0, "the index was reached");
        }
    }
  run_out_free (&out);
  origin_stop (&o);
}

MODE_TEST (egress, pip_installs_from_an_allowed_index, .timeout = 180)
{
  pip_install (*mode, true);
}

MODE_TEST (egress, pip_cannot_reach_an_index_not_allowed_and_says_why, .timeout = 180)
{
  pip_install (*mode, false);
}

/* ---- the proxy's own resolution, against a resolver of the test's ----
 *
 * In a network and mount namespace of its own (root: the launcher may
 * still be the test user), with loopback only, /etc/resolv.conf naming a
 * DNS responder on 127.0.0.1 (dns.py) and /etc/hosts and nsswitch.conf of
 * the test's: the responder answers rebind.nsbox.test with a public
 * address first and 127.0.0.1 second, private.nsbox.test with 10.0.0.7.
 * Nothing leaves the namespace: it has no route anywhere. */

static void
bind_file (const char *dir, const char *name, const char *content, const char *target)
{
  char path[160];
  snprintf (path, sizeof path, "%s/%s", dir, name);
  write_text_file (path, content, 0644);
  if (mount (path, target, NULL, MS_BIND, NULL) < 0)
    {
      fprintf (stderr, "bind %s on %s: %s\n", path, target, strerror (errno));
      _exit (2);
    }
}

static void
loopback_up (void)
{
  if (system ("ip link set lo up") != 0)
    {
      fprintf (stderr, "ip link set lo up failed\n");
      _exit (2);
    }
}

static int
count_in (const char *path, const char *needle)
{
  size_t len = 0;
  char *text = read_file (path, &len);
  int n = 0;
  for (const char *p = text; p && (p = strstr (p, needle)); p += strlen (needle))
    n++;
  free (text);
  return n;
}

/* The child's checks: 0 when all hold, else 1 with the reasons on stderr. */
static int
rebinding_child (const char *dir)
{
  if (unshare (CLONE_NEWNET | CLONE_NEWNS) < 0
      || mount (NULL, "/", NULL, MS_REC | MS_PRIVATE, NULL) < 0)
    {
      fprintf (stderr, "unshare: %s\n", strerror (errno));
      return 2;
    }
  loopback_up ();
  /* An address of this machine's that no class refuses. */
  if (system ("ip addr add 93.184.215.20/32 dev lo") != 0)
    {
      fprintf (stderr, "ip addr add failed\n");
      return 2;
    }
  bind_file (dir, "resolv.conf",
             "nameserver 127.0.0.1\nsearch corp.nsbox.test\noptions attempts:1 timeout:3\n",
             "/etc/resolv.conf");
  bind_file (dir, "hosts", "127.0.0.1 localhost\n", "/etc/hosts");
  bind_file (dir, "nsswitch.conf", "hosts: files dns\n", "/etc/nsswitch.conf");
  char dns_log[160], dns_port[160], origin_log[160], origin_port[160];
  snprintf (dns_log, sizeof dns_log, "%s/dns.log", dir);
  snprintf (dns_port, sizeof dns_port, "%s/dns.port", dir);
  snprintf (origin_log, sizeof origin_log, "%s/origin.log", dir);
  snprintf (origin_port, sizeof origin_port, "%s/origin.port", dir);
  const char *dns[] = { "python3",
                        FIXTURES "/dns.py",
                        "--port",
                        "53",
                        "--port-file",
                        dns_port,
                        "--log",
                        dns_log,
                        "--answers",
                        "{\"rebind.nsbox.test\": [\"93.184.215.14\", \"127.0.0.1\"], "
                        "\"private.nsbox.test\": [\"10.0.0.7\"], "
                        "\"intranet.corp.nsbox.test\": [\"93.184.215.15\"], "
                        "\"self.nsbox.test\": [\"93.184.215.20\"], "
                        "\"self6.nsbox.test\": [\"::ffff:93.184.215.20\"]}",
                        NULL };
  const char *origin[]
      = { "python3", FIXTURES "/origin.py", "--port-file", origin_port, "--log", origin_log, NULL };
  pid_t dns_pid = spawn_python (dns), origin_pid = spawn_python (origin);
  unsigned port = wait_port (origin_port);
  if (!wait_port (dns_port) || !port)
    {
      fprintf (stderr, "the servers did not start\n");
      return 2;
    }
  /* A service of this machine on that address, on the origin's port. */
  int self_fd = socket (AF_INET, SOCK_STREAM | SOCK_CLOEXEC | SOCK_NONBLOCK, 0);
  struct sockaddr_in self = { .sin_family = AF_INET, .sin_port = htons ((uint16_t)port) };
  inet_pton (AF_INET, "93.184.215.20", &self.sin_addr);
  if (self_fd < 0 || bind (self_fd, (struct sockaddr *)&self, sizeof self) < 0
      || listen (self_fd, 8) < 0)
    {
      fprintf (stderr, "listen on 93.184.215.20: %s\n", strerror (errno));
      return 2;
    }
  char code[1024], port_arg[16];
  snprintf (port_arg, sizeof port_arg, "%u", port);
  snprintf (code, sizeof code,
            "import urllib.request, urllib.error\n"
            "for host in ['rebind.nsbox.test', 'rebind.nsbox.test', 'private.nsbox.test',\n"
            "             'intranet', 'ghost.nsbox.test', 'self.nsbox.test',\n"
            "             'self6.nsbox.test']:\n"
            "    try:\n"
            "        urllib.request.urlopen('http://%%s:%u/hello' %% host, timeout=15)\n"
            "        print('reached')\n"
            "    except urllib.error.HTTPError as e:\n"
            "        print(e.code, e.read().decode().strip())\n",
            port);
  const char *const args[]
      = { "--network", "proxy",          "--egress-allow", "*.nsbox.test", "--egress-allow",
          "intranet",  "--egress-ports", port_arg,         "--timeout",    "60s",
          NULL };
  struct run_out out;
  run_cli (code, strlen (code), args, &out);
  kill (dns_pid, SIGTERM);
  kill (origin_pid, SIGTERM);
  waitpid (dns_pid, NULL, 0);
  waitpid (origin_pid, NULL, 0);
  int failed = 0;
  if (harness_is_runsc ())
    {
      /* Refused before a sandbox, without a lookup. */
      if (out.exit_status != 125 || !strstr (out.err, "not available with runtime runsc")
          || count_in (dns_log, "\"type\"") != 0)
        {
          fprintf (stderr, "runsc: expected a refusal: %s\n", run_describe (&out));
          failed = 1;
        }
      run_out_free (&out);
      return failed;
    }
  const char *s = run_stdout (&out, NULL);
  /* One lookup per request, the address it gave used: the public one
   * first (unreachable here), then the loopback one, refused. */
  json_t *log = json_object_get (json_object_get (run_json (&out), "egress"), "log");
  const char *first = json_string_value (json_object_get (json_array_get (log, 0), "address"));
  const char *second = json_string_value (json_object_get (json_array_get (log, 1), "address"));
  if (!strstr (s, "502 nsbox egress proxy: cannot connect to rebind.nsbox.test port")
      || !strstr (s, "403 nsbox egress proxy: rebind.nsbox.test resolves to a loopback address")
      || !strstr (s, "403 nsbox egress proxy: private.nsbox.test resolves to a private address")
      || strstr (s, "127.0.0.1") || strstr (s, "10.0.0.7") || !first
      || strcmp (first, "93.184.215.14") != 0 || !second || strcmp (second, "127.0.0.1") != 0)
    {
      fprintf (stderr, "unexpected program output: %s\n", run_describe (&out));
      failed = 1;
    }
  int a_rebind = count_in (dns_log, "\"name\": \"rebind.nsbox.test\", \"type\": \"A\"");
  int a_private = count_in (dns_log, "\"name\": \"private.nsbox.test\", \"type\": \"A\"");
  if (a_rebind != 2 || a_private != 1)
    {
      fprintf (stderr, "A queries: rebind %d (expected 2), private %d (expected 1)\n", a_rebind,
               a_private);
      failed = 1;
    }
  /* This machine's own address is refused like loopback, also as the
   * IPv4-mapped IPv6 address that reaches it. */
  if (!strstr (s, "403 nsbox egress proxy: self.nsbox.test resolves to this machine's own address")
      || !strstr (s,
                  "403 nsbox egress proxy: self6.nsbox.test resolves to this machine's own address")
      || listener_was_connected (self_fd))
    {
      fprintf (stderr, "this machine's own address was not refused: %s\n", run_describe (&out));
      failed = 1;
    }
  close (self_fd);
  /* The resolver's search domain never applies to the proxy's names. */
  if (count_in (dns_log, "corp.nsbox.test") != 0 || !strstr (s, "cannot resolve intranet")
      || !strstr (s, "cannot resolve ghost.nsbox.test"))
    {
      fprintf (stderr, "a search domain was used: %s\n", run_describe (&out));
      failed = 1;
    }
  if (count_in (origin_log, "\"connection\"") != 0)
    {
      fprintf (stderr, "the loopback server was reached\n");
      failed = 1;
    }
  run_out_free (&out);
  return failed;
}

Test (egress, a_name_is_resolved_once_and_a_rebinding_answer_is_refused, .timeout = 120)
{
  if (geteuid () != 0)
    {
      /* Namespaces of the test's own need root. */
      cr_assert (!harness_must_work (), "this test needs root");
      cr_skip_test ("needs root");
    }
  char dir[64];
  make_dir (dir, sizeof dir);
  /* Measured here: the child cannot log to Criterion, as calibrating does. */
  (void)harness_time_scale ();
  pid_t pid = fork ();
  cr_assert (pid >= 0);
  char reasons[96];
  snprintf (reasons, sizeof reasons, "%s/reasons", dir);
  if (pid == 0)
    {
      /* Its reasons, for the assertion below. */
      int fd = open (reasons, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
      if (fd < 0 || dup2 (fd, STDERR_FILENO) < 0)
        _exit (2);
      _exit (rebinding_child (dir));
    }
  int status;
  cr_assert (waitpid (pid, &status, 0) == pid);
  size_t len = 0;
  char *why = read_file (reasons, &len);
  char cmd[128];
  snprintf (cmd, sizeof cmd, "rm -rf %s", dir);
  if (system (cmd) != 0)
    cr_log_warn ("could not remove %s", dir);
  cr_assert (WIFEXITED (status) && WEXITSTATUS (status) == 0,
             "the rebinding checks failed (status %d): %s", status, why ? why : "(no reasons)");
  free (why);
}

MODE_TEST (egress, slow_readers_keep_the_proxy_small, .timeout = 120)
{
  struct origin o;
  origin_start (&o, false);
  const char *const extra[] = { "--egress-allow", "web.nsbox.test", NULL };
  /* The baseline: one small request. */
  char code[1536];
  snprintf (code, sizeof code,
            "import urllib.request\n"
            "urllib.request.urlopen('http://web.nsbox.test:%u/hello', timeout=10).read()\n",
            o.port);
  struct run_out base;
  if (!egress_run (*mode, &o, code, extra, &base))
    {
      run_out_free (&base);
      origin_stop (&o);
      return;
    }
  /* Eight downloads of 1 GB each, read a few KiB at a time for 3 s: the
   * servers push as fast as they can, the program hardly reads. */
  snprintf (code, sizeof code,
            "import socket, time\n"
            "socks = []\n"
            "for i in range(8):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
            "    s.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)\n"
            "    s.sendall(b'GET http://web.nsbox.test:%u/bytes/1000000000 HTTP/1.1\\r\\n'\n"
            "              b'Host: web.nsbox.test:%u\\r\\n\\r\\n')\n"
            "    socks.append(s)\n"
            "got = 0\n"
            "end = time.time() + 3\n"
            "while time.time() < end:\n"
            "    for s in socks:\n"
            "        got += len(s.recv(1024))\n"
            "    time.sleep(0.05)\n"
            "print('read', got)\n",
            o.port, o.port);
  struct run_out out;
  egress_run (*mode, &o, code, extra, &out);
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strncmp (s, "read ", 5) == 0 && strtol (s + 5, NULL, 10) > 0,
              "the downloads did not start");
  long grown = out.peak_rss_kb - out.base_rss_kb, base_grown = base.peak_rss_kb - base.base_rss_kb;
  RUN_ASSERT (&out, grown <= base_grown + 8 * 1024,
              "the launcher grew by %ld kB with slow readers, %ld kB for one small request", grown,
              base_grown);
  run_out_free (&base);
  run_out_free (&out);
  origin_stop (&o);
}

/* A native sandbox (whatever the pass's runtime) with the proxy, and
 * web.nsbox.test allowed and pinned to the origin on `port`. */
#define NATIVE_PROXY_ARGS(port)                                                                    \
  "--runtime", "native", "--network", "proxy", "--egress-allow", "web.nsbox.test",                 \
      "--egress-resolve", "web.nsbox.test=127.0.0.1", "--egress-ports", (port)

/* nsbox serve's pool: its warm entries carry the proxy too, one per run. */
Test (egress, pooled_runs_through_nsbox_serve_use_the_proxy, .timeout = 120)
{
  struct origin o;
  origin_start (&o, false);
  char port[16];
  snprintf (port, sizeof port, "%u", o.port);
  const char *const args[] = { NATIVE_PROXY_ARGS (port), "--pool-size", "1", NULL };
  struct serve_job server;
  serve_start (args, &server);
  char code[512];
  snprintf (code, sizeof code,
            "import urllib.request\n"
            "print(urllib.request.urlopen('http://web.nsbox.test:%u/hello', timeout=10)"
            ".read().decode().strip())\n",
            o.port);
  char want[128];
  snprintf (want, sizeof want, "hello from web.nsbox.test:%u /hello\n", o.port);
  int warm = 0;
  for (int i = 0; i < 3; i++)
    {
      struct run_out out;
      serve_run (&server, code, NULL, &out);
      RUN_ASSERT (&out, strcmp (run_stdout (&out, NULL), want) == 0, "run %d: not reached", i);
      json_t *e = json_object_get (run_json (&out), "egress");
      RUN_ASSERT (&out, json_integer_value (json_object_get (e, "connections")) == 1,
                  "run %d: the report is not this run's own", i);
      warm += strcmp (run_json_str (&out, "served", NULL), "warm") == 0;
      run_out_free (&out);
    }
  cr_expect_gt (warm, 0, "no run was served warm");
  cr_expect_eq (origin_count (&o, "\"event\": \"request\""), 3, "server requests: %d",
                origin_count (&o, "\"event\": \"request\""));
  cr_expect_eq (serve_stop (&server, NULL), 0);
  origin_stop (&o);
}

/* A library process that forks while a proxied run holds a connection (a
 * multiprocessing worker, a pre-fork server): the child holds none of the
 * proxy's fds (the sandbox's listener would keep its network namespace
 * alive, and the server would see no end of its connection), and the run
 * ends well. The child's fds are read in the child itself. */
Test (egress, a_forked_child_holds_none_of_the_proxy_s_fds, .timeout = 120)
{
  struct origin o;
  origin_start (&o, false);
  char port[16];
  snprintf (port, sizeof port, "%u", o.port);
  const char *const args[] = { NATIVE_PROXY_ARGS (port), "--timeout", "60s", NULL };
  /* Size 0: the run is served cold, so no refill thread starts an entry
   * (and opens fds of its own) while the launcher forks. */
  struct pool_job pool;
  pool_start (args, 0, &pool);
  /* 20 KiB at 1 KiB per 100 ms: the connection lasts about 2 s. */
  char code[512];
  snprintf (code, sizeof code,
            "import urllib.request\n"
            "r = urllib.request.urlopen('http://web.nsbox.test:%u/slow/20480', timeout=30)\n"
            "n = len(r.read())\n"
            "print('done' if n == 20480 else n)\n",
            o.port);
  int child_new = -1, launcher_new = 0;
  bool ok = false;
  pool_proxied_fork_check (&pool, code, &child_new, &launcher_new, &ok);
  cr_expect (launcher_new >= 3,
             "the launcher held %d new sockets when it forked: the run's connection was not "
             "open yet",
             launcher_new);
  cr_expect (child_new == 0, "the forked child holds %d sockets or pipes of the proxied run",
             child_new);
  cr_expect (ok, "the proxied run did not end well beside the fork");
  pool_stop (&pool);
  cr_expect_eq (origin_count (&o, "\"event\": \"request\""), 1, "server requests: %d",
                origin_count (&o, "\"event\": \"request\""));
  origin_stop (&o);
}
