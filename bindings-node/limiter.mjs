// ESM entry point: the same objects as the CommonJS one (one native addon instance per thread).
import { createRequire } from 'node:module'

const require = createRequire(import.meta.url)
const rl = require('./limiter.js')

export const {
  Limiter,
  parsePolicies,
  preparePolicies,
  renderHeaders,
  problemBody,
  PROBLEM_CONTENT_TYPE,
  LimiterError,
  BackendUnavailableError,
  BackendError,
  ClockSkewError,
  LimiterClosedError,
  NativePanicError,
  InvalidArgumentError,
  InvalidArgumentTypeError,
} = rl
export default rl
