'use strict'
// rl-limiter/fastify: a Fastify plugin (fastify-plugin style, so its hooks reach every route
// registered after it). Per route: `config: { rateLimit: { policies, key, cost, ... } }` in the
// route options, or `rateLimit: false` to leave a route out. `fastify` and `fastify-plugin` are
// optional peer dependencies; the core package never loads this file.

const fp = require('fastify-plugin')
const { keys, configure, check, failure, resolved, PROBLEM_CONTENT_TYPE } = require('./middleware.js')

/**
 * The onRequest hook that limits one route's requests by `cfg`. Callback style, not async: a
 * request decided in place (a lease, the memory backend) then makes no promise at all. It never
 * returns a value (a returned promise or reply would make Fastify continue a second time).
 */
function hook(cfg) {
  function fail(request, done, err) {
    const outcome = failure(cfg, err, request)
    if (outcome === 'open') done()
    else done(outcome)
  }
  function respond(request, reply, done, result) {
    if (result === null) {
      done()
      return
    }
    const { decision, headers } = result
    request.rateLimit = decision
    for (let i = 0; i < headers.length; i += 2) reply.header(headers[i], headers[i + 1])
    if (decision.allowed) {
      done()
      return
    }
    if (!cfg.onDenied) {
      reply.code(429).type(PROBLEM_CONTENT_TYPE).send(result.body)
      return
    }
    // A hook that answers does not call done; an error from onDenied goes to Fastify's handler.
    Promise.resolve()
      .then(() => cfg.onDenied(request, reply, decision))
      .then(
        () => {
          if (!reply.sent) reply.code(429).type(PROBLEM_CONTENT_TYPE).send(result.body)
        },
        (err) => done(err),
      )
  }
  return function rlRateLimit(request, reply, done) {
    let result
    try {
      result = check(cfg, request)
    } catch (err) {
      fail(request, done, err)
      return
    }
    if (!resolved(result)) {
      respond(request, reply, done, result)
      return
    }
    result.then(
      (r) => {
        try {
          respond(request, reply, done, r)
        } catch (err) {
          done(err)
        }
      },
      (err) => fail(request, done, err),
    )
  }
}

function asArray(v) {
  return v === undefined ? [] : Array.isArray(v) ? v : [v]
}

/**
 * Options: as for rl-limiter/express, plus `global` (default true: every route is limited by the
 * plugin's policies unless its config says otherwise; false: only routes with
 * `config.rateLimit`). A route's own `config.rateLimit` overrides the plugin's options; its keys
 * are prefixed with the route (`GET /path|`) unless it sets `prefix`, so that a route's limit
 * never shares a window with the global one.
 */
async function rlFastify(fastify, options) {
  const { global = true, ...rest } = options
  const base = rest.policies === undefined ? null : configure(rest)
  if (global && base === null) {
    configure(rest) // raises the error naming what is missing
  }
  fastify.decorateRequest('rateLimit', null)
  fastify.addHook('onRoute', (routeOptions) => {
    const own = routeOptions.config && routeOptions.config.rateLimit
    if (own === false) return
    let cfg
    if (own && typeof own === 'object') {
      const method = Array.isArray(routeOptions.method) ? routeOptions.method.join(',') : routeOptions.method
      const prefix = own.prefix ?? `${rest.prefix ?? ''}${method} ${routeOptions.url}|`
      cfg = configure({ ...rest, ...own, prefix })
    } else if (global) {
      cfg = base
    } else {
      return
    }
    routeOptions.onRequest = [...asArray(routeOptions.onRequest), hook(cfg)]
  })
}

const plugin = fp(rlFastify, { fastify: '4.x || 5.x', name: 'rl-limiter' })
module.exports = plugin
module.exports.default = plugin
module.exports.rlFastify = plugin
module.exports.keys = keys
