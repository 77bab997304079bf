// One key, limit L per W ms, C concurrent callers, D seconds, against one Redis: rl-limiter and
// rate-limiter-flexible's RateLimiterRedis (over ioredis) in the same process, one after the other.
//
//   node bench.mjs --url redis://127.0.0.1:6379 [--seconds 10] [--concurrency 64] [--limit 5000]
//                  [--window-ms 1000] [--warmup-seconds 1] [--only rl|rlf] [--json] [--ping]
//                  [--rounds N]
//
// --rounds N runs the pair N times, alternating which library goes first, and adds a median row
// per library (on a shared or busy machine single runs swing widely).
//
// --ping also measures each client's round trip with a trivial command (rl's limiter.ping() vs
// ioredis's ping()), same callers and duration: the client side's capacity when Redis does
// (almost) no work per call.
//
// Per library: decisions/s (completed calls, allowed or denied), latency P50/P99/P99.9/max of one
// call as its caller sees it (promise created -> settled), admitted/s, and the most permits
// admitted in any span of W ms:
//   - rl: from the Decision's nowMs, which is Redis TIME at the moment the script decided (exact);
//     also from client-side completion times, for comparison with rate-limiter-flexible.
//   - rate-limiter-flexible: its reply carries no decision time, so from client-side completion
//     times (performance.timeOrigin + performance.now() when the promise settles). Completion lags
//     the decision in Redis by the reply's trip back (about the P50 latency), with jitter; its
//     window is a fixed window that starts at the first request after the key expired.
import { createRequire } from 'node:module'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)

