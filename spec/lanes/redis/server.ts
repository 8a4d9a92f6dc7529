// The Redis the fleet-lane specs talk to: 127.0.0.1:6379 (`.ci/run` starts one when none
// answers). A spec file asks for it in its `before`: without a server the specs fail at once,
// saying so, rather than waiting on a client that reconnects for ever. Each run gets a key
// prefix of its own, and clears it afterwards.
import { randomBytes } from 'node:crypto';
import { spawn, spawnSync, type ChildProcess } from 'node:child_process';
import { createConnection, createServer, type Socket } from 'node:net';
import { Redis } from 'ioredis';
import { createClient } from 'redis';
import { RedisLaneStore, type RedisConnection, type RedisSubscriber } from '../../../lib/lanes/index.js';

export const REDIS_HOST = '127.0.0.1';
export const REDIS_PORT = 6379;

/** Resolves once a Redis answers PING on 127.0.0.1:6379 within a second; rejects with what to do otherwise. */
export function requireRedis(): Promise<void> {
  return new Promise((resolve, reject) => {
    const socket = createConnection({ host: REDIS_HOST, port: REDIS_PORT });
    const fail = (why: string): void => {
      socket.destroy();
      reject(
        new Error(
          `the fleet-lane specs need a Redis server on ${REDIS_HOST}:${REDIS_PORT}, and none answered PING (${why}). ` +
            `Start one (redis-server --save '' --appendonly no), or run .ci/run, which starts one.`,
        ),
      );
    };
    socket.setTimeout(1000, () => fail('no answer within 1 s'));
    socket.on('error', (error) => fail(error.message));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      socket.destroy();
      if (data.toString().startsWith('+PONG')) resolve();
      else fail(`it answered ${JSON.stringify(data.toString().trim())}`);
    });
  });
}

/** A key prefix no other run uses. */
export function uniquePrefix(name: string): string {
  return `agent-lanes-spec:${name}:${process.pid}:${randomBytes(4).toString('hex')}:`;
}

function nodeRedisClient() {
  return createClient({ socket: { host: REDIS_HOST, port: REDIS_PORT, reconnectStrategy: false } });
}

export type NodeRedis = ReturnType<typeof nodeRedisClient>;

/** A connected node-redis client (close it with `client.close()`). */
export async function nodeRedis(): Promise<NodeRedis> {
  const client = nodeRedisClient();
  client.on('error', () => undefined);
  await client.connect();
  return client;
}

/** An ioredis client (close it with `client.quit()`). */
export function ioredis(): Redis {
  const client = new Redis({ host: REDIS_HOST, port: REDIS_PORT, lazyConnect: false });
  client.on('error', () => undefined);
  return client;
}

/** Every key under `prefix`. */
export async function keysUnder(client: NodeRedis, prefix: string): Promise<string[]> {
  const keys: string[] = [];
  for await (const page of client.scanIterator({ MATCH: `${prefix.replace(/[*?[\]\\]/g, '\\$&')}*`, COUNT: 500 })) keys.push(...page);
  return keys;
}

/** Deletes every key under `prefix`. */
export async function clearPrefix(client: NodeRedis, prefix: string): Promise<void> {
  const keys = await keysUnder(client, prefix);
  if (keys.length > 0) await client.del(keys);
}

/** A port on 127.0.0.1 nothing listens on (it was free a moment ago). */
export function closedPort(): Promise<number> {
  return new Promise((resolve, reject) => {
    const server = createServer();
    server.on('error', reject);
    server.listen(0, REDIS_HOST, () => {
      const address = server.address();
      const port = typeof address === 'object' && address !== null ? address.port : 0;
      server.close(() => resolve(port));
    });
  });
}

/**
 * A RedisConnection that counts the scripts sent through it, keeps every wake-up its subscriber
 * hears, and can drop wake-ups: how a spec sees that a waiter is woken without asking, which
 * process a grant reached, and that a lost wake-up is caught all the same.
 */
export class CountingConnection implements RedisConnection {
  scripts = 0;
  dropWakeUps = false;
  dropped = 0;
  /** Every message its subscriber heard, dropped or not. */
  readonly heard: string[] = [];
  constructor(private readonly inner: RedisConnection) {}

  evalsha(sha1: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    this.scripts++;
    return this.inner.evalsha(sha1, keys, args);
  }

  eval(script: string, keys: readonly string[], args: readonly string[]): Promise<unknown> {
    return this.inner.eval(script, keys, args);
  }

  subscriber(onReady: () => void): RedisSubscriber {
    const inner = this.inner.subscriber(onReady);
    return {
      subscribe: (channel, sharded, listener) =>
        inner.subscribe(channel, sharded, (message) => {
          this.heard.push(message);
          if (!this.dropWakeUps) listener(message);
          else this.dropped++;
        }),
      unsubscribe: (channel, sharded) => inner.unsubscribe(channel, sharded),
      close: () => inner.close(),
    };
  }
}

/** Resolves after `ms`. */
export const sleep = (ms: number): Promise<void> => new Promise((resolve) => setTimeout(resolve, ms));

/** Resolves once `check` is true, looking every 5 ms; rejects with `what` after `ms`. */
export async function until(check: () => boolean | Promise<boolean>, what: string, ms = 5000): Promise<void> {
  const end = Date.now() + ms;
  while (!(await check())) {
    if (Date.now() > end) throw new Error(`timed out after ${ms} ms waiting for ${what}`);
    await sleep(5);
  }
}

let requests = 0;
/** The arguments a lane change starts with when a spec runs its script by hand: a request id of its own, and how long its answer is kept (ms). */
export function requestArgs(): [string, string] {
  return [`spec-request:${process.pid}:${++requests}`, '5000'];
}

