// rl-limiter/prometheus: a real limiter on the harness's Redis, its metrics in a prom-client
// registry, read back as text by an independent parser (parse-prometheus-text-format, not ours),
// and served over node:http and fetched.
import assert from 'node:assert/strict'
import { execFileSync } from 'node:child_process'
import { createServer } from 'node:http'
import { createRequire } from 'node:module'
import { describe, test } from 'node:test'

import parsePrometheusTextFormat from 'parse-prometheus-text-format'
import { Registry } from 'prom-client'
import { Limiter } from 'rl-limiter'
import prometheusDefault, { LIMITER_LABEL, registerMetrics } from 'rl-limiter/prometheus'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

const require = createRequire(import.meta.url)
const FAMILIES = require('../metrics-table.js')

/** Parsed text -> { kinds: name -> type, series: Map('name{sorted labels}' -> number) }. */
function parse(text) {
  const kinds = {}
  const series = new Map()
  for (const fam of parsePrometheusTextFormat(text)) {
    kinds[fam.name] = fam.type.toLowerCase()
    for (const m of fam.metrics) series.set(id(fam.name, m.labels ?? {}), Number(m.value))
  }
  return { kinds, series }
}

function id(name, labels) {
  const l = Object.keys(labels).sort().map((k) => `${k}=${labels[k]}`)
  return `${name}{${l.join(',')}}`
}

/** Every sample the table implies for `stats`, computed here from the table and stats(). */
function expected(stats, base = {}) {
  const out = new Map()
  for (const f of FAMILIES) {
    for (const [labelValue, field, scale, mode] of f.samples) {
      const labels = f.label ? { ...base, [f.label]: labelValue } : base
      out.set(id(f.name, labels), mode != null ? Number(stats.mode === mode) : stats[field] * scale)
    }
  }
  return out
}

