// Types shared by rl-limiter/express and rl-limiter/fastify (middleware.js).
import type { CompositeDecision, HeaderStyle, Key, Limiter, Policy } from './limiter.js'

/** A value, or a promise of one: key, cost and exempt functions may be async. */
export type MaybePromise<T> = T | Promise<T>

/** The request fields the key helpers read (an Express request, a Fastify request). */
export interface RequestLike {
  method?: string
  url?: string
  headers: Record<string, string | string[] | undefined>
  socket?: { remoteAddress?: string }
}

/** Options of the middleware and the plugin. `Req` is the framework's request, `Res` its response. */
export interface MiddlewareOptions<Req, Res> {
  /** The limiter that decides (one per process, shared by every middleware). */
  limiter: Limiter
  /**
   * The limits each request must fit, all at once: a policy string (`"burst: 100/s; 5000/h"`,
   * parsed by the core) or policies from `parsePolicies`.
   */
  policies: string | readonly Policy[]
  /** The request's key. Default: the client IP ({@link keys.ip} with `trustedProxyHeader`). */
  key?: (req: Req) => MaybePromise<Key>
  /** Prepended to string keys, so that two middlewares on the same key keep separate windows. */
  prefix?: string
  /** The header a trusted proxy sets with the client address (e.g. `x-forwarded-for`); unset: the socket's peer address. */
  trustedProxyHeader?: string
  /** With `trustedProxyHeader`: how many proxies you run in front of the app (default 1). */
  trustedHops?: number
  /** Permits the request takes (a number or a function of the request). Default 1. */
  cost?: number | ((req: Req) => MaybePromise<number>)
  /** The call's group (a Redis Cluster hash tag), for keys that must be grouped. */
  group?: string | ((req: Req) => string)
  /** Requests for which this returns true are not limited (and get no headers). */
  exempt?: (req: Req) => MaybePromise<boolean>
  /**
   * Called for a denied request, after the rate-limit headers and `Retry-After` are set; if it
   * sends a response, that one is used, else the 429 problem response is sent.
   */
  onDenied?: (req: Req, res: Res, decision: CompositeDecision) => MaybePromise<unknown>
  /** Which rate-limit fields every checked response carries. Default `'ietf'`. */
  headerStyle?: HeaderStyle
  /**
   * What a limiter failure does (a backend error that the core's local fallback did not absorb,
   * a closed limiter): true (default) lets the request through after `onError`; false fails it
   * with status 503 through the framework's error handling. A key or cost the core refuses is a
   * bug and always fails the request.
   */
  failOpen?: boolean
  /** Called with each limiter failure. Default: a warning on the console, at most every 10 s. */
  onError?: (err: Error, req: Req) => void
}

/** The decision of a checked request, as the middleware leaves it on the request (`req.rateLimit`). */
export type RequestDecision = CompositeDecision | null

/** Key functions for `options.key`. */
export declare const keys: {
  /** The client IP: the socket's peer, or the `trustedHops`-th entry from the right of `trustedProxyHeader`. */
  ip(options?: { trustedProxyHeader?: string; trustedHops?: number }): (req: RequestLike) => string
  /** `user:<id>` from `getUser`, or `ip:<address>` from `fallback` for anonymous requests. */
  user<Req extends RequestLike>(getUser: (req: Req) => string | number | null | undefined, fallback?: (req: Req) => string): (req: Req) => string
  /** One window per route pattern and client: `METHOD pattern|<base key>`. */
  route<Req extends RequestLike>(base?: (req: Req) => string): (req: Req) => string
}
