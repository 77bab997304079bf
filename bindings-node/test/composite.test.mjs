// acquireAll and the policy functions: all-or-nothing across keys, a burst and a daily limit on
// one key, groups, and invalid input named by the argument the caller wrote. Rendering and parsing
// are the core's; these tests check the binding carries them through unchanged.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { describe, test } from 'node:test'

import { InvalidArgumentError, InvalidArgumentTypeError, Limiter, parsePolicies, problemBody, renderHeaders, PROBLEM_CONTENT_TYPE } from 'rl-limiter'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

const require = createRequire(import.meta.url)

for (const backend of ['redis', 'memory']) {
  const url = backend === 'redis' ? REDIS_URL : undefined
  describe(`acquireAll (${backend})`, () => {
    test('all or nothing: a denying rule takes nothing from the others', async () => {
      const limiter = new Limiter(url)
      const group = uniqueKey('group')
      const [a, b] = ['a', 'b']
      const rules = [{ key: a, limit: 1, windowMs: 60_000 }, { key: b, limit: 5, windowMs: 60_000 }]
      const first = await limiter.acquireAll(rules, { group })
      assert.equal(first.allowed, true)
      assert.deepEqual(first.decisions.map((d) => d.used), [1, 1])
      const denied = await limiter.acquireAll(rules, { group })
      assert.equal(denied.allowed, false)
      assert.deepEqual(denied.decisions.map((d) => d.allowed), [false, true])
      assert.ok(denied.retryAfterMs > 50_000 && denied.retryAfterMs <= 60_000, `retryAfterMs ${denied.retryAfterMs}`)
      assert.equal(denied.retryAfterMs, denied.decisions[0].retryAfterMs)
      // b still counts only the first call.
      const onlyB = await limiter.acquireAll([rules[1]], { group })
      assert.equal(onlyB.allowed, true)
      assert.equal(onlyB.decisions[0].used, 2)
      await limiter.close()
    })

    test('a burst and a daily limit on one key need no group and count one window', async () => {
      const limiter = new Limiter(url)
      const key = uniqueKey('burst-daily')
      const policies = parsePolicies('burst: 3/s; daily: 5/d')
      const rules = policies.map((p) => ({ key, limit: p.limit, windowMs: p.windowMs, cost: 1 }))
      const outcomes = []
      for (let i = 0; i < 4; i++) outcomes.push(await limiter.acquireAll(rules))
      assert.deepEqual(outcomes.map((d) => d.allowed), [true, true, true, false])
      const last = outcomes[3]
      assert.deepEqual(last.decisions.map((d) => d.allowed), [false, true])
      assert.deepEqual(last.decisions.map((d) => d.used), [3, 3])
      assert.deepEqual(last.decisions.map((d) => d.remaining), [0, 2])
      assert.equal(last.mode, backend === 'redis' ? 'normal' : 'memory')
      // The same key through acquire() is the same window: 3 used of the daily 5.
      const one = await limiter.peek(key, { limit: 5, windowMs: 86_400_000 })
      assert.equal(one.used, 3)
      await limiter.close()
    })

    test('a group keeps its keys apart from the same keys ungrouped', async () => {
      const limiter = new Limiter(url)
      const key = uniqueKey('grouped')
      const rule = { key, limit: 1, windowMs: 60_000 }
      assert.equal((await limiter.acquireAll([rule], { group: 'g1' })).allowed, true)
      assert.equal((await limiter.acquireAll([rule], { group: 'g1' })).allowed, false)
      assert.equal((await limiter.acquireAll([rule], { group: Buffer.from('g2') })).allowed, true)
      assert.equal((await limiter.acquireAll([rule])).allowed, true)
      assert.equal((await limiter.acquire(key, { limit: 1, windowMs: 60_000 })).allowed, false)
      await limiter.close()
    })

    test('resetInGroup clears the key in that group only', async () => {
      const limiter = new Limiter(url)
      const key = uniqueKey('reset-group')
      const fits = async (group) => (await limiter.acquireAll([{ key, limit: 1, windowMs: 60_000 }], { group })).allowed
      for (const g of ['g1', 'g2']) {
        assert.equal(await fits(g), true)
        assert.equal(await fits(g), false)
      }
      assert.equal((await limiter.acquire(key, { limit: 1, windowMs: 60_000 })).allowed, true)
      assert.equal(await limiter.resetInGroup(key, { group: Buffer.from('g1') }), undefined)
      assert.equal(await fits('g1'), true, "the group's window was cleared")
      assert.equal(await fits('g2'), false, "another group's window is untouched")
      assert.equal((await limiter.peek(key, { limit: 1, windowMs: 60_000 })).used, 1, 'the ungrouped window is untouched')
      await limiter.resetInGroup(key) // no group: reset
      assert.equal((await limiter.peek(key, { limit: 1, windowMs: 60_000 })).used, 0)
      assert.equal(await fits('g1'), false)
      await assert.rejects(limiter.resetInGroup(key, { group: '' }), (e) => e instanceof InvalidArgumentError && e.argument === 'options.group' && /1 to 1024/.test(e.message))
      await assert.rejects(limiter.resetInGroup(key, { group: 7 }), (e) => e instanceof InvalidArgumentTypeError && e.argument === 'options.group')
      await assert.rejects(limiter.resetInGroup('', { group: 'g1' }), (e) => e instanceof InvalidArgumentError && e.argument === 'key')
      await limiter.close()
    })

    test('invalid input is refused naming the value, before any I/O', async () => {
      const limiter = new Limiter(url)
      const ok = { key: 'k', limit: 1, windowMs: 1000 }
      const cases = [
        [[], {}, InvalidArgumentError, 'rules', /empty/],
        ['k', {}, InvalidArgumentTypeError, 'rules', /must be an array/],
        [[ok, 5], {}, InvalidArgumentTypeError, 'rules[1]', /object/],
        [Array(17).fill(ok), {}, InvalidArgumentError, 'rules', /at most 16/],
        [[{ ...ok, limit: 0 }], {}, InvalidArgumentError, 'rules[].limit', /rule 0/],
        [[ok, { ...ok, windowMs: 1.5 }], {}, InvalidArgumentError, 'rules[].windowMs', /rule 1/],
        [[{ ...ok, cost: '2' }], {}, InvalidArgumentTypeError, 'rules[].cost', /type number.*rule 0/],
        [[{ key: 'k', limit: 1 }], {}, InvalidArgumentTypeError, 'rules[].windowMs', /required/],
        [[{ ...ok, key: 7 }], {}, InvalidArgumentTypeError, 'rules[].key', /string/],
        [[{ ...ok, key: '' }], {}, InvalidArgumentError, 'rules[].key', /rule 0/],
        [[ok, { ...ok, cost: 2, limit: 5 }], {}, InvalidArgumentError, 'rules[].cost', /different costs/],
        [[{ ...ok, key: 'ip:1.2.3.4' }, { ...ok, key: 'user:42' }], {}, InvalidArgumentError, 'rules', /pass a group/],
        [[ok], { group: '' }, InvalidArgumentError, 'options.group', /1 to 1024/],
        [[ok], { group: 5 }, InvalidArgumentTypeError, 'options.group', /string/],
      ]
      for (const [rules, options, cls, argument, message] of cases) {
        await assert.rejects(limiter.acquireAll(rules, options), (e) => {
          assert.ok(e instanceof cls, `${argument}: ${e}`)
          assert.equal(e.code, 'ERR_RL_INVALID_ARGUMENT')
          assert.equal(e.argument, argument, e.message)
          assert.match(e.message, message)
          return true
        })
      }
      // Nothing was taken by the refused calls.
      assert.equal((await limiter.peek('k', { limit: 1, windowMs: 1000 })).used, 0)
      await limiter.close()
    })
  })
}

