'use strict'
// What rl-limiter/express and rl-limiter/fastify share: the key helpers, the configuration and
// one request's check. Host-language glue only: the policies are parsed and prepared once, and
// the decision made and the headers and problem body rendered by the core in one call per
// request (preparePolicies, acquirePolicies); this file picks the key and the cost and hands the
// results to the framework.

const { parsePolicies, preparePolicies, PROBLEM_CONTENT_TYPE, InvalidArgumentError, InvalidArgumentTypeError } = require('./limiter.js')
const { decider } = require('./internal.js')

function socketAddress(req) {
  const socket = req.socket ?? (req.raw && req.raw.socket)
  return (socket && socket.remoteAddress) || 'unknown'
}

/**
 * A key function: the client's IP address. The socket's peer address, unless `trustedProxyHeader`
 * is configured (e.g. `'x-forwarded-for'`): then the address `trustedHops` entries from the right
 * of that header's list (1: the last one, which the one proxy in front of the app appended). Only
 * configure a header that a proxy you run always sets: anyone can send one.
 */
function ip(options = {}) {
  const header = options.trustedProxyHeader ? String(options.trustedProxyHeader).toLowerCase() : null
  const hops = options.trustedHops ?? 1
  if (!Number.isSafeInteger(hops) || hops < 1) {
    throw new InvalidArgumentError('options.trustedHops', `is ${hops}; must be a whole number of at least 1`)
  }
  if (!header) return socketAddress
  return function clientIp(req) {
    let value = req.headers[header]
    if (Array.isArray(value)) value = value.join(',')
    if (value) {
      const parts = value.split(',')
      const entry = parts[Math.max(0, parts.length - hops)].trim()
      if (entry) return entry
    }
    return socketAddress(req)
  }
}

/** A key function: `user:<id>` from `getUser(req)`, or `ip:<address>` (from `fallback`) when it gives none. */
function user(getUser, fallback = ip()) {
  if (typeof getUser !== 'function') throw new InvalidArgumentTypeError('getUser', 'must be a function')
  return function userKey(req) {
    const id = getUser(req)
    return id === undefined || id === null || id === '' ? `ip:${fallback(req)}` : `user:${id}`
  }
}

/**
 * A key function: the route's pattern (Express `req.route.path` inside a route, Fastify
 * `request.routeOptions.url`; else the method and path) and `base`'s key: one window per route
 * and client.
 */
function route(base = ip()) {
  return function routeKey(req) {
    const pattern = (req.routeOptions && req.routeOptions.url) || (req.route && req.route.path && (req.baseUrl || '') + req.route.path) || (req.path ?? req.url)
    return `${req.method} ${pattern}|${base(req)}`
  }
}

/**
 * The middleware's options, checked once: policies parsed and the header style checked by the
 * core, functions checked for being functions.
 */
function configure(options) {
  if (options === null || typeof options !== 'object') {
    throw new InvalidArgumentTypeError('options', 'must be an object with at least `limiter` and `policies`')
  }
  const { limiter } = options
  if (!limiter || typeof limiter.acquirePolicies !== 'function') {
    throw new InvalidArgumentTypeError('options.limiter', 'must be a Limiter from rl-limiter')
  }
  let policies = options.policies
  if (typeof policies === 'string') policies = parsePolicies(policies)
  if (!Array.isArray(policies) || policies.length === 0) {
    throw new InvalidArgumentTypeError('options.policies', 'must be a policy string such as "100/s; 5000/h" or a non-empty array of policies')
  }
  const headerStyle = options.headerStyle ?? 'ietf'
  const prepared = preparePolicies(policies, headerStyle)
  const fn = (name, fallback) => {
    const v = options[name] ?? fallback
    if (v !== undefined && typeof v !== 'function') throw new InvalidArgumentTypeError(`options.${name}`, 'must be a function')
    return v
  }
  const cost = options.cost ?? 1
  if (typeof cost !== 'number' && typeof cost !== 'function') {
    throw new InvalidArgumentTypeError('options.cost', 'must be a number or a function of the request')
  }
  const group = options.group
  if (group !== undefined && typeof group !== 'string' && typeof group !== 'function') {
    throw new InvalidArgumentTypeError('options.group', 'must be a string or a function of the request')
  }
  const failOpen = options.failOpen ?? true
  if (typeof failOpen !== 'boolean') throw new InvalidArgumentTypeError('options.failOpen', 'must be a boolean')
  const prefix = options.prefix ?? ''
  if (typeof prefix !== 'string') throw new InvalidArgumentTypeError('options.prefix', 'must be a string')
  // rl's Limiter decides a request in place when it can (see check); another object with an
  // acquirePolicies method (a wrapper) is called through that.
  const decide = typeof limiter[decider] === 'function'
    ? limiter[decider](prepared)
    : (key, cost, group) => limiter.acquirePolicies(prepared, key, group === undefined ? { cost } : { cost, group })
  return {
    limiter,
    decide,
    policies,
    prepared,
    headerStyle,
    key: fn('key', ip({ trustedProxyHeader: options.trustedProxyHeader, trustedHops: options.trustedHops })),
    cost,
    group,
    exempt: fn('exempt'),
    onDenied: fn('onDenied'),
    onError: fn('onError', logError(failOpen)),
    failOpen,
    prefix,
  }
}

