// ESM entry point of rl-limiter/express: the same objects as the CommonJS one.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const express = require('./express.js')

export const { rateLimit, keys } = express
export default express
