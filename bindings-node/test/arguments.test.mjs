// Bad inputs, from the shared table tests/conformance/invalid.json (format in its README): each row
// JavaScript can express rejects (calls) or throws (constructor) with InvalidArgumentError (a
// RangeError) or InvalidArgumentTypeError (a TypeError) naming the argument as the caller wrote it,
// and nothing reaches Redis. Below the table, the JavaScript-only values no JSON row can carry.
import assert from 'node:assert/strict'
import { readFileSync } from 'node:fs'
import { after, before, describe, test } from 'node:test'

import { InvalidArgumentError, InvalidArgumentTypeError, Limiter, parsePolicies } from 'rl-limiter'
import { PrivateRedis, commandCalls, redisCli } from './helpers.mjs'

const TABLE = JSON.parse(readFileSync(new URL('../../tests/conformance/invalid.json', import.meta.url), 'utf8'))
const FIELDS = new Set(['id', 'call', 'args', 'error', 'argument', 'needs', 'shows', 'message_lacks'])

// Every tag of the table: null if JavaScript expresses it, else why not. An unknown tag fails.
const NEEDS = {
  dynamic_types: null,
  compound_values: null,
  null_key: null,
  distinct_float: 'JavaScript has no float type apart from its numbers (the float_numbers rows)',
  float_numbers: null,
  negative: null,
  beyond_i64: null,
  beyond_u64: null,
  inexact_double: 'no JavaScript number holds this integer exactly',
  unknown_option: null,
  byte_strings: 'JavaScript strings are Unicode',
  lone_surrogate: 'Node encodes a lone surrogate as U+FFFD before rl sees it',
  zero_option: null,
}

/** retry_delay_ms -> retryDelayMs (rl_core::options::camel_case). */
const camel = (name) => name.replace(/_(.)/g, (_, c) => c.toUpperCase())
/** The argument as a JavaScript caller wrote it. */
const spelled = (name) => (['key', 'url', 'options', 'policy'].includes(name) ? name : `options.${camel(name)}`)

/** The argument of a composite (acquireAll) row, as its caller wrote it. */
const COMPOSITE_NAMES = {
  rules: 'rules',
  key: 'rules[].key',
  limit: 'rules[].limit',
  window_ms: 'rules[].windowMs',
  cost: 'rules[].cost',
  group: 'options.group',
}
const spelledFor = (row) =>
  row.call === 'acquire_all' && row.argument in COMPOSITE_NAMES ? COMPOSITE_NAMES[row.argument] : spelled(row.argument)

/** A table value as the JavaScript value it stands for. */
function value(v) {
  if (Array.isArray(v)) return v.map(value)
  if (v === null || typeof v !== 'object') return v
  const [[tag, x], ...rest] = Object.entries(v)
  assert.equal(rest.length, 0, `a tagged value has one key: ${JSON.stringify(v)}`)
  switch (tag) {
    case 'int': {
      const n = Number(x)
      assert.equal(BigInt(n), BigInt(x), `${x} is no exact double (the row needs inexact_double)`)
      return n
    }
    case 'float':
      return { nan: NaN, inf: Infinity, '-inf': -Infinity }[x] ?? Number(x)
    case 'bytes_hex':
      return Buffer.from(x, 'hex')
    case 'utf16':
      return String.fromCharCode(...x.match(/.{4}/g).map((h) => parseInt(h, 16)))
    case 'repeat': {
      const [part, times] = [value(x[0]), x[1]]
      return typeof part === 'string' ? part.repeat(times) : Buffer.concat(Array(times).fill(part))
    }
    case 'object':
      return Object.fromEntries(Object.entries(x).map(([k, y]) => [k, value(y)]))
    default:
      assert.fail(`unknown value tag ${tag}`)
  }
}

function skipReason(row) {
  for (const k of Object.keys(row)) assert.ok(FIELDS.has(k), `${row.id}: unknown field ${k}`)
  assert.ok(row.call in TABLE.calls, `${row.id}: unknown call ${row.call}`)
  assert.ok(['invalid_argument', 'invalid_type'].includes(row.error), `${row.id}: error ${row.error}`)
  for (const tag of row.needs ?? []) {
    assert.ok(tag in NEEDS, `${row.id}: unknown need ${tag}`)
    if (NEEDS[tag] !== null) return `${tag}: ${NEEDS[tag]}`
  }
  return null
}

