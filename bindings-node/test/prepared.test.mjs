// preparePolicies and acquirePolicies: the middleware's one call per request. The decision must
// be acquireAll's, and the headers and body exactly what renderHeaders and problemBody give for
// it (one renderer, the core's); bad input is refused naming the argument the caller wrote.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { InvalidArgumentError, InvalidArgumentTypeError, Limiter, LimiterClosedError, parsePolicies, preparePolicies, problemBody, renderHeaders } from 'rl-limiter'
import internal from '../internal.js'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

// Not part of the API (package.json's exports leave internal.js out): the middleware's method.
const { decider } = internal

const pairs = (flat) => flat.reduce((out, v, i) => (i % 2 ? out[out.length - 1].push(v) : out.push([v]), out), [])

for (const backend of ['redis', 'memory']) {
  const url = backend === 'redis' ? REDIS_URL : undefined
  describe(`acquirePolicies (${backend})`, () => {
    test('decides like acquireAll and renders what renderHeaders and problemBody render', async () => {
      const limiter = new Limiter(url)
      const text = 'burst: 2/10s; daily: 100/d'
      const prepared = preparePolicies(text, 'both')
      assert.deepEqual(prepared.list, parsePolicies(text))
      assert.equal(prepared.style, 'both')
      const key = uniqueKey('prepared')
      const first = await limiter.acquirePolicies(prepared, key, { cost: 2 })
      assert.equal(first.decision.allowed, true)
      assert.deepEqual(first.decision.decisions.map((d) => d.used), [2, 2])
      assert.deepEqual(pairs(first.headers), renderHeaders(prepared.list, first.decision, 'both'))
      assert.equal(first.body, undefined)
      const denied = await limiter.acquirePolicies(prepared, key)
      assert.equal(denied.decision.allowed, false)
      assert.deepEqual(denied.decision.decisions.map((d) => d.allowed), [false, true])
      assert.deepEqual(pairs(denied.headers), renderHeaders(prepared.list, denied.decision, 'both'))
      assert.equal(pairs(denied.headers).at(-1)[0], 'Retry-After')
      assert.equal(denied.body, problemBody(prepared.list, denied.decision))
      assert.deepEqual(JSON.parse(denied.body)['violated-policies'], ['burst'])
      // The same key through acquireAll sees the same window.
      const rules = prepared.list.map((p) => ({ key, limit: p.limit, windowMs: p.windowMs }))
      assert.equal((await limiter.acquireAll(rules)).decisions[1].used, 2)
      await limiter.close()
    })

    test('a group and policies given as objects', async () => {
      const limiter = new Limiter(url)
      const prepared = preparePolicies([{ name: 'one', limit: 1, windowMs: 60_000 }])
      const group = uniqueKey('prepared-group')
      assert.equal((await limiter.acquirePolicies(prepared, 'k', { group })).decision.allowed, true)
      const again = await limiter.acquirePolicies(prepared, 'k', { group })
      assert.equal(again.decision.allowed, false)
      assert.deepEqual(pairs(again.headers).map(([n]) => n), ['RateLimit-Policy', 'RateLimit', 'Retry-After'])
      assert.equal((await limiter.acquirePolicies(prepared, 'k', { group: uniqueKey('other') })).decision.allowed, true)
      await limiter.close()
    })
  })
}

