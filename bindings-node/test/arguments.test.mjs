// Every bad input rejects (calls) or throws (constructor) with a typed error naming the argument,
// TypeError for wrong types and missing fields, RangeError for bad number shapes and out-of-range
// values, and nothing reaches Redis.
import assert from 'node:assert/strict'
import { after, before, describe, test } from 'node:test'

import { InvalidArgumentError, InvalidArgumentTypeError, Limiter } from 'rl-limiter'
import { REDIS_PORT, REDIS_URL, commandCalls, redisCli, uniqueKey } from './helpers.mjs'

const KEY = uniqueKey('args')
const GOOD = { limit: 10, windowMs: 1000 }

// [description, value, expected class]: number shapes for limit / windowMs / cost.
const BAD_NUMBERS = [
  ['NaN', NaN, RangeError],
  ['Infinity', Infinity, RangeError],
  ['-Infinity', -Infinity, RangeError],
  ['a negative', -1, RangeError],
  ['-0.5', -0.5, RangeError],
  ['a fraction', 1.5, RangeError],
  ['2^53', 2 ** 53, RangeError],
  ['2^53 + 2', 2 ** 53 + 2, RangeError],
  ['1e300', 1e300, RangeError],
  ['a numeric string', '5', TypeError],
  ['an empty string', '', TypeError],
  ['a bigint', 5n, TypeError],
  ['null', null, TypeError],
  ['true', true, TypeError],
  ['an object', {}, TypeError],
  ['an array', [5], TypeError],
  ['a Number object', new Number(5), TypeError], // eslint-disable-line no-new-wrappers
]

// Values of the right shape that the core refuses (range rules live in Rust).
const OUT_OF_RANGE = [
  ['limit', { limit: 0, windowMs: 1000 }],
  ['limit', { limit: 1e15 + 1, windowMs: 1000 }],
  ['windowMs', { limit: 1, windowMs: 0 }],
  ['windowMs', { limit: 1, windowMs: 30 * 24 * 3600 * 1000 + 1 }],
  ['cost', { limit: 1, windowMs: 1000, cost: 0 }],
  ['cost', { limit: 5, windowMs: 1000, cost: 6 }],
]

const BAD_KEYS = [
  ['undefined', undefined, TypeError],
  ['null', null, TypeError],
  ['a number', 42, TypeError],
  ['an object', { key: 'x' }, TypeError],
  ['an array', ['x'], TypeError],
  ['a symbol', Symbol('x'), TypeError],
  ['an ArrayBuffer', new ArrayBuffer(4), TypeError],
  ['an empty string', '', RangeError],
  ['an empty Buffer', Buffer.alloc(0), RangeError],
  ['a 64 KiB + 1 key', 'k'.repeat(64 * 1024 + 1), RangeError],
]

function check(err, expectedClass, argument) {
  assert.ok(err instanceof expectedClass, `${err?.name}: ${err?.message} is not a ${expectedClass.name}`)
  assert.ok(err instanceof InvalidArgumentError, `${err?.name} is not an InvalidArgumentError`)
  assert.ok(err instanceof Error)
  assert.equal(err.code, 'ERR_RL_INVALID_ARGUMENT')
  assert.equal(err.argument, argument)
  assert.match(err.message, new RegExp(`"${argument.replace('.', '\\.')}"`))
  if (expectedClass === TypeError) assert.ok(err instanceof InvalidArgumentTypeError)
  return true
}

describe('bad arguments', () => {
  let limiter
  let before_calls
  before(async () => {
    limiter = new Limiter(REDIS_URL)
    await limiter.ping()
    before_calls = commandCalls(REDIS_PORT)
  })
  after(async () => {
    // Nothing reached Redis: no script ran, no key was written (other files use other keys).
    const calls = commandCalls(REDIS_PORT)
    for (const cmd of ['evalsha', 'eval', 'del']) {
      assert.equal(calls[cmd] ?? 0, before_calls[cmd] ?? 0, `${cmd} ran during the bad-argument tests`)
    }
    assert.equal(redisCli(REDIS_PORT, 'EXISTS', `rl:{${KEY}}`), '0')
    await limiter.close()
  })

  for (const field of ['limit', 'windowMs', 'cost']) {
    for (const [what, value, cls] of BAD_NUMBERS) {
      test(`acquire: options.${field} = ${what} rejects with ${cls.name}`, async () => {
        await assert.rejects(limiter.acquire(KEY, { ...GOOD, [field]: value }), (e) => check(e, cls, `options.${field}`))
      })
    }
  }
  for (const field of ['limit', 'windowMs']) {
    for (const [what, value, cls] of BAD_NUMBERS) {
      test(`peek: options.${field} = ${what} rejects with ${cls.name}`, async () => {
        await assert.rejects(limiter.peek(KEY, { ...GOOD, [field]: value }), (e) => check(e, cls, `options.${field}`))
      })
    }
  }
  for (const [field, options] of OUT_OF_RANGE) {
    test(`acquire: ${JSON.stringify(options)} rejects with RangeError from the core`, async () => {
      await assert.rejects(limiter.acquire(KEY, options), (e) => check(e, RangeError, `options.${field}`))
    })
  }
  for (const [what, key, cls] of BAD_KEYS) {
    test(`key = ${what} rejects with ${cls.name} (acquire, peek, reset)`, async () => {
      await assert.rejects(limiter.acquire(key, GOOD), (e) => check(e, cls, 'key'))
      await assert.rejects(limiter.peek(key, GOOD), (e) => check(e, cls, 'key'))
      await assert.rejects(limiter.reset(key), (e) => check(e, cls, 'key'))
    })
  }
  test('missing fields and options reject with TypeError', async () => {
    await assert.rejects(limiter.acquire(KEY), (e) => check(e, TypeError, 'options'))
    await assert.rejects(limiter.acquire(KEY, null), (e) => check(e, TypeError, 'options'))
    await assert.rejects(limiter.acquire(KEY, 5), (e) => check(e, TypeError, 'options'))
    await assert.rejects(limiter.acquire(KEY, {}), (e) => check(e, TypeError, 'options.limit'))
    await assert.rejects(limiter.acquire(KEY, { limit: 5 }), (e) => check(e, TypeError, 'options.windowMs'))
    await assert.rejects(limiter.acquire(KEY, { windowMs: 5 }), (e) => check(e, TypeError, 'options.limit'))
    await assert.rejects(limiter.peek(KEY, { limit: 5 }), (e) => check(e, TypeError, 'options.windowMs'))
    await assert.rejects(limiter.peek(KEY, { ...GOOD, cost: 2 }), (e) => check(e, TypeError, 'options.cost'))
    await assert.rejects(limiter.acquire(), (e) => check(e, TypeError, 'key'))
  })
  test('the calls never throw synchronously', () => {
    const p = limiter.acquire(NaN, NaN)
    p.catch(() => {})
    assert.ok(p instanceof Promise)
    limiter.peek(undefined).catch(() => {})
    limiter.reset({}).catch(() => {})
  })
})