function parseArgs(argv) {
  const o = { url: process.env.RL_TEST_REDIS_URL, seconds: 10, concurrency: 64, limit: 5000, windowMs: 1000, warmupSeconds: 1, only: null, json: false, ping: false, rounds: 1 }
  for (let i = 0; i < argv.length; i++) {
    const a = argv[i]
    const next = () => argv[++i]
    if (a === '--url') o.url = next()
    else if (a === '--seconds') o.seconds = Number(next())
    else if (a === '--concurrency') o.concurrency = Number(next())
    else if (a === '--limit') o.limit = Number(next())
    else if (a === '--window-ms') o.windowMs = Number(next())
    else if (a === '--warmup-seconds') o.warmupSeconds = Number(next())
    else if (a === '--only') o.only = next()
    else if (a === '--json') o.json = true
    else if (a === '--ping') o.ping = true
    else if (a === '--rounds') o.rounds = Number(next())
    else throw new Error(`unknown argument ${a}`)
  }
  if (!o.url) throw new Error('--url (or RL_TEST_REDIS_URL) is required')
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

/** Total microseconds Redis spent in commands so far (INFO commandstats; scripts include their calls). */
async function redisUsec(client) {
  const info = await client.info('commandstats')
  let usec = 0
  for (const m of info.matchAll(/^cmdstat_(\w+):calls=\d+,usec=(\d+)/gm)) {
    // Commands run inside a script are counted in the script's own time as well.
    if (!['set', 'incrby', 'pttl', 'expire', 'lrange', 'lindex', 'lset', 'rpush', 'ltrim', 'pexpire', 'del', 'time'].includes(m[1])) usec += Number(m[2])
  }
  return usec
}

function percentile(sorted, p) {
  if (sorted.length === 0) return NaN
  return sorted[Math.min(sorted.length - 1, Math.floor((p / 100) * sorted.length))]
}

/**
 * Runs `call()` from `concurrency` loops for `seconds`. `call` resolves to
 * `{ allowed, atMs }` (atMs: the library's own decision time, or undefined).
 */
async function drive(call, { seconds, concurrency }) {
  const latencies = []
  const admittedServer = []
  const admittedClient = []
  let calls = 0
  let allowed = 0
  let errors = 0
  let firstError = null
  const origin = performance.timeOrigin
  const cpu0 = process.cpuUsage()
  const start = performance.now()
  const end = start + seconds * 1000
  async function loop() {
    while (performance.now() < end) {
      const t0 = performance.now()
      let r
      try {
        r = await call()
      } catch (e) {
        errors++
        firstError ??= e
        continue
      }
      const t1 = performance.now()
      latencies.push(t1 - t0)
      calls++
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
    seconds: elapsed,
    decisionsPerSec: calls / elapsed,
    admitted: allowed,
    admittedPerSec: allowed / elapsed,
    errors,
    // CPU of this whole process (JavaScript thread, rl's runtime threads, libuv), per decision.
    clientCpuUs: (cpu.user + cpu.system) / calls,
    firstError: firstError ? String(firstError) : null,
    p50ms: percentile(sorted, 50),
    p99ms: percentile(sorted, 99),
    p999ms: percentile(sorted, 99.9),
    maxMs: sorted[sorted.length - 1],
    admittedServer,
    admittedClient,
  }
}

/** Runs `drive`, adding Redis's own CPU time per decision (from a separate admin connection). */
async function measured(admin, call, opts) {
  const before = await redisUsec(admin)
  const r = await drive(call, opts)
  r.redisUs = ((await redisUsec(admin)) - before) / r.calls
  return r
}

async function benchRl(opts, key, admin) {
  const { Limiter } = require('rl-limiter')
  const limiter = new Limiter(opts.url)
  await limiter.ping()
  const acquireOpts = { limit: opts.limit, windowMs: opts.windowMs }
  const call = async () => {
    const d = await limiter.acquire(key, acquireOpts)
    return { allowed: d.allowed, atMs: d.nowMs }
  }
  if (opts.warmupSeconds > 0) await drive(call, { ...opts, seconds: opts.warmupSeconds })
  await limiter.reset(key)
  const r = await measured(admin, call, opts)
  await limiter.close()
  return r
}

async function benchRlf(opts, key, admin) {
  const Redis = require('ioredis')
  const { RateLimiterRedis, RateLimiterRes } = require('rate-limiter-flexible')
  const client = new Redis(opts.url, { enableOfflineQueue: true, maxRetriesPerRequest: 1 })
  await client.ping()
  if (opts.windowMs % 1000 !== 0) throw new Error('rate-limiter-flexible takes whole seconds')
  const limiter = new RateLimiterRedis({ storeClient: client, keyPrefix: 'rlf-bench', points: opts.limit, duration: opts.windowMs / 1000 })
  const call = async () => {
    try {
      await limiter.consume(key, 1)
      return { allowed: true, atMs: undefined }
    } catch (e) {
      if (e instanceof RateLimiterRes) return { allowed: false, atMs: undefined }
      throw e
    }
  }
  if (opts.warmupSeconds > 0) await drive(call, { ...opts, seconds: opts.warmupSeconds })
  await limiter.delete(key)
  const r = await measured(admin, call, opts)
  client.disconnect()
  return r
}

async function benchPing(opts, admin) {
  const { Limiter } = require('rl-limiter')
  const Redis = require('ioredis')
  const out = {}
  const limiter = new Limiter(opts.url)
  const client = new Redis(opts.url)
  for (const [name, call] of [
    ['rl-limiter ping()', () => limiter.ping().then(() => ({ allowed: false }))],
    ['ioredis ping()', () => client.ping().then(() => ({ allowed: false }))],
  ]) {
    if (opts.warmupSeconds > 0) await drive(call, { ...opts, seconds: opts.warmupSeconds })
    const r = await measured(admin, call, opts)
    out[name] = { 'calls/s': Math.round(r.decisionsPerSec), 'P50 ms': +r.p50ms.toFixed(3), 'P99 ms': +r.p99ms.toFixed(3), 'client CPU µs/call': +r.clientCpuUs.toFixed(2) }
  }
  await limiter.close()
  client.disconnect()
  return out
}

function summarize(name, r, opts) {
  const out = {
    library: name,
    decisionsPerSec: Math.round(r.decisionsPerSec),
    p50ms: +r.p50ms.toFixed(3),
    p99ms: +r.p99ms.toFixed(3),
    p999ms: +r.p999ms.toFixed(3),
    maxMs: +r.maxMs.toFixed(3),
    clientCpuUsPerDecision: +r.clientCpuUs.toFixed(2),
    redisUsPerDecision: +r.redisUs.toFixed(2),
    admittedPerSec: Math.round(r.admittedPerSec),
    maxAdmittedAnySpanServer: r.admittedServer.length ? maxInSpan(r.admittedServer, opts.windowMs) : null,
    maxAdmittedAnySpanClient: maxInSpan(r.admittedClient, opts.windowMs),
    calls: r.calls,
    errors: r.errors,
  }
  if (r.firstError) out.firstError = r.firstError
  return out
}

const opts = parseArgs(process.argv.slice(2))
const results = []
const admin = new (require('ioredis'))(opts.url)
const RLF = 'rate-limiter-flexible (RateLimiterRedis, ioredis)'
const RL = 'rl-limiter'
for (let round = 0; round < opts.rounds; round++) {
  const stamp = `${Date.now()}:${round}`
  const order = round % 2 === 0 ? [RLF, RL] : [RL, RLF]
  for (const name of order) {
    if (name === RLF && opts.only !== 'rl') results.push({ round, ...summarize(RLF, await benchRlf(opts, `bench:rlf:${stamp}`, admin), opts) })
    if (name === RL && opts.only !== 'rlf') results.push({ round, ...summarize(RL, await benchRl(opts, `bench:rl:${stamp}`, admin), opts) })
  }
}
const median = (xs) => {
  const s = [...xs].sort((a, b) => a - b)
  return s.length % 2 ? s[(s.length - 1) / 2] : (s[s.length / 2 - 1] + s[s.length / 2]) / 2
}
const medians = {}
for (const name of [RLF, RL]) {
  const rs = results.filter((r) => r.library === name)
  if (rs.length === 0) continue
  medians[name] = Object.fromEntries(
    ['decisionsPerSec', 'p50ms', 'p99ms', 'p999ms', 'clientCpuUsPerDecision', 'redisUsPerDecision', 'admittedPerSec'].map((f) => [f, +median(rs.map((r) => r[f])).toFixed(3)]),
  )
  medians[name].maxAdmittedAnySpanServer = rs[0].maxAdmittedAnySpanServer === null ? null : Math.max(...rs.map((r) => r.maxAdmittedAnySpanServer))
  medians[name].maxAdmittedAnySpanClient = Math.max(...rs.map((r) => r.maxAdmittedAnySpanClient))
}
const ping = opts.ping ? await benchPing(opts, admin) : null
admin.disconnect()

if (opts.json) {
  console.log(JSON.stringify({ options: { ...opts, url: undefined }, results, medians, ping }))
} else {
  console.log(`one key, limit ${opts.limit}/${opts.windowMs} ms, ${opts.concurrency} concurrent callers, ${opts.seconds} s each, ${opts.rounds} round(s), node ${process.version}`)
  const row = (r) => ({
    'decisions/s': Math.round(r.decisionsPerSec),
    'P50 ms': r.p50ms,
    'P99 ms': r.p99ms,
    'P99.9 ms': r.p999ms,
    'client CPU µs/decision': r.clientCpuUsPerDecision,
    'Redis µs/decision': r.redisUsPerDecision,
    'admitted/s': Math.round(r.admittedPerSec),
    [`max in any ${opts.windowMs} ms (server time)`]: r.maxAdmittedAnySpanServer ?? 'n/a',
    [`max in any ${opts.windowMs} ms (client completion)`]: r.maxAdmittedAnySpanClient,
  })
  const table = {}
  for (const r of results) table[opts.rounds > 1 ? `${r.library} #${r.round + 1}` : r.library] = { ...row(r), errors: r.errors }
  if (opts.rounds > 1) for (const [name, m] of Object.entries(medians)) table[`${name} (median; max over rounds)`] = row(m)
  console.table(table)
  const f = medians[RLF]
  const ours = medians[RL]
  if (f && ours) {
    console.log(`speed ratio rl/rlf: ${(ours.decisionsPerSec / f.decisionsPerSec).toFixed(2)}x; P99 rl ${ours.p99ms} ms vs rlf ${f.p99ms} ms${opts.rounds > 1 ? ' (medians)' : ''}`)
  }
  if (ping) {
    console.log('trivial command (PING), same callers:')
    console.table(ping)
  }
}
