// rl-limiter/fastify in a real Fastify server on a loopback port, driven by fetch: the plugin's
// global limit, per-route config through route options (its own window), routes left out, the
// core's headers (parsed with structured-headers), 429 + problem+json + Retry-After, exempt,
// onDenied, the trusted proxy header, and exactness under concurrent load counted by the app.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, describe, test } from 'node:test'

import Fastify from 'fastify'
import { Limiter } from 'rl-limiter'
import rlFastify, { keys } from 'rl-limiter/fastify'
import { REDIS_URL, maxInSpan, uniqueKey } from './helpers.mjs'
import { assertDenied, listenFastify, load, rateLimitFields, retryAfter } from './http.mjs'

const require = createRequire(import.meta.url)
// Without the local fallback: these tests check Redis's own decisions, which a busy test machine
// (the other files run in parallel) must not send to the fallback's conservative local budget.
const limiter = new Limiter(REDIS_URL, { localFallback: false })
after(() => limiter.close())

/** A Fastify app with the plugin and a few routes; `served` records what the handlers served. */
async function serve(options, routes = (app, handler) => app.get('/hello', handler)) {
  const app = Fastify()
  const served = []
  await app.register(rlFastify, { limiter, prefix: uniqueKey('fastify'), ...options })
  const handler = async (request) => {
    served.push({ path: request.routeOptions.url, nowMs: request.rateLimit?.nowMs, mode: request.rateLimit?.mode })
    return { ok: true }
  }
  routes(app, handler)
  const server = await listenFastify(app)
  return { ...server, served }
}

