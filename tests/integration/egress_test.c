/* network: proxy, by effect. Real servers on this machine's loopback
 * (tests/fixtures/egress/origin.py, plain and TLS with a test CA) stand
 * for the outside; the tests name them *.nsbox.test and pin those names to
 * 127.0.0.1 with egress-resolve. What reached a server is read from the
 * server's own log, never from nsbox's report; what the program saw is
 * what it printed. No outside address is ever contacted: every name the
 * proxy would resolve is refused before or pinned. Under runsc the mode is
 * refused with its reason, and nothing reaches a server. */
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
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

static void
origin_start (struct origin *o, bool tls)
{
  make_dir (o->dir, sizeof o->dir);
  char port_file[128], cert[128], key[128];
  snprintf (port_file, sizeof port_file, "%s/port", o->dir);
  snprintf (o->log, sizeof o->log, "%s/log", o->dir);
  snprintf (cert, sizeof cert, "%s/server.pem", o->dir);
  snprintf (key, sizeof key, "%s/server.key", o->dir);
  if (tls)
    make_certs (o->dir);
  o->pid = fork ();
  cr_assert (o->pid >= 0);
  if (o->pid == 0)
    {
      /* A failed assertion ends the test without origin_stop. */
      prctl (PR_SET_PDEATHSIG, SIGTERM);
      const char *argv[] = { "python3", FIXTURES "/origin.py", "--port-file", port_file, "--log",
                             o->log,    tls ? "--tls" : NULL,  cert,          key,       NULL };
      execvp ("python3", (char **)argv);
      _exit (127);
    }
  for (int i = 0; i < 200; i++)
    {
      char buf[32];
      size_t len = 0;
      if (read_whole (port_file, buf, sizeof buf, &len) && len > 0)
        {
          o->port = (unsigned)strtoul (buf, NULL, 10);
          if (o->port)
            return;
        }
      sleep_seconds (0.05);
    }
  cr_assert_fail ("origin.py did not start");
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
            "         '[::ffff:127.0.0.1]', '[::1]', '127.0.0.1.', 'web.nsbox.test.0x7f']\n"
            "def ask(line):\n"
            "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
            "    s.sendall(line.encode() + b'\\r\\nHost: x\\r\\n\\r\\n')\n"
            "    r = b''\n"
            "    while True:\n"
            "        b = s.recv(4096)\n"
            "        if not b: break\n"
            "        r += b\n"
            "    s.close()\n"
            "    r = r.decode(errors='replace')\n"
            "    return r.split('\\r\\n')[0] + ' | ' + r.split('\\r\\n\\r\\n', 1)[-1].strip()\n"
            "for h in hosts:\n"
            "    print('GET', h, ask('GET http://%%s:%u/hello HTTP/1.1' %% h))\n"
            "    print('CONNECT', h, ask('CONNECT %%s:%u HTTP/1.1' %% h))\n",
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
      "import socket\n"
      "def ask(data):\n"
      "    s = socket.create_connection(('127.0.0.1', 3128), timeout=10)\n"
      "    s.sendall(data)\n"
      "    r = s.recv(4096).decode(errors='replace')\n"
      "    s.close()\n"
      "    return r.split('\\r\\n')[0] + ' | ' + r.split('\\r\\n\\r\\n', 1)[-1].strip()\n"
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
      RUN_ASSERT (&out, strstr (out.out, "1") == NULL, "case %zu: the code ran", i);
      run_out_free (&out);
    }
}
