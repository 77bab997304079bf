'use strict'
// Names the package's own modules share that are not part of its API (package.json's "exports"
// does not list this file).

/** `Limiter`'s method for the middleware: acquirePolicies' result itself when decided at once. */
const decideNow = Symbol('rl-limiter.decideNow')

module.exports = { decideNow }
