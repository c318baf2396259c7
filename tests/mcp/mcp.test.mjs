// nsbox mcp through the official MCP TypeScript SDK client (Client +
// StdioClientTransport) and through raw JSON-RPC lines on the server's
// stdio. Run by tests/mcp/run.sh (node --test), which installs the SDK
// outside the repository and sets NSBOX_MCP_NODE_MODULES.
//
// Environment: NSBOX_BIN (the nsbox binary), NSBOX_TEST_ROOTFS (the fixture
// rootfs), NSBOX_MCP_NODE_MODULES (where @modelcontextprotocol/sdk is),
// NSBOX_TEST_RUNTIME (optional: --runtime for every server).
import { test, after, afterEach } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { createHash } from 'node:crypto';
import { createRequire } from 'node:module';
import { chmodSync, existsSync, mkdtempSync, readdirSync, readFileSync, rmSync, writeFileSync } from 'node:fs';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createInterface } from 'node:readline';
import { inflateSync } from 'node:zlib';

const NSBOX = process.env.NSBOX_BIN;
const ROOTFS = process.env.NSBOX_TEST_ROOTFS;
const MODULES = process.env.NSBOX_MCP_NODE_MODULES;
assert.ok(NSBOX && ROOTFS && MODULES, 'NSBOX_BIN, NSBOX_TEST_ROOTFS and NSBOX_MCP_NODE_MODULES must be set');

const require = createRequire(join(MODULES, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const VERSIONS = ['2024-11-05', '2025-03-26', '2025-06-18', '2025-11-25'];
const LATEST = '2025-11-25';
const GENERIC_FAILURE = "nsbox could not run the code: internal error; details are in the server's log";

function serverArgs(extra) {
  const args = ['mcp', '--rootfs', ROOTFS, ...extra];
  if (process.env.NSBOX_TEST_RUNTIME) args.push('--runtime', process.env.NSBOX_TEST_RUNTIME);
  return args;
}

const sleep = (ms) => new Promise((r) => setTimeout(r, ms));

async function waitFor(what, predicate, ms) {
  const end = Date.now() + ms;
  for (;;) {
    if (predicate()) return;
    if (Date.now() > end) assert.fail(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(100);
  }
}

// Every process below `root`, from /proc (pid, parent, comm, start time).
function processes() {
  const all = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    let stat;
    try {
      stat = readFileSync(`/proc/${name}/stat`, 'utf8');
    } catch {
      continue; // gone, or not ours to read
    }
    const close = stat.lastIndexOf(')');
    const fields = stat.slice(close + 2).split(' ');
    all.push({
      pid: Number(name),
      comm: stat.slice(stat.indexOf('(') + 1, close),
      ppid: Number(fields[1]),
      start: fields[19],
    });
  }
  return all;
}

function descendants(root) {
  const all = processes();
  const found = [];
  const frontier = [root];
  while (frontier.length) {
    const parent = frontier.pop();
    for (const p of all)
      if (p.ppid === parent) {
        found.push(p);
        frontier.push(p.pid);
      }
  }
  return found;
}

function alive(p) {
  try {
    const stat = readFileSync(`/proc/${p.pid}/stat`, 'utf8');
    return stat.slice(stat.lastIndexOf(')') + 2).split(' ')[19] === p.start;
  } catch {
    return false;
  }
}

const clients = [];
async function connect(extra, { version } = {}) {
  const transport = new StdioClientTransport({
    command: NSBOX,
    args: serverArgs(extra),
    stderr: 'pipe',
  });
  const log = [];
  transport.stderr.on('data', (d) => log.push(String(d)));
  const seen = {};
  if (version) {
    // The SDK offers its latest version; this asks for `version` instead
    // (the SDK accepts any version it supports in the answer).
    const send = transport.send.bind(transport);
    transport.send = (msg, opts) => {
      if (msg.method === 'initialize') msg = { ...msg, params: { ...msg.params, protocolVersion: version } };
      return send(msg, opts);
    };
    // The client sets onmessage just before it starts the transport.
    const start = transport.start.bind(transport);
    transport.start = () => {
      const inner = transport.onmessage;
      transport.onmessage = (msg, extra) => {
        if (msg.result && msg.result.protocolVersion) seen.protocolVersion = msg.result.protocolVersion;
        inner(msg, extra);
      };
      return start();
    };
  }
  const client = new Client({ name: 'nsbox-mcp-test', version: '1.0.0' });
  await client.connect(transport);
  clients.push(client);
  return { client, transport, log, seen };
}

after(async () => {
  for (const c of clients) await c.close().catch(() => {});
});

const call = (client, args, options) => client.callTool({ name: 'run_python', arguments: args }, undefined, options);
const textOf = (result) => result.content.filter((c) => c.type === 'text').map((c) => c.text).join('\n');

// The shared server: a 5 s ceiling, 10 calls at once.
let main;
async function mainServer() {
  if (!main) main = await connect(['--timeout', '5s', '--max-concurrent', '10', '--pool-size', '2']);
  return main.client;
}

test('tools/list: run_python with its input and output schema', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const { tools } = await client.listTools();
  assert.equal(tools.length, 1);
  const [tool] = tools;
  assert.equal(tool.name, 'run_python');
  assert.equal(tool.inputSchema.type, 'object');
  assert.deepEqual(tool.inputSchema.required, ['code']);
  assert.equal(tool.inputSchema.properties.code.type, 'string');
  assert.equal(tool.inputSchema.properties.timeout.type, 'number');
  assert.equal(tool.inputSchema.properties.files.type, 'array');
  const out = tool.outputSchema;
  assert.equal(out.type, 'object');
  for (const key of ['exit_code', 'timed_out', 'oom_killed', 'stdout', 'stderr', 'stdout_truncated',
    'timeout_ms', 'runtime', 'files', 'files_refused', 'quota_refusal', 'egress'])
    assert.ok(out.properties[key], `outputSchema lacks ${key}`);
  for (const key of ['exit_code', 'timed_out', 'oom_killed', 'stdout', 'stderr', 'files', 'files_refused'])
    assert.ok(out.required.includes(key), `outputSchema does not require ${key}`);
});

test('print(45) gives 45, as text and as structured content', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const r = await call(client, { code: 'print(45)' });
  assert.equal(r.isError, false);
  assert.match(textOf(r), /^exit code: 0\n--- stdout ---\n45\n/);
  assert.equal(r.structuredContent.stdout, '45\n');
  assert.equal(r.structuredContent.exit_code, 0);
  assert.equal(r.structuredContent.timed_out, false);
});