// The middleware's call (internal): a decision made at once is the value itself, one that waits
// on Redis a promise; both are what acquirePolicies resolves to.
describe('the middleware\'s in-place call', () => {
  const isPromise = (v) => v !== null && typeof v === 'object' && typeof v.then === 'function'
  test('memory: the result itself, the same as acquirePolicies gives', async () => {
    const limiter = new Limiter()
    const prepared = preparePolicies('2/m', 'both')
    const decide = limiter[decider](prepared)
    const now = decide('a', 1, undefined)
    assert.equal(isPromise(now), false)
    const later = await limiter.acquirePolicies(prepared, 'b')
    assert.deepEqual(Object.keys(now).sort(), Object.keys(later).sort())
    assert.deepEqual(now.headers, later.headers)
    assert.deepEqual({ ...now.decision, nowMs: 0, decisions: now.decision.decisions.map((d) => ({ ...d, nowMs: 0 })) }, { ...later.decision, nowMs: 0, decisions: later.decision.decisions.map((d) => ({ ...d, nowMs: 0 })) })
    decide('a', 1, undefined)
    const denied = decide('a', 1, undefined)
    assert.equal(denied.decision.allowed, false)
    assert.deepEqual(pairs(denied.headers), renderHeaders(prepared.list, denied.decision, 'both'))
    assert.equal(denied.body, problemBody(prepared.list, denied.decision))
    assert.deepEqual(JSON.parse(denied.body)['violated-policies'], ['2/1m'])
    // A key longer than the native side's first read, a Buffer key and a group are whole.
    const long = 'k'.repeat(300) + 'é'.repeat(200)
    assert.equal(decide(long, 2, undefined).decision.allowed, true)
    assert.equal(decide(long, 1, undefined).decision.allowed, false)
    assert.equal(decide('k'.repeat(300) + 'é'.repeat(199) + 'e', 2, undefined).decision.allowed, true, 'a key that differs only at its end is another key')
    assert.equal(decide(Buffer.from(long), 1, undefined).decision.allowed, false, 'a Buffer with the same bytes is the same key')
    assert.equal(decide(long, 1, 'g').decision.allowed, true, 'another group is another window')
    // Keys whose last character (2, 3 or 4 bytes of UTF-8) crosses the end of that first read.
    for (let pad = 244; pad <= 256; pad++) {
      for (const [a, b] of [['é', 'è'], ['€', '₤'], ['😀', '😁']]) {
        const k = `${pad}:` + 'k'.repeat(pad)
        assert.equal(decide(k + a, 2, undefined).decision.allowed, true)
        assert.equal(decide(k + b, 2, undefined).decision.allowed, true, `${pad} + ${b}: a key that differs only in its last character is another window`)
        assert.equal(decide(Buffer.from(k + a), 1, undefined).decision.allowed, false, `${pad} + ${a}: read whole, the same key as its Buffer`)
      }
    }
    // Bad input throws at once, typed and named; a closed limiter rejects.
    assert.throws(() => decide(42, 1, undefined), (e) => e instanceof InvalidArgumentTypeError && e.argument === 'key')
    assert.throws(() => decide('a', 'x', undefined), (e) => e instanceof InvalidArgumentTypeError && e.argument === 'options.cost')
    assert.throws(() => limiter[decider]('2/m'), (e) => e instanceof InvalidArgumentTypeError && e.argument === 'policies')
    await assert.rejects(decide('a', 1.5, undefined), (e) => e instanceof InvalidArgumentError && e.argument === 'options.cost')
    await limiter.close()
    await assert.rejects(decide('a', 1, undefined), (e) => e instanceof LimiterClosedError)
    await assert.rejects(limiter[decider](prepared)('a', 1, undefined), (e) => e instanceof LimiterClosedError, 'a decider made after close')
  })

  test('Redis: a promise for a script call, the value itself for a lease decision', async () => {
    const plain = new Limiter(REDIS_URL)
    const prepared = preparePolicies('1000/m')
    const p = plain[decider](prepared)(uniqueKey('now-plain'), 1, undefined)
    assert.equal(isPromise(p), true)
    assert.equal((await p).decision.mode, 'normal')
    await plain.close()
    const leasing = new Limiter(REDIS_URL, { leases: 'on' })
    const key = uniqueKey('now-lease')
    const decide = leasing[decider](prepared)
    const first = decide(key, 1, undefined)
    assert.equal(isPromise(first), true, 'the first call takes the lease from Redis')
    assert.equal((await first).decision.mode, 'lease')
    const next = decide(key, 1, undefined)
    assert.equal(isPromise(next), false, 'a decision from the lease is made in place')
    assert.equal(next.decision.mode, 'lease')
    await leasing.close()
  })
})

describe('preparePolicies and acquirePolicies refuse bad input naming it', () => {
  const refused = (fn, type, argument, re) => assert.throws(fn, (e) => e instanceof type && e.argument === argument && re.test(e.message), `${argument} ${re}`)
  test('preparePolicies', () => {
    refused(() => preparePolicies('10/fortnight'), InvalidArgumentError, 'policies', /fortnight/)
    refused(() => preparePolicies('a: 1/s; a: 2/m'), InvalidArgumentError, 'policies', /twice/)
    refused(() => preparePolicies(42), InvalidArgumentTypeError, 'policies', /policy string or an array/)
    refused(() => preparePolicies([{ name: 'x', limit: -1, windowMs: 1000 }]), InvalidArgumentError, 'policies', /policy 0's limit is -1/)
    refused(() => preparePolicies([{ name: 'x', limit: 1 }]), InvalidArgumentTypeError, 'policies', /windowMs/)
    refused(() => preparePolicies([]), InvalidArgumentError, 'policies', /is empty/)
    refused(() => preparePolicies([{ name: 'a', limit: 1, windowMs: 1000 }, { name: 'a', limit: 2, windowMs: 60_000 }]), InvalidArgumentError, 'policies', /"a" twice/)
    refused(() => preparePolicies('1/s', 'draft'), InvalidArgumentError, 'style', /"draft"; must be one of ietf, legacy, both, none/)
    refused(() => preparePolicies('1/s', 7), InvalidArgumentTypeError, 'style', /string/)
  })

  test('acquirePolicies', async () => {
    const limiter = new Limiter()
    const prepared = preparePolicies('5/s')
    const rejected = (p, type, argument, re) => assert.rejects(p, (e) => e instanceof type && e.argument === argument && re.test(e.message))
    await rejected(limiter.acquirePolicies(parsePolicies('5/s'), 'k'), InvalidArgumentTypeError, 'policies', /preparePolicies/)
    await rejected(limiter.acquirePolicies('5/s', 'k'), InvalidArgumentTypeError, 'policies', /preparePolicies/)
    await rejected(limiter.acquirePolicies(prepared, 42), InvalidArgumentTypeError, 'key', /string/)
    await rejected(limiter.acquirePolicies(prepared, 'k', { cost: 1.5 }), InvalidArgumentError, 'options.cost', /1\.5/)
    await rejected(limiter.acquirePolicies(prepared, 'k', { cost: 'x' }), InvalidArgumentTypeError, 'options.cost', /number/)
    await rejected(limiter.acquirePolicies(prepared, 'k', { group: 3 }), InvalidArgumentTypeError, 'options.group', /string/)
    await limiter.close()
    await assert.rejects(limiter.acquirePolicies(prepared, 'k'), (e) => e instanceof LimiterClosedError)
  })
})