function check(row, err) {
  const cls = row.error === 'invalid_type' ? InvalidArgumentTypeError : InvalidArgumentError
  assert.ok(err instanceof cls, `${err?.name}: ${err?.message} is not a ${cls.name}`)
  assert.ok(err instanceof InvalidArgumentError)
  assert.equal(err instanceof TypeError, row.error === 'invalid_type', `${err?.name}: ${err?.message}`)
  assert.equal(err.code, 'ERR_RL_INVALID_ARGUMENT')
  assert.equal(err.argument, spelledFor(row), err.message)
  if (row.shows !== undefined) {
    if (/^-?\d+$/.test(row.shows)) {
      // A number, however the host prints it (2^70 is 1.1805916207174113e+21 in JavaScript,
      // 1180591620717411300000 from the double the addon got): some number in the message equals it.
      const numbers = err.message.match(/-?\d+(\.\d+)?(e[+-]?\d+)?/gi) ?? []
      assert.ok(numbers.some((n) => Number(n) === Number(row.shows)), `${err.message} should show ${row.shows}`)
    } else {
      // A name, spelled as this host spells names.
      const shown = [row.shows, camel(row.shows)]
      assert.ok(shown.some((s) => err.message.includes(s)), `${err.message} should show ${shown.join(' or ')}`)
    }
  }
  if (row.message_lacks !== undefined) assert.ok(!err.message.includes(row.message_lacks), err.message)
  return true
}

/** acquire/peek/reset arguments: the key, and the rest in the options object, camelCase. */
function callArgs(row) {
  const a = { ...TABLE.calls[row.call].defaults, ...row.args }
  const key = value(a.key)
  if (row.call === 'reset') return [key]
  const options = {}
  for (const p of TABLE.calls[row.call].params) if (p !== 'key' && p in a) options[camel(p)] = value(a[p])
  return [key, options]
}

/** acquireAll's arguments for a composite row: rules (absent fields: acquire's defaults) and options. */
function compositeArgs(row) {
  const rules = (row.args.rules ?? [{}]).map((r) => {
    const f = { ...TABLE.calls.acquire.defaults, ...r }
    return Object.fromEntries(Object.entries(f).map(([k, v]) => [camel(k), value(v)]))
  })
  return 'group' in row.args ? [rules, { group: value(row.args.group) }] : [rules]
}

const expressible = []
const skipped = new Map()
for (const row of TABLE.rows) {
  const why = skipReason(row)
  if (why === null) expressible.push(row)
  else skipped.set(why, (skipped.get(why) ?? 0) + 1)
}

describe('the conformance table', () => {
  let redis, onRedis, memory
  before(() => {
    redis = PrivateRedis.start()
    onRedis = new Limiter(redis.url)
    memory = new Limiter()
  })
  after(async () => {
    // Nothing reached Redis: no script ran, nothing was written.
    const calls = commandCalls(redis.port)
    for (const cmd of ['fcall', 'evalsha', 'eval', 'del']) assert.equal(calls[cmd] ?? 0, 0, `${cmd} ran`)
    assert.equal(redisCli(redis.port, 'DBSIZE'), '0')
    await onRedis.close()
    await memory.close()
    await redis.stop()
  })

  test('counts', () => {
    const n = [...skipped.values()].reduce((a, b) => a + b, 0)
    console.log(`node: ${expressible.length} rows asserted, ${n} skipped`)
    for (const [why, k] of skipped) console.log(`  skipped ${k} needing ${why}`)
    assert.equal(expressible.length + n, TABLE.rows.length)
    assert.ok(expressible.length > 100)
  })

  for (const row of expressible) {
    test(row.id, async () => {
      if (row.call === 'open') {
        const url = 'url' in row.args ? value(row.args.url) : undefined
        const options = Object.fromEntries(Object.entries(row.args.options ?? {}).map(([k, v]) => [camel(k), value(v)]))
        assert.throws(() => new Limiter(url, options), (e) => check(row, e))
        return
      }
      if (row.call === 'parse_policies') {
        assert.throws(() => parsePolicies(value(row.args.text)), (e) => check(row, e))
        return
      }
      if (row.call === 'acquire_all') {
        const args = compositeArgs(row)
        if (row.args.options !== undefined) {
          // Options rows run on Redis only (tests/conformance/README.md).
          const options = Object.fromEntries(Object.entries(row.args.options).map(([k, v]) => [camel(k), value(v)]))
          const limiter = new Limiter(redis.url, options)
          try {
            await assert.rejects(limiter.acquireAll(...args), (e) => check(row, e))
          } finally {
            await limiter.close()
          }
          return
        }
        for (const limiter of [onRedis, memory]) await assert.rejects(limiter.acquireAll(...args), (e) => check(row, e))
        return
      }
      const args = callArgs(row)
      for (const limiter of [onRedis, memory]) {
        const p = limiter[row.call](...args) // never throws synchronously
        await assert.rejects(p, (e) => check(row, e))
      }
    })
  }
})