test('a non-zero exit is a normal result, not isError', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const r = await call(client, { code: 'import sys; print("bye", file=sys.stderr); sys.exit(3)' });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.exit_code, 3);
  assert.match(textOf(r), /exit code: 3/);
  assert.match(textOf(r), /--- stderr ---\nbye\n/);
});

test('the network is blocked: a connection to 1.1.1.1 fails', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const code = [
    'import socket',
    's = socket.socket(socket.AF_INET, socket.SOCK_STREAM)',
    's.settimeout(3)',
    'try:',
    '    s.connect(("1.1.1.1", 53))',
    '    print("connected")',
    'except OSError as e:',
    '    print("blocked", e.errno)',
  ].join('\n');
  const r = await call(client, { code });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.stdout, "blocked 101\n"); // ENETUNREACH: no route at all
});

test('the root is read-only: writing to /usr fails', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const code = [
    'try:',
    '    open("/usr/nsbox-mcp-test", "w").write("x")',
    '    print("written")',
    'except OSError as e:',
    '    print("refused", e.errno)',
  ].join('\n');
  const r = await call(client, { code });
  assert.equal(r.structuredContent.stdout, 'refused 30\n'); // EROFS
});

test('an infinite loop is killed at its timeout and reported as timed out', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const began = Date.now();
  const r = await call(client, { code: 'while True: pass', timeout: 2 });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.timed_out, true);
  assert.equal(r.structuredContent.timeout_ms, 2000);
  assert.match(textOf(r), /timed out after 2s/);
  assert.ok(Date.now() - began < 30000);
});

test('a timeout above the server ceiling is capped, and the text says so', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const r = await call(client, { code: 'while True: pass', timeout: 1000 });
  assert.equal(r.isError, false);
  assert.equal(r.structuredContent.timed_out, true);
  assert.equal(r.structuredContent.timeout_ms, 5000);
  assert.match(textOf(r), /^timeout: 5s \(1000 s asked for; capped/);
  assert.match(textOf(r), /timed out after 5s/);
});

test('huge output is capped with the head-tail marker', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const r = await call(client, { code: 'import sys\nsys.stdout.write("x" * 10_000_000)\nprint("END")' });
  const s = r.structuredContent;
  assert.equal(s.stdout_truncated, true);
  assert.ok(s.stdout_omitted_bytes > 9_000_000);
  assert.ok(s.stdout.length < 1_000_000);
  assert.match(s.stdout, /\[nsbox: \d+ bytes omitted\]/);
  assert.match(s.stdout, /END\n$/);
  assert.match(textOf(r), /output truncated: \d+ bytes omitted from stdout/);
});

const privateDirs = () => readdirSync(tmpdir()).filter((n) => /^nsbox-mcp-(in|out)\./.test(n));

