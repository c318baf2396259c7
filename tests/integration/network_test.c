/* network: none. A private network namespace with loopback only. These tests
 * never send anything off this machine: the one outside name is resolved
 * (and must fail to resolve) inside the sandbox. */
#include <stdio.h>
#include <string.h>
#include <unistd.h>

#include "harness.h"

MODE_TEST (net, http_request_to_the_internet_fails, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "15s", NULL };
  run_mode (*mode,
            "import urllib.request\n"
            "urllib.request.urlopen('http://example.com', timeout=2)\n"
            "print('fetched')\n",
            args, &out);
  RUN_ASSERT (&out, !run_json_bool (&out, "timed_out"), "expected the request to fail, not hang");
  RUN_ASSERT (&out, run_json_int (&out, "exit_code") != 0, "expected a non-zero exit code");
  RUN_ASSERT (&out, out.exit_status != 0, "expected a non-zero exit status");
  const char *err = run_stderr (&out, NULL);
  RUN_ASSERT (&out, strstr (err, "Error") != NULL, "expected an error on stderr");
  RUN_ASSERT (&out, strstr (run_stdout (&out, NULL), "fetched") == NULL, "the request succeeded");
  run_out_free (&out);
}

MODE_TEST (net, host_loopback_listener_is_unreachable, .timeout = 30)
{
  uint16_t port;
  int listener = tcp_listener (&port);
  char code[1024];
  snprintf (code, sizeof code,
            "import socket, urllib.request\n"
            "port = %u\n"
            "try:\n"
            "    urllib.request.urlopen('http://127.0.0.1:%%d/' %% port, timeout=2)\n"
            "    print('urllib connected')\n"
            "except Exception as e:\n"
            "    print('urllib failed', type(e).__name__)\n"
            "s = socket.socket()\n"
            "s.settimeout(2)\n"
            "try:\n"
            "    s.connect(('127.0.0.1', port))\n"
            "    print('socket connected')\n"
            "except OSError as e:\n"
            "    print('socket failed', e.errno)\n",
            (unsigned)port);
  const char *const args[] = { "--timeout", "15s", NULL };
  struct run_out out;
  run_mode (*mode, code, args, &out);
  bool connected = listener_was_connected (listener);
  close (listener);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strstr (s, "urllib failed") != NULL, "urllib reached the host's listener");
  RUN_ASSERT (&out, strstr (s, "socket failed") != NULL, "a socket reached the host's listener");
  RUN_ASSERT (&out, !connected, "the host listener on 127.0.0.1:%u saw a connection",
              (unsigned)port);
  run_out_free (&out);
}

MODE_TEST (net, name_resolution_fails, .timeout = 30)
{
  struct run_out out;
  const char *const args[] = { "--timeout", "15s", NULL };
  run_mode (*mode,
            "import socket\n"
            "try:\n"
            "    print('resolved', socket.getaddrinfo('example.com', 80))\n"
            "except OSError as e:\n"
            "    print('failed', type(e).__name__)\n",
            args, &out);
  RUN_ASSERT (&out, out.exit_status == 0, "expected exit status 0");
  const char *s = run_stdout (&out, NULL);
  RUN_ASSERT (&out, strncmp (s, "failed ", 7) == 0, "expected getaddrinfo to raise");
  run_out_free (&out);
}

MODE_TEST (net, only_loopback_interface_exists, .timeout = 30)
{
  struct run_out out;
  run_mode (
      *mode,
      "names = [l.split(':')[0].strip() for l in open('/proc/net/dev').read().splitlines()[2:]]\n"
      "print(sorted(names))\n",
      NULL, &out);
  assert_prints (&out, "['lo']\n");
  run_out_free (&out);
}

MODE_TEST (net, loopback_inside_the_sandbox_is_up, .timeout = 30)
{
  struct run_out out;
  run_mode (*mode,
            "import socket\n"
            "srv = socket.socket()\n"
            "srv.bind(('127.0.0.1', 0))\n"
            "srv.listen(1)\n"
            "c = socket.create_connection(srv.getsockname(), timeout=5)\n"
            "conn, _ = srv.accept()\n"
            "c.sendall(b'ping')\n"
            "print(conn.recv(4).decode())\n",
            NULL, &out);
  assert_prints (&out, "ping\n");
  run_out_free (&out);
}
