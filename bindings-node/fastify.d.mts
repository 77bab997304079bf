// Types of the ESM entry point (fastify.mjs).
import plugin from './fastify.js'

export declare const rlFastify: typeof plugin.rlFastify
export declare const keys: typeof plugin.keys
export type RlFastifyOptions = plugin.RlFastifyOptions
export type RouteRateLimit = plugin.RouteRateLimit
export default rlFastify
