// Type-checked by test.sh (tsc --noEmit), never run: CommonJS flavour.
import { Limiter, LimiterError, type AcquireOptions, type Stats } from 'rl-limiter'
import rl = require('rl-limiter')

const policy: AcquireOptions = { limit: 100, windowMs: 60_000, cost: 2 }
const limiter = new rl.Limiter()

export async function check(key: string): Promise<boolean> {
  try {
    return (await limiter.acquire(key, policy)).allowed
  } catch (err) {
    if (err instanceof LimiterError) console.error(err.code)
    return false
  }
}

export const other: Limiter = new Limiter('memory://')

export function mode(): Stats['mode'] {
  const s: Stats = new rl.Limiter(undefined, { localFallback: false, instances: 2 }).stats()
  return s.mode
}

import promClient = require('prom-client')
import rlPrometheus = require('rl-limiter/prometheus')

export function metricsCjs(): void {
  rlPrometheus.registerMetrics({ api: other }, { registry: new promClient.Registry() })
}

import Fastify = require('fastify')
import rlFastify = require('rl-limiter/fastify')
import rlExpress = require('rl-limiter/express')

export async function middlewareCjs(): Promise<void> {
  const app = Fastify.fastify()
  await app.register(rlFastify, { limiter: other, policies: '5/s' })
  await app.register(rlFastify.default, { limiter: other, global: false })
  const ip: string = rlFastify.keys.ip()({ headers: {} })
  void ip, rlExpress.rateLimit({ limiter: other, policies: '5/s' })
}