describe('rl-limiter/prometheus', () => {
  test('CommonJS and ESM give the same function', () => {
    const cjs = require('rl-limiter/prometheus')
    assert.equal(cjs.registerMetrics, registerMetrics)
    assert.equal(prometheusDefault.registerMetrics, registerMetrics)
    assert.equal(LIMITER_LABEL, 'limiter')
  })

  test('the published package carries the subpath export and the table it reads', () => {
    const packed = JSON.parse(execFileSync('npm', ['pack', '--dry-run', '--json', '--ignore-scripts'], { cwd: new URL('..', import.meta.url), encoding: 'utf8' }))
    const files = packed[0].files.map((f) => f.path)
    for (const f of ['prometheus.js', 'prometheus.mjs', 'prometheus.d.ts', 'prometheus.d.mts', 'metrics-table.js']) assert.ok(files.includes(f), f)
    const pkg = require('../package.json')
    assert.equal(pkg.peerDependenciesMeta['prom-client'].optional, true)
    assert.equal(pkg.dependencies?.['prom-client'], undefined)
  })

  test('registry text equals stats() and the decisions made, every family present', async () => {
    // Every call goes to Redis (no cached denials), which stays "normal" however slow this
    // machine is: the counts are then exactly the calls made.
    const limiter = new Limiter(REDIS_URL, { denialCache: false, degradeRttMs: 60_000 })
    try {
      const registry = new Registry()
      registerMetrics(limiter, { registry })
      const key = uniqueKey('prometheus')
      const decisions = []
      for (let i = 0; i < 7; i++) decisions.push(await limiter.acquire(key, { limit: 4, windowMs: 60_000 }))
      assert.equal(decisions.filter((d) => !d.allowed).length, 3)
      const before = limiter.stats()
      const { kinds, series } = parse(await registry.metrics())
      const after = limiter.stats()

      for (const f of FAMILIES) assert.equal(kinds[f.name], f.kind, f.name)
      assert.equal(series.get('rl_decisions_total{mode=normal}'), 7)
      assert.equal(series.get('rl_denials_total{mode=normal}'), 3)
      assert.equal(series.get('rl_mode{mode=normal}'), 1)
      assert.equal(series.get('rl_mode{mode=local}'), 0)
      assert.ok(series.get('rl_redis_rtt_seconds{quantile=1}') > 0)

      // Every sample equals stats(); the state's age only grows between the two snapshots.
      const want = expected(before)
      const age = series.get('rl_state_seconds{}')
      // Bounds scaled as the collector scales (by the table's factor): x * 0.001 and x / 1e3
      // differ in the last bit for some x, which failed this whenever both snapshots had the same age.
      const scale = FAMILIES.find((f) => f.name === 'rl_state_seconds').samples[0][2]
      assert.ok(before.stateMs * scale <= age && age <= after.stateMs * scale, `${age}`)
      series.delete('rl_state_seconds{}')
      want.delete('rl_state_seconds{}')
      // The fleet's size is learned by heartbeat, in the background: it may change between the
      // two snapshots, and the scrape shows one of them.
      if (before.instances !== after.instances) {
        assert.ok([before.instances, after.instances].includes(series.get('rl_instances{}')))
        series.delete('rl_instances{}')
        want.delete('rl_instances{}')
      }
      assert.deepEqual(series, want)
    } finally {
      limiter.close()
    }
  })

  test('served over node:http and fetched: several limiters under the limiter label', async () => {
    const api = new Limiter(REDIS_URL, { degradeRttMs: 60_000 })
    const login = new Limiter() // the memory backend
    const gone = new Limiter()
    gone.close()
    const registry = new Registry()
    registerMetrics(new Map([['api', api], ['login', login], ['gone', gone]]), { registry, labels: { service: 'shop' } })
    const server = createServer(async (req, res) => {
      res.setHeader('Content-Type', registry.contentType)
      res.end(await registry.metrics())
    })
    await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
    try {
      const key = uniqueKey('prometheus-http')
      for (let i = 0; i < 4; i++) await api.acquire(key, { limit: 2, windowMs: 60_000 })
      for (let i = 0; i < 5; i++) await login.acquire(key, { limit: 1, windowMs: 60_000 })
      const res = await fetch(`http://127.0.0.1:${server.address().port}/metrics`)
      assert.equal(res.status, 200)
      assert.match(res.headers.get('content-type'), /^text\/plain/)
      const { series } = parse(await res.text())

      assert.equal(series.get('rl_decisions_total{limiter=api,mode=normal,service=shop}'), 3)
      assert.equal(series.get('rl_denials_total{limiter=api,mode=normal,service=shop}'), 1)
      // With the denial cache (the default), the 4th call's denial is replayed without Redis.
      assert.equal(series.get('rl_denials_cached_total{limiter=api,service=shop}'), 1)
      assert.equal(series.get('rl_decisions_total{limiter=login,mode=memory,service=shop}'), 5)
      assert.equal(series.get('rl_denials_total{limiter=login,mode=memory,service=shop}'), 4)
      assert.equal(series.get('rl_mode{limiter=login,mode=memory,service=shop}'), 1)
      // The closed limiter exports nothing; every series names its limiter and the service.
      const names = new Set([...series.keys()].map((k) => /limiter=([^,}]*)/.exec(k)?.[1]))
      assert.deepEqual([...names].sort(), ['api', 'login'])
      assert.ok([...series.keys()].every((k) => k.includes('service=shop')))
      // And match the two limiters' stats() exactly (but the state's age).
      const want = new Map([...expected(api.stats(), { limiter: 'api', service: 'shop' }), ...expected(login.stats(), { limiter: 'login', service: 'shop' })])
      for (const m of [want, series]) for (const k of [...m.keys()]) if (k.startsWith('rl_state_seconds')) m.delete(k)
      assert.deepEqual(series, want)
    } finally {
      await new Promise((resolve) => server.close(resolve))
      api.close()
      login.close()
    }
  })

  test('labels must not shadow rl labels; a registry holds each family once', () => {
    const limiter = new Limiter()
    try {
      assert.throws(() => registerMetrics(limiter, { registry: new Registry(), labels: { mode: 'x' } }), /mode/)
      assert.throws(() => registerMetrics({ a: limiter }, { registry: new Registry(), labels: { limiter: 'x' } }), /limiter/)
      assert.throws(() => registerMetrics(limiter, {}), /registry/)
      assert.throws(() => registerMetrics({ a: 42 }, { registry: new Registry() }), TypeError)
      // One limiter has no limiter label of its own, so a constant one is the caller's to set.
      const registry = new Registry()
      registerMetrics(limiter, { registry, labels: { limiter: 'api' } })
      // A second registration of the same families is refused by prom-client: that is why
      // several limiters go in one call.
      assert.throws(() => registerMetrics(limiter, { registry }), /already been registered/)
    } finally {
      limiter.close()
    }
  })
})
