// Where one rl call's time goes, seen from JavaScript: the same caller loop (C concurrent callers,
// N seconds each) over calls that add one layer at a time, next to ioredis doing the same work.
//
//   node breakdown.mjs --url redis://... [--seconds 3] [--concurrency 1] [--keys 1]
//
//   rl memory acquire     napi call + argument conversion + the core's decision + promise,
//                         settled at once on this thread (no runtime, no thread hop)
//   rl ping               + the hop to the core's tokio runtime, PING, and the hop back
//                         (threadsafe function -> this thread settles the promise)
//   ioredis ping          ioredis's own round trip, on this thread's event loop
//   rl acquire            + the script (FCALL or EVALSHA), denial cache off, limit never reached
//   ioredis evalsha       the same script, same calling convention and arguments, by ioredis
// Per row: calls/s, P50/P99 of one call, and client CPU per call (the whole process).
import { createRequire } from 'node:module'
import { readFileSync } from 'node:fs'
import { performance } from 'node:perf_hooks'

const require = createRequire(import.meta.url)
const Redis = require('ioredis')
const { Limiter } = require('rl-limiter')

const o = { url: process.env.RL_TEST_REDIS_URL, seconds: 3, concurrency: 1, keys: 1 }
for (let i = 2; i < process.argv.length; i++) {
  const a = process.argv[i]
  const v = process.argv[++i]
  if (a === '--url') o.url = v
  else if (a === '--seconds') o.seconds = Number(v)
  else if (a === '--concurrency') o.concurrency = Number(v)
  else if (a === '--keys') o.keys = Number(v)
  else throw new Error(`unknown argument ${a}`)
}

async function drive(call) {
  const lat = []
  const cpu0 = process.cpuUsage()
  const start = performance.now()
  const end = start + o.seconds * 1000
  const keyOf = o.keys === 1 ? () => 'k' : () => `u${(Math.random() * o.keys) | 0}`
  async function loop() {
    while (performance.now() < end) {
      const k = keyOf()
      const t0 = performance.now()
      await call(k)
      lat.push(performance.now() - t0)
    }
  }
  await Promise.all(Array.from({ length: o.concurrency }, loop))
  const secs = (performance.now() - start) / 1000
  const cpu = process.cpuUsage(cpu0)
  const s = Float64Array.from(lat).sort()
  const pct = (p) => +(s[Math.min(s.length - 1, Math.floor(p * s.length))] * 1000).toFixed(1)
  return { 'calls/s': Math.round(lat.length / secs), 'P50 µs': pct(0.5), 'P99 µs': pct(0.99), 'client CPU µs/call': +((cpu.user + cpu.system) / lat.length).toFixed(2) }
}

const lim = { limit: 1e12, windowMs: 1000 }
const mem = new Limiter(undefined)
const rl = new Limiter(o.url, { denialCache: false, localFallback: false, keyPrefix: 'bd:' })
await rl.ping()
const io = new Redis(o.url)
await io.ping()
const script = readFileSync(new URL('../../lua/sliding_window.lua', import.meta.url), 'utf8')
const sha = await io.script('LOAD', script)
const head = Buffer.alloc(16)
head.writeDoubleBE(0, 0)
head.writeDoubleBE(1000, 8)
const req = Buffer.alloc(32)
;[1, lim.windowMs, lim.limit, 1].forEach((v, i) => req.writeDoubleBE(v, i * 8))

const rows = {
  'rl memory acquire': (k) => mem.acquire(k, lim),
  'rl ping': () => rl.ping(),
  'ioredis ping': () => io.ping(),
  'rl acquire': (k) => rl.acquire(k, lim),
  'ioredis evalsha (same script)': (k) => io.evalshaBuffer(sha, 1, `bd:{${k}}`, 'rl1', head, req),
}
const out = {}
for (const [name, call] of Object.entries(rows)) {
  await drive(call) // warm-up, same length
  out[name] = await drive(call)
}
console.log(`${o.concurrency} caller(s), ${o.keys} key(s), ${o.seconds} s per row, node ${process.version}`)
console.table(out)
await rl.close()
await mem.close()
io.disconnect()
