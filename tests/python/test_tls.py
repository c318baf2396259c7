"""https: a real TLS terminator (socat, from Debian) in front of nsbox
serve on loopback, with a certificate of a CA made here. The certificate is
checked (a client without the CA is refused before any byte of the run
leaves it), and a token is never sent in clear beyond loopback."""

from __future__ import annotations

import asyncio
import shutil
import socket
import subprocess
import time
from pathlib import Path
from typing import Any, Iterator, Tuple

import nsbox
import pytest
from conftest import free_port, scaled

assert shutil.which("socat"), "socat is missing: tests/fixtures/deps.sh installs it"


def _ca_and_cert(d: Path) -> Tuple[Path, Path, Path]:
    def openssl(*args: str) -> None:
        subprocess.run(["openssl", *args], check=True, capture_output=True)

    ca_key, ca, key, csr, cert = d / "ca.key", d / "ca.pem", d / "s.key", d / "s.csr", d / "s.pem"
    openssl("req", "-x509", "-newkey", "rsa:2048", "-nodes", "-keyout", str(ca_key), "-out", str(ca),
            "-days", "2", "-subj", "/CN=nsbox test CA")
    openssl("req", "-newkey", "rsa:2048", "-nodes", "-keyout", str(key), "-out", str(csr), "-subj", "/CN=localhost")
    ext = d / "ext"
    ext.write_text("subjectAltName=DNS:localhost,IP:127.0.0.1\n")
    openssl("x509", "-req", "-in", str(csr), "-CA", str(ca), "-CAkey", str(ca_key), "-CAcreateserial",
            "-out", str(cert), "-days", "2", "-extfile", str(ext))
    return ca, cert, key


@pytest.fixture
def tls_server(start_server: Any, tmp_path: Path) -> Iterator[Tuple[str, Path, Any]]:
    s = start_server(tcp=True)
    ca, cert, key = _ca_and_cert(tmp_path)
    port = free_port()
    upstream = s.address[len("http://"):]
    proxy = subprocess.Popen(
        ["socat", f"OPENSSL-LISTEN:{port},bind=127.0.0.1,reuseaddr,fork,cert={cert},key={key},verify=0",
         f"TCP:{upstream}"],
        stdin=subprocess.DEVNULL, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + scaled(10)
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), timeout=1).close()
                break
            except OSError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.02)
        yield f"https://localhost:{port}", ca, s
    finally:
        proxy.terminate()
        proxy.wait()


def test_https_with_the_servers_ca(tls_server: Tuple[str, Path, Any]) -> None:
    address, ca, s = tls_server
    c = nsbox.Client(address, token=s.token, cafile=str(ca))
    assert c.run("print(6 * 7)").stdout == "42\n"
    with c.sandbox() as sb:
        sb.run("x = 5")
        assert sb.run("x + 1").value == "6"
    assert [e for e in c.run_stream("print(1)")][-1].stdout == "1\n"  # type: ignore[union-attr]

    async def main() -> str:
        ac = nsbox.AsyncClient(address, token=s.token, cafile=str(ca))
        try:
            return (await ac.run("print(7)")).stdout
        finally:
            await ac.close()

    assert asyncio.run(main()) == "7\n"


def test_https_refuses_a_certificate_it_cannot_trust(tls_server: Tuple[str, Path, Any]) -> None:
    address, _, s = tls_server
    with pytest.raises(nsbox.ConnectionError, match="TLS: certificate verify failed|TLS: .*certificate"):
        nsbox.Client(address, token=s.token).run("1")

    async def main() -> None:
        ac = nsbox.AsyncClient(address, token=s.token)
        try:
            await ac.run("1")
        finally:
            await ac.close()

    with pytest.raises(nsbox.ConnectionError, match="certificate"):
        asyncio.run(main())


def test_no_token_in_clear_beyond_loopback() -> None:
    for make in (nsbox.Client, nsbox.AsyncClient):
        with pytest.raises(nsbox.UsageError, match="in clear"):
            make("http://192.0.2.1:8080", token="secret")
        make("http://192.0.2.1:8080", token="secret", insecure=True)  # asked for
        make("http://127.0.0.1:8080", token="secret")  # loopback
        make("http://[::1]:8080", token="secret")
