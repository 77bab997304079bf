// Types of rl-limiter/fastify (fastify.js).
import type { FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { MiddlewareOptions } from './middleware.js'

export { keys, type MiddlewareOptions, type MaybePromise, type RequestLike } from './middleware.js'

/** A route's own limits: `config: { rateLimit: {...} }` in its route options (or `false`: not limited). */
export type RouteRateLimit = Partial<Omit<MiddlewareOptions<FastifyRequest, FastifyReply>, 'limiter'>> & {
  limiter?: MiddlewareOptions<FastifyRequest, FastifyReply>['limiter']
}

/** Options of the plugin; see MiddlewareOptions. */
export type RlFastifyOptions = (Omit<MiddlewareOptions<FastifyRequest, FastifyReply>, 'policies'> & {
  /** The limits of every route (with `global`), unless a route sets its own. */
  policies?: MiddlewareOptions<FastifyRequest, FastifyReply>['policies']
  /** true (default): every route is limited; false: only routes with `config.rateLimit`. */
  global?: boolean
})

declare module 'fastify' {
  interface FastifyContextConfig {
    rateLimit?: RouteRateLimit | false
  }
  interface FastifyRequest {
    /** The decision of a limited route's request (null when exempt or not limited). */
    rateLimit: import('./limiter.js').CompositeDecision | null
  }
}

/**
 * The plugin: register it before the routes it limits. Every checked response carries the core's
 * rate-limit headers; a denied one gets 429, `Retry-After` and an `application/problem+json` body.
 */
declare const rlFastify: FastifyPluginAsync<RlFastifyOptions>
export { rlFastify }
export default rlFastify
