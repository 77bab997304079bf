// Types of rl-limiter/fastify (fastify.js). CommonJS: module.exports is the plugin itself, with
// `default`, `rlFastify` and `keys` on it (the fastify-plugin convention), hence `export =`.
import type { FastifyInstance, FastifyPluginAsync, FastifyReply, FastifyRequest } from 'fastify'
import type { CompositeDecision } from './limiter.js'
import type { MiddlewareOptions, keys as Keys } from './middleware.js'

declare module 'fastify' {
  interface FastifyContextConfig {
    /** This route's own limits (its own window), or false: not limited. */
    rateLimit?: rlFastify.RouteRateLimit | false
  }
  interface FastifyRequest {
    /** The decision of a limited route's request (null when exempt or not limited). */
    rateLimit: CompositeDecision | null
  }
}

type Options = MiddlewareOptions<FastifyRequest, FastifyReply>

declare namespace rlFastify {
  /** A route's own limits: `config: { rateLimit: {...} }` in its route options. */
  export type RouteRateLimit = Partial<Options>
  /** Options of the plugin; see MiddlewareOptions. */
  export type RlFastifyOptions = Omit<Options, 'policies'> & {
    /** The limits of every route (with `global`), unless a route sets its own. */
    policies?: Options['policies']
    /** true (default): every route is limited; false: only routes with `config.rateLimit`. */
    global?: boolean
  }
  export type { MiddlewareOptions }
  export const keys: typeof Keys
  export const rlFastify: FastifyPluginAsync<RlFastifyOptions>
  export { rlFastify as default }
}

/**
 * The plugin: register it before the routes it limits. Every checked response carries the core's
 * rate-limit headers; a denied one gets 429, `Retry-After` and an `application/problem+json` body.
 */
declare function rlFastify(instance: FastifyInstance, options: rlFastify.RlFastifyOptions): Promise<void>
export = rlFastify
