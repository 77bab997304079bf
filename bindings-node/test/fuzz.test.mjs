// Random arguments across the FFI (fast-check): keys of any string, bytes or size, limits, windows
// and costs of any number or type, option names and values of any type, rule lists and policy
// text. Every call resolves to a well-formed decision or rejects (throws, for the constructor and
// parsePolicies) with InvalidArgumentError / InvalidArgumentTypeError naming an argument: never a
// crash, never a NativePanicError, never another error. Decisions go to a real redis-server.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import fc from 'fast-check'
import { InvalidArgumentError, InvalidArgumentTypeError, Limiter, parsePolicies } from 'rl-limiter'
import { REDIS_URL } from './helpers.mjs'

const RUNS = Number(process.env.RL_FUZZ_RUNS || 400)
const MAX_KEY_BYTES = 65536

const outcomes = { ok: 0, refused: 0 }

/** Both outcomes occurred since the last call (a property that never admits tests little). */
function bothOutcomes() {
  const seen = { ...outcomes }
  outcomes.ok = outcomes.refused = 0
  assert.ok(seen.ok > 0 && seen.refused > 0, JSON.stringify(seen))
}

/** The call's result, or undefined if it threw or rejected with a typed invalid-argument error. */
async function typed(call) {
  try {
    const r = await call()
    outcomes.ok++
    return r
  } catch (e) {
    outcomes.refused++
    assert.ok(
      e instanceof InvalidArgumentError || e instanceof InvalidArgumentTypeError,
      `not a typed error: ${e && e.stack}`,
    )
    assert.equal(e.code, 'ERR_RL_INVALID_ARGUMENT')
    assert.ok(typeof e.argument === 'string' && e.argument.length > 0, String(e))
    return undefined
  }
}

function wellFormed(d) {
  assert.equal(typeof d.allowed, 'boolean')
  for (const f of ['remaining', 'used', 'retryAfterMs', 'resetAfterMs', 'nowMs']) {
    assert.ok(Number.isSafeInteger(d[f]) && d[f] >= 0, `${f}: ${d[f]}`)
  }
  assert.equal(typeof d.mode, 'string')
}

const any = fc.oneof(
  fc.constant(null),
  fc.constant(undefined),
  fc.boolean(),
  fc.integer(),
  fc.double(),
  fc.bigInt(),
  fc.string({ maxLength: 12 }),
  fc.uint8Array({ maxLength: 12 }),
  fc.array(fc.integer(), { maxLength: 2 }),
  fc.dictionary(fc.string({ maxLength: 3 }), fc.integer(), { maxKeys: 2 }),
  fc.constant(Symbol('s')),
  fc.constant(() => 1),
)
const EDGES = [0, 1, 2, 1e15, 1e15 + 1, 2592000000, 2592000001, 2 ** 53 - 1, 2 ** 53, 2 ** 64, -1, -0, 0.5, NaN, Infinity, -Infinity]
const number = fc.oneof(fc.integer({ min: 1, max: 100 }), fc.constantFrom(...EDGES), fc.double(), any)
const key = fc.oneof(
  fc.string({ maxLength: 30 }),
  fc.string({ unit: 'binary', maxLength: 30 }),
  fc.uint8Array({ maxLength: 30 }),
  fc.constantFrom('', '\ud800', '{}', '}{', '\0', 'x'.repeat(MAX_KEY_BYTES), 'x'.repeat(MAX_KEY_BYTES + 1)),
  fc.constantFrom(MAX_KEY_BYTES, MAX_KEY_BYTES + 1, 1 << 20).map((n) => Buffer.alloc(n, 107)),
  any,
)

