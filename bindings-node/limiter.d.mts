// Types of the ESM entry point (limiter.mjs): the same names as the CommonJS one, plus a default
// export holding all of them.
import * as rl from './limiter.js'

export * from './limiter.js'
export default rl
