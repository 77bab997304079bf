// Drives the HTTP benchmark (run.sh starts the Redis). Two phases, each app started by itself
// (app.mjs) and stopped by pid:
// 1. Over the limit: wrk (closed loop, one key, far above the limit): req/s, P50/P99, the most
//    the app served in any window, Redis commands per request (INFO commandstats diff).
// 2. Moderate load: vegeta at a fixed rate (open loop, so a slow server cannot slow the load
//    down and hide its latency), below the limit so every request is admitted and well below
//    the app's capacity: P50/P99 per app and what the limiter adds to the app's P99, judged on
//    the P99 of every round's requests pooled (a P99 of one short round is its ~25th worst
//    request, which a single scheduler hiccup moves; the per-round values are shown beside it).
//    Each app first gets BENCH_WARMUP_SECONDS (15) of the same load, not measured: V8 is still
//    compiling the request path's functions seconds after start, and a tail measured then is the
//    JIT's, more so the more JavaScript a request runs (Fastify, 6 rounds in one run: bare P99
//    0.38 ms after 2 s, 0.33 ms after 15 s; with rl on memory:// 0.52 and 0.38 ms). vegeta runs
//    with GOGC=off (its own garbage collector's pauses land in every app's tail otherwise), and
//    each framework's app without a limiter runs twice per round (the "again" row, an A/A
//    control): the gap between the two is the noise floor any "added to the app's P99" is to be
//    read against.
// BENCH_TIME=1: each app also times, per request, the limiter's step and the whole request
// inside the app (app.mjs), reported as P50/P99 µs beside the moderate phase's rows.
// BENCH_VARIANTS may name `stub` (a control, moderate phase only: fixed RateLimit fields, no
// limiter) and `rl-memory`.
// BENCH_BASELINE=<dir>: also runs the rl middleware from another bindings-node directory (its
// JavaScript and the addon built there: e.g. `git archive` of the last commit with a copy of
// that commit's built addon), with and without leases, to compare a change side by side in one
// run.
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { mkdtempSync, readFileSync, rmSync, writeFileSync } from 'node:fs'
import { tmpdir } from 'node:os'
import { join } from 'node:path'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
const PORT = process.env.RL_TEST_REDIS_PORT
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const THREADS = Number(process.env.BENCH_THREADS ?? 2)
const LIMIT = Number(process.env.LIMIT ?? 1000)
const WINDOW_MS = Number(process.env.WINDOW_MS ?? 1000)
// Half the limit: every request is admitted, and far below either framework's capacity (several
// thousand req/s on a loaded 2-core machine), so the latency measured is the app's, not a queue's.
const RATE = Number(process.env.BENCH_RATE ?? Math.floor((LIMIT * 1000) / WINDOW_MS / 2))
const MODERATE_SECONDS = Number(process.env.BENCH_MODERATE_SECONDS ?? 5)
const WARMUP_SECONDS = Number(process.env.BENCH_WARMUP_SECONDS ?? 15)
// A tail latency on a shared machine swings by 2x from one round to the next: the apps take turns
// (round-robin) for this many rounds, and the table gives each app's P50 and P99 over all its
// rounds' requests together (vegeta report of every round's results), and each round's P99.
const ROUNDS = Number(process.env.BENCH_ROUNDS ?? 6)
const VEGETA = process.env.VEGETA ?? 'vegeta'
const BASELINE = process.env.BENCH_BASELINE
const PHASES = (process.env.BENCH_PHASES ?? 'over,moderate').split(',')
const FRAMEWORKS = (process.env.BENCH_FRAMEWORKS ?? 'express,fastify').split(',')
// BENCH_VARIANTS=none,rl-memory,...: only these variants (rl-memory, the middleware on the memory
// backend, is the middleware's own cost with no Redis and no lease bookkeeping; not run by default).
const VARIANTS = process.env.BENCH_VARIANTS?.split(',')
const runs = [
  ['express', 'none', 'Express, no limiter'],
  ['express', 'none', 'Express, no limiter, again (A/A control)', 'moderate'],
  ['express', 'rl', 'Express + rl-limiter/express'],
  ['express', 'rl-leases', 'Express + rl-limiter/express, leases=on'],
  ...(BASELINE ? [['express', 'rl-baseline', 'Express + rl-limiter/express (baseline)'], ['express', 'rl-baseline-leases', 'Express + rl-limiter/express, leases=on (baseline)']] : []),
  ['express', 'peer', 'Express + express-rate-limit/rate-limit-redis (ioredis)'],
  ['fastify', 'none', 'Fastify, no limiter'],
  ['fastify', 'none', 'Fastify, no limiter, again (A/A control)', 'moderate'],
  ['fastify', 'rl', 'Fastify + rl-limiter/fastify'],
  ['fastify', 'rl-leases', 'Fastify + rl-limiter/fastify, leases=on'],
  ...(BASELINE ? [['fastify', 'rl-baseline', 'Fastify + rl-limiter/fastify (baseline)'], ['fastify', 'rl-baseline-leases', 'Fastify + rl-limiter/fastify, leases=on (baseline)']] : []),
  ['fastify', 'peer', 'Fastify + @fastify/rate-limit (ioredis)'],
  ...(VARIANTS?.includes('stub') ? [['express', 'stub', 'Express + two fixed fields, no limiter (control)', 'moderate'], ['fastify', 'stub', 'Fastify + two fixed fields, no limiter (control)', 'moderate']] : []),
  ...(VARIANTS?.includes('rl-memory') ? [['express', 'rl-memory', 'Express + rl-limiter/express, memory://'], ['fastify', 'rl-memory', 'Fastify + rl-limiter/fastify, memory://']] : []),
]
  .filter(([framework, variant]) => FRAMEWORKS.includes(framework) && (!VARIANTS || VARIANTS.includes(variant)))
  .sort((a, b) => FRAMEWORKS.indexOf(a[0]) - FRAMEWORKS.indexOf(b[0]))

