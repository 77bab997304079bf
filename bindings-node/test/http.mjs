// Shared by the middleware tests: servers on free loopback ports, and the RateLimit fields read
// with an independent RFC 9651 parser (structured-headers), every item checked for its shape.
import assert from 'node:assert/strict'
import { once } from 'node:events'
import { parseList } from 'structured-headers'

/** Starts an Express app on a free loopback port: { base, close }. */
export async function listenExpress(app) {
  const server = app.listen(0, '127.0.0.1')
  await once(server, 'listening')
  const base = `http://127.0.0.1:${server.address().port}`
  return {
    base,
    close: () => new Promise((resolve) => {
      server.close(resolve)
      server.closeAllConnections()
    }),
  }
}

/** Starts a Fastify app on a free loopback port: { base, close }. */
export async function listenFastify(app) {
  const base = await app.listen({ port: 0, host: '127.0.0.1' })
  return { base, close: () => app.close() }
}

/** A parameter that must be a non-negative Structured Fields Integer. */
function integer(params, name, field) {
  const v = params.get(name)
  assert.ok(Number.isInteger(v) && v >= 0, `${field}: parameter ${name} = ${v}`)
  return v
}

/**
 * `RateLimit-Policy` and `RateLimit` of a response, parsed as Structured Field Lists:
 * { policy: Map(name -> {q, w}), state: Map(name -> {r, t}) }, or null if absent.
 */
export function rateLimitFields(res) {
  const policyText = res.headers.get('ratelimit-policy')
  const stateText = res.headers.get('ratelimit')
  if (policyText === null && stateText === null) return null
  assert.ok(policyText !== null && stateText !== null, 'RateLimit-Policy and RateLimit come together')
  const policy = new Map()
  for (const [name, params] of parseList(policyText)) {
    assert.equal(typeof name, 'string', `a policy is named by a String: ${policyText}`)
    policy.set(name, { q: integer(params, 'q', 'RateLimit-Policy'), w: integer(params, 'w', 'RateLimit-Policy') })
  }
  const state = new Map()
  for (const [name, params] of parseList(stateText)) {
    assert.equal(typeof name, 'string', `RateLimit names a policy by a String: ${stateText}`)
    assert.ok(policy.has(name), `RateLimit names ${name}, which RateLimit-Policy does not`)
    state.set(name, { r: integer(params, 'r', 'RateLimit'), t: integer(params, 't', 'RateLimit') })
  }
  return { policy, state }
}

/** Retry-After as whole seconds (RFC 9110 delay-seconds), or null. */
export function retryAfter(res) {
  const v = res.headers.get('retry-after')
  if (v === null) return null
  assert.match(v, /^\d+$/, `Retry-After: ${v}`)
  return Number(v)
}

/** Checks a 429: problem+json body naming the violated policies, Retry-After no earlier than their t. */
export async function assertDenied(res, violated) {
  assert.equal(res.status, 429)
  assert.equal(res.headers.get('content-type').split(';')[0], 'application/problem+json')
  const body = await res.json()
  assert.equal(body.status, 429)
  assert.equal(body.type, 'https://iana.org/assignments/http-problem-types#quota-exceeded')
  assert.deepEqual(body['violated-policies'], violated)
  const wait = retryAfter(res)
  assert.ok(wait >= 1, `Retry-After ${wait}`)
  const fields = rateLimitFields(res)
  if (fields) {
    for (const name of violated) assert.ok(wait >= fields.state.get(name).t, `Retry-After ${wait} < t of ${name}`)
  }
  return body
}

/**
 * Concurrent load: `clients` loops of fetch(url) until `ms` elapse. Returns the status codes.
 */
export async function load(url, { clients, ms, headers }) {
  const codes = []
  const end = Date.now() + ms
  await Promise.all(Array.from({ length: clients }, async () => {
    while (Date.now() < end) {
      const res = await fetch(url, { headers })
      await res.arrayBuffer()
      codes.push(res.status)
    }
  }))
  return codes
}
