// Types of the ESM entry point (express.mjs): the same names, plus a default export holding them.
import * as express from './express.js'

export * from './express.js'
export default express
