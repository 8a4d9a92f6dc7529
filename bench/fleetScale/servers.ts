// The Redis servers of the fleet-scale bench: a redis-server of its own on a free port of
// 127.0.0.1 (so Redis's CPU, command counts and memory are this bench's alone, not those of
// whatever else uses the shared 6379), and a Cluster of three of them (three shards, no
// replicas), made with CLUSTER ADDSLOTSRANGE and CLUSTER MEET. Every server is killed at the end.
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { mkdtempSync, readFileSync, rmSync } from 'node:fs';
import { createServer } from 'node:net';
import { tmpdir } from 'node:os';
import { join } from 'node:path';
import { createClient } from 'redis';

const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

const clientOf = (port: number) => createClient({ socket: { host: '127.0.0.1', port, reconnectStrategy: false } });
export type Client = ReturnType<typeof clientOf>;

export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

/** A port on 127.0.0.1 free a moment ago (and its cluster bus port, +10000, too). */
async function freePort(): Promise<number> {
  for (;;) {
    const port = await new Promise<number>((resolve, reject) => {
      const server = createServer();
      server.on('error', reject);
      server.listen(0, '127.0.0.1', () => {
        const address = server.address();
        server.close(() => resolve(typeof address === 'object' && address !== null ? address.port : 0));
      });
    });
    if (port > 0 && port + 10000 < 65536) return port;
  }
}

/** One redis-server of the bench's own. */
export class BenchRedis {
  private child: ChildProcess | undefined;
  private dir: string | undefined;
  client: Client | undefined;
  constructor(readonly port: number) {}

  static async start(cluster = false): Promise<BenchRedis> {
    const server = new BenchRedis(await freePort());
    await server.spawn(cluster);
    return server;
  }

  private async spawn(cluster: boolean): Promise<void> {
    this.dir = mkdtempSync(join(tmpdir(), 'fleet-scale-redis-'));
    const args = ['--port', String(this.port), '--bind', '127.0.0.1', '--save', '', '--appendonly', 'no', '--dir', this.dir];
    if (cluster) args.push('--cluster-enabled', 'yes', '--cluster-config-file', 'nodes.conf', '--cluster-node-timeout', '5000');
    this.child = spawn('redis-server', args, { stdio: 'ignore' });
    const end = Date.now() + 5000;
    for (;;) {
      const client = clientOf(this.port);
      client.on('error', () => undefined);
      try {
        await client.connect();
        this.client = client;
        return;
      } catch {
        if (Date.now() > end) throw new Error(`redis-server on ${this.port} did not start within 5 s`);
        await sleep(20);
      }
    }
  }

  get pid(): number {
    return this.child?.pid ?? 0;
  }

  /** INFO section `section`, as field -> value. */
  async info(section: string): Promise<Record<string, string>> {
    const text = await this.client!.info(section);
    const out: Record<string, string> = {};
    for (const line of text.split('\r\n')) {
      const at = line.indexOf(':');
      if (at > 0) out[line.slice(0, at)] = line.slice(at + 1);
    }
    return out;
  }

  /** Redis's CPU so far (user + system), ms. */
  async cpuMs(): Promise<number> {
    const cpu = await this.info('cpu');
    return (Number(cpu.used_cpu_user) + Number(cpu.used_cpu_sys)) * 1000;
  }

  /** Calls and microseconds so far, by command (INFO commandstats). */
  async commands(): Promise<Map<string, { calls: number; usec: number }>> {
    const stats = await this.info('commandstats');
    const out = new Map<string, { calls: number; usec: number }>();
    for (const [name, value] of Object.entries(stats)) {
      const calls = /calls=(\d+)/.exec(value);
      const usec = /usec=(\d+)/.exec(value);
      if (calls && usec) out.set(name.replace(/^cmdstat_/, ''), { calls: Number(calls[1]), usec: Number(usec[1]) });
    }
    return out;
  }

  async usedMemory(): Promise<number> {
    return Number((await this.info('memory')).used_memory);
  }

