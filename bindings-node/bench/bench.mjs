// rl-limiter against rate-limiter-flexible's RateLimiterRedis (over ioredis), side by side in one
// process, against one Redis, in three scenarios (issue 13, item 5):
//
//   lone  1 caller at a time, one key, limit 5000 / 1000 ms (a Node handler at low load)
//   hot   64 concurrent callers, one key, limit 5000 / 1000 ms
//   many  64 concurrent callers, each call on a random key out of 100,000, limit 100 / 1000 ms
//
//   node bench.mjs --url redis://127.0.0.1:6379 [--label pinned] [--scenarios lone,hot,many]
//                  [--seconds 5] [--warmup-seconds 1] [--rounds 2] [--keys 100000]
//                  [--only rlf,rl,rl-nodc] [--json-out FILE] [--memory]
//
// Contenders per scenario:
//   rlf       RateLimiterRedis with its defaults (one EVAL-like script call per consume).
//   rl        rl-limiter with its defaults: the local denial cache is on, so once a hot key is
//             full most of its denials are decided here without Redis (exact, see the README).
//   rl-nodc   rl-limiter with denialCache: false: every decision is a Redis script call, like
//             for like with rlf (one-key scenarios only; with 100,000 keys nothing is denied).
// --rounds N runs every contender N times, rotating which goes first, and reports the median
// (on a shared machine single runs swing widely).
//
// Per run: decisions/s (completed calls, allowed or denied), latency P50/P99/P99.9 of one call as
// its caller sees it (promise created -> settled), client CPU (this whole process: the JavaScript
// thread, rl's runtime threads, libuv) and Redis CPU (INFO commandstats) per decision, admitted/s,
// and for one key the most permits admitted in any span of the window (rl: from the Decision's
// nowMs, Redis TIME at the decision; rlf: from client-side completion times, which lag).
//
// --memory also measures Redis bytes per idle key for both (MEMORY USAGE summed over every Redis
// key a library made for 2,000 user keys, each after 1 and after 10 admitted calls, / 2,000).
import { createRequire } from 'node:module'
import { appendFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const Redis = require('ioredis')
const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible')
const { Limiter } = require('rl-limiter')

const SCENARIOS = {
  lone: { concurrency: 1, keys: 1, limit: 5000, windowMs: 1000, what: '1 caller, one key, 5000/1000 ms' },
  hot: { concurrency: 64, keys: 1, limit: 5000, windowMs: 1000, what: '64 callers, one key, 5000/1000 ms' },
  many: { concurrency: 64, keys: 100_000, limit: 100, windowMs: 1000, what: '64 callers, random key of 100,000, 100/1000 ms' },
}

function parseArgs(argv) {
  const o = { url: process.env.RL_TEST_REDIS_URL, label: '', scenarios: ['lone', 'hot', 'many'], seconds: 5, warmupSeconds: 1, rounds: 2, keys: 100_000, only: null, jsonOut: null, memory: false }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => argv[++i]
    if (a === '--url') o.url = next()
    else if (a === '--label') o.label = next()
    else if (a === '--scenarios') o.scenarios = next().split(',')
    else if (a === '--seconds') o.seconds = Number(next())
    else if (a === '--warmup-seconds') o.warmupSeconds = Number(next())
    else if (a === '--rounds') o.rounds = Number(next())
    else if (a === '--keys') o.keys = Number(next())
    else if (a === '--only') o.only = next()
    else if (a === '--json-out') o.jsonOut = next()
    else if (a === '--memory') o.memory = true
    else throw new Error(`unknown argument ${a}`)
  }
  if (!o.url) throw new Error('--url (or RL_TEST_REDIS_URL) is required')
  for (const s of o.scenarios) if (!SCENARIOS[s]) throw new Error(`unknown scenario ${s}`)
  SCENARIOS.many.keys = o.keys
  return o
}

/** Most timestamps (ms, any order) inside any half-open span (t - span, t]. */
function maxInSpan(times, span) {
  const t = Float64Array.from(times).sort()
  let best = 0
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i] - t[j] >= span) j++
    best = Math.max(best, i - j + 1)
  }
  return best
}

/** Total microseconds Redis spent in scripts and other top-level commands so far. */
async function redisUsec(admin) {
  const info = await admin.info('commandstats')
  let usec = 0
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=\d+,usec=(\d+)/gm)) {
    // Commands run inside a script are counted in the script's own time as well.
    if (['eval', 'evalsha', 'fcall', 'fcall_ro', 'ping', 'script', 'function'].includes(m[1])) usec += Number(m[2])
  }
  return usec
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/**
 * Runs `call(key)` from `concurrency` loops for `seconds`. `call` resolves to `{ allowed, atMs }`
 * (atMs: the library's own decision time, or undefined). `keyOf()` picks each call's key.
 */
