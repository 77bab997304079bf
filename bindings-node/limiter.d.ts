// Types of rl-limiter (limiter.js / limiter.mjs). Hand-written: the generated index.d.ts describes
// the raw native addon underneath, which is not the public API.

/** Options of a limiter. Every field is optional; ranges are checked by the core. */
export interface LimiterOptions {
  /** Prepended to every Redis key; no braces (the hash tag comes from the key). Default `"rl:"`. */
  keyPrefix?: string
  /** Longest wait to establish a connection, 1..60000 ms. Default 500. */
  connectTimeoutMs?: number
  /** Longest a call waits for its decision, connecting included, 1..60000 ms. Default 500. */
  requestTimeoutMs?: number
  /** Allowed distance between a client-supplied clock and Redis TIME, ms. Default 1000. */
  maxClockSkewMs?: number
  /**
   * Wait before the single retry of a call that failed with a connection-class error (refused,
   * dropped, READONLY, LOADING, TRYAGAIN, CLUSTERDOWN, MASTERDOWN, BUSY, OOM), ms; 0 allowed, at
   * most `requestTimeoutMs`. Default 50.
   */
  retryDelayMs?: number
  /**
   * While Redis is unhealthy, decide locally (`mode: 'local'`, from the budget `limit / instances`)
   * instead of rejecting with {@link BackendUnavailableError}. Default `true`.
   */
  localFallback?: boolean
  /** normal → local when real calls' round trips stay above `degradeRttMs` for `degradeAfterMs` (or calls fail after their retry). 1..60000 ms. Default 5. */
  degradeRttMs?: number
  /** See `degradeRttMs`. 1..60000 ms. Default 100. */
  degradeAfterMs?: number
  /** local → normal when background probes see round trips below `recoverRttMs` for `recoverAfterMs`. 1..60000 ms, at most `degradeRttMs`. Default 2. */
  recoverRttMs?: number
  /** See `recoverRttMs`. 1..60000 ms. Default 500. */
  recoverAfterMs?: number
  /** How many instances share each limit (local budget = floor(limit / instances)), 1..1000000. Default: counted from live instances' heartbeats in Redis (8, the design's fleet size, before any is seen). */
  instances?: number
  /** Most keys the local record keeps (least recently used ones are forgotten), 1..10000000. Default 10000. */
  localMaxKeys?: number
}

/** What `acquire` asks for: at most `limit` permits in any span of `windowMs` ms. */
export interface AcquireOptions {
  /** Permits per window, 1..1e15. */
  limit: number
  /** Window length in ms, 1..2592000000 (30 days). */
  windowMs: number
  /** Permits this call takes, 1..limit. Default 1. */
  cost?: number
}

/** What `peek` asks about (always one permit). */
export interface PeekOptions {
  limit: number
  windowMs: number
  cost?: never
}

/**
 * Which path decided: `normal` (Redis), `memory` (in-process backend), `local` (the fallback while
 * Redis is unhealthy: counts from the local budget `floor(limit / instances)`), `lease`; later
 * versions may add more.
 */
export type Mode = 'normal' | 'memory' | 'local' | 'lease' | (string & {})

/** One decision. All times in ms on the deciding clock (Redis TIME for Redis). */
export interface Decision {
  /** Whether the permits were granted (for `peek`: whether one permit would be). */
  allowed: boolean
  /** Permits left in the window after this call: `limit - used`. */
  remaining: number
  /** Permits counted in the window after this call (denied requests are not counted). */
  used: number
  /** 0 if allowed; otherwise the wait after which the same request fits, if nothing else is admitted meanwhile. */
  retryAfterMs: number
  /** When the window is empty again if nothing else is admitted; 0 if it is empty now. */
  resetAfterMs: number
  /** Which path decided. */
  mode: Mode
  /** Time of the decision: Redis server time for Redis. */
  nowMs: number
}

/** What `limiter.stats()` returns: a plain object, a snapshot. Counts are since the limiter was made. */
export interface Stats {
  /** The path new decisions take now: `normal` (Redis), `local` (fallback) or `memory`. */
  mode: Mode
  /** `standalone`, `sentinel`, `cluster` or `memory`. */
  topology: 'standalone' | 'sentinel' | 'cluster' | 'memory' | (string & {})
  /** Decisions made by Redis. */
  decisionsNormal: number
  /** Decisions made by the local fallback. */
  decisionsLocal: number
  /** Decisions made by the memory backend. */
  decisionsMemory: number
  /** normal → local transitions. */
  transitionsToLocal: number
  /** local → normal transitions. */
  transitionsToNormal: number
  /** How long the current state has lasted, ms. */
  stateMs: number
  /** What caused the current state (`"start"` at first). */
  stateReason: string
  /** Redis calls that failed with a connection-class error. */
  redisErrors: number
  /** Of those, how many were retried. */
  retries: number
  /** Recovery probes sent while `local`. */
  probes: number
  /** Repair calls that wrote locally admitted permits back to Redis. */
  repairs: number
  /** Permits those repairs added. */
  repairedPermits: number
  /** New primaries seen (Sentinel, Cluster). */
  failovers: number
  /** The divisor of the local budget: configured, or live instances seen in Redis. */
  instances: number
  /** Keys the local record holds (at most `localMaxKeys`). */
  localKeys: number
  /** Round trips recorded (of the last 1024 Redis decisions). */
  rttSamples: number
  /** Last, median, 99th percentile and longest round trip, in microseconds. */
  rttLastUs: number
  rttP50Us: number
  rttP99Us: number
  rttMaxUs: number
}