/**
 * A TCP proxy on 127.0.0.1 in front of a Redis: what a flaky network does to a client, on cue.
 * `hold()` keeps what clients send (a request is then in flight), `swallow()` passes requests on
 * but drops the answers (Redis acts, the client never hears), `cut()` resets every connection
 * (clients reconnect through it), `pass()` goes back to forwarding.
 */
export class RedisProxy {
  private readonly server = createServer((client) => this.accept(client));
  private readonly pairs = new Set<{ client: Socket; upstream: Socket }>();
  private mode: 'pass' | 'hold' | 'swallow' = 'pass';
  /** Bytes clients sent while held, and answers dropped while swallowing. */
  held = 0;
  swallowed = 0;
  /** What clients sent while held (the start of it). */
  heldText = '';
  port = 0;

  constructor(private readonly upstreamPort = REDIS_PORT) {}

  listen(): Promise<number> {
    return new Promise((resolve, reject) => {
      this.server.once('error', reject);
      this.server.listen(0, REDIS_HOST, () => {
        const address = this.server.address();
        this.port = typeof address === 'object' && address !== null ? address.port : 0;
        resolve(this.port);
      });
    });
  }

  hold(): void {
    this.mode = 'hold';
  }

  swallow(): void {
    this.mode = 'swallow';
  }

  pass(): void {
    this.mode = 'pass';
  }

  /** Resets every connection open now. */
  cut(): void {
    for (const { client, upstream } of this.pairs) {
      client.resetAndDestroy();
      upstream.destroy();
    }
    this.pairs.clear();
  }

  close(): Promise<void> {
    this.cut();
    return new Promise((resolve) => this.server.close(() => resolve()));
  }

  private accept(client: Socket): void {
    const upstream = createConnection({ host: REDIS_HOST, port: this.upstreamPort });
    const pair = { client, upstream };
    this.pairs.add(pair);
    const drop = (): void => {
      this.pairs.delete(pair);
      client.destroy();
      upstream.destroy();
    };
    client.on('error', drop);
    upstream.on('error', drop);
    client.on('close', drop);
    upstream.on('close', drop);
    client.on('data', (data) => {
      if (this.mode === 'hold') {
        this.held += data.length;
        if (this.heldText.length < 4096) this.heldText += data.toString('latin1');
      }
      else upstream.write(data);
    });
    upstream.on('data', (data) => {
      if (this.mode === 'swallow') this.swallowed += data.length;
      else client.write(data);
    });
  }
}

/** A redis-server of the spec's own on a free port (no persistence): restart it, flush it, stop it. */
export class OwnRedis {
  private child: ChildProcess | undefined = undefined;
  constructor(readonly port: number) {}

  /** Starts it and resolves once it answers PING. */
  async start(): Promise<void> {
    const child = spawn('redis-server', ['--port', String(this.port), '--bind', REDIS_HOST, '--save', '', '--appendonly', 'no'], { stdio: 'ignore' });
    this.child = child;
    const end = Date.now() + 5000;
    for (;;) {
      if (await pings(this.port)) return;
      if (Date.now() > end) throw new Error(`redis-server on port ${this.port} did not answer PING within 5 s`);
      await sleep(20);
    }
  }

  /** Its process id (while it runs). */
  get pid(): number | undefined {
    return this.child?.pid;
  }

  /** Stops it (SIGKILL: its data is gone) and resolves once it exited. */
  stop(): Promise<void> {
    const child = this.child;
    this.child = undefined;
    if (child === undefined || child.exitCode !== null || child.signalCode !== null) return Promise.resolve();
    return new Promise((resolve) => {
      child.once('exit', () => resolve());
      child.kill('SIGKILL');
    });
  }
}

/** True once a redis-server is installed here. */
export function hasRedisServer(): boolean {
  return spawnSync('redis-server', ['--version'], { stdio: 'ignore' }).status === 0;
}

function pings(port: number): Promise<boolean> {
  return new Promise((resolve) => {
    const socket = createConnection({ host: REDIS_HOST, port });
    socket.setTimeout(500, () => {
      socket.destroy();
      resolve(false);
    });
    socket.on('error', () => resolve(false));
    socket.on('connect', () => socket.write('PING\r\n'));
    socket.on('data', (data) => {
      socket.destroy();
      resolve(data.toString().startsWith('+PONG'));
    });
  });
}

type StoreOptions = Partial<ConstructorParameters<typeof RedisLaneStore>[0]>;

/**
 * A spec file's Redis, set up in its `describe`: a connected node-redis `client` (made in a
 * `before`, once a server answers), a key `prefix` of its own, `store()` for stores on that
 * prefix (a 3 s lease unless told), `stores` to close any other store a spec makes, and
 * `closers` for anything else a spec opens. Its `after` closes every store, then the closers,
 * clears the prefix and closes the client.
 */
export function redisFixture(name: string) {
  const prefix = uniquePrefix(name);
  const stores: RedisLaneStore[] = [];
  const closers: Array<() => Promise<unknown>> = [];
  let connected: NodeRedis | undefined;
  before(async () => {
    await requireRedis();
    connected = await nodeRedis();
  });
  after(async () => {
    await Promise.all(stores.map((s) => s.close()));
    await Promise.all(closers.map((close) => close()));
    if (connected !== undefined) {
      await clearPrefix(connected, prefix);
      await connected.close();
    }
  });
  return {
    prefix,
    stores,
    closers,
    /** The client (only once the file's `before` ran). */
    get client(): NodeRedis {
      if (connected === undefined) throw new Error('the Redis fixture is used before its before hook connected it');
      return connected;
    },
    store(options: StoreOptions = {}): RedisLaneStore {
      const made = new RedisLaneStore({ client: this.client, prefix, leaseSeconds: 3, ...options });
      stores.push(made);
      return made;
    },
  };
}