async function drive(call, keyOf, seconds, concurrency) {
  const latencies = []
  const admittedServer = []
  const admittedClient = []
  let calls = 0
  let allowed = 0
  let errors = 0
  let firstError = null
  const modes = {}
  const origin = performance.timeOrigin
  const cpu0 = process.cpuUsage()
  const start = performance.now()
  const end = start + seconds * 1000
  async function loop() {
    while (performance.now() < end) {
      const key = keyOf()
      const t0 = performance.now()
      let r
      try {
        r = await call(key)
      } catch (e) {
        errors++
        firstError ??= e
        continue
      }
      const t1 = performance.now()
      latencies.push(t1 - t0)
      calls++
      if (r.mode !== undefined) modes[r.mode] = (modes[r.mode] ?? 0) + 1
      if (r.allowed) {
        allowed++
        admittedClient.push(origin + t1)
        if (r.atMs !== undefined) admittedServer.push(r.atMs)
      }
    }
  }
  await Promise.all(Array.from({ length: concurrency }, loop))
  const elapsed = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpu0)
  const sorted = Float64Array.from(latencies).sort()
  return {
    calls,
    decisionsPerSec: calls / elapsed,
    admittedPerSec: allowed / elapsed,
    errors,
    modes,
    firstError: firstError ? String(firstError) : null,
    clientCpuUs: (cpu.user + cpu.system) / calls,
    p50ms: percentile(sorted, 50),
    p99ms: percentile(sorted, 99),
    p999ms: percentile(sorted, 99.9),
    admittedServer,
    admittedClient,
  }
}

/** A contender: `open(scenario, prefix)` -> { call(key) -> {allowed, atMs}, reset(key), close() }. */
const CONTENDERS = {
  rlf: {
    name: 'rate-limiter-flexible',
    async open(s, prefix, url) {
      const client = new Redis(url, { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
      await client.ping()
      const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: prefix, points: s.limit, duration: s.windowMs / 1000 })
      return {
        async call(key) {
          try {
            await limiter.consume(key, 1)
            return { allowed: true, atMs: undefined }
          } catch (e) {
            if (e instanceof RateLimiterRes) return { allowed: false, atMs: undefined }
            throw e
          }
        },
        reset: (key) => limiter.delete(key),
        close: async () => client.disconnect(),
      }
    },
  },
  rl: {
    name: 'rl-limiter',
    open: (s, prefix, url) => openRl(s, prefix, url, {}),
  },
  'rl-nodc': {
    name: 'rl-limiter, denialCache: false',
    oneKeyOnly: true,
    open: (s, prefix, url) => openRl(s, prefix, url, { denialCache: false }),
  },
}

// localFallback: false: on this shared 2-core machine Redis's round trip passes degradeRttMs (5 ms)
// under load, and the limiter would then decide most calls from its local fallback (mode local),
// which is not what is compared here. Every rl decision below is Redis's (or the denial cache's).
async function openRl(s, prefix, url, options) {
  const limiter = new Limiter(url, { keyPrefix: prefix, localFallback: false, ...options })
  await limiter.ping()
  const o = { limit: s.limit, windowMs: s.windowMs }
  return {
    async call(key) {
      const d = await limiter.acquire(key, o)
      return { allowed: d.allowed, atMs: d.nowMs, mode: d.mode }
    },
    reset: (key) => limiter.reset(key),
    close: () => limiter.close(),
  }
}

async function runOne(id, s, opts, admin, stamp) {
  const c = CONTENDERS[id]
  const prefix = `b:${id}:${stamp}:`
  const lib = await c.open(s, prefix, opts.url)
  const hotKey = 'hot'
  const keyOf = s.keys === 1 ? () => hotKey : () => `u${(Math.random() * s.keys) | 0}`
  if (opts.warmupSeconds > 0) await drive(lib.call, keyOf, opts.warmupSeconds, s.concurrency)
  if (s.keys === 1) await lib.reset(hotKey)
  const before = await redisUsec(admin)
  const r = await drive(lib.call, keyOf, opts.seconds, s.concurrency)
  r.redisUs = ((await redisUsec(admin)) - before) / r.calls
  await lib.close()
  return {
    decisionsPerSec: Math.round(r.decisionsPerSec),
    p50ms: +r.p50ms.toFixed(3),
    p99ms: +r.p99ms.toFixed(3),
    p999ms: +r.p999ms.toFixed(3),
    clientCpuUs: +r.clientCpuUs.toFixed(2),
    redisUs: +r.redisUs.toFixed(2),
    admittedPerSec: Math.round(r.admittedPerSec),
    maxAdmittedInWindow: s.keys === 1 ? maxInSpan(r.admittedServer.length ? r.admittedServer : r.admittedClient, s.windowMs) : null,
    errors: r.errors,
    modes: r.modes,
    firstError: r.firstError,
  }
}

const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}

