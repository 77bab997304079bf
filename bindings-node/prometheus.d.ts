// Types of rl-limiter/prometheus (CommonJS). prom-client is an optional peer dependency.
import type { Counter, Gauge, Registry } from 'prom-client'
import type { Limiter } from './limiter'

/** The label that names each limiter when one call registers several: `"limiter"`. */
export declare const LIMITER_LABEL: 'limiter'

export interface RegisterMetricsOptions {
  /** The prom-client registry to register the families in. */
  registry: Registry
  /** Constant labels added to every sample (bounded values only; not rl's own label names). */
  labels?: Record<string, string>
}

/**
 * Registers rl's metric families (rl_decisions_total, rl_denials_total, rl_mode, ...) whose
 * values are read from `limiter.stats()` at each scrape. Several limiters: pass a Map or an
 * object from a name you choose to a limiter; each sample then gets `limiter="<name>"`.
 */
export declare function registerMetrics(
  limiters: Limiter | ReadonlyMap<string, Limiter> | Readonly<Record<string, Limiter>>,
  options: RegisterMetricsOptions,
): Array<Counter<string> | Gauge<string>>
