# hostile: positive control: an asyncio TCP server and client over the sandbox's loopback, IPv4 and IPv6
# expect: exit=0 stdout="OK b'ping' b'ping'\n"
import asyncio
async def main():
    async def handle(r, w):
        w.write(await r.read(4)); await w.drain(); w.close()
    out = []
    for host in ("127.0.0.1", "::1"):
        srv = await asyncio.start_server(handle, host, 0)
        port = srv.sockets[0].getsockname()[1]
        r, w = await asyncio.open_connection(host, port)
        w.write(b"ping"); await w.drain()
        out.append(await r.read(4))
        w.close(); srv.close(); await srv.wait_closed()
    print("OK", *out)
asyncio.run(main())
