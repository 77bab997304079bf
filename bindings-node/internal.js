'use strict'
// Names the package's own modules share that are not part of its API (package.json's "exports"
// does not list this file).

/**
 * `Limiter`'s method for the middleware: `limiter[decider](prepared)` gives the function a
 * request calls, `(key, cost, group)`, which returns acquirePolicies' result itself when decided
 * at once.
 */
const decider = Symbol('rl-limiter.decider')

module.exports = { decider }