describe('rl-limiter/fastify', () => {
  test('headers on every response, then 429 with problem+json and Retry-After', async (t) => {
    const app = await serve({ policies: 'burst: 2/10s; daily: 50/d' })
    t.after(app.close)
    for (const r of [1, 0]) {
      const res = await fetch(`${app.base}/hello`)
      assert.equal(res.status, 200)
      assert.equal(retryAfter(res), null)
      const f = rateLimitFields(res)
      assert.deepEqual([...f.policy], [['burst', { q: 2, w: 10 }], ['daily', { q: 50, w: 86400 }]])
      assert.equal(f.state.get('burst').r, r)
    }
    const denied = await fetch(`${app.base}/hello`)
    await assertDenied(denied, ['burst'])
    assert.equal(rateLimitFields(denied).state.get('daily').r, 48)
    assert.equal(app.served.length, 2)
  })

  test('per-route config: its own limit and window, a route left out, the global limit elsewhere', async (t) => {
    const app = await serve({ policies: '3/m' }, (app, handler) => {
      app.get('/hello', handler)
      app.get('/login', { config: { rateLimit: { policies: 'login: 1/m' } } }, handler)
      app.get('/health', { config: { rateLimit: false } }, handler)
      app.post('/upload', { config: { rateLimit: { cost: 2 } } }, handler)
    })
    t.after(app.close)
    const login = await fetch(`${app.base}/login`)
    assert.equal(login.status, 200)
    assert.deepEqual([...rateLimitFields(login).policy], [['login', { q: 1, w: 60 }]])
    await assertDenied(await fetch(`${app.base}/login`), ['login'])
    // The route's window is its own: the global one is untouched.
    const hello = await fetch(`${app.base}/hello`)
    assert.equal(rateLimitFields(hello).state.get('3/1m').r, 2)
    // A route with only a cost keeps the global policies, in its own window.
    const up = await fetch(`${app.base}/upload`, { method: 'POST' })
    assert.equal(rateLimitFields(up).state.get('3/1m').r, 1)
    await assertDenied(await fetch(`${app.base}/upload`, { method: 'POST' }), ['3/1m'])
    for (let i = 0; i < 5; i++) {
      const health = await fetch(`${app.base}/health`)
      assert.equal(health.status, 200)
      assert.equal(rateLimitFields(health), null)
    }
  })

  test('global: false limits only the routes with config', async (t) => {
    const app = await serve({ global: false }, (app, handler) => {
      app.get('/hello', handler)
      app.get('/limited', { config: { rateLimit: { policies: '1/m' } } }, handler)
    })
    t.after(app.close)
    assert.equal(rateLimitFields(await fetch(`${app.base}/hello`)), null)
    assert.equal((await fetch(`${app.base}/limited`)).status, 200)
    await assertDenied(await fetch(`${app.base}/limited`), ['1/1m'])
  })

  test('exempt and onDenied (which may replace the response)', async (t) => {
    const seen = []
    const app = await serve({
      policies: '1/m',
      exempt: (request) => request.headers['x-internal'] === 'yes',
      onDenied: async (request, reply, decision) => {
        seen.push(decision)
        if (request.query.custom) reply.code(503).send({ custom: true })
      },
    })
    t.after(app.close)
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.base}/hello`, { headers: { 'x-internal': 'yes' } })
      assert.equal(res.status, 200)
      assert.equal(rateLimitFields(res), null)
    }
    assert.equal((await fetch(`${app.base}/hello`)).status, 200)
    const custom = await fetch(`${app.base}/hello?custom=1`)
    assert.equal(custom.status, 503)
    assert.deepEqual(await custom.json(), { custom: true })
    assert.ok(retryAfter(custom) >= 1)
    await assertDenied(await fetch(`${app.base}/hello`), ['1/1m'])
    assert.equal(seen.length, 2)
    assert.equal(seen[1].allowed, false)
  })

  test('X-Forwarded-For counts only when configured, and only its trusted entry', async (t) => {
    const xff = (v) => ({ headers: { 'x-forwarded-for': v } })
    const plain = await serve({ policies: '1/m' })
    t.after(plain.close)
    assert.equal((await fetch(`${plain.base}/hello`, xff('10.0.0.1'))).status, 200)
    assert.equal((await fetch(`${plain.base}/hello`, xff('10.0.0.2'))).status, 429)
    const proxied = await serve({ policies: '1/m', key: keys.ip({ trustedProxyHeader: 'x-forwarded-for', trustedHops: 2 }) })
    t.after(proxied.close)
    assert.equal((await fetch(`${proxied.base}/hello`, xff('10.0.0.1, 172.16.0.1'))).status, 200)
    assert.equal((await fetch(`${proxied.base}/hello`, xff('10.0.0.2, 172.16.0.1'))).status, 200, 'two clients behind two proxies')
    assert.equal((await fetch(`${proxied.base}/hello`, xff('6.6.6.6, 10.0.0.1, 172.16.0.1'))).status, 429, 'a spoofed entry does not make a new client')
  })

  test('fail-closed answers 503 on a limiter failure', async (t) => {
    const closed = new Limiter(REDIS_URL)
    await closed.close()
    const errors = []
    const app = await serve({ limiter: closed, policies: '1/m', failOpen: false, onError: (e) => errors.push(e) })
    t.after(app.close)
    assert.equal((await fetch(`${app.base}/hello`)).status, 503)
    assert.equal(app.served.length, 0)
    assert.equal(errors[0].code, 'ERR_RL_CLOSED')
  })

  test('a route config mistake is refused when the route is added', async () => {
    const app = Fastify()
    await app.register(rlFastify, { limiter, policies: '1/s' })
    assert.throws(() => app.get('/x', { config: { rateLimit: { policies: '1/fortnight' } } }, async () => 'x'), (e) => e.argument === 'policy')
    await app.close()
  })

  test('exactness: under concurrent load over the limit, the app serves at most the limit per window', async (t) => {
    const limit = 20
    const windowMs = 1000
    const app = await serve({ policies: `${limit}/s` })
    t.after(app.close)
    const codes = await load(`${app.base}/hello`, { clients: 16, ms: 3000 })
    const served = app.served
    assert.equal(codes.filter((c) => c === 200).length, served.length)
    assert.ok(codes.filter((c) => c === 429).length > served.length, `load must be above the limit: ${codes.length} requests`)
    assert.ok(served.length > 2 * limit, `load must span several windows: ${served.length} served`)
    assert.deepEqual(new Set(codes), new Set([200, 429]))
    const worst = maxInSpan(served.map((s) => s.nowMs), windowMs)
    assert.ok(worst <= limit, `${worst} served in one ${windowMs} ms window, limit ${limit}`)
  })

  // A request decided at once (memory backend, a lease) is answered without a promise; key, cost
  // and exempt functions that return promises take the promise path. Both must answer the same,
  // and an async onDenied still replaces the 429.
  for (const [name, make] of [['memory://', () => new Limiter('memory://')], ['leases on Redis', () => new Limiter(REDIS_URL, { leases: 'on', localFallback: false })]]) {
    test(`decided in place (${name}) and through promises (async key, cost, exempt, onDenied): the same answers`, async (t) => {
      const own = make()
      t.after(() => own.close())
      const limit = name === 'memory://' ? 3 : 40
      const modes = []
      const apps = [
        await serve({ limiter: own, policies: `${limit}/m`, exempt: (request) => request.headers['x-internal'] === 'yes' }),
        await serve({
          limiter: own,
          policies: `${limit}/m`,
          key: async () => 'k',
          cost: async () => 1,
          exempt: async (request) => request.headers['x-internal'] === 'yes',
          onDenied: async (request, reply) => {
            if (request.query.custom) reply.code(503).send({ custom: true })
          },
        }),
      ]
      for (const app of apps) t.after(app.close)
      for (const app of apps) {
        const internal = await fetch(`${app.base}/hello`, { headers: { 'x-internal': 'yes' } })
        assert.equal(internal.status, 200)
        // Until the first denial. With leases, what this instance knows is left also counts its
        // leases' unused permits (each lease counts in full until returned), so it falls faster,
        // and rises again when a lease is returned.
        const remaining = []
        let res = await fetch(`${app.base}/hello`)
        while (res.status === 200 && remaining.length < 2 * limit) {
          remaining.push(rateLimitFields(res).state.get(`${limit}/1m`).r)
          res = await fetch(`${app.base}/hello`)
        }
        await assertDenied(res, [`${limit}/1m`])
        if (name === 'memory://') {
          assert.deepEqual(remaining, Array.from({ length: limit }, (_, i) => limit - 1 - i), 'remaining counts down by one per request')
        } else {
          assert.ok(remaining.length <= limit && remaining.length >= limit / 2, `${remaining.length} served of ${limit}`)
          assert.ok(remaining.every((r) => r >= 0 && r < limit), `remaining within the limit: ${remaining}`)
        }
        modes.push(...app.served.map((s) => s.mode))
      }
      const custom = await fetch(`${apps[1].base}/hello?custom=1`)
      assert.equal(custom.status, 503)
      assert.deepEqual(await custom.json(), { custom: true })
      assert.ok(retryAfter(custom) >= 1)
      if (name !== 'memory://') assert.ok(modes.filter((m) => m === 'lease').length >= limit / 2, `most requests decided from a lease: ${modes}`)
    })
  }

  test('CommonJS and ESM give the same plugin', async () => {
    const cjs = require('rl-limiter/fastify')
    assert.equal(cjs, rlFastify)
    assert.equal(cjs.keys, keys)
  })
})
