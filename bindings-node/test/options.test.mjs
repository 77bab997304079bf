// The options object goes to the core's option table as it is: every option in the table works
// under its camelCase name (clientClock included), a value is taken by its JavaScript type only
// (null: the default; bigint: a whole number), and a key the table does not have, or a snake_case
// spelling of one it has, is refused naming `options`.
import assert from 'node:assert/strict'
import { describe, test } from 'node:test'

import { InvalidArgumentError, InvalidArgumentTypeError, Limiter } from 'rl-limiter'
import { REDIS_URL, uniqueKey } from './helpers.mjs'

const OPTS = { limit: 3, windowMs: 60_000 }

function invalid(cls, argument) {
  return (e) => {
    assert.ok(e instanceof cls, `${e?.name}: ${e?.message}`)
    assert.equal(e.code, 'ERR_RL_INVALID_ARGUMENT')
    assert.equal(e.argument, argument)
    return true
  }
}

describe('options through the core table', () => {
  for (const [backend, url] of [['redis', REDIS_URL], ['memory', undefined]]) {
    test(`clientClock: true decides on this host's clock (${backend})`, async () => {
      const limiter = new Limiter(url, { clientClock: true })
      try {
        const before = Date.now()
        const d = await limiter.acquire(uniqueKey('client-clock'), OPTS)
        assert.equal(d.allowed, true)
        assert.equal(d.mode, backend === 'redis' ? 'normal' : 'memory')
        assert.ok(d.nowMs >= before - 1 && d.nowMs <= Date.now() + 1, `nowMs ${d.nowMs} is this host's time`)
      } finally {
        await limiter.close()
      }
    })
  }

  test('clientClock takes a boolean only', () => {
    assert.throws(() => new Limiter(undefined, { clientClock: 1 }), invalid(InvalidArgumentTypeError, 'options.clientClock'))
    assert.throws(() => new Limiter(undefined, { clientClock: 'yes' }), invalid(InvalidArgumentTypeError, 'options.clientClock'))
  })

  test('a bigint is a whole number: in range it is taken, out of range it is a RangeError naming the option', async () => {
    const limiter = new Limiter(REDIS_URL, { instances: 2n, localMaxKeys: 5n })
    assert.equal(limiter.stats().instances, 2)
    await limiter.close()
    assert.throws(() => new Limiter(undefined, { instances: -1n }), invalid(RangeError, 'options.instances'))
    assert.throws(() => new Limiter(undefined, { instances: 2n ** 200n }), invalid(RangeError, 'options.instances'))
  })

  test('null and undefined keep the default', async () => {
    const limiter = new Limiter(undefined, { keyPrefix: null, instances: undefined, localFallback: null })
    assert.equal(limiter.stats().instances > 0, true)
    await limiter.close()
  })

  test('an unknown key, or the snake_case spelling of an option, is refused naming options', () => {
    for (const key of ['timeout', 'retry_delay_ms', 'key_prefix', 'RetryDelayMs']) {
      assert.throws(
        () => new Limiter(undefined, { [key]: 5 }),
        (e) => invalid(InvalidArgumentError, 'options')(e) && e instanceof RangeError && e.message.includes(JSON.stringify(key)) && e.message.includes('retryDelayMs'),
      )
    }
  })

  // (stats().instances shows the configured divisor on a Redis limiter; no call is made.)
  test('symbol and inherited keys are not options', async () => {
    const options = Object.create({ notAnOption: 1 })
    options[Symbol('x')] = 1
    options.instances = 3
    const limiter = new Limiter(REDIS_URL, options)
    assert.equal(limiter.stats().instances, 3)
    await limiter.close()
  })

  test('an object value is a TypeError naming the option', () => {
    assert.throws(() => new Limiter(undefined, { keyPrefix: {} }), invalid(InvalidArgumentTypeError, 'options.keyPrefix'))
    assert.throws(() => new Limiter(undefined, { retryDelayMs: () => 5 }), invalid(InvalidArgumentTypeError, 'options.retryDelayMs'))
  })

  test('backend after close() is "closed"', async () => {
    const limiter = new Limiter(undefined)
    assert.equal(limiter.backend, 'memory')
    await limiter.close()
    assert.equal(limiter.backend, 'closed')
  })
})
