// The API surface: Decision fields, peek/reset/ping/close, key types, the memory backend, backend
// errors, and both module systems.
import assert from 'node:assert/strict'
import { createRequire } from 'node:module'
import { describe, test } from 'node:test'

import * as esm from 'rl-limiter'
import rlDefault, { BackendError, Limiter, LimiterClosedError, LimiterError } from 'rl-limiter'
import { REDIS_PORT, REDIS_URL, redisCli, uniqueKey } from './helpers.mjs'

const require = createRequire(import.meta.url)
const FIELDS = ['allowed', 'remaining', 'used', 'retryAfterMs', 'resetAfterMs', 'mode', 'nowMs']

function assertDecision(d) {
  assert.deepEqual(Object.keys(d).sort(), [...FIELDS].sort())
  assert.equal(typeof d.allowed, 'boolean')
  assert.equal(typeof d.mode, 'string')
  for (const f of ['remaining', 'used', 'retryAfterMs', 'resetAfterMs', 'nowMs']) {
    assert.ok(Number.isSafeInteger(d[f]) && d[f] >= 0, `${f} = ${d[f]}`)
  }
}

describe('module systems', () => {
  test('CommonJS and ESM give the same classes', () => {
    const cjs = require('rl-limiter')
    assert.equal(cjs.Limiter, esm.Limiter)
    assert.equal(rlDefault.Limiter, Limiter)
    for (const name of ['Limiter', 'LimiterError', 'BackendUnavailableError', 'BackendError', 'ClockSkewError', 'LimiterClosedError', 'InvalidArgumentError', 'InvalidArgumentTypeError']) {
      assert.equal(typeof esm[name], 'function', name)
      assert.equal(cjs[name], esm[name], name)
    }
  })
})

for (const backend of ['redis', 'memory']) {
  const url = backend === 'redis' ? REDIS_URL : undefined
  const mode = backend === 'redis' ? 'normal' : 'memory'
  describe(`${backend} backend`, () => {
    test('acquire, deny, retryAfterMs, peek, reset', async () => {
      const limiter = new Limiter(url)
      assert.equal(limiter.backend, backend)
      const key = uniqueKey('basic')
      const o = { limit: 3, windowMs: 10_000 }
      const d1 = await limiter.acquire(key, o)
      assertDecision(d1)
      assert.deepEqual({ ...d1, nowMs: 0 }, { allowed: true, remaining: 2, used: 1, retryAfterMs: 0, resetAfterMs: 10_000, mode, nowMs: 0 })
      const d2 = await limiter.acquire(key, { ...o, cost: 2 })
      assert.equal(d2.allowed, true)
      assert.equal(d2.remaining, 0)
      const denied = await limiter.acquire(key, o)
      assertDecision(denied)
      assert.equal(denied.allowed, false)
      assert.equal(denied.used, 3)
      assert.ok(denied.retryAfterMs > 9_000 && denied.retryAfterMs <= 10_000, `retryAfterMs ${denied.retryAfterMs}`)
      assert.ok(denied.nowMs >= d1.nowMs)
      // Redis time, not ours, but the two clocks are the same machine's here.
      assert.ok(Math.abs(denied.nowMs - Date.now()) < 5_000)

      const p = await limiter.peek(key, o)
      assert.equal(p.allowed, false)
      assert.equal(p.used, 3)
      await limiter.reset(key)
      const p2 = await limiter.peek(key, o)
      assert.equal(p2.allowed, true)
      assert.equal(p2.used, 0)
      assert.equal((await limiter.acquire(key, o)).used, 1, 'peek took nothing')
      await limiter.ping()
      await limiter.close()
    })

    test('string, Buffer and Uint8Array keys with the same bytes share a window; other bytes do not', async () => {
      const limiter = new Limiter(url)
      const key = uniqueKey('bytes') + ':ключ:{x}'
      const o = { limit: 10, windowMs: 10_000 }
      await limiter.acquire(key, o)
      await limiter.acquire(Buffer.from(key), o)
      const u8 = new Uint8Array(Buffer.from(key))
      assert.equal((await limiter.acquire(u8, o)).used, 3)
      // A view into a larger buffer: only its own bytes are the key.
      const big = Buffer.from('xx' + key + 'yy')
      assert.equal((await limiter.acquire(big.subarray(2, big.length - 2), o)).used, 4)
      const binary = Buffer.from([0, 255, 0x7b, 0x7d, 0x25])
      assert.equal((await limiter.acquire(binary, o)).used, 1)
      await limiter.close()
    })

    test('close(): idempotent, waits for calls in flight, later calls reject with LimiterClosedError', async () => {
      const limiter = new Limiter(url)
      const key = uniqueKey('close')
      const inflight = Array.from({ length: 50 }, () => limiter.acquire(key, { limit: 100, windowMs: 1000 }))
      const closing = limiter.close()
      assert.equal(limiter.closed, true)
      const all = await Promise.all(inflight)
      assert.equal(all.filter((d) => d.allowed).length, 50)
      await closing
      await limiter.close()
      for (const call of [() => limiter.acquire(key, { limit: 1, windowMs: 1 }), () => limiter.peek(key, { limit: 1, windowMs: 1 }), () => limiter.reset(key), () => limiter.ping()]) {
        await assert.rejects(call(), (e) => e instanceof LimiterClosedError && e instanceof LimiterError && e.code === 'ERR_RL_CLOSED')
      }
    })
  })
}

