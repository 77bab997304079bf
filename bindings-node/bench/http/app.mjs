// One tiny app for the HTTP benchmark: `node app.mjs <express|fastify> <none|rl|rl-leases|peer> <port>`.
// GET / answers "ok"; one key for every request (the worst case: one hot key), LIMIT permits per
// WINDOW_MS. The handler records the time of every request it serves; GET /__served (never
// limited) answers how many it served and the most it served in any WINDOW_MS span (app clock).
// Variant `rl-baseline`: rl's middleware from the bindings-node directory BENCH_BASELINE (with
// its own addon), `rl-baseline-leases` the same with leases=on;
// `rl-leases`: rl's middleware on a limiter with leases=on; `rl-memory`: on the memory backend;
// `stub`: a middleware that sets two fixed RateLimit fields and calls no limiter (the glue alone).
// BENCH_TIME=1: the app also times, per request it serves, the limiter's step (from a hook that
// runs before it to one that runs after it; with no limiter, the same two hooks back to back) and
// the whole request (first hook to the response's finish), in µs: GET /__served?timings=1 gives
// them and starts afresh.
import { Redis } from 'ioredis'

const [framework, variant, port] = process.argv.slice(2)
const LIMIT = Number(process.env.LIMIT ?? 1000)
const WINDOW_MS = Number(process.env.WINDOW_MS ?? 1000)
const REDIS_URL = process.env.RL_TEST_REDIS_URL
const KEY = 'bench'

const served = []
function maxInSpan(times, span) {
  const t = [...times].sort((a, b) => a - b)
  let best = 0
  for (let i = 0, j = 0; i < t.length; i++) {
    while (t[i] - t[j] >= span) j++
    best = Math.max(best, i - j + 1)
  }
  return best
}
let limiter = null
// rl variants: how the limiter decided (a decision that was not `lease` made a Redis round trip).
const decided = () => {
  if (!limiter) return undefined
  const s = limiter.stats()
  return { normal: s.decisionsNormal, lease: s.decisionsLease, local: s.decisionsLocal, leasesTaken: s.leasesTaken }
}
const TIME = process.env.BENCH_TIME === '1'
let timings = { step: [], request: [] }
const now = () => performance.now()
/** The step's start (before the limiter), its end (after it), and the request's end. */
function stamp(req, field) {
  if (TIME) req[field] = now()
}
function finished(req) {
  if (!TIME || req.url !== '/' || req.rlBenchAfter === undefined) return
  timings.step.push(Math.round((req.rlBenchAfter - req.rlBenchBefore) * 1000))
  timings.request.push(Math.round((now() - req.rlBenchBefore) * 1000))
}
const report = (withTimings) => {
  const r = { served: served.length, maxInWindow: maxInSpan(served, WINDOW_MS), decided: decided() }
  if (withTimings && TIME) {
    r.timings = timings
    timings = { step: [], request: [] }
  }
  return r
}
const STUB_FIELDS = ['RateLimit-Policy', `"default";q=${LIMIT};w=${Math.ceil(WINDOW_MS / 1000)}`, 'RateLimit', `"default";r=${LIMIT - 1};t=1`]

const baseline = variant === 'rl-baseline' || variant === 'rl-baseline-leases'
const rlModule = (name) => (baseline ? import(`${process.env.BENCH_BASELINE}/${name === '' ? 'limiter' : name}.js`) : import(`rl-limiter${name && '/' + name}`))
const isRl = variant === 'rl' || baseline || variant === 'rl-leases' || variant === 'rl-memory'

async function rlLimiter() {
  const { Limiter } = await rlModule('')
  // rl-leases: exact leases (README: Hot keys), so most requests are decided without a round trip.
  // rl-memory: the memory backend, the middleware's own cost with no Redis.
  limiter = new Limiter(variant === 'rl-memory' ? 'memory://' : REDIS_URL, variant === 'rl-leases' || variant === 'rl-baseline-leases' ? { leases: 'on' } : undefined)
  return limiter
}

async function expressApp() {
  const { default: express } = await import('express')
  const app = express()
  app.get('/__served', (req, res) => res.json(report(req.query.timings === '1')))
  if (TIME) {
    app.use((req, res, next) => {
      stamp(req, 'rlBenchBefore')
      res.on('finish', () => finished(req))
      next()
    })
  }
  if (variant === 'stub') {
    app.use((req, res, next) => {
      for (let i = 0; i < STUB_FIELDS.length; i += 2) res.setHeader(STUB_FIELDS[i], STUB_FIELDS[i + 1])
      next()
    })
  } else if (isRl) {
    const { rateLimit } = await rlModule('express')
    app.use(rateLimit({ limiter: await rlLimiter(), policies: `${LIMIT}/${WINDOW_MS}ms`, key: () => KEY }))
  } else if (variant === 'peer') {
    const { rateLimit } = await import('express-rate-limit')
    const { RedisStore } = await import('rate-limit-redis')
    const client = new Redis(REDIS_URL)
    app.use(rateLimit({
      windowMs: WINDOW_MS,
      limit: LIMIT,
      standardHeaders: 'draft-8',
      legacyHeaders: false,
      keyGenerator: () => KEY,
      store: new RedisStore({ sendCommand: (command, ...args) => client.call(command, ...args) }),
    }))
  }
  if (TIME) {
    app.use((req, res, next) => {
      stamp(req, 'rlBenchAfter')
      next()
    })
  }
  app.get('/', (req, res) => {
    served.push(Date.now())
    res.send('ok')
  })
  app.listen(Number(port), '127.0.0.1', () => console.log('ready'))
}

async function fastifyApp() {
  const { default: Fastify } = await import('fastify')
  const app = Fastify()
  if (TIME) {
    // Fastify runs the app's onRequest hooks before a route's own (where rl's plugin puts its
    // hook), and preParsing after every onRequest hook.
    app.decorateRequest('rlBenchBefore', undefined)
    app.decorateRequest('rlBenchAfter', undefined)
    app.addHook('onRequest', (request, reply, done) => {
      stamp(request, 'rlBenchBefore')
      done()
    })
    app.addHook('preParsing', (request, reply, payload, done) => {
      stamp(request, 'rlBenchAfter')
      done(null, payload)
    })
    app.addHook('onResponse', (request, reply, done) => {
      finished(request)
      done()
    })
  }
  if (variant === 'stub') {
    app.addHook('onRoute', (routeOptions) => {
      if (routeOptions.url !== '/') return
      routeOptions.onRequest = [(request, reply, done) => {
        for (let i = 0; i < STUB_FIELDS.length; i += 2) reply.header(STUB_FIELDS[i], STUB_FIELDS[i + 1])
        done()
      }]
    })
  } else if (isRl) {
    const { default: rl } = await rlModule('fastify')
    await app.register(rl, { limiter: await rlLimiter(), policies: `${LIMIT}/${WINDOW_MS}ms`, key: () => KEY })
  } else if (variant === 'peer') {
    const { default: rateLimit } = await import('@fastify/rate-limit')
    await app.register(rateLimit, { max: LIMIT, timeWindow: WINDOW_MS, redis: new Redis(REDIS_URL), keyGenerator: () => KEY })
  }
  app.get('/__served', { config: { rateLimit: false } }, async (request) => report(request.query.timings === '1'))
  app.get('/', async () => {
    served.push(Date.now())
    return 'ok'
  })
  await app.listen({ port: Number(port), host: '127.0.0.1' })
  console.log('ready')
}

await (framework === 'express' ? expressApp() : fastifyApp())
