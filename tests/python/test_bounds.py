"""Every answer is bounded: in time as a whole (a server that trickles
bytes cannot hold a call), in size (a server cannot fill the client's
memory), and a run's bound follows its profile's timeout. The hostile
servers here are raw sockets on loopback; the wall clock is the test's."""

from __future__ import annotations

import asyncio
import os
import signal
import socket
import threading
import time
from typing import Any, Callable, Iterator

import nsbox
import nsbox._http
import pytest
from conftest import scaled, wait_until
from test_errors import all_stopped


def _serve(behave: Callable[[socket.socket], None]) -> Iterator[str]:
    """A loopback server: each connection gets its request head read,
    then behave(conn)."""
    ls = socket.socket()
    ls.bind(("127.0.0.1", 0))
    ls.listen(16)
    done = threading.Event()

    def one(conn: socket.socket) -> None:
        with conn:
            try:
                conn.settimeout(5)
                data = b""
                while b"\r\n\r\n" not in data:
                    piece = conn.recv(65536)
                    if not piece:
                        return
                    data += piece
                behave(conn)
            except OSError:
                pass

    def loop() -> None:
        while not done.is_set():
            try:
                conn, _ = ls.accept()
            except OSError:
                return
            threading.Thread(target=one, args=(conn,), daemon=True).start()

    threading.Thread(target=loop, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{ls.getsockname()[1]}"
    finally:
        done.set()
        ls.close()


def _endless(conn: socket.socket, head: bytes, piece: bytes) -> None:
    conn.sendall(head)
    for _ in range(100000):
        conn.sendall(piece)


def huge_length(conn: socket.socket) -> None:
    _endless(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 99999999999\r\n\r\n", b"x" * 65536)


def endless_chunks(conn: socket.socket) -> None:
    _endless(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nTransfer-Encoding: chunked\r\n\r\n",
             b"10000\r\n" + b"x" * 65536 + b"\r\n")


def until_close(conn: socket.socket) -> None:
    _endless(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nConnection: close\r\n\r\n", b"x" * 65536)


def endless_line(conn: socket.socket) -> None:
    _endless(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n",
             b"10000\r\n" + b"x" * 65536 + b"\r\n")


def huge_chunk(conn: socket.socket) -> None:
    _endless(conn, b"HTTP/1.1 200 OK\r\nContent-Type: application/x-ndjson\r\nTransfer-Encoding: chunked\r\n\r\n"
             b"7fffffffff\r\n", b"x" * 65536)


def trickle(conn: socket.socket) -> None:
    conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 1000\r\n\r\n")
    for _ in range(1000):
        conn.sendall(b" ")
        time.sleep(0.1)


def _name(f: Callable[[socket.socket], None]) -> str:
    return f.__name__


@pytest.mark.parametrize("behave", [huge_length, endless_chunks, until_close], ids=_name)
def test_an_answer_past_the_cap_is_an_error(behave: Callable[[socket.socket], None]) -> None:
    for address in _serve(behave):
        began = time.monotonic()
        with pytest.raises(nsbox.Error, match="exceeds 1048576"):
            nsbox.Client(address, max_answer_bytes=1 << 20, request_timeout=scaled(20)).run("1")

        async def main() -> None:
            c = nsbox.AsyncClient(address, max_answer_bytes=1 << 20, request_timeout=scaled(20))
            try:
                await c.run("1")
            finally:
                await c.close()

        with pytest.raises(nsbox.Error, match="exceeds 1048576"):
            asyncio.run(main())
        assert time.monotonic() - began < scaled(10)


@pytest.mark.parametrize("behave", [endless_line, huge_chunk], ids=_name)
def test_a_stream_line_past_the_cap_is_an_error(behave: Callable[[socket.socket], None]) -> None:
    for address in _serve(behave):
        with pytest.raises(nsbox.Error, match="exceeds 1048576"):
            list(nsbox.Client(address, max_answer_bytes=1 << 20, request_timeout=scaled(20)).run_stream("1"))

        async def main() -> None:
            c = nsbox.AsyncClient(address, max_answer_bytes=1 << 20, request_timeout=scaled(20))
            try:
                async for _ in c.run_stream("1"):
                    pass
            finally:
                await c.close()

        with pytest.raises(nsbox.Error, match="exceeds 1048576"):
            asyncio.run(main())


def test_a_trickling_server_cannot_hold_a_call() -> None:
    for address in _serve(trickle):
        def run(c: nsbox.Client) -> object:
            return c.run("1")

        def stream(c: nsbox.Client) -> object:
            return list(c.run_stream("1"))

        for call in (run, stream):
            began = time.monotonic()
            with pytest.raises(nsbox.ConnectionError, match="no answer within 2 s"):
                call(nsbox.Client(address, request_timeout=2))
            assert time.monotonic() - began < 4, "the bound is per read, not per call"


def test_a_run_is_bounded_by_its_profiles_timeout(start_server: Any, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(nsbox._http, "REQUEST_MARGIN", 1.0)
    s = start_server("--timeout", "2s")
    c = s.client()
    assert c.run("print(1)").stdout == "1\n"  # learns the profile's timeout
    os.kill(s.proc.pid, signal.SIGSTOP)
    try:
        assert wait_until(lambda: all_stopped(s.proc.pid), 5)
        began = time.monotonic()
        with pytest.raises(nsbox.ConnectionError, match="no answer within 3 s"):
            c.run("1")
        assert time.monotonic() - began < 6
    finally:
        os.kill(s.proc.pid, signal.SIGCONT)
    # A profile longer than the old fixed 330 s bound gets its own.
    long = start_server("--timeout", "20m").client()
    assert long.run("1").exit_code == 0
    assert long._bounds.run({}, None) == 1200 + 1.0
