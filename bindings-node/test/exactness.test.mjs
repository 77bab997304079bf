// The core promise, seen from Node: 64 concurrent promises offer three times the limit on one key
// for three windows, and no span of one window (measured on Redis time, the Decision's nowMs)
// ever holds more than the limit. Without the local fallback: this checks Redis's own decisions,
// which a busy test machine must not send to the fallback (tested in fallback.test.mjs).
import assert from 'node:assert/strict'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { Limiter } from 'rl-limiter'
import { REDIS_URL, maxInSpan, uniqueKey } from './helpers.mjs'

const LIMIT = 300
const WINDOW_MS = 1000
const WINDOWS = 3
const CONCURRENCY = 64
const OFFERED_PER_WINDOW = 3 * LIMIT

test('64 concurrent callers offering 3x the limit for 3 windows never get more than the limit in any window', async () => {
  const limiter = new Limiter(REDIS_URL, { localFallback: false })
  const key = uniqueKey('exact')
  const admitted = []
  const denied = []
  let offered = 0
  // Each caller paces itself so that together they offer 3x the limit per window.
  const gapMs = (WINDOW_MS * CONCURRENCY) / OFFERED_PER_WINDOW
  const end = Date.now() + WINDOWS * WINDOW_MS
  async function caller(i) {
    await sleep((gapMs * i) / CONCURRENCY)
    while (Date.now() < end) {
      const started = Date.now()
      offered++
      const d = await limiter.acquire(key, { limit: LIMIT, windowMs: WINDOW_MS })
      assert.equal(d.mode, 'normal')
      assert.equal(d.remaining, LIMIT - d.used)
      assert.ok(d.used <= LIMIT, `used ${d.used} > limit`)
      if (d.allowed) {
        assert.equal(d.retryAfterMs, 0)
        admitted.push(d.nowMs)
      } else {
        assert.ok(d.retryAfterMs > 0 && d.retryAfterMs <= WINDOW_MS, `retryAfterMs ${d.retryAfterMs}`)
        denied.push(d)
      }
      const wait = gapMs - (Date.now() - started)
      if (wait > 0) await sleep(wait)
    }
  }
  await Promise.all(Array.from({ length: CONCURRENCY }, (_, i) => caller(i)))
  await limiter.close()

  const worst = maxInSpan(admitted, WINDOW_MS)
  assert.ok(offered >= 2 * WINDOWS * LIMIT, `offered only ${offered}: the machine is too slow to test anything`)
  assert.ok(denied.length > 0, 'nothing was denied: the offer never exceeded the limit')
  assert.equal(worst, LIMIT, `most admitted in any ${WINDOW_MS} ms span: ${worst}, limit ${LIMIT} (offered ${offered}, admitted ${admitted.length})`)
})

test('a burst of 64 x 3 concurrent promises at once admits exactly the limit', async () => {
  const limiter = new Limiter(REDIS_URL, { localFallback: false })
  const key = uniqueKey('burst')
  const limit = 64
  const decisions = await Promise.all(Array.from({ length: 3 * limit }, () => limiter.acquire(key, { limit, windowMs: 60_000 })))
  await limiter.close()
  assert.equal(decisions.filter((d) => d.allowed).length, limit)
  const used = decisions.map((d) => d.used).sort((a, b) => a - b)
  assert.equal(used.at(-1), limit)
})