const redis = (...args) => execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', PORT, ...args], { encoding: 'utf8' }).trim()
function commandCalls() {
  let total = 0
  for (const line of redis('INFO', 'commandstats').split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (m && !['info', 'config', 'flushall'].includes(m[1])) total += Number(m[2])
  }
  return total
}
async function freePort() {
  const s = createServer().listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  return port
}
function ms(text) {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text)
  return m ? Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2]] : NaN
}

/** Starts app.mjs and waits for it to listen; `stop()` kills it by pid. */
async function startApp(framework, variant, label) {
  const port = await freePort()
  const app = spawn(process.execPath, [`${here}/app.mjs`, framework, variant, String(port)], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LIMIT: String(LIMIT), WINDOW_MS: String(WINDOW_MS) } })
  await new Promise((resolve, reject) => {
    app.stdout.on('data', (d) => String(d).includes('ready') && resolve())
    app.on('exit', (code) => reject(new Error(`${label}: the app exited (${code})`)))
  })
  const url = `http://127.0.0.1:${port}/`
  execFileSync('wrk', ['-t1', '-c4', '-d1s', url], { encoding: 'utf8' }) // warm-up
  await new Promise((r) => setTimeout(r, WINDOW_MS + 100))
  return {
    url,
    stop: async () => {
      app.kill('SIGTERM')
      await once(app, 'exit').catch(() => {})
    },
  }
}

async function overTheLimit([framework, variant, label]) {
  redis('FLUSHALL')
  const { url, stop } = await startApp(framework, variant, label)
  try {
    const before = await (await fetch(`${url}__served`)).json()
    redis('CONFIG', 'RESETSTAT')
    const out = execFileSync('wrk', [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency', url], { encoding: 'utf8' })
    const commands = commandCalls()
    const after = await (await fetch(`${url}__served`)).json()
    const requests = Number(/(\d+) requests in/.exec(out)[1])
    const non2xx = Number((/Non-2xx or 3xx responses: (\d+)/.exec(out) ?? [0, 0])[1])
    return {
      label,
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]),
      p50: ms(/\s50%\s+(\S+)/.exec(out)[1]),
      p99: ms(/\s99%\s+(\S+)/.exec(out)[1]),
      requests,
      served: after.served - before.served,
      denied: non2xx,
      maxInWindow: after.maxInWindow,
      commandsPerRequest: commands / requests,
    }
  } finally {
    await stop()
  }
}

const resultsDir = mkdtempSync(join(tmpdir(), 'rl-http-bench-'))
process.on('exit', () => rmSync(resultsDir, { recursive: true, force: true }))
const latencies = (files) => JSON.parse(execFileSync(VEGETA, ['report', '-type=json', ...files], { encoding: 'utf8', maxBuffer: 1 << 30 })).latencies

