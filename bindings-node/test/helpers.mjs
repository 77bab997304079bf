// Shared by the test files: the Redis the harness started, a private one when a test must stop
// and restart its server, and a way to ask Redis what happened (redis-cli, from redis-tools).
import { execFileSync, spawn } from 'node:child_process'
import { setTimeout as sleep } from 'node:timers/promises'

export const REDIS_URL = process.env.RL_TEST_REDIS_URL
export const REDIS_PORT = process.env.RL_TEST_REDIS_PORT
if (!REDIS_URL || !REDIS_PORT) {
  throw new Error('run the tests under the harness: target/debug/rl-harness run -- node --test ... (see test.sh)')
}

/** Runs one Redis command with redis-cli and returns its raw output (trimmed). */
export function redisCli(port, ...args) {
  return execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', String(port), ...args], { encoding: 'utf8', stdio: ['ignore', 'pipe', 'pipe'] }).trim()
}

/** Calls of each command so far, from INFO commandstats: { evalsha: 12, ... }. */
export function commandCalls(port) {
  const calls = {}
  for (const line of redisCli(port, 'INFO', 'commandstats').split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (m) calls[m[1]] = Number(m[2])
  }
  return calls
}

/** A unique key per test, so files running in parallel never share a window. */
let n = 0
export function uniqueKey(name) {
  return `node-test:${name}:${process.pid}:${Date.now()}:${n++}`
}

/** The most timestamps (integer ms) inside any span (t - span, t]. */
export function maxInSpan(times, span) {
  const t = [...times].sort((a, b) => a - b)
  let best = 0
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i] - t[j] >= span) j++
    best = Math.max(best, i - j + 1)
  }
  return best
}

/**
 * A redis-server of this test's own (from `rl-harness start`), which the test may freeze, kill and
 * bring back on the same port. `await stop()` must run in an `after` hook.
 */
export class PrivateRedis {
  static start() {
    const harness = process.env.RL_HARNESS
    if (!harness) throw new Error('RL_HARNESS is not set: run under rl-harness')
    const info = JSON.parse(execFileSync(harness, ['start', '--json'], { encoding: 'utf8' }))
    return new PrivateRedis(harness, info)
  }

  constructor(harness, info) {
    this.harness = harness
    this.url = info.url
    this.port = info.port
    this.pid = info.pid
    this.dir = info.dir
    // The same flags as the harness (tests/harness/src/server.rs), for restarting on this port.
    // (Not /proc/PID/exe: Debian's redis-server is a link that dispatches on its own name.)
    this.binary = process.env.RL_REDIS_SERVER || 'redis-server'
    this.args = ['--bind', '127.0.0.1', '--port', String(this.port), '--save', '', '--appendonly', 'no', '--daemonize', 'no', '--protected-mode', 'no', '--dir', this.dir, '--logfile', `${this.dir}/redis.log`]
    this.child = null
  }

  freeze() {
    process.kill(this.pid, 'SIGSTOP')
  }

  thaw() {
    process.kill(this.pid, 'SIGCONT')
  }

  /** Kills the server at once (connections are refused from now on). */
  async kill() {
    process.kill(this.pid, 'SIGKILL')
    for (let i = 0; i < 100; i++) {
      try {
        process.kill(this.pid, 0)
      } catch {
        return
      }
      await sleep(20)
    }
  }

  /** Starts the same server again, on the same port, and waits until it answers. */
  async restart() {
    this.child = spawn(this.binary, this.args, { stdio: 'ignore' })
    this.pid = this.child.pid
    for (let i = 0; i < 250; i++) {
      try {
        if (redisCli(this.port, 'PING') === 'PONG') return
      } catch {}
      await sleep(20)
    }
    throw new Error('redis-server did not come back')
  }

  async stop() {
    const child = this.child
    if (child && child.exitCode === null && child.signalCode === null) {
      // Restarted by us: our child, stopped and reaped here (the harness then removes the directory).
      const exited = new Promise((resolve) => child.once('exit', resolve))
      child.kill('SIGTERM')
      await exited
    }
    try {
      process.kill(this.pid, 'SIGCONT')
    } catch {}
    execFileSync(this.harness, ['stop', '--pid', String(this.pid), '--dir', this.dir])
  }
}