/** A key: a string (its UTF-8 bytes) or raw bytes. */
export type Key = string | Buffer | Uint8Array

/**
 * An exact sliding-window rate limiter: at most `limit` permits in ANY span of `windowMs` ms per
 * key, shared by every process using the same Redis (one atomic script call per decision, on
 * Redis's clock), or in process memory when no URL is given.
 */
export declare class Limiter {
  /**
   * @param url `redis://[user:password@]host:port[/db]`, `rediss://...` (TLS),
   *   `redis+sentinel://host:port,host:port/master[/db]`, `redis+cluster://host:port,host:port`,
   *   `memory://`, or omitted for the in-process memory backend. Nothing is connected here: the
   *   first call connects.
   * @throws {InvalidArgumentError} synchronously, for a bad URL or option.
   */
  constructor(url?: string | null, options?: LimiterOptions)
  /** `'redis'` or `'memory'` (`'closed'` after `close()`). */
  readonly backend: 'redis' | 'memory' | 'closed'
  /** Whether `close()` was called. */
  readonly closed: boolean
  /** This limiter's id in the fleet's heartbeats in Redis; `null` for the memory backend. */
  readonly instanceId: string | null
  /**
   * Which path decides now, per-path counters, state transitions and Redis round trips.
   * Synchronous: never waits (no I/O). Throws {@link LimiterClosedError} after `close()`.
   */
  stats(): Stats
  /**
   * Takes `cost` permits from `key`'s window if they fit. A denied request takes nothing.
   * Rejects with {@link InvalidArgumentError} (a TypeError or RangeError), {@link BackendUnavailableError},
   * {@link BackendError} or {@link LimiterClosedError}; never throws synchronously.
   */
  acquire(key: Key, options: AcquireOptions): Promise<Decision>
  /** The window's state without taking anything; `allowed` tells whether one permit would be granted. */
  peek(key: Key, options: PeekOptions): Promise<Decision>
  /** Forgets everything admitted on `key`. */
  reset(key: Key): Promise<void>
  /** Resolves when the backend answers (connecting if needed): for readiness probes. */
  ping(): Promise<void>
  /**
   * Refuses new calls (they reject with {@link LimiterClosedError}) and releases the connection;
   * resolves once the calls in flight are settled. Idempotent.
   */
  close(): Promise<void>
  [Symbol.asyncDispose](): Promise<void>
}

/** Error codes, one per class. */
export type ErrorCode =
  | 'ERR_RL_INVALID_ARGUMENT'
  | 'ERR_RL_BACKEND_UNAVAILABLE'
  | 'ERR_RL_BACKEND'
  | 'ERR_RL_CLOCK_SKEW'
  | 'ERR_RL_CLOSED'

/** Base of the errors a call on a valid limiter can end with. */
export declare class LimiterError extends Error {
  readonly code: Exclude<ErrorCode, 'ERR_RL_INVALID_ARGUMENT'>
}
/**
 * Redis could not be reached in time (refused, timed out, dropped). Retrying later may succeed.
 * With the default `localFallback: true`, `acquire` and `peek` are decided locally instead;
 * `reset` and `ping` still reject with it.
 */
export declare class BackendUnavailableError extends LimiterError {
  readonly code: 'ERR_RL_BACKEND_UNAVAILABLE'
}
/** Redis answered with an error (wrong type at the key, script error, auth, OOM...). */
export declare class BackendError extends LimiterError {
  readonly code: 'ERR_RL_BACKEND'
}
/** A client-supplied time was too far from Redis TIME. */
export declare class ClockSkewError extends LimiterError {
  readonly code: 'ERR_RL_CLOCK_SKEW'
  readonly clientMs: number
  readonly serverMs: number
  readonly skewMs: number
  readonly maxSkewMs: number
}
/** The limiter was closed. */
export declare class LimiterClosedError extends LimiterError {
  readonly code: 'ERR_RL_CLOSED'
}
/**
 * A value the limiter cannot honour; nothing was sent to Redis. A RangeError for out-of-range
 * values and bad number shapes (NaN, Infinity, negative, fractional, above 2^53 - 1);
 * `instanceof InvalidArgumentError` is also true for {@link InvalidArgumentTypeError}.
 */
export declare class InvalidArgumentError extends RangeError {
  readonly code: 'ERR_RL_INVALID_ARGUMENT'
  /** The argument, as written by the caller: `"key"`, `"options.limit"`, `"url"`... */
  readonly argument: string
}
/** A value of the wrong type, or a required one missing. A TypeError. */
export declare class InvalidArgumentTypeError extends TypeError {
  readonly code: 'ERR_RL_INVALID_ARGUMENT'
  readonly argument: string
}
