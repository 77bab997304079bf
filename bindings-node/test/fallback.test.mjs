// The local fallback (on by default), its options and `stats()`. A limiter on a port where
// nothing listens: the first call is refused, retried once after `retryDelayMs`, then decided
// locally (`mode: 'local'`) from the local budget floor(limit / instances); with
// `localFallback: false` the same calls reject with BackendUnavailableError.
import assert from 'node:assert/strict'
import { createServer } from 'node:net'
import { describe, test } from 'node:test'

import { BackendUnavailableError, Limiter, LimiterClosedError } from 'rl-limiter'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

const REQUEST_TIMEOUT_MS = 500
const SLACK_MS = 500 // scheduling on a busy 2-core machine
const OPTS = { limit: 100, windowMs: 60_000 }
// A Redis that is never slow enough to leave `normal` on a busy test machine (only errors would).
const PATIENT = { degradeRttMs: 5_000, degradeAfterMs: 60_000 }

const NUMBER_FIELDS = [
  'decisionsNormal', 'decisionsLocal', 'decisionsMemory', 'transitionsToLocal', 'transitionsToNormal', 'stateMs',
  'redisErrors', 'retries', 'probes', 'repairs', 'repairedPermits', 'failovers', 'instances', 'localKeys',
  'rttSamples', 'rttLastUs', 'rttP50Us', 'rttP99Us', 'rttMaxUs', 'shardBorrows', 'decisionsLease',
  'leasesTaken', 'leaseRefunds', 'leasedPermits', 'refundedPermits', 'denialsCached', 'deniedNormal', 'deniedLocal',
  'deniedMemory',
]
const FIELDS = ['mode', 'topology', 'stateReason', ...NUMBER_FIELDS]

/** A URL where nothing listens: a port the kernel just handed out and that was closed again. */
async function nobodyUrl() {
  const server = createServer()
  await new Promise((resolve) => server.listen(0, '127.0.0.1', resolve))
  const { port } = server.address()
  await new Promise((resolve) => server.close(resolve))
  return `redis://127.0.0.1:${port}/`
}

function assertStatsShape(s) {
  assert.equal(Object.getPrototypeOf(s), Object.prototype, 'a plain object')
  assert.deepEqual(Object.keys(s).sort(), [...FIELDS].sort())
  for (const f of ['mode', 'topology', 'stateReason']) assert.equal(typeof s[f], 'string', f)
  for (const f of NUMBER_FIELDS) assert.ok(Number.isSafeInteger(s[f]) && s[f] >= 0, `${f} = ${s[f]}`)
  assert.deepEqual(JSON.parse(JSON.stringify(s)), s)
}

async function localBudget(limiter, key) {
  const t0 = performance.now()
  const decisions = [await limiter.acquire(key, OPTS)]
  const firstMs = performance.now() - t0
  assert.ok(firstMs < REQUEST_TIMEOUT_MS + SLACK_MS, `the first call took ${firstMs.toFixed(0)} ms`)
  const t1 = performance.now()
  for (let i = 0; i < 25; i++) decisions.push(await limiter.acquire(key, OPTS))
  assert.ok(performance.now() - t1 < 1000, 'local decisions waited on Redis')
  decisions.slice(0, 25).forEach((d, i) => {
    assert.equal(d.mode, 'local')
    assert.equal(d.allowed, true, `call ${i + 1}`)
    assert.equal(d.used, i + 1)
    assert.equal(d.remaining, 25 - (i + 1), 'remaining counts down from the local budget 100 / 4')
  })
  const denied = decisions[25]
  assert.equal(denied.mode, 'local')
  assert.equal(denied.allowed, false)
  assert.equal(denied.used, 25)
  assert.equal(denied.remaining, 0)
  assert.ok(denied.retryAfterMs > 0, `retryAfterMs ${denied.retryAfterMs}`)
}

