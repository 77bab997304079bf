// Type-checked by test.sh (tsc --noEmit), never run: the README's TypeScript example, ESM flavour.
import rl, { BackendUnavailableError, InvalidArgumentError, Limiter, type Decision, type LimiterOptions, type Stats } from 'rl-limiter'

const limiter = new Limiter(process.env.REDIS_URL ?? 'redis://127.0.0.1:6379', { requestTimeoutMs: 200 })

export async function handle(userId: string): Promise<number> {
  try {
    const d: Decision = await limiter.acquire(`api:orders:${userId}`, { limit: 5000, windowMs: 1000 })
    return d.allowed ? 200 : 429
  } catch (err) {
    if (err instanceof BackendUnavailableError) return 503 // or fail open: your policy
    if (err instanceof InvalidArgumentError) throw err // a bug in the caller
    throw err
  }
}

export async function misc(): Promise<void> {
  const d = await limiter.peek(Buffer.from('raw-key'), { limit: 10, windowMs: 60_000 })
  const n: number = d.remaining + d.used + d.retryAfterMs + d.resetAfterMs + d.nowMs
  const mode: string = d.mode
  void n, mode
  await limiter.reset(new Uint8Array([1, 2, 3]))
  await limiter.ping()
  const alsoLimiter: typeof Limiter = rl.Limiter
  void alsoLimiter
  // @ts-expect-error limit must be a number
  await limiter.acquire('k', { limit: '5', windowMs: 1000 })
  // @ts-expect-error windowMs is required
  await limiter.acquire('k', { limit: 5 })
  // @ts-expect-error peek takes no cost
  await limiter.peek('k', { limit: 5, windowMs: 1000, cost: 2 })
  // @ts-expect-error keys are strings or bytes
  await limiter.acquire(42, { limit: 5, windowMs: 1000 })
  // @ts-expect-error unknown option
  new Limiter(undefined, { timeout: 5 })
  const fallback: LimiterOptions = { retryDelayMs: 20, localFallback: true, degradeRttMs: 10, degradeAfterMs: 200, recoverRttMs: 5, recoverAfterMs: 1000, instances: 4, localMaxKeys: 50_000 }
  const s: Stats = new Limiter(undefined, fallback).stats()
  const counts: number = s.decisionsNormal + s.decisionsLocal + s.decisionsMemory + s.rttP99Us + s.instances
  const reason: string = s.stateReason
  const local: boolean = s.mode === 'local' && s.topology !== 'cluster' && d.mode !== 'memory'
  const id: string | null = limiter.instanceId
  void counts, reason, local, id
  // @ts-expect-error localFallback is a boolean
  new Limiter(undefined, { localFallback: 'no' })
  await limiter.close()
}

// rl-limiter/prometheus with prom-client: one limiter, or several by name.
import { Registry } from 'prom-client'
import prometheus, { registerMetrics } from 'rl-limiter/prometheus'

export function metrics(): Registry {
  const registry = new Registry()
  registerMetrics(limiter, { registry })
  const created = prometheus.registerMetrics(new Map([['api', limiter], ['login', new Limiter()]]), { registry, labels: { service: 'shop' } })
  void created.length
  // @ts-expect-error a registry is required
  registerMetrics(limiter, {})
  // @ts-expect-error label values are strings
  registerMetrics(limiter, { registry, labels: { service: 1 } })
  return registry
}

// Composite limits and the HTTP surface (rendered by the core).
import { parsePolicies, renderHeaders, problemBody, PROBLEM_CONTENT_TYPE, type CompositeDecision, type Policy, type Rule } from 'rl-limiter'

export async function composite(ip: string): Promise<[number, Array<[string, string]>, string]> {
  const policies: Policy[] = parsePolicies('burst: 100/s; daily: 5000/d')
  const rules: Rule[] = policies.map((p) => ({ key: `ip:${ip}`, limit: p.limit, windowMs: p.windowMs }))
  const d: CompositeDecision = await limiter.acquireAll(rules)
  await limiter.acquireAll([{ key: 'a', limit: 1, windowMs: 1000, cost: 1 }, { key: 'b', limit: 2, windowMs: 1000 }], { group: 'tenant' })
  const first: number = d.decisions[0].remaining + d.retryAfterMs + d.nowMs
  void first
  const headers = renderHeaders(policies, d, 'both')
  renderHeaders(policies, d)
  // @ts-expect-error an unknown header style
  renderHeaders(policies, d, 'draft')
  // @ts-expect-error rules need a window
  await limiter.acquireAll([{ key: 'a', limit: 1 }])
  // @ts-expect-error the group is a string or bytes
  await limiter.acquireAll(rules, { group: 5 })
  const body = d.allowed ? '' : problemBody(policies, d)
  const type: 'application/problem+json' = PROBLEM_CONTENT_TYPE
  void type
  return [d.allowed ? 200 : 429, headers, body]
}

// rl-limiter/express and rl-limiter/fastify (frameworks as optional peers).
import express from 'express'
import Fastify from 'fastify'
import { keys, rateLimit } from 'rl-limiter/express'
import rlFastify from 'rl-limiter/fastify'

export async function middleware(): Promise<void> {
  const app = express()
  app.use(rateLimit({ limiter, policies: '100/s; 5000/h', trustedProxyHeader: 'x-forwarded-for', cost: () => 2, exempt: (req) => req.url === '/health', headerStyle: 'both' }))
  app.get('/x', rateLimit({ limiter, policies: parsePolicies('1/s'), key: keys.route(keys.user(() => 'u')), onDenied: (_req, res, d) => { res.statusCode = d.allowed ? 200 : 503 } }))
  // @ts-expect-error the header style is one of the core's
  rateLimit({ limiter, policies: '1/s', headerStyle: 'draft' })
  // @ts-expect-error a limiter is required
  rateLimit({ policies: '1/s' })
  const f = Fastify()
  await f.register(rlFastify, { limiter, policies: '10/s', global: true })
  f.get('/y', { config: { rateLimit: { policies: '1/m', cost: (req) => (req.headers['x-big'] ? 5 : 1) } } }, async (req) => req.rateLimit?.allowed)
  f.get('/z', { config: { rateLimit: false } }, async () => 'z')
}