test('the memory backend keeps nothing in Redis and shares nothing between limiters', async () => {
  const key = uniqueKey('mem')
  const a = new Limiter()
  const b = new Limiter('memory://')
  assert.equal((await a.acquire(key, { limit: 1, windowMs: 60_000 })).allowed, true)
  assert.equal((await a.acquire(key, { limit: 1, windowMs: 60_000 })).allowed, false)
  assert.equal((await b.acquire(key, { limit: 1, windowMs: 60_000 })).allowed, true)
  await Promise.all([a.close(), b.close()])
})

test('keyPrefix decides the Redis key; the user key is the hash tag', async () => {
  const key = uniqueKey('prefix')
  const limiter = new Limiter(REDIS_URL, { keyPrefix: 'myapp:rl:' })
  await limiter.acquire(key, { limit: 5, windowMs: 60_000 })
  assert.equal(redisCli(REDIS_PORT, 'EXISTS', `myapp:rl:{${key}}`), '1')
  await limiter.reset(key)
  assert.equal(redisCli(REDIS_PORT, 'EXISTS', `myapp:rl:{${key}}`), '0')
  await limiter.close()
})

test('a Redis error (wrong type at the key) rejects with BackendError', async () => {
  const key = uniqueKey('wrongtype')
  redisCli(REDIS_PORT, 'SET', `rl:{${key}}`, 'not a window')
  const limiter = new Limiter(REDIS_URL)
  await assert.rejects(limiter.acquire(key, { limit: 5, windowMs: 1000 }), (e) => {
    assert.ok(e instanceof BackendError, `${e.name}: ${e.message}`)
    assert.ok(e instanceof LimiterError)
    assert.equal(e.code, 'ERR_RL_BACKEND')
    // The core names the key: Redis's own WRONGTYPE error names none.
    assert.ok(e.message.includes(`rl:{${key}} holds something that is not an rl window`), e.message)
    return true
  })
  await limiter.close()
})

test('many limiters opened and closed do not leak event-loop handles', async () => {
  const handles = process._getActiveHandles().length
  for (let i = 0; i < 200; i++) {
    const l = new Limiter(REDIS_URL)
    if (i % 20 === 0) await l.acquire(uniqueKey('many'), { limit: 1, windowMs: 1000 })
    await l.close()
  }
  assert.ok(process._getActiveHandles().length <= handles, 'handles grew')
})

test('Symbol.asyncDispose closes the limiter (for `await using`)', async () => {
  const limiter = new Limiter(REDIS_URL)
  assert.equal(typeof Symbol.asyncDispose, 'symbol')
  await limiter[Symbol.asyncDispose]()
  assert.equal(limiter.closed, true)
})
