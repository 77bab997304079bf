// rl-limiter/express in a real Express server on a loopback port, driven by fetch: the core's
// headers on every checked response (parsed with structured-headers), 429 + problem+json +
// Retry-After, exempt, onDenied, the trusted proxy header, cost and user keys, fail-open, and
// exactness under concurrent load counted by the app.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { after, describe, test } from 'node:test'

import express from 'express'
import { Limiter } from 'rl-limiter'
import { keys, rateLimit } from 'rl-limiter/express'
import { REDIS_URL, maxInSpan, uniqueKey } from './helpers.mjs'
import { assertDenied, listenExpress, load, rateLimitFields, retryAfter } from './http.mjs'

const require = createRequire(import.meta.url)
// Without the local fallback: these tests check Redis's own decisions, which a busy test machine
// (the other files run in parallel) must not send to the fallback's conservative local budget.
const limiter = new Limiter(REDIS_URL, { localFallback: false })
after(() => limiter.close())

/** An app with `middleware` in front of GET /hello, recording what the handler served. */
async function serve(middleware) {
  const app = express()
  const served = []
  app.use(middleware)
  app.get('/hello', (req, res) => {
    served.push({ at: Date.now(), nowMs: req.rateLimit?.nowMs, mode: req.rateLimit?.mode })
    res.json({ ok: true })
  })
  // Errors answer with their status, without Express's default stack trace on stderr.
  app.use((err, req, res, next) => res.status(err.status ?? 500).end())
  const server = await listenExpress(app)
  return { ...server, served }
}

