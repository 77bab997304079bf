'use strict'
// rl-limiter/express: Express middleware (Express 4 and 5). The framework is not imported here:
// `express` is an optional peer dependency, and the core package never loads this file.

const { keys, configure, check, failure, resolved, PROBLEM_CONTENT_TYPE } = require('./middleware.js')

/**
 * A middleware that limits each request by `options.policies` on the key `options.key(req)`
 * (default: the client IP). Every checked response carries the core's rate-limit headers; a
 * denied one gets 429, `Retry-After` and an `application/problem+json` body, unless
 * `options.onDenied(req, res, decision)` sends its own response. See express.d.ts.
 */
function rateLimit(options) {
  const cfg = configure(options)
  async function denied(req, res, decision, body) {
    if (cfg.onDenied) {
      await cfg.onDenied(req, res, decision)
      if (res.headersSent || res.writableEnded) return
    }
    res.statusCode = 429
    res.setHeader('Content-Type', PROBLEM_CONTENT_TYPE)
    res.end(body)
  }
  function respond(req, res, next, result) {
    if (result === null) return next()
    const { decision, headers } = result
    req.rateLimit = decision
    for (let i = 0; i < headers.length; i += 2) res.setHeader(headers[i], headers[i + 1])
    if (decision.allowed) return next()
    return denied(req, res, decision, result.body).catch(next)
  }
  function fail(req, next, err) {
    const outcome = failure(cfg, err, req)
    return outcome === 'open' ? next() : next(outcome)
  }
  // Decided in place when it can be (a lease, the memory backend): then no promise is made.
  return function rlRateLimit(req, res, next) {
    let result
    try {
      result = check(cfg, req)
    } catch (err) {
      return fail(req, next, err)
    }
    if (!resolved(result)) return respond(req, res, next, result)
    result.then(
      (r) => respond(req, res, next, r),
      (err) => fail(req, next, err),
    )
  }
}

module.exports = { rateLimit, keys }