test('files: an input is read in the sandbox, files left in /tmp/out come back', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const code = [
    'import os',
    'data = open("/mnt/in/data.csv").read()',
    'print(data.strip())',
    'os.makedirs("/tmp/out", exist_ok=True)',
    'open("/tmp/out/sum.txt", "w").write(str(sum(int(x) for x in data.split(","))))',
    'open("/tmp/out/raw.bin", "wb").write(bytes(range(256)))',
  ].join('\n');
  const r = await call(client, { code, files: [{ name: 'data.csv', content: Buffer.from('1,2,3\n').toString('base64') }] });
  assert.equal(r.isError, false, textOf(r));
  assert.equal(r.structuredContent.stdout, '1,2,3\n');
  assert.deepEqual(r.structuredContent.files.map((f) => f.name).sort(), ['raw.bin', 'sum.txt']);
  const resource = (name) => r.content.find((c) => c.type === 'resource' && c.resource.uri === `nsbox://out/${name}`);
  assert.equal(resource('sum.txt').resource.text, '6');
  assert.equal(resource('sum.txt').resource.mimeType, 'text/plain');
  const raw = resource('raw.bin').resource;
  assert.equal(raw.mimeType, 'application/octet-stream');
  assert.deepEqual([...Buffer.from(raw.blob, 'base64')], [...Array(256).keys()]);
  assert.match(textOf(r), /file: \/tmp\/out\/sum.txt \(1 bytes\)/);
  // The call's private directories are gone once it is answered.
  await waitFor('the private directories to be removed', () => privateDirs().length === 0, 5000);
});

test('files: a PNG the program writes comes back as an image', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const code = [
    'import os, struct, zlib',
    'w, h = 16, 8',
    'rows = b"".join(b"\\x00" + b"".join(bytes((x * 16, y * 32, 128)) for x in range(w)) for y in range(h))',
    'def chunk(kind, data):',
    '    body = kind + data',
    '    return struct.pack(">I", len(data)) + body + struct.pack(">I", zlib.crc32(body) & 0xffffffff)',
    'png = (b"\\x89PNG\\r\\n\\x1a\\n" + chunk(b"IHDR", struct.pack(">IIBBBBB", w, h, 8, 2, 0, 0, 0))',
    '       + chunk(b"IDAT", zlib.compress(rows)) + chunk(b"IEND", b""))',
    'os.makedirs("/tmp/out", exist_ok=True)',
    'open("/tmp/out/plot.png", "wb").write(png)',
    'print("plotted")',
  ].join('\n');
  const r = await call(client, { code });
  assert.equal(r.isError, false, textOf(r));
  assert.equal(r.structuredContent.stdout, 'plotted\n');
  const images = r.content.filter((c) => c.type === 'image');
  assert.equal(images.length, 1);
  assert.equal(images[0].mimeType, 'image/png');
  const png = Buffer.from(images[0].data, 'base64');
  assert.deepEqual([...png.subarray(0, 8)], [0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a]);
  assert.equal(png.toString('latin1', 12, 16), 'IHDR');
  assert.equal(png.readUInt32BE(16), 16);
  assert.equal(png.readUInt32BE(20), 8);
  const idatLength = png.readUInt32BE(33);
  assert.equal(png.toString('latin1', 37, 41), 'IDAT');
  assert.equal(inflateSync(png.subarray(41, 41 + idatLength)).length, 8 * (1 + 3 * 16));
});

test('files: bad names and bad base64 are input errors naming the argument', { timeout: 120000 }, async () => {
  const client = await mainServer();
  for (const files of [
    [{ name: '../escape', content: 'eA==' }],
    [{ name: 'a/b', content: 'eA==' }],
    [{ name: 'ok.txt', content: 'not base64!' }],
    [{ name: 'x', content: 'eA==' }, { name: 'x', content: 'eA==' }],
    'not an array',
  ]) {
    const r = await call(client, { code: 'print(1)', files });
    assert.equal(r.isError, true, JSON.stringify(files));
    assert.match(textOf(r), /'files'/);
  }
});

test('input errors name the argument (isError under 2025-11-25)', { timeout: 120000 }, async () => {
  const client = await mainServer();
  let r = await call(client, {});
  assert.equal(r.isError, true);
  assert.match(textOf(r), /'code'/);
  r = await call(client, { code: 42 });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /'code' must be a string/);
  r = await call(client, { code: 'print(1)', timeout: 'soon' });
  assert.equal(r.isError, true);
  assert.match(textOf(r), /'timeout'/);
});