describe('local fallback', () => {
  test('nothing listens: 25 of 100 allowed locally with instances 4, then denied; stats() says so', async () => {
    // degradeRttMs is raised so that only the refusal and its retry (asserted below) can send it local.
    const limiter = new Limiter(await nobodyUrl(), { requestTimeoutMs: REQUEST_TIMEOUT_MS, instances: 4, retryDelayMs: 20, degradeRttMs: 60_000 })
    assert.equal(limiter.stats().mode, 'normal')
    const key = uniqueKey('fallback')
    await localBudget(limiter, key)
    const s = limiter.stats()
    assertStatsShape(s)
    assert.equal(s.mode, 'local')
    assert.equal(s.topology, 'standalone')
    assert.equal(s.transitionsToLocal, 1)
    assert.equal(s.transitionsToNormal, 0)
    assert.equal(s.decisionsLocal, 26)
    assert.equal(s.decisionsNormal, 0)
    assert.ok(s.redisErrors >= 1, `redisErrors ${s.redisErrors}`)
    assert.ok(s.retries >= 1, `retries ${s.retries}`)
    assert.equal(s.instances, 4)
    assert.equal(s.localKeys, 1)
    assert.ok(s.stateReason.length > 0)
    // Many at once, on another key: its own budget, decided together.
    const burst = await Promise.all(Array.from({ length: 30 }, () => limiter.acquire(key + ':burst', OPTS)))
    assert.equal(burst.filter((d) => d.allowed).length, 25)
    assert.ok(burst.every((d) => d.mode === 'local'))
    assert.equal(limiter.stats().localKeys, 2)
    assert.equal(typeof limiter.instanceId, 'string')
    await limiter.close()
    assert.throws(() => limiter.stats(), LimiterClosedError)
    assert.equal(typeof limiter.instanceId, 'string', 'kept after close()')
  })

  test('localFallback: false rejects with BackendUnavailableError instead', async () => {
    const limiter = new Limiter(await nobodyUrl(), { requestTimeoutMs: REQUEST_TIMEOUT_MS, instances: 4, localFallback: false })
    const key = uniqueKey('nofallback')
    for (let i = 0; i < 3; i++) await assert.rejects(limiter.acquire(key, OPTS), BackendUnavailableError)
    await assert.rejects(limiter.peek(key, OPTS), BackendUnavailableError)
    const s = limiter.stats()
    assertStatsShape(s)
    assert.equal(s.mode, 'normal')
    assert.equal(s.decisionsLocal, 0)
    assert.equal(s.transitionsToLocal, 0)
    assert.ok(s.redisErrors >= 1)
    await limiter.close()
  })

  test('good values of every new option are accepted', async () => {
    for (const url of [undefined, await nobodyUrl()]) {
      const options = { retryDelayMs: 0, localFallback: true, degradeRttMs: 60_000, degradeAfterMs: 1, recoverRttMs: 60_000, recoverAfterMs: 60_000, instances: 1_000_000, localMaxKeys: 10_000_000 }
      await new Limiter(url, options).close()
      await new Limiter(url, { localFallback: false, instances: undefined, localMaxKeys: 1 }).close()
    }
  })
})

describe('stats()', () => {
  test('memory backend: mode and topology "memory", decisionsMemory counts', async () => {
    const limiter = new Limiter()
    for (let i = 0; i < 3; i++) await limiter.acquire('k', { limit: 10, windowMs: 1000 })
    const s = limiter.stats()
    assertStatsShape(s)
    assert.equal(s.mode, 'memory')
    assert.equal(s.topology, 'memory')
    assert.equal(s.decisionsMemory, 3)
    assert.equal(s.decisionsNormal, 0)
    assert.equal(s.decisionsLocal, 0)
    assert.equal(limiter.instanceId, null)
    assert.notEqual(limiter.stats(), s, 'a new snapshot each time')
    await limiter.close()
    assert.throws(() => limiter.stats(), (e) => e instanceof LimiterClosedError && e.code === 'ERR_RL_CLOSED')
  })

  test('live Redis: mode "normal", decisionsNormal counts, round trips are measured', async () => {
    const limiter = new Limiter(REDIS_URL, PATIENT)
    const key = uniqueKey('stats')
    for (let i = 0; i < 5; i++) assert.equal((await limiter.acquire(key, OPTS)).mode, 'normal')
    const s = limiter.stats()
    assertStatsShape(s)
    assert.equal(s.mode, 'normal')
    assert.equal(s.topology, 'standalone')
    assert.equal(s.decisionsNormal, 5)
    assert.equal(s.decisionsLocal, 0)
    assert.equal(s.transitionsToLocal, 0)
    assert.ok(s.rttSamples > 0, `rttSamples ${s.rttSamples}`)
    assert.ok(s.rttMaxUs >= s.rttP50Us && s.rttP50Us > 0)
    assert.equal(typeof limiter.instanceId, 'string')
    const other = new Limiter(REDIS_URL)
    assert.notEqual(limiter.instanceId, other.instanceId)
    await Promise.all([limiter.close(), other.close()])
  })
})
