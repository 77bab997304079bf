// Types of the ESM entry point (prometheus.mjs): the same names as the CommonJS one, plus a
// default export holding all of them.
import * as prometheus from './prometheus.js'

export * from './prometheus.js'
export default prometheus