/** The default `onError`: one line per error, at most one every 10 s (with the count skipped). */
function logError(failOpen, intervalMs = 10_000) {
  let last = 0
  let skipped = 0
  return function log(err) {
    const now = Date.now()
    if (now - last < intervalMs) {
      skipped++
      return
    }
    const more = skipped ? ` (${skipped} more since the last line)` : ''
    const outcome = failOpen ? 'request let through (failOpen)' : 'request failed with 503 (failOpen: false)'
    console.warn(`rl-limiter: the limiter failed, ${outcome}: ${err && err.message}${more}`)
    last = now
    skipped = 0
  }
}

function resolved(v) {
  return v !== null && typeof v === 'object' && typeof v.then === 'function'
}

/**
 * One request's check: null when the request is exempt, else `{ decision, headers, body }` from
 * the core (`headers` flat, `[name, value, ...]`, for allowed and denied requests alike; `body`
 * the problem body of a denial). The result itself when everything was decided at once (key,
 * cost and exempt functions that return values, and a decision from a lease, the denial cache or
 * the memory backend), else a promise of it: a request that needs no Redis round trip makes no
 * promise and waits for no microtask turn. Throws, or rejects, with the limiter's errors.
 */
function check(cfg, req) {
  if (cfg.exempt) {
    const skip = cfg.exempt(req)
    if (resolved(skip)) return skip.then((s) => (s ? null : decide(cfg, req)))
    if (skip) return null
  }
  return decide(cfg, req)
}

function decide(cfg, req) {
  const key = cfg.key(req)
  const cost = typeof cfg.cost === 'function' ? cfg.cost(req) : cfg.cost
  if (resolved(key) || resolved(cost)) return Promise.all([key, cost]).then(([k, c]) => take(cfg, req, k, c))
  return take(cfg, req, key, cost)
}

function take(cfg, req, key, cost) {
  key = typeof key === 'string' ? cfg.prefix + key : key
  const group = typeof cfg.group === 'function' ? cfg.group(req) : cfg.group
  return cfg.decide(key, cost === undefined ? 1 : cost, group)
}

/**
 * What to do with an error from a check: `'open'` (let the request through, after `onError`)
 * for the limiter's own failures when `failOpen`, else the error to raise in the framework. An
 * invalid argument (a key or cost the key/cost function made) is a bug and is always raised;
 * with `failOpen: false` a limiter failure is raised with status 503.
 */
function failure(cfg, err, req) {
  if (err instanceof InvalidArgumentError || !(err && typeof err.code === 'string' && err.code.startsWith('ERR_RL_'))) {
    return err
  }
  cfg.onError(err, req)
  if (cfg.failOpen) return 'open'
  err.status = err.statusCode = 503
  return err
}

module.exports = {
  keys: { ip, user, route },
  configure,
  check,
  failure,
  resolved,
  PROBLEM_CONTENT_TYPE,
}