  async stop(): Promise<void> {
    await this.client?.close().catch(() => undefined);
    this.client = undefined;
    const child = this.child;
    this.child = undefined;
    if (child !== undefined && child.exitCode === null && child.signalCode === null) {
      await new Promise((resolve) => {
        child.once('exit', resolve);
        child.kill('SIGKILL');
      });
    }
    if (this.dir !== undefined) rmSync(this.dir, { recursive: true, force: true });
  }
}

/** Commands' calls and time between two readings of commandstats. */
export function commandDelta(
  before: Map<string, { calls: number; usec: number }>,
  after: Map<string, { calls: number; usec: number }>,
): { calls: number; usec: number; byCommand: Map<string, { calls: number; usec: number }> } {
  let calls = 0;
  let usec = 0;
  const byCommand = new Map<string, { calls: number; usec: number }>();
  for (const [name, now] of after) {
    if (name === 'info') continue;
    const was = before.get(name) ?? { calls: 0, usec: 0 };
    const delta = { calls: now.calls - was.calls, usec: now.usec - was.usec };
    if (delta.calls === 0) continue;
    byCommand.set(name, delta);
    calls += delta.calls;
    usec += delta.usec;
  }
  return { calls, usec, byCommand };
}

/** A Redis Cluster of three masters (no replicas) on 127.0.0.1, slots split evenly. */
export class BenchCluster {
  private constructor(readonly shards: readonly BenchRedis[]) {}

  static async start(): Promise<BenchCluster> {
    const shards = await Promise.all([0, 1, 2].map(() => BenchRedis.start(true)));
    const ranges = [
      [0, 5460],
      [5461, 10922],
      [10923, 16383],
    ] as const;
    await Promise.all(shards.map((shard, i) => shard.client!.sendCommand(['CLUSTER', 'ADDSLOTSRANGE', String(ranges[i]![0]), String(ranges[i]![1])])));
    for (const shard of shards.slice(1)) await shards[0]!.client!.sendCommand(['CLUSTER', 'MEET', '127.0.0.1', String(shard.port)]);
    const end = Date.now() + 20_000;
    for (;;) {
      const states = await Promise.all(shards.map(async (shard) => (await shard.info('cluster')).cluster_enabled === '1' && /cluster_state:ok/.test(String(await shard.client!.sendCommand(['CLUSTER', 'INFO'])))));
      if (states.every(Boolean)) break;
      if (Date.now() > end) throw new Error('the bench Cluster did not reach cluster_state:ok within 20 s');
      await sleep(100);
    }
    // Every node must know every other's slots before clients ask.
    await sleep(500);
    return new BenchCluster(shards);
  }

  get ports(): number[] {
    return this.shards.map((shard) => shard.port);
  }

  async stop(): Promise<void> {
    await Promise.all(this.shards.map((shard) => shard.stop()));
  }
}

/** CPU time (user + system, ms) of process `pid` so far, from /proc; 0 where there is none. */
export function processCpuMs(pid: number): number {
  try {
    const text = readFileSync(`/proc/${pid}/stat`, 'utf8');
    const fields = text.slice(text.lastIndexOf(')') + 2).split(' ');
    const ticks = Number(fields[11]) + Number(fields[12]);
    return (ticks * 1000) / 100;
  } catch {
    return 0;
  }
}

/**
 * How long process `pid`'s main thread has waited, runnable, for a CPU so far (ms, from
 * /proc/<pid>/schedstat); 0 where there is none. A process short of CPU shows here, not in its
 * CPU time: on a busy machine a Redis at 10 % of a core may wait most of the time for one.
 */
export function processWaitMs(pid: number | 'self'): number {
  try {
    return Number(readFileSync(`/proc/${pid}/schedstat`, 'utf8').split(' ')[1]) / 1e6;
  } catch {
    return 0;
  }
}

/** The machine's load averages (1, 5, 15 min), as uptime says them. */
export function loadText(): string {
  try {
    return readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ');
  } catch {
    return '?';
  }
}