/** Redis bytes per user key: MEMORY USAGE of every Redis key `prefix` made, / users. */
async function bytesPerKey(admin, prefix, users) {
  let total = 0
  let n = 0
  let cursor = '0'
  do {
    const [next, keys] = await admin.scan(cursor, 'MATCH', `*${prefix}*`, 'COUNT', 1000)
    cursor = next
    for (const k of keys) {
      total += Number(await admin.memory('USAGE', k, 'SAMPLES', '0'))
      n++
    }
  } while (cursor !== '0')
  return { bytesPerUserKey: Math.round(total / users), redisKeysPerUserKey: +(n / users).toFixed(2) }
}

async function memory(opts, admin) {
  const users = 2000
  // A 60 s window, so that no key expires while it is measured.
  const s = { ...SCENARIOS.many, windowMs: 60_000 }
  const out = {}
  for (const id of ['rlf', 'rl']) {
    for (const calls of [1, 10]) {
      const prefix = `mem${calls}:${id}:${Date.now()}:`
      const lib = await CONTENDERS[id].open(s, prefix, opts.url)
      for (let i = 0; i < users; i += 100) {
        const batch = []
        for (let j = i; j < i + 100; j++) for (let c = 0; c < calls; c++) batch.push(lib.call(`m${j}`))
        await Promise.all(batch)
      }
      await lib.close()
      out[`${CONTENDERS[id].name}, ${calls} admitted`] = await bytesPerKey(admin, prefix, users)
    }
  }
  return out
}

const opts = parseArgs(process.argv.slice(2))
const admin = new Redis(opts.url)
const report = { label: opts.label, node: process.version, scenarios: {} }
const title = (s) => `${s.what}${opts.label ? ` [${opts.label}]` : ''}`
for (const name of opts.scenarios) {
  const s = SCENARIOS[name]
  let ids = Object.keys(CONTENDERS).filter((id) => !(CONTENDERS[id].oneKeyOnly && s.keys > 1))
  if (opts.only) ids = ids.filter((id) => opts.only.split(',').includes(id))
  const runs = Object.fromEntries(ids.map((id) => [id, []]))
  for (let round = 0; round < opts.rounds; round++) {
    const order = ids.map((_, i) => ids[(i + round) % ids.length])
    for (const id of order) runs[id].push(await runOne(id, s, opts, admin, `${Date.now()}:${round}`))
  }
  const table = {}
  const med = {}
  for (const id of ids) {
    const rs = runs[id]
    med[id] = Object.fromEntries(['decisionsPerSec', 'p50ms', 'p99ms', 'p999ms', 'clientCpuUs', 'redisUs', 'admittedPerSec'].map((f) => [f, +median(rs.map((r) => r[f])).toFixed(3)]))
    med[id].maxAdmittedInWindow = s.keys === 1 ? Math.max(...rs.map((r) => r.maxAdmittedInWindow)) : null
    med[id].errors = rs.reduce((a, r) => a + r.errors, 0)
    med[id].rounds = rs.map((r) => r.decisionsPerSec)
    // rl's decisions by mode over all rounds, as shares (normal, local fallback, lease...).
    const modes = {}
    for (const r of rs) for (const [m, n] of Object.entries(r.modes)) modes[m] = (modes[m] ?? 0) + n
    const total = Object.values(modes).reduce((a, b) => a + b, 0)
    med[id].modes = Object.entries(modes).map(([m, n]) => `${m} ${((100 * n) / total).toFixed(1)}%`).join(', ')
    const firstError = rs.find((r) => r.firstError)?.firstError
    if (firstError) med[id].firstError = firstError
    table[CONTENDERS[id].name] = {
      'decisions/s': Math.round(med[id].decisionsPerSec),
      'P50 ms': med[id].p50ms,
      'P99 ms': med[id].p99ms,
      'P99.9 ms': med[id].p999ms,
      'client CPU µs/dec': med[id].clientCpuUs,
      'Redis µs/dec': med[id].redisUs,
      'admitted/s': Math.round(med[id].admittedPerSec),
      [`max in any ${s.windowMs} ms`]: med[id].maxAdmittedInWindow ?? '-',
      'each round': med[id].rounds.join(' '),
      modes: med[id].modes || '-',
      errors: med[id].errors,
    }
  }
  console.log(`\n${title(s)}: median of ${opts.rounds} round(s), ${opts.seconds} s each`)
  console.table(table)
  if (med.rlf) {
    for (const id of ids.filter((i) => i !== 'rlf')) {
      console.log(`  ${CONTENDERS[id].name} / rlf: ${(med[id].decisionsPerSec / med.rlf.decisionsPerSec).toFixed(2)}x decisions/s; P99 ${med[id].p99ms} vs ${med.rlf.p99ms} ms`)
    }
  }
  for (const [id, m] of Object.entries(med)) if (m.firstError) console.log(`  ${id} first error: ${m.firstError}`)
  report.scenarios[name] = med
}
if (opts.memory) {
  report.memory = await memory(opts, admin)
  console.log('\nRedis bytes per idle user key (MEMORY USAGE of all its Redis keys, 2,000 keys)')
  console.table(report.memory)
}
admin.disconnect()
if (opts.jsonOut) appendFileSync(opts.jsonOut, JSON.stringify(report) + '\n')