// ---- JavaScript-only values ---------------------------------------------------------------------

describe('JavaScript-only bad values', () => {
  const limiter = new Limiter()
  after(() => limiter.close())
  const GOOD = { limit: 10, windowMs: 1000 }
  const typeError = (argument) => (e) => e instanceof InvalidArgumentTypeError && e instanceof TypeError && e.argument === argument

  for (const [what, key] of [['undefined', undefined], ['a symbol', Symbol('x')], ['an ArrayBuffer', new ArrayBuffer(4)]]) {
    test(`key = ${what} rejects with TypeError (acquire, peek, reset)`, async () => {
      await assert.rejects(limiter.acquire(key, GOOD), typeError('key'))
      await assert.rejects(limiter.peek(key, GOOD), typeError('key'))
      await assert.rejects(limiter.reset(key), typeError('key'))
    })
  }
  // eslint-disable-next-line no-new-wrappers
  for (const [what, v] of [['a bigint', 5n], ['a Number object', new Number(5)]]) {
    for (const field of ['limit', 'windowMs', 'cost']) {
      test(`acquire: options.${field} = ${what} rejects with TypeError`, async () => {
        await assert.rejects(limiter.acquire('k', { ...GOOD, [field]: v }), typeError(`options.${field}`))
      })
    }
  }
  // Options take a bigint as a whole number (options.test.mjs); a boxed Number is no number.
  // eslint-disable-next-line no-new-wrappers
  test('new Limiter({ retryDelayMs: a Number object }) throws TypeError', () => {
    // eslint-disable-next-line no-new-wrappers
    assert.throws(() => new Limiter(undefined, { retryDelayMs: new Number(5) }), typeError('options.retryDelayMs'))
  })
  test('missing fields and options reject with TypeError', async () => {
    await assert.rejects(limiter.acquire('k'), typeError('options'))
    await assert.rejects(limiter.acquire('k', null), typeError('options'))
    await assert.rejects(limiter.acquire('k', 5), typeError('options'))
    await assert.rejects(limiter.acquire('k', {}), typeError('options.limit'))
    await assert.rejects(limiter.acquire('k', { limit: 5 }), typeError('options.windowMs'))
    await assert.rejects(limiter.acquire('k', { windowMs: 5 }), typeError('options.limit'))
    await assert.rejects(limiter.peek('k', { limit: 5 }), typeError('options.windowMs'))
    await assert.rejects(limiter.peek('k', { ...GOOD, cost: 2 }), typeError('options.cost'))
    await assert.rejects(limiter.acquire(), typeError('key'))
  })
  test('the constructor options must be an object', () => {
    assert.throws(() => new Limiter(undefined, 'x'), typeError('options'))
    assert.throws(() => new Limiter(undefined, null), typeError('options'))
  })
  test('the calls never throw synchronously', () => {
    const p = limiter.acquire(NaN, NaN)
    p.catch(() => {})
    assert.ok(p instanceof Promise)
    limiter.peek(undefined).catch(() => {})
    limiter.reset({}).catch(() => {})
  })
})
