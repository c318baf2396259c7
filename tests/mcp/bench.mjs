// make bench: the round trip of an MCP tools/call of run_python `print(1)`
// through the official SDK client (Client + StdioClientTransport) to
// `nsbox mcp` with its pool warm, against a cold `chroot ROOTFS python -`
// running `print(1)`, measured interleaved (mcp chroot mcp chroot ...) in
// the same run so that load drifts hit both alike. Sequential calls.
//
// usage: node tests/mcp/bench.mjs   (tests/bench/run.sh sets the environment)
// Environment: NSBOX_BIN, NSBOX_TEST_ROOTFS, NSBOX_MCP_NODE_MODULES (from
// tests/mcp/run.sh --install-only), BENCH_MCP_N (timed calls, default 200),
// BENCH_MCP_WARMUP (default 20). chroot needs root: without it only the
// MCP figures are printed.
import { spawn } from 'node:child_process';
import { createRequire } from 'node:module';
import { join } from 'node:path';

const NSBOX = process.env.NSBOX_BIN;
const ROOTFS = process.env.NSBOX_TEST_ROOTFS;
const MODULES = process.env.NSBOX_MCP_NODE_MODULES;
if (!NSBOX || !ROOTFS || !MODULES) {
  console.error('bench-mcp: NSBOX_BIN, NSBOX_TEST_ROOTFS and NSBOX_MCP_NODE_MODULES must be set');
  process.exit(2);
}
const N = Number(process.env.BENCH_MCP_N || 200);
const WARMUP = Number(process.env.BENCH_MCP_WARMUP || 20);
const require = createRequire(join(MODULES, 'package.json'));
const { Client } = require('@modelcontextprotocol/sdk/client/index.js');
const { StdioClientTransport } = require('@modelcontextprotocol/sdk/client/stdio.js');

const withChroot = process.getuid() === 0;

function chrootOnce() {
  return new Promise((resolve, reject) => {
    const began = performance.now();
    const child = spawn('chroot', [ROOTFS, 'python', '-'], {
      stdio: ['pipe', 'pipe', 'inherit'],
      env: { PATH: '/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin', LANG: 'C.UTF-8', HOME: '/tmp' },
    });
    let out = '';
    child.stdout.on('data', (d) => (out += d));
    child.on('error', reject);
    child.on('close', (code) => {
      const ms = performance.now() - began;
      if (code !== 0 || out !== '1\n') reject(new Error(`chroot python: exit ${code}, stdout ${JSON.stringify(out)}`));
      else resolve(ms);
    });
    child.stdin.end('print(1)\n');
  });
}

async function mcpOnce(client, served) {
  const began = performance.now();
  const r = await client.callTool({ name: 'run_python', arguments: { code: 'print(1)' } });
  const ms = performance.now() - began;
  if (r.isError || r.structuredContent.stdout !== '1\n') throw new Error(`mcp call failed: ${JSON.stringify(r.content)}`);
  served[r.structuredContent.served] = (served[r.structuredContent.served] || 0) + 1;
  return ms;
}

const pct = (xs, p) => {
  const s = [...xs].sort((a, b) => a - b);
  return s[Math.min(s.length - 1, Math.max(0, Math.ceil((p / 100) * s.length) - 1))];
};

const transport = new StdioClientTransport({
  command: NSBOX,
  args: ['mcp', '--rootfs', ROOTFS, '--pool-size', '2'],
  stderr: 'ignore',
});
const client = new Client({ name: 'nsbox-mcp-bench', version: '1.0.0' });
await client.connect(transport);
const warmServed = {};
for (let i = 0; i < WARMUP; i++) {
  await mcpOnce(client, warmServed);
  if (withChroot) await chrootOnce();
}
const mcp = [];
const chroot = [];
const served = {};
for (let i = 0; i < N; i++) {
  mcp.push(await mcpOnce(client, served));
  if (withChroot) chroot.push(await chrootOnce());
}
await client.close();

const line = (name, xs) =>
  `${name.padEnd(28)} p50 ${pct(xs, 50).toFixed(2).padStart(8)} ms   p99 ${pct(xs, 99).toFixed(2).padStart(8)} ms   ` +
  `min ${Math.min(...xs).toFixed(2).padStart(8)} ms`;
console.log(`bench-mcp: ${N} sequential tools/call print(1) after ${WARMUP} warm-up calls, interleaved with chroot`);
console.log(line('mcp tools/call (pool warm)', mcp));
console.log(`${''.padEnd(28)} served: ${Object.entries(served).map(([k, v]) => `${k} ${v}`).join(', ')}`);
if (withChroot) {
  console.log(line('chroot python - (cold)', chroot));
  console.log(`ratio p50 mcp / p50 chroot: ${(pct(mcp, 50) / pct(chroot, 50)).toFixed(2)} (target <= 0.5)`);
} else {
  console.log('chroot: skipped (needs root)');
}