test('audit log: each call is one chained record naming the MCP client, without the code', { timeout: 120000 }, async () => {
  const dir = mkdtempSync(join(tmpdir(), 'nsbox-mcp-audit-'));
  const log = join(dir, 'audit.log');
  const { client } = await connect(['--audit-log', log, '--session', 'conv-1', '--pool-size', '1']);
  const codes = ['print("marker-" + "a1b2c3")', 'import sys\nsys.exit(4)'];
  for (const code of codes) await call(client, { code });
  await client.close();
  const sha256 = (text) => createHash('sha256').update(text).digest('hex');
  const text = readFileSync(log, 'utf8');
  assert.ok(!text.includes('a1b2c3'), 'neither the code nor its output may reach the log');
  const lines = text.split('\n');
  assert.equal(lines.pop(), '', 'the log ends with a newline');
  assert.equal(lines.length, 2);
  let prev = null;
  lines.forEach((line, i) => {
    // Recomputed here: "hash" is the SHA-256 of the text before it, closed.
    const tail = line.length - 75;
    assert.equal(line.slice(tail, tail + 9), ',"hash":"');
    const record = JSON.parse(line);
    assert.equal(sha256(line.slice(0, tail) + '}'), record.hash, `record ${i + 1}: hash`);
    assert.equal(record.prev, prev, `record ${i + 1}: prev`);
    prev = record.hash;
    assert.equal(record.caller.client, 'mcp nsbox-mcp-test');
    assert.equal(record.session, 'conv-1');
    assert.equal(record.code.sha256, sha256(codes[i]));
    assert.equal(record.outcome.exit_code, [0, 4][i]);
  });
  rmSync(dir, { recursive: true, force: true });
});

