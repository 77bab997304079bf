// Types of the ESM entry point (fastify.mjs).
import rlFastify from './fastify.js'

export { rlFastify, keys, type RlFastifyOptions, type RouteRateLimit, type MiddlewareOptions } from './fastify.js'
export default rlFastify