describe('bad constructor arguments throw synchronously', () => {
  const cases = [
    [[42], TypeError, 'url'],
    [[{}], TypeError, 'url'],
    [['http://127.0.0.1:6379'], RangeError, 'url'],
    [['redis://'], RangeError, 'url'],
    [[REDIS_URL, 'x'], TypeError, 'options'],
    [[REDIS_URL, null], TypeError, 'options'],
    [[REDIS_URL, { keyPrefix: 5 }], TypeError, 'options.keyPrefix'],
    [[REDIS_URL, { keyPrefix: 'a{b}' }], RangeError, 'options.keyPrefix'],
    [[REDIS_URL, { connectTimeoutMs: 0 }], RangeError, 'options.connectTimeoutMs'],
    [[REDIS_URL, { connectTimeoutMs: 60_001 }], RangeError, 'options.connectTimeoutMs'],
    [[REDIS_URL, { requestTimeoutMs: 0 }], RangeError, 'options.requestTimeoutMs'],
    [[REDIS_URL, { maxClockSkewMs: 30 * 24 * 3600 * 1000 + 1 }], RangeError, 'options.maxClockSkewMs'],
    // The fallback's options: ranges are the core's, reported under the option's JavaScript name.
    [[REDIS_URL, { retryDelayMs: 60001 }], RangeError, 'options.retryDelayMs'],
    [[REDIS_URL, { degradeRttMs: 0 }], RangeError, 'options.degradeRttMs'],
    [[REDIS_URL, { degradeRttMs: 60_001 }], RangeError, 'options.degradeRttMs'],
    [[REDIS_URL, { degradeAfterMs: 0 }], RangeError, 'options.degradeAfterMs'],
    [[REDIS_URL, { recoverRttMs: 0 }], RangeError, 'options.recoverRttMs'],
    [[REDIS_URL, { recoverRttMs: 10, degradeRttMs: 5 }], RangeError, 'options.recoverRttMs'],
    [[REDIS_URL, { recoverRttMs: 6 }], RangeError, 'options.recoverRttMs'], // above the default degradeRttMs (5)
    [[REDIS_URL, { recoverAfterMs: 60_001 }], RangeError, 'options.recoverAfterMs'],
    [[REDIS_URL, { instances: 0 }], RangeError, 'options.instances'],
    [[REDIS_URL, { instances: 1_000_001 }], RangeError, 'options.instances'],
    [[REDIS_URL, { localMaxKeys: 0 }], RangeError, 'options.localMaxKeys'],
    [[REDIS_URL, { localMaxKeys: 10_000_001 }], RangeError, 'options.localMaxKeys'],
    [[undefined, { instances: 0 }], RangeError, 'options.instances'],
    [[undefined, { recoverRttMs: 10, degradeRttMs: 5 }], RangeError, 'options.recoverRttMs'],
  ]
  // Options go to the core's option table as they are: null restores the default and a bigint is
  // a whole number (checked against the range), so both are accepted there (see `accepted` below).
  const accepted = [[{ localFallback: null }, 'null']]
  for (const [what, value] of [['1', 1], ['0', 0], ['"false"', 'false'], ['an object', {}]]) {
    cases.push([[REDIS_URL, { localFallback: value }], TypeError, 'options.localFallback', what])
  }
  for (const field of ['connectTimeoutMs', 'requestTimeoutMs', 'maxClockSkewMs', 'retryDelayMs', 'degradeRttMs', 'degradeAfterMs', 'recoverRttMs', 'recoverAfterMs', 'instances', 'localMaxKeys']) {
    for (const [what, value, cls] of BAD_NUMBERS) {
      if (value === null || typeof value === 'bigint') accepted.push([{ [field]: value }, what])
      else cases.push([[REDIS_URL, { [field]: value }], cls, `options.${field}`, what])
    }
  }
  for (const [options, what] of accepted) {
    test(`new Limiter({ ${Object.keys(options)[0]}: ${what} }) is accepted`, async () => {
      const limiter = new Limiter(REDIS_URL, options)
      await limiter.close()
    })
  }
  for (const [args, cls, argument, what] of cases) {
    test(`new Limiter(${what ? `{ ${argument.slice(8)}: ${what} }` : args.map((a) => (typeof a === 'string' ? JSON.stringify(a) : JSON.stringify(a) ?? String(a))).join(', ')}) throws ${cls.name}`, () => {
      assert.throws(() => new Limiter(...args), (e) => check(e, cls, argument))
    })
  }
})
