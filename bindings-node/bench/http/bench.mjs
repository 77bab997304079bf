// Drives the HTTP benchmark (run.sh starts the Redis): for each framework and variant, starts
// app.mjs, resets Redis's command statistics, runs wrk against one key above the limit, then
// reads what the app served and Redis's INFO commandstats, and stops the app (by pid).
import { execFileSync, spawn } from 'node:child_process'
import { once } from 'node:events'
import { createServer } from 'node:net'
import { fileURLToPath } from 'node:url'

const here = fileURLToPath(new URL('.', import.meta.url))
const PORT = process.env.RL_TEST_REDIS_PORT
const SECONDS = Number(process.env.BENCH_SECONDS ?? 10)
const CONNECTIONS = Number(process.env.BENCH_CONNECTIONS ?? 64)
const THREADS = Number(process.env.BENCH_THREADS ?? 2)
const LIMIT = Number(process.env.LIMIT ?? 1000)
const WINDOW_MS = Number(process.env.WINDOW_MS ?? 1000)
const runs = [
  ['express', 'none', 'Express, no limiter'],
  ['express', 'rl', 'Express + rl-limiter/express'],
  ['express', 'peer', 'Express + express-rate-limit/rate-limit-redis (ioredis)'],
  ['fastify', 'none', 'Fastify, no limiter'],
  ['fastify', 'rl', 'Fastify + rl-limiter/fastify'],
  ['fastify', 'peer', 'Fastify + @fastify/rate-limit (ioredis)'],
]

const redis = (...args) => execFileSync('redis-cli', ['-h', '127.0.0.1', '-p', PORT, ...args], { encoding: 'utf8' }).trim()
function commandCalls() {
  let total = 0
  for (const line of redis('INFO', 'commandstats').split('\n')) {
    const m = /^cmdstat_([^:]+):calls=(\d+)/.exec(line.trim())
    if (m && !['info', 'config', 'flushall'].includes(m[1])) total += Number(m[2])
  }
  return total
}
async function freePort() {
  const s = createServer().listen(0, '127.0.0.1')
  await once(s, 'listening')
  const { port } = s.address()
  s.close()
  return port
}
function ms(text) {
  const m = /^([\d.]+)(us|ms|s)$/.exec(text)
  return m ? Number(m[1]) * { us: 0.001, ms: 1, s: 1000 }[m[2]] : NaN
}

const rows = []
for (const [framework, variant, label] of runs) {
  redis('FLUSHALL')
  const port = await freePort()
  const app = spawn(process.execPath, [`${here}/app.mjs`, framework, variant, String(port)], { stdio: ['ignore', 'pipe', 'inherit'], env: { ...process.env, LIMIT: String(LIMIT), WINDOW_MS: String(WINDOW_MS) } })
  try {
    await new Promise((resolve, reject) => {
      app.stdout.on('data', (d) => String(d).includes('ready') && resolve())
      app.on('exit', (code) => reject(new Error(`${label}: the app exited (${code})`)))
    })
    const url = `http://127.0.0.1:${port}/`
    execFileSync('wrk', ['-t1', '-c4', '-d1s', url], { encoding: 'utf8' }) // warm-up
    await new Promise((r) => setTimeout(r, WINDOW_MS + 100))
    const before = await (await fetch(`${url}__served`)).json()
    redis('CONFIG', 'RESETSTAT')
    const out = execFileSync('wrk', [`-t${THREADS}`, `-c${CONNECTIONS}`, `-d${SECONDS}s`, '--latency', url], { encoding: 'utf8' })
    const commands = commandCalls()
    const after = await (await fetch(`${url}__served`)).json()
    const requests = Number(/(\d+) requests in/.exec(out)[1])
    const non2xx = Number((/Non-2xx or 3xx responses: (\d+)/.exec(out) ?? [0, 0])[1])
    rows.push({
      label,
      rps: Number(/Requests\/sec:\s+([\d.]+)/.exec(out)[1]),
      p50: ms(/\s50%\s+(\S+)/.exec(out)[1]),
      p99: ms(/\s99%\s+(\S+)/.exec(out)[1]),
      requests,
      served: after.served - before.served,
      denied: non2xx,
      maxInWindow: after.maxInWindow,
      commandsPerRequest: commands / requests,
    })
  } finally {
    app.kill('SIGTERM')
    await once(app, 'exit').catch(() => {})
  }
}

const load = (await import('node:fs')).readFileSync('/proc/loadavg', 'utf8').split(' ').slice(0, 3).join(' ')
console.log(`\nOne key, limit ${LIMIT} per ${WINDOW_MS} ms; wrk -t${THREADS} -c${CONNECTIONS} -d${SECONDS}s (closed loop, far above the limit); load average after: ${load}\n`)
console.log('| app | req/s | P50 ms | P99 ms | served | denied | most served in any window (app clock) | Redis cmds/request |')
console.log('|---|---:|---:|---:|---:|---:|---:|---:|')
for (const r of rows) {
  console.log(`| ${r.label} | ${r.rps.toFixed(0)} | ${r.p50.toFixed(2)} | ${r.p99.toFixed(2)} | ${r.served} | ${r.denied} | ${r.maxInWindow}${r.label.includes('no limiter') ? '' : ` (limit ${LIMIT})`} | ${r.commandsPerRequest.toFixed(2)} |`)
}