async function moderate([framework, variant, label], round, index) {
  redis('FLUSHALL')
  const { url, stop } = await startApp(framework, variant, label)
  try {
    const attack = (seconds) => execFileSync(VEGETA, ['attack', `-rate=${RATE}/s`, `-duration=${seconds}s`, '-keepalive=true'], { input: `GET ${url}\n`, maxBuffer: 1 << 30, env: { ...process.env, GOGC: 'off' } })
    if (WARMUP_SECONDS > 0) attack(WARMUP_SECONDS)
    const before = await (await fetch(`${url}__served?timings=1`)).json()
    const results = attack(MODERATE_SECONDS)
    const after = await (await fetch(`${url}__served?timings=1`)).json()
    const file = join(resultsDir, `${index}-${framework}-${variant}-${round}.bin`)
    writeFileSync(file, results)
    const report = JSON.parse(execFileSync(VEGETA, ['report', '-type=json', file], { encoding: 'utf8', maxBuffer: 1 << 30 }))
    const codes = report.status_codes ?? {}
    return {
      label,
      framework,
      variant,
      file,
      requests: report.requests,
      rate: report.rate,
      p50: report.latencies['50th'] / 1e6,
      p99: report.latencies['99th'] / 1e6,
      ok: codes['200'] ?? 0,
      other: report.requests - (codes['200'] ?? 0),
      // rl: decisions during the run that made a Redis round trip (not from a lease).
      roundTrips: after.decided ? after.decided.normal - before.decided.normal : null,
      timings: after.timings,
    }
  } finally {
    await stop()
  }
}

const load = () => readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')

if (PHASES.includes('over')) {
  const rows = []
  for (const run of runs.filter((r) => r[3] !== 'moderate')) rows.push(await overTheLimit(run))
  console.log(`\nOne key, limit ${LIMIT} per ${WINDOW_MS} ms; wrk -t${THREADS} -c${CONNECTIONS} -d${SECONDS}s (closed loop, far above the limit); load average after: ${load()}\n`)
  console.log('| app | req/s | P50 ms | P99 ms | served | denied | most served in any window (app clock) | Redis cmds/request |')
  console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
  for (const r of rows) {
    console.log(`| ${r.label} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.served} | ${r.denied} | ${r.maxInWindow}${r.label.includes('no limiter') ? '' : ` (limit ${LIMIT})`} | ${r.commandsPerRequest.toFixed(2)} |`)
  }
}

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)]

if (PHASES.includes('moderate')) {
  const samples = runs.map(() => [])
  for (let round = 0; round < ROUNDS; round++) {
    for (let i = 0; i < runs.length; i++) samples[i].push(await moderate(runs[i], round, i))
  }
  const rows = samples.map((s) => {
    const pooled = latencies(s.map((r) => r.file))
    return {
      ...s[0],
      requests: s.reduce((n, r) => n + r.requests, 0),
      ok: s.reduce((n, r) => n + r.ok, 0),
      other: s.reduce((n, r) => n + r.other, 0),
      p50: pooled['50th'] / 1e6,
      p99: pooled['99th'] / 1e6,
      medianP99: median(s.map((r) => r.p99)),
      p99s: s.map((r) => r.p99.toFixed(2)).join(' / '),
      roundTrips: s[0].roundTrips === null ? null : s.reduce((n, r) => n + r.roundTrips, 0),
      step: s[0].timings ? s.flatMap((r) => r.timings.step) : null,
      request: s[0].timings ? s.flatMap((r) => r.timings.request) : null,
    }
  })
  console.log(`\nModerate load: one key, vegeta at a fixed ${RATE} req/s (open loop; half the limit of ${LIMIT} per ${WINDOW_MS} ms, so all admitted), ${ROUNDS} rounds of ${MODERATE_SECONDS}s per app taken in turns, after ${WARMUP_SECONDS}s of the same load not measured; P50/P99 of all rounds' requests together; load average after: ${load()}\n`)
  const timed = rows.some((r) => r.step)
  const quantiles = (xs) => {
    const t = [...xs].sort((a, b) => a - b)
    return `${t[Math.floor(t.length * 0.5)]} / ${t[Math.min(t.length - 1, Math.floor(t.length * 0.99))]}`
  }
  console.log(`| app | requests | 200 | other | P50 ms | P99 ms | added to the app's P99 | P99 per round (median) | rl: decided by Redis (not a lease) |${timed ? ' limiter step P50 / P99 µs | in-app request P50 / P99 µs |' : ''}`)
  console.log(`|---|---:|---:|---:|---:|---:|---:|---:|---:|${timed ? '---|---|' : ''}`)
  for (const r of rows) {
    const base = rows.find((b) => b.framework === r.framework && b.variant === 'none')
    const added = r === base || !base ? '' : `${r.p99 >= base.p99 ? '+' : ''}${(((r.p99 - base.p99) / base.p99) * 100).toFixed(0)}%`
    const trips = r.roundTrips === null ? '' : `${r.roundTrips} (${((r.roundTrips / r.requests) * 100).toFixed(1)}%)`
    const times = timed ? ` ${r.step ? quantiles(r.step) : ''} | ${r.request ? quantiles(r.request) : ''} |` : ''
    console.log(`| ${r.label} | ${r.requests} | ${r.ok} | ${r.other} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${added} | ${r.p99s} (${r.medianP99.toFixed(2)}) | ${trips} |${times}`)
  }
}
