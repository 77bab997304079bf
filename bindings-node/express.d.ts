// Types of rl-limiter/express (express.js). Written without @types/express: any request and
// response that extend Node's IncomingMessage and ServerResponse fit.
import type { IncomingMessage, ServerResponse } from 'node:http'
import type { MiddlewareOptions } from './middleware.js'

export { keys, type MiddlewareOptions, type MaybePromise, type RequestLike } from './middleware.js'

/** Options of {@link rateLimit}; see MiddlewareOptions. */
export type RateLimitOptions<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse> = MiddlewareOptions<Req, Res>

declare module 'node:http' {
  interface IncomingMessage {
    /** Set by rl-limiter/express on a checked request: its decision. */
    rateLimit?: import('./limiter.js').CompositeDecision
  }
}

/**
 * An Express middleware limiting each request by `options.policies` on `options.key(req)`.
 * Every checked response carries the core's rate-limit headers (`RateLimit-Policy`, `RateLimit`);
 * a denied one gets 429, `Retry-After` and an `application/problem+json` body (RFC 9457).
 */
export declare function rateLimit<Req extends IncomingMessage = IncomingMessage, Res extends ServerResponse = ServerResponse>(
  options: RateLimitOptions<Req, Res>,
): (req: Req, res: Res, next: (err?: unknown) => void) => void
