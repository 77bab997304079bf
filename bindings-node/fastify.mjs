// ESM entry point of rl-limiter/fastify: the same objects as the CommonJS one.
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const plugin = require('./fastify.js')

export const { rlFastify, keys } = plugin
export default plugin