describe('rl-limiter/express', () => {
  test('headers on every response, then 429 with problem+json and Retry-After', async (t) => {
    const app = await serve(rateLimit({ limiter, policies: 'burst: 3/10s; daily: 100/d', prefix: uniqueKey('express-basic') }))
    t.after(app.close)
    const rs = []
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.base}/hello`)
      assert.equal(res.status, 200)
      assert.deepEqual(await res.json(), { ok: true })
      assert.equal(retryAfter(res), null, 'no Retry-After on an allowed response')
      const f = rateLimitFields(res)
      assert.deepEqual([...f.policy], [['burst', { q: 3, w: 10 }], ['daily', { q: 100, w: 86400 }]])
      rs.push([f.state.get('burst').r, f.state.get('daily').r])
      assert.equal(f.state.get('burst').t, 10)
    }
    assert.deepEqual(rs, [[2, 99], [1, 98], [0, 97]])
    const denied = await fetch(`${app.base}/hello`)
    await assertDenied(denied, ['burst'])
    const f = rateLimitFields(denied)
    assert.deepEqual(f.state.get('burst').r, 0)
    assert.ok(f.state.get('burst').t >= 9 && f.state.get('burst').t <= 10)
    assert.equal(f.state.get('daily').r, 97, 'a denial takes nothing')
    assert.equal(app.served.length, 3)
  })

  test('legacy header style and a cost from the request', async (t) => {
    const app = await serve(rateLimit({ limiter, policies: '10/m', headerStyle: 'legacy', cost: (req) => Number(req.headers['x-cost'] ?? 1), prefix: uniqueKey('express-legacy') }))
    t.after(app.close)
    const res = await fetch(`${app.base}/hello`, { headers: { 'x-cost': '4' } })
    assert.equal(res.status, 200)
    assert.equal(res.headers.get('ratelimit'), null)
    assert.equal(res.headers.get('x-ratelimit-limit'), '10')
    assert.equal(res.headers.get('x-ratelimit-remaining'), '6')
    const over = await fetch(`${app.base}/hello`, { headers: { 'x-cost': '7' } })
    await assertDenied(over, ['10/1m'])
    assert.equal(over.headers.get('x-ratelimit-remaining'), '6')
  })

  test('a cost the core refuses fails the request (500), it is not let through', async (t) => {
    const errors = []
    const app = express()
    app.use(rateLimit({ limiter, policies: '5/m', cost: 0, prefix: uniqueKey('express-badcost') }))
    app.get('/hello', (req, res) => res.send('served'))
    app.use((err, req, res, next) => {
      errors.push(err)
      res.status(500).send('error')
    })
    const server = await listenExpress(app)
    t.after(server.close)
    const res = await fetch(`${server.base}/hello`)
    assert.equal(res.status, 500)
    assert.equal(errors[0].argument, 'options.cost')
  })

  test('exempt requests are served without headers and take nothing', async (t) => {
    const app = await serve(rateLimit({ limiter, policies: '1/m', exempt: (req) => req.headers['x-internal'] === 'yes', prefix: uniqueKey('express-exempt') }))
    t.after(app.close)
    for (let i = 0; i < 3; i++) {
      const res = await fetch(`${app.base}/hello`, { headers: { 'x-internal': 'yes' } })
      assert.equal(res.status, 200)
      assert.equal(rateLimitFields(res), null)
    }
    assert.equal((await fetch(`${app.base}/hello`)).status, 200)
    await assertDenied(await fetch(`${app.base}/hello`), ['1/1m'])
  })

  test('onDenied gets the decision and may replace the response; the headers stay', async (t) => {
    const seen = []
    const app = await serve(rateLimit({
      limiter,
      policies: '1/m',
      prefix: uniqueKey('express-ondenied'),
      onDenied: (req, res, decision) => {
        seen.push(decision)
        if (req.query.custom) res.status(503).json({ custom: true })
      },
    }))
    t.after(app.close)
    assert.equal((await fetch(`${app.base}/hello`)).status, 200)
    const custom = await fetch(`${app.base}/hello?custom=1`)
    assert.equal(custom.status, 503)
    assert.deepEqual(await custom.json(), { custom: true })
    assert.ok(retryAfter(custom) >= 1)
    assert.equal(rateLimitFields(custom).state.get('1/1m').r, 0)
    await assertDenied(await fetch(`${app.base}/hello`), ['1/1m'])
    assert.equal(seen.length, 2)
    assert.equal(seen[0].allowed, false)
    assert.ok(seen[0].retryAfterMs > 0)
  })

  test('X-Forwarded-For counts only when configured, and only its trusted entry', async (t) => {
    const plain = await serve(rateLimit({ limiter, policies: '1/m', prefix: uniqueKey('express-noproxy') }))
    t.after(plain.close)
    const xff = (v) => ({ headers: { 'x-forwarded-for': v } })
    assert.equal((await fetch(`${plain.base}/hello`, xff('10.0.0.1'))).status, 200)
    assert.equal((await fetch(`${plain.base}/hello`, xff('10.0.0.2'))).status, 429, 'an unconfigured header is ignored: one client')

    const proxied = await serve(rateLimit({ limiter, policies: '1/m', trustedProxyHeader: 'X-Forwarded-For', prefix: uniqueKey('express-proxy') }))
    t.after(proxied.close)
    assert.equal((await fetch(`${proxied.base}/hello`, xff('10.0.0.1'))).status, 200)
    assert.equal((await fetch(`${proxied.base}/hello`, xff('10.0.0.2'))).status, 200, 'two clients behind the proxy')
    assert.equal((await fetch(`${proxied.base}/hello`, xff('6.6.6.6, 10.0.0.1'))).status, 429, 'a spoofed leftmost entry does not make a new client')
  })

  test('keys.user and keys.route', async (t) => {
    const byUser = keys.user((req) => req.headers['x-user'])
    const app = express()
    const prefix = uniqueKey('express-keys')
    app.get('/a', rateLimit({ limiter, policies: '1/m', key: keys.route(byUser), prefix }), (req, res) => res.send('a'))
    app.get('/b', rateLimit({ limiter, policies: '1/m', key: keys.route(byUser), prefix }), (req, res) => res.send('b'))
    const server = await listenExpress(app)
    t.after(server.close)
    const get = async (path, user) => (await fetch(`${server.base}${path}`, { headers: user ? { 'x-user': user } : {} })).status
    assert.deepEqual([await get('/a', 'alice'), await get('/a', 'bob'), await get('/b', 'alice'), await get('/a')], [200, 200, 200, 200])
    assert.deepEqual([await get('/a', 'alice'), await get('/b', 'bob'), await get('/a')], [429, 200, 429])
  })

  test('fail-open lets a request through on a limiter failure and reports it; fail-closed answers 503', async (t) => {
    const closed = new Limiter(REDIS_URL)
    await closed.close()
    const errors = []
    const open = await serve(rateLimit({ limiter: closed, policies: '1/m', onError: (e) => errors.push(e) }))
    t.after(open.close)
    const res = await fetch(`${open.base}/hello`)
    assert.equal(res.status, 200)
    assert.equal(rateLimitFields(res), null)
    assert.equal(errors[0].code, 'ERR_RL_CLOSED')

    const shut = await serve(rateLimit({ limiter: closed, policies: '1/m', failOpen: false, onError: () => {} }))
    t.after(shut.close)
    assert.equal((await fetch(`${shut.base}/hello`)).status, 503)
    assert.equal(shut.served.length, 0)
  })

  test('configuration mistakes are refused at setup, by the core', () => {
    assert.throws(() => rateLimit({ limiter, policies: '10/fortnight' }), (e) => e.argument === 'policy' && /fortnight/.test(e.message))
    assert.throws(() => rateLimit({ limiter, policies: '10/s', headerStyle: 'draft' }), (e) => e.argument === 'style')
    assert.throws(() => rateLimit({ policies: '10/s' }), (e) => e.argument === 'options.limiter')
    assert.throws(() => rateLimit({ limiter, policies: '10/s', exempt: true }), (e) => e.argument === 'options.exempt')
  })

  test('exactness: under concurrent load over the limit, the app serves at most the limit per window', async (t) => {
    const limit = 20
    const windowMs = 1000
    const app = await serve(rateLimit({ limiter, policies: `${limit}/s`, prefix: uniqueKey('express-exact') }))
    t.after(app.close)
    const codes = await load(`${app.base}/hello`, { clients: 16, ms: 3000 })
    const served = app.served
    assert.equal(codes.filter((c) => c === 200).length, served.length)
    assert.ok(codes.filter((c) => c === 429).length > served.length, `load must be above the limit: ${codes.length} requests`)
    assert.ok(served.length > 2 * limit, `load must span several windows: ${served.length} served`)
    assert.deepEqual(new Set(codes), new Set([200, 429]))
    // The handler's record of what it served, by each request's deciding time.
    const worst = maxInSpan(served.map((s) => s.nowMs), windowMs)
    assert.ok(worst <= limit, `${worst} served in one ${windowMs} ms window, limit ${limit}`)
  })

  // A request decided at once (memory backend, a lease) is answered without a promise; key, cost
  // and exempt functions that return promises take the promise path. Both must answer the same.
  for (const [name, make] of [['memory://', () => new Limiter('memory://')], ['leases on Redis', () => new Limiter(REDIS_URL, { leases: 'on', localFallback: false })]]) {
    test(`decided in place (${name}) and through promises (async key, cost, exempt): the same answers`, async (t) => {
      const own = make()
      t.after(() => own.close())
      const prefix = uniqueKey('express-inplace')
      const limit = name === 'memory://' ? 3 : 40
      const modes = []
      const apps = [
        await serve(rateLimit({ limiter: own, policies: `${limit}/m`, prefix: `${prefix}:sync:`, exempt: (req) => req.headers['x-internal'] === 'yes' })),
        await serve(rateLimit({
          limiter: own,
          policies: `${limit}/m`,
          prefix: `${prefix}:async:`,
          key: async () => 'k',
          cost: async () => 1,
          exempt: async (req) => req.headers['x-internal'] === 'yes',
        })),
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
      if (name !== 'memory://') assert.ok(modes.filter((m) => m === 'lease').length >= limit / 2, `most requests decided from a lease: ${modes}`)
    })
  }

  test('CommonJS and ESM give the same middleware', async () => {
    const cjs = require('rl-limiter/express')
    assert.equal(cjs.rateLimit, rateLimit)
    assert.equal(cjs.keys, keys)
  })
})