describe('random arguments across the FFI', () => {
  let limiter
  before(() => {
    limiter = new Limiter(REDIS_URL, { localFallback: false })
  })
  after(() => limiter.close())

  test('acquire, peek and reset with random keys, limits, windows and costs', async () => {
    await fc.assert(
      fc.asyncProperty(key, number, number, number, fc.oneof(fc.constant('opts'), any), async (k, limit, windowMs, cost, shape) => {
        const opts = shape === 'opts' ? { limit, windowMs, cost } : shape
        const d = await typed(() => limiter.acquire(k, opts))
        if (d !== undefined) wellFormed(d)
        const p = await typed(() => limiter.peek(k, { limit, windowMs }))
        if (p !== undefined) wellFormed(p)
        await typed(() => limiter.reset(k))
      }),
      { numRuns: RUNS },
    )
    bothOutcomes()
  })

  const OPTION_NAMES = ['keyPrefix', 'connectTimeoutMs', 'requestTimeoutMs', 'clientClock', 'maxClockSkewMs',
    'retryDelayMs', 'localFallback', 'degradeRttMs', 'degradeAfterMs', 'recoverRttMs', 'recoverAfterMs',
    'instances', 'localMaxKeys', 'keyShards', 'leases', 'leaseMs', 'leaseHotRate', 'denialCache', 'key_prefix']
  const optionValue = fc.oneof(
    fc.constantFrom(null, undefined, true, false, 0, 1, 5, 64, 65, 1000, 60000, 60001, -1, 1.5, NaN, '', 'auto', 'off', 'rl:', 'a{b}', 'x'.repeat(1025)),
    any,
  )

  test('new Limiter with random options (memory backend)', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.dictionary(fc.oneof(fc.constantFrom(...OPTION_NAMES), fc.string({ maxLength: 8 })), optionValue, { maxKeys: 4 }), any),
        async (options) => {
          const lim = await typed(() => new Limiter(null, options))
          if (lim !== undefined) {
            wellFormed(await lim.acquire('k', { limit: 5, windowMs: 1000 }))
            lim.close()
          }
        },
      ),
      { numRuns: RUNS },
    )
    bothOutcomes()
  })

  test('new Limiter with random non-URL values', async () => {
    // Only values that cannot name a host: a fuzzed host name would be looked up in DNS.
    await fc.assert(
      fc.asyncProperty(fc.oneof(any, fc.string({ maxLength: 30 }).filter((u) => !u.includes('://'))), async (url) => {
        const lim = await typed(() => new Limiter(url))
        if (lim !== undefined) lim.close()
      }),
      { numRuns: RUNS },
    )
    bothOutcomes()
  })

  const rule = fc.oneof(
    fc.record({ key, limit: number, windowMs: number, cost: number }, { requiredKeys: ['key', 'limit', 'windowMs'] }),
    any,
  )

  // In range, one cost: admitted or denied, unless the keys' slots differ without a group.
  const goodRule = fc.record({
    key: fc.constantFrom('a', 'b'),
    limit: fc.integer({ min: 1, max: 100 }),
    windowMs: fc.integer({ min: 1, max: 100000 }),
  })

  test('acquireAll with random rule lists and groups', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(fc.array(rule, { maxLength: 18 }), fc.array(goodRule, { minLength: 1, maxLength: 4 }), any),
        fc.oneof(fc.record({ group: key }), fc.constant({ group: 'g' }), any),
        async (rules, opts) => {
        const c = await typed(() => limiter.acquireAll(rules, opts))
        if (c !== undefined) {
          assert.equal(typeof c.allowed, 'boolean')
          assert.equal(c.decisions.length, rules.length)
          c.decisions.forEach(wellFormed)
        }
      },
      ),
      { numRuns: RUNS },
    )
    bothOutcomes()
  })

  const PIECES = ['1', '100', '0', '99999999999999999999', '/', ' per ', 'PER', 's', 'ms', 'hour', 'month', 'year',
    ';', ',', '|', ':', 'name', '"', '\\', ' ', '€', 'a€', '😀', '5 a€/s']

  test('parsePolicies with random text and values', async () => {
    await fc.assert(
      fc.asyncProperty(
        fc.oneof(
          fc.string({ maxLength: 30 }),
          fc.array(fc.constantFrom(...PIECES), { maxLength: 10 }).map((a) => a.join('')),
          fc.tuple(fc.nat(2000), fc.constantFrom('/', ' per '), fc.constantFrom('s', 'ms', '2m', 'hour', 'x', '')).map((t) => t.join('')),
          any,
        ),
        async (text) => {
          const ps = await typed(() => parsePolicies(text))
          if (ps !== undefined) {
            assert.ok(ps.length > 0)
            for (const p of ps) assert.ok(p.limit >= 1 && p.windowMs >= 1 && typeof p.name === 'string')
          }
        },
      ),
      { numRuns: RUNS },
    )
    bothOutcomes()
  })
})
