// ESM entry point of rl-limiter/prometheus: the same functions as the CommonJS one.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const prometheus = require('./prometheus.js')

export const { registerMetrics, LIMITER_LABEL } = prometheus
export default prometheus
