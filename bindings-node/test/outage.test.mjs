// Redis down: calls reject with BackendUnavailableError within the configured request timeout
// (frozen server: no answer at all; killed server: connection refused), and the same limiter
// works again once Redis is back. Uses a server of its own: it is frozen and killed here. These
// limiters run with `localFallback: false` (the fallback, on by default, is in fallback.test.mjs).
import assert from 'node:assert/strict'
import { after, before, test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { BackendUnavailableError, Limiter, LimiterError } from 'rl-limiter'
import { PrivateRedis, uniqueKey } from './helpers.mjs'

const TIMEOUT_MS = 300
// Scheduling slack on a busy 2-core machine: the bound is the timeout, the slack is the test's.
const SLACK_MS = 350
const OPTS = { limit: 1000, windowMs: 1000 }

let redis
before(() => {
  redis = PrivateRedis.start()
})
after(() => redis.stop())

async function timed(promise) {
  const t0 = performance.now()
  try {
    return { value: await promise, ms: performance.now() - t0 }
  } catch (error) {
    return { error, ms: performance.now() - t0 }
  }
}

function assertUnavailable(r) {
  assert.ok(r.error, `expected a rejection, got ${JSON.stringify(r.value)}`)
  assert.ok(r.error instanceof BackendUnavailableError, `${r.error.name}: ${r.error.message}`)
  assert.ok(r.error instanceof LimiterError)
  assert.equal(r.error.code, 'ERR_RL_BACKEND_UNAVAILABLE')
  assert.ok(r.ms <= TIMEOUT_MS + SLACK_MS, `took ${r.ms.toFixed(0)} ms, timeout ${TIMEOUT_MS} ms`)
}

test('a frozen Redis: every call rejects within the request timeout, then it recovers', async () => {
  const limiter = new Limiter(redis.url, { requestTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS, localFallback: false })
  const key = uniqueKey('frozen')
  assert.equal((await limiter.acquire(key, OPTS)).allowed, true)

  redis.freeze()
  try {
    // Many callers at once: none waits longer than the timeout.
    const results = await Promise.all(Array.from({ length: 32 }, () => timed(limiter.acquire(key, OPTS))))
    results.forEach(assertUnavailable)
    assertUnavailable(await timed(limiter.peek(key, OPTS)))
    assertUnavailable(await timed(limiter.reset(key)))
    assertUnavailable(await timed(limiter.ping()))
  } finally {
    redis.thaw()
  }
  const d = await recovered(limiter, key)
  assert.equal(d.mode, 'normal')
  await limiter.close()
})

test('a killed Redis: calls reject fast with BackendUnavailableError; a restarted one is used again', async () => {
  const limiter = new Limiter(redis.url, { requestTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS, localFallback: false })
  const key = uniqueKey('killed')
  assert.equal((await limiter.acquire(key, OPTS)).used, 1)

  await redis.kill()
  for (let i = 0; i < 5; i++) assertUnavailable(await timed(limiter.acquire(key, OPTS)))
  const burst = await Promise.all(Array.from({ length: 32 }, () => timed(limiter.acquire(key, OPTS))))
  burst.forEach(assertUnavailable)

  await redis.restart()
  const d = await recovered(limiter, key)
  // A fresh server: the window starts empty again.
  assert.equal(d.used, 1)
  await limiter.close()
})

test('a limiter made while Redis is down works once Redis is up', async () => {
  await redis.kill()
  const limiter = new Limiter(redis.url, { requestTimeoutMs: TIMEOUT_MS, connectTimeoutMs: TIMEOUT_MS, localFallback: false })
  const key = uniqueKey('late')
  assertUnavailable(await timed(limiter.acquire(key, OPTS)))
  await redis.restart()
  await recovered(limiter, key)
  await limiter.close()
})

/** Retries (as a caller would) until a call succeeds; the limiter reconnects by itself. */
async function recovered(limiter, key) {
  const deadline = Date.now() + 5000
  for (;;) {
    try {
      return await limiter.acquire(key, OPTS)
    } catch (e) {
      assert.ok(e instanceof BackendUnavailableError, `${e.name}: ${e.message}`)
      if (Date.now() > deadline) throw new Error(`no recovery within 5 s: ${e.message}`)
      await sleep(50)
    }
  }
}
