// Leases through the binding: decisions in mode 'lease' with the lease stats, and close()
// returning unused leases at once, long before they would age out (leaseMs + window).
import assert from 'node:assert/strict'
import { test } from 'node:test'

import { Limiter } from 'rl-limiter'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

const o = { limit: 100, windowMs: 60_000 }
const LEASE_MS = 10_000

/** How many single permits a plain limiter can take now. */
async function takenByAnother(key) {
  const b = new Limiter(REDIS_URL)
  let got = 0
  while ((await b.acquire(key, o)).allowed) got++
  await b.close()
  return got
}

test('decisions from a lease have mode lease and count in the lease stats', async () => {
  const a = new Limiter(REDIS_URL, { leases: 'on', leaseMs: LEASE_MS })
  const key = uniqueKey('lease-mode')
  const modes = []
  for (let i = 0; i < 5; i++) modes.push((await a.acquire(key, o)).mode)
  assert.ok(modes.filter((m) => m === 'lease').length >= 4, modes.join())
  const s = a.stats()
  assert.ok(s.decisionsLease >= 4, JSON.stringify(s))
  assert.equal(s.leasesTaken, 1)
  assert.ok(s.leasedPermits >= 5)
  assert.equal(s.leaseRefunds, 0)
  await a.close()
})

test('close() returns unused leases before resolving', async () => {
  const a = new Limiter(REDIS_URL, { leases: 'on', leaseMs: LEASE_MS })
  const key = uniqueKey('lease-close')
  for (let i = 0; i < 3; i++) assert.ok((await a.acquire(key, o)).allowed)
  const leased = a.stats().leasedPermits
  assert.ok(leased > 3)
  const b = new Limiter(REDIS_URL)
  assert.equal((await b.peek(key, o)).used, leased)
  await b.close()
  await a.close()
  await a.close() // idempotent
  // The lease would count for leaseMs + window (70 s); close gave back all but the 3 used.
  assert.equal(await takenByAnother(key), o.limit - 3)
})