describe('policies and headers', () => {
  test('parsePolicies returns the core parse, errors name text', () => {
    assert.deepEqual(parsePolicies('burst: 100/s; 5000 per hour'), [
      { name: 'burst', limit: 100, windowMs: 1000 },
      { name: '5000/1h', limit: 5000, windowMs: 3_600_000 },
    ])
    assert.throws(() => parsePolicies('100/fortnight'), (e) => e instanceof InvalidArgumentError && e.argument === 'policy' && /fortnight/.test(e.message))
    assert.throws(() => parsePolicies('a: 1/s; a: 2/m'), (e) => e.argument === 'policy' && /twice/.test(e.message))
    assert.throws(() => parsePolicies(42), (e) => e instanceof InvalidArgumentTypeError && e.argument === 'policy')
  })

  test('renderHeaders and problemBody for a denial, every style', async () => {
    const limiter = new Limiter()
    const policies = parsePolicies('burst: 1/10s; daily: 100/d')
    const rules = policies.map((p) => ({ key: 'k', limit: p.limit, windowMs: p.windowMs }))
    const allowed = await limiter.acquireAll(rules)
    assert.deepEqual(renderHeaders(policies, allowed), [
      ['RateLimit-Policy', '"burst";q=1;w=10, "daily";q=100;w=86400'],
      ['RateLimit', '"burst";r=0;t=10, "daily";r=99;t=86400'],
    ])
    const denied = await limiter.acquireAll(rules)
    const h = new Map(renderHeaders(policies, denied, 'both'))
    assert.deepEqual([...h.keys()], ['RateLimit-Policy', 'RateLimit', 'X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'])
    assert.equal(h.get('Retry-After'), '10')
    assert.equal(h.get('X-RateLimit-Limit'), '1')
    assert.deepEqual(renderHeaders(policies, denied, 'none'), [['Retry-After', '10']])
    assert.deepEqual(renderHeaders(policies, denied, 'legacy').map(([n]) => n), ['X-RateLimit-Limit', 'X-RateLimit-Remaining', 'X-RateLimit-Reset', 'Retry-After'])
    const body = JSON.parse(problemBody(policies, denied))
    assert.equal(body.status, 429)
    assert.deepEqual(body['violated-policies'], ['burst'])
    assert.equal(body.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded')
    assert.equal(PROBLEM_CONTENT_TYPE, 'application/problem+json')
    await limiter.close()
  })

  test('renderHeaders refuses bad input naming the argument', async () => {
    const limiter = new Limiter()
    const policies = parsePolicies('2/s')
    const d = await limiter.acquireAll([{ key: 'x', limit: 2, windowMs: 1000 }])
    const refused = (fn, argument, re) => assert.throws(fn, (e) => e instanceof InvalidArgumentError && e.argument === argument && re.test(e.message))
    refused(() => renderHeaders(policies, d, 'draft'), 'style', /ietf, legacy, both, none/)
    refused(() => renderHeaders([...policies, ...policies], d), 'policies', /2 policies but the decision has 1 rules/)
    refused(() => renderHeaders([{ name: 'a"b', limit: 1, windowMs: 1 }], d), 'policies', /policy 0/)
    refused(() => renderHeaders(policies, { ...d, mode: 'warp' }), 'decision', /warp/)
    refused(() => renderHeaders(policies, { ...d, retryAfterMs: -1 }), 'decision', /retryAfterMs/)
    refused(() => renderHeaders(policies, null), 'decision', /CompositeDecision/)
    refused(() => renderHeaders('2/s', d), 'policies', /array/)
    refused(() => problemBody(policies, { ...d, decisions: [{}] }), 'decision', /decisions\[0\]\.allowed/)
    await limiter.close()
  })

  test('CommonJS and ESM export the same functions', async () => {
    const cjs = require('rl-limiter')
    assert.equal(cjs.parsePolicies, parsePolicies)
    assert.equal(cjs.renderHeaders, renderHeaders)
    assert.equal(cjs.problemBody, problemBody)
  })
})