test('a quota refusal is a tool error the model can read, and nothing runs', { timeout: 120000 }, async () => {
  const { client } = await connect(['--quota-runs-per-minute', '2', '--session', 'quota-1', '--pool-size', '1']);
  for (let i = 0; i < 2; i++) {
    const r = await call(client, { code: 'print("ran")' });
    assert.equal(r.isError, false);
    assert.equal(r.structuredContent.stdout, 'ran\n');
  }
  const refused = await call(client, { code: 'print("ran")' });
  assert.equal(refused.isError, true, 'a refusal is an error for the model');
  assert.match(refused.content[0].text, /^refused: this session's quota runs-per-minute \(2 per minute\) is used up; retry in \d+s\n/);
  assert.equal(refused.structuredContent.quota_refusal.quota, 'runs-per-minute');
  assert.ok(refused.structuredContent.quota_refusal.retry_after_ms > 0);
  assert.equal(refused.structuredContent.stdout, '', 'nothing ran');
  await client.close();
});

test('10 parallel calls all complete, concurrently', { timeout: 120000 }, async () => {
  const client = await mainServer();
  const code = 'import time\ntime.sleep(1)\nprint("ok")';
  let began = Date.now();
  await call(client, { code });
  const one = Date.now() - began;
  began = Date.now();
  const results = await Promise.all(Array.from({ length: 10 }, () => call(client, { code })));
  const ten = Date.now() - began;
  for (const r of results) assert.equal(r.structuredContent.stdout, 'ok\n');
  assert.ok(ten < 6 * one, `10 parallel calls took ${ten} ms, one took ${one} ms`);
});

// A server with no pooled sandbox: every descendant of it belongs to a run.
let quiet;
async function quietServer() {
  if (!quiet) quiet = await connect(['--timeout', '60s', '--pool-size', '0', '--max-concurrent', '2']);
  return quiet;
}

const isPython = (p) => p.comm.startsWith('python');

test('cancellation (AbortSignal) kills the sandbox of the call', { timeout: 120000 }, async () => {
  const { client, transport } = await quietServer();
  const ac = new AbortController();
  const pending = call(client, { code: 'while True: pass', timeout: 60 }, { signal: ac.signal, timeout: 120000 });
  pending.catch(() => {});
  await waitFor('the run to start', () => descendants(transport.pid).some(isPython), 30000);
  const running = descendants(transport.pid);
  ac.abort('test');
  await assert.rejects(pending);
  await waitFor('the run to be gone', () => running.every((p) => !alive(p)), 15000);
  assert.deepEqual(descendants(transport.pid), []);
  const r = await call(client, { code: 'print("still serving")' });
  assert.equal(r.structuredContent.stdout, 'still serving\n');
});

test('progress notifications arrive during a 12 s run', { timeout: 120000 }, async () => {
  const { client } = await quietServer();
  const progress = [];
  const r = await call(client, { code: 'import time\ntime.sleep(12)\nprint("done")', timeout: 40 },
    { onprogress: (p) => progress.push(p), timeout: 120000 });
  assert.equal(r.structuredContent.stdout, 'done\n');
  assert.ok(progress.length >= 1, 'no progress notification');
  for (let i = 1; i < progress.length; i++) assert.ok(progress[i].progress > progress[i - 1].progress);
});

test('a run nsbox cannot start is isError with a generic text and no path', { timeout: 120000 }, async () => {
  const empty = mkdtempSync(join(tmpdir(), 'nsbox-mcp-empty-'));
  try {
    const transport = new StdioClientTransport({
      command: NSBOX,
      args: ['mcp', '--rootfs', empty, '--pool-size', '0'],
      stderr: 'pipe',
    });
    const log = [];
    transport.stderr.on('data', (d) => log.push(String(d)));
    const client = new Client({ name: 'nsbox-mcp-test', version: '1.0.0' });
    await client.connect(transport);
    const r = await call(client, { code: 'print(1)' });
    await client.close();
    assert.equal(r.isError, true);
    assert.equal(textOf(r), GENERIC_FAILURE);
    assert.ok(!textOf(r).includes('/'));
    assert.equal(r.structuredContent, undefined);
    assert.ok(log.join('').includes('run_python'), 'the detail is not in the server log');
  } finally {
    rmSync(empty, { recursive: true, force: true });
  }
});

test('protocol versions via the SDK: each is echoed, calls work', { timeout: 120000 }, async () => {
  for (const version of VERSIONS) {
    const { client, transport, seen } = await connect(['--pool-size', '1'], { version });
    assert.equal(seen.protocolVersion, version);
    const { tools } = await client.listTools();
    const structured = version >= '2025-06-18';
    assert.equal(Boolean(tools[0].outputSchema), structured, version);
    const r = await call(client, { code: 'print(7)' });
    assert.equal(r.isError, false);
    assert.match(textOf(r), /7/);
    assert.equal(Boolean(r.structuredContent), structured, version);
    assert.equal(transport.pid > 0, true);
    await client.close();
  }
});

// ---- raw JSON-RPC on the server's stdio ----

// A failed test must not leave its server running (node would wait for
// it): SIGTERM, so that it removes what it made, then SIGKILL.
const rawChildren = new Set();
afterEach(async () => {
  const running = (child) => child.exitCode === null && child.signalCode === null;
  for (const child of rawChildren) {
    if (!running(child)) continue;
    child.kill('SIGTERM');
    for (let i = 0; i < 100 && running(child); i++) await sleep(100);
    if (running(child)) child.kill('SIGKILL');
  }
  rawChildren.clear();
});

function rawServer(extra = ['--pool-size', '0']) {
  const child = spawn(NSBOX, serverArgs(extra), { stdio: ['pipe', 'pipe', 'pipe'] });
  rawChildren.add(child);
  const lines = [];
  const waiters = [];
  createInterface({ input: child.stdout }).on('line', (line) => {
    lines.push(JSON.parse(line));
    while (waiters.length) waiters.shift()();
  });
  child.stderr.resume();
  const exited = new Promise((resolve) => child.on('exit', (code, signal) => resolve({ code, signal })));
  const send = (obj) => child.stdin.write(typeof obj === 'string' ? obj + '\n' : JSON.stringify(obj) + '\n');
  async function next(timeoutMs = 30000) {
    const end = Date.now() + timeoutMs;
    while (!lines.length) {
      if (Date.now() > end) assert.fail('no message from the server');
      await new Promise((r) => {
        waiters.push(r);
        setTimeout(r, 200);
      });
    }
    return lines.shift();
  }
  async function request(id, method, params) {
    send({ jsonrpc: '2.0', id, method, ...(params ? { params } : {}) });
    return next();
  }
  return { child, send, next, request, exited };
}

const initParams = (v) => ({ protocolVersion: v, capabilities: {}, clientInfo: { name: 'raw', version: '1' } });

test('protocol versions over raw JSON-RPC: supported ones echoed, others answered with the latest', { timeout: 120000 }, async () => {
  for (const [asked, expected] of [...VERSIONS.map((v) => [v, v]), ['2099-01-01', LATEST], ['1.0', LATEST]]) {
    const s = rawServer();
    const reply = await s.request(1, 'initialize', initParams(asked));
    assert.equal(reply.id, 1);
    assert.equal(reply.result.protocolVersion, expected, `asked ${asked}`);
    assert.equal(reply.result.serverInfo.name, 'nsbox');
    assert.ok(reply.result.capabilities.tools);
    s.child.stdin.end();
    assert.deepEqual(await s.exited, { code: 0, signal: null });
  }
});

test('malformed and invalid messages get errors and the server keeps serving', { timeout: 120000 }, async () => {
  const s = rawServer();
  await s.request(1, 'initialize', initParams('2024-11-05'));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  s.send('{"jsonrpc": "2.0", "id": 5, "method": ');
  let m = await s.next();
  assert.equal(m.error.code, -32700);
  assert.equal(m.id, null);
  s.send('[1, 2]');
  m = await s.next();
  assert.equal(m.error.code, -32600);
  m = await s.request(2, 'no/such/method');
  assert.equal(m.error.code, -32601);
  assert.equal(m.id, 2);
  s.send({ jsonrpc: '1.0', id: 3, method: 'ping' });
  m = await s.next();
  assert.equal(m.error.code, -32600);
  assert.equal(m.id, 3);
  m = await s.request(4, 'tools/call', { name: 'run_python', arguments: {} });
  assert.equal(m.error.code, -32602); // 2024-11-05: input errors are protocol errors
  assert.match(m.error.message, /'code'/);
  m = await s.request(5, 'tools/call', { name: 'no_such_tool', arguments: {} });
  assert.equal(m.error.code, -32602);
  m = await s.request('six', 'ping');
  assert.deepEqual(m, { jsonrpc: '2.0', id: 'six', result: {} });
  s.child.stdin.end();
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

test('stdin closing ends the server with status 0 and no process left, also mid-run', { timeout: 120000 }, async () => {
  const s = rawServer(['--pool-size', '2', '--timeout', '60s']);
  await s.request(1, 'initialize', initParams(LATEST));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  s.send({ jsonrpc: '2.0', id: 2, method: 'tools/call', params: { name: 'run_python', arguments: { code: 'while True: pass' } } });
  // The run and the pooled sandboxes.
  await waitFor('the run to start', () => descendants(s.child.pid).filter(isPython).length >= 1, 30000);
  await sleep(500);
  const before = descendants(s.child.pid);
  assert.ok(before.length > 0);
  const began = Date.now();
  s.child.stdin.end();
  assert.deepEqual(await s.exited, { code: 0, signal: null });
  assert.ok(Date.now() - began < 20000, `the server took ${Date.now() - began} ms to exit`);
  await waitFor('every sandbox process to be gone', () => before.every((p) => !alive(p)), 15000);
});

// A flood of tools/call requests, past the workers and the queue: every
// request gets exactly one answer, a result or a busy error (-32000) the
// client can retry on; none is dropped, and the server keeps serving.
const callMsg = (id, code) => ({ jsonrpc: '2.0', id, method: 'tools/call', params: { name: 'run_python', arguments: { code } } });

async function answersFor(s, ids, ms = 120000) {
  const got = new Map();
  const end = Date.now() + ms;
  while (got.size < ids.length) {
    const m = await s.next(Math.max(1000, end - Date.now()));
    if (m.method) continue; // notifications
    assert.ok(ids.includes(m.id), `an answer to an unknown id: ${JSON.stringify(m)}`);
    assert.ok(!got.has(m.id), `id ${m.id} answered twice`);
    got.set(m.id, m);
  }
  return got;
}

test('a flood of calls: every request answered once, a result or a retryable busy error', { timeout: 240000 }, async () => {
  const s = rawServer(['--pool-size', '1', '--max-concurrent', '2', '--max-queue', '3']);
  await s.request(1, 'initialize', initParams(LATEST));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  const ids = Array.from({ length: 40 }, (_, i) => 100 + i);
  s.child.stdin.write(ids.map((id) => JSON.stringify(callMsg(id, `import time; time.sleep(0.2); print(${id})`)) + '\n').join(''));
  const got = await answersFor(s, ids);
  let results = 0;
  let busy = 0;
  for (const [id, m] of got) {
    if (m.result) {
      assert.equal(m.result.isError, false, JSON.stringify(m));
      assert.equal(m.result.structuredContent.stdout, `${id}\n`);
      results++;
    } else {
      assert.equal(m.error.code, -32000, JSON.stringify(m));
      assert.match(m.error.message, /busy: .*try again later/);
      busy++;
    }
  }
  assert.ok(results >= 5 && busy >= 1, `${results} results, ${busy} busy`);
  assert.deepEqual(await s.request(2, 'ping'), { jsonrpc: '2.0', id: 2, result: {} });
  s.child.stdin.end();
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

test('stdin closing behind a flood: queued and running calls each get an error, none is dropped', { timeout: 240000 }, async () => {
  const s = rawServer(['--pool-size', '1', '--max-concurrent', '2', '--max-queue', '4', '--timeout', '60s']);
  await s.request(1, 'initialize', initParams(LATEST));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  const ids = Array.from({ length: 20 }, (_, i) => `call-${i}`);
  // The calls and the end of input in one go: the first two run, four wait.
  s.child.stdin.end(ids.map((id) => JSON.stringify(callMsg(id, 'import time; time.sleep(30)')) + '\n').join(''));
  const got = await answersFor(s, ids, 60000);
  const kinds = { killed: 0, not_run: 0, busy: 0 };
  for (const m of got.values()) {
    assert.equal(m.error?.code, -32000, JSON.stringify(m));
    if (/the server stopped \(its input closed\) before the call ended/.test(m.error.message)) kinds.killed++;
    else if (/the server stopped \(its input closed\): the call was not run/.test(m.error.message)) kinds.not_run++;
    else if (/^busy: /.test(m.error.message)) kinds.busy++;
    else assert.fail(`unexpected error: ${m.error.message}`);
  }
  assert.equal(kinds.killed + kinds.not_run, 6, JSON.stringify(kinds));
  assert.equal(kinds.busy, 14, JSON.stringify(kinds));
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

test('SIGTERM answers the calls in flight with an error naming it', { timeout: 120000 }, async () => {
  const s = rawServer(['--pool-size', '0', '--max-concurrent', '1', '--max-queue', '2', '--timeout', '60s']);
  await s.request(1, 'initialize', initParams(LATEST));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  s.send(callMsg('a', 'import time; time.sleep(30)'));
  s.send(callMsg('b', 'print(1)'));
  await waitFor('the run to start', () => descendants(s.child.pid).filter(isPython).length >= 1, 30000);
  s.child.kill('SIGTERM');
  const got = await answersFor(s, ['a', 'b'], 30000);
  assert.match(got.get('a').error.message, /the server stopped \(SIGTERM\) before the call ended: its sandbox was killed/);
  assert.match(got.get('b').error.message, /the server stopped \(SIGTERM\): the call was not run/);
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

test('a request reusing the id of a call in flight is refused; the call is answered once', { timeout: 120000 }, async () => {
  const s = rawServer(['--pool-size', '1']);
  await s.request(1, 'initialize', initParams(LATEST));
  s.send({ jsonrpc: '2.0', method: 'notifications/initialized' });
  s.send(callMsg(7, 'import time; time.sleep(2); print("first")'));
  s.send(callMsg(7, 'print("second")'));
  s.send({ jsonrpc: '2.0', id: 7, method: 'ping' });
  let m = await s.next();
  assert.equal(m.id, 7);
  assert.equal(m.error?.code, -32600, JSON.stringify(m));
  assert.match(m.error.message, /id 7 is the id of a call still in flight/);
  m = await s.next();
  assert.equal(m.error?.code, -32600, JSON.stringify(m));
  m = await s.next();
  assert.equal(m.id, 7);
  assert.equal(m.result.structuredContent.stdout, 'first\n', JSON.stringify(m));
  // Once answered, the id is free again (the client's to reuse or not).
  assert.deepEqual(await s.request(7, 'ping'), { jsonrpc: '2.0', id: 7, result: {} });
  s.child.stdin.end();
  assert.deepEqual(await s.exited, { code: 0, signal: null });
});

// mcp-state: per-session: one live sandbox for the connection.
const RUNSC = process.env.NSBOX_TEST_RUNTIME === 'runsc';
const PER_SESSION = ['--mcp-state', 'per-session', '--pool-size', '0', '--timeout', '10s'];

// Under runsc the server refuses the mode at its start, saying why: what
// each per-session test checks there instead.
async function refusedUnderRunsc() {
  if (!RUNSC) return false;
  const child = spawn(NSBOX, serverArgs(PER_SESSION), { stdio: ['pipe', 'pipe', 'pipe'] });
  let err = '';
  child.stderr.on('data', (d) => (err += String(d)));
  const code = await new Promise((resolve) => child.on('exit', (c) => resolve(c)));
  assert.notEqual(code, 0);
  assert.match(err, /per-session needs live sandboxes, which runtime runsc does not have/);
  return true;
}

test('per-session: state survives between calls, the value comes back, reset starts over', { timeout: 120000 }, async () => {
  if (await refusedUnderRunsc()) return;
  const { client } = await connect(PER_SESSION);
  const { tools } = await client.listTools();
  assert.deepEqual(tools.map((t) => t.name).sort(), ['reset', 'run_python']);
  assert.match(tools.find((t) => t.name === 'run_python').description, /State persists between calls/);
  let r = await call(client, { code: 'import json\nx = 41\n_ = open("/tmp/kept", "w").write("yes")' });
  assert.equal(r.structuredContent.exit_code, 0, textOf(r));
  assert.equal(r.structuredContent.value, null);
  r = await call(client, { code: 'json.dumps([x + 1, open("/tmp/kept").read()])' });
  assert.equal(r.structuredContent.value, `'[42, "yes"]'`, textOf(r));
  assert.match(textOf(r), /--- value ---\n'\[42, "yes"\]'\n/);
  assert.equal(r.structuredContent.sandbox_run, 2);
  const first = r.structuredContent.sandbox_id;
  r = await client.callTool({ name: 'reset', arguments: {} });
  assert.match(textOf(r), /^reset: the sandbox and everything in it are gone/);
  r = await call(client, { code: 'x' });
  assert.equal(r.structuredContent.exit_code, 1);
  assert.match(r.structuredContent.stderr, /NameError/);
  assert.notEqual(r.structuredContent.sandbox_id, first);
  assert.match(textOf(r), /fresh sandbox \(the session was reset\)/);
  await assert.rejects(client.callTool({ name: 'reset', arguments: { hard: true } }), /reset takes no arguments/);
});

test('per-session: files go to /tmp/in, /tmp/out is an outbox, and neither link is followed', { timeout: 120000 }, async () => {
  if (await refusedUnderRunsc()) return;
  const { client } = await connect(PER_SESSION);
  const { tools } = await client.listTools();
  assert.match(tools.find((t) => t.name === 'run_python').inputSchema.properties.files.description, /\/tmp\/in\/NAME/);
  const b64 = (text) => Buffer.from(text).toString('base64');
  let r = await call(client, {
    code: 'import os\ndata = open("/tmp/in/data.csv").read()\nos.makedirs("/tmp/out", exist_ok=True)\n'
      + '_ = open("/tmp/out/sum.txt", "w").write(str(sum(int(x) for x in data.split(","))))\ndata.strip()',
    files: [{ name: 'data.csv', content: b64('1,2,3\n') }],
  });
  assert.equal(r.isError, false, textOf(r));
  assert.equal(r.structuredContent.value, "'1,2,3'");
  assert.deepEqual(r.structuredContent.files.map((f) => f.name), ['sum.txt']);
  assert.equal(r.content.find((c) => c.type === 'resource').resource.text, '6');
  // Collected files leave /tmp/out; the input stays, as the rest of /tmp.
  r = await call(client, { code: 'import os\n(os.listdir("/tmp/out"), open("/tmp/in/data.csv").read())' });
  assert.deepEqual(r.structuredContent.files, []);
  assert.equal(r.structuredContent.value, "([], '1,2,3\\n')", textOf(r));
  // A new input of one name replaces the old.
  r = await call(client, { code: 'open("/tmp/in/data.csv").read()', files: [{ name: 'data.csv', content: b64('9\n') }] });
  assert.equal(r.structuredContent.value, "'9\\n'", textOf(r));
  // Both turned into links to a host directory anyone may write: the
  // launcher writes nothing there and collects nothing from it.
  const host = mkdtempSync(join(tmpdir(), 'nsbox-mcp-link-'));
  chmodSync(host, 0o777);
  writeFileSync(join(host, 'secret.txt'), 'host secret');
  chmodSync(join(host, 'secret.txt'), 0o644);
  try {
    r = await call(client, {
      code: `import os, shutil\nshutil.rmtree("/tmp/in")\nshutil.rmtree("/tmp/out")\n`
        + `os.symlink("${host}", "/tmp/in")\nos.symlink("${host}", "/tmp/out")`,
    });
    assert.equal(r.structuredContent.exit_code, 0, textOf(r));
    assert.deepEqual(r.structuredContent.files, []);
    assert.ok(r.structuredContent.files_refused.some((f) => f.name === '/tmp/out' && /symbolic link/.test(f.reason)),
      JSON.stringify(r.structuredContent.files_refused));
    r = await call(client, { code: 'print(1)', files: [{ name: 'planted.txt', content: b64('x') }] });
    assert.equal(r.isError, true, textOf(r));
    assert.match(textOf(r), /\/tmp\/in/);
    assert.deepEqual(readdirSync(host), ['secret.txt']);
    // The refusal ran nothing and kept the sandbox.
    r = await call(client, { code: 'import os\nos.path.islink("/tmp/in")' });
    assert.equal(r.structuredContent.value, 'True', textOf(r));
  } finally {
    rmSync(host, { recursive: true, force: true });
  }
});

// Processes whose command line names `marker`, seen from the host.
function marked(marker) {
  const found = [];
  for (const name of readdirSync('/proc')) {
    if (!/^\d+$/.test(name)) continue;
    try {
      if (readFileSync(`/proc/${name}/cmdline`, 'utf8').includes(marker)) found.push(Number(name));
    } catch {
      // gone
    }
  }
  return found;
}

test('per-session: a lost sandbox is replaced, and the client going away ends the last one', { timeout: 120000 }, async () => {
  if (await refusedUnderRunsc()) return;
  const { client, transport } = await connect(PER_SESSION);
  const marker = `nsbox-mcp-session-${process.pid}-${Date.now()}`;
  const start = `import subprocess, sys\nbg = subprocess.Popen([sys.executable, '-c', 'import time; time.sleep(600)', '${marker}'])\ny = 1`;
  let r = await call(client, { code: start });
  assert.equal(r.structuredContent.exit_code, 0, textOf(r));
  await waitFor('the background process', () => marked(marker).length === 1, 10000);
  // A run that ignores the interrupt at its timeout loses the sandbox.
  r = await call(client, { code: 'import signal, time\nsignal.signal(signal.SIGINT, signal.SIG_IGN)\nwhile True: time.sleep(0.1)', timeout: 1 });
  assert.equal(r.structuredContent.sandbox_lost, true, textOf(r));
  assert.match(textOf(r), /sandbox lost: its variables, files and processes are gone/);
  await waitFor('the lost sandbox\'s processes to go', () => marked(marker).length === 0, 10000);
  r = await call(client, { code: 'y' });
  assert.match(r.structuredContent.stderr, /NameError/);
  assert.match(textOf(r), /note: this call ran in a fresh sandbox \(the previous call's run lost its sandbox\)/);
  r = await call(client, { code: start.replace('y = 1', 'y = 2') });
  await waitFor('the new background process', () => marked(marker).length === 1, 10000);
  const server = transport.pid;
  await client.close();
  await waitFor('the server to exit', () => !existsSync(`/proc/${server}`), 20000);
  await waitFor('the session sandbox\'s processes to go', () => marked(marker).length === 0, 10000);
});
