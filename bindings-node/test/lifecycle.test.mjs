// The addon never keeps a process alive: not after close(), not while idle; it does keep it alive
// while a call is pending. Worker threads each get their own, independent state.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'
import { setTimeout as sleep } from 'node:timers/promises'

import { PrivateRedis, uniqueKey } from './helpers.mjs'

const fixture = (name) => fileURLToPath(new URL(`./fixtures/${name}`, import.meta.url))

/** Runs node on a fixture; fails if it has not exited by itself within `limitMs`. */
function run(args, { env = {}, limitMs = 10_000 } = {}) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, args, { env: { ...process.env, ...env }, stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const t0 = performance.now()
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`node ${args.join(' ')} did not exit within ${limitMs} ms (kept alive?)\n${stdout}\n${stderr}`))
    }, limitMs)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stdout, stderr, ms: performance.now() - t0 })
    })
  })
}

for (const mode of ['close', 'close-nowait', 'idle']) {
  test(`the process exits by itself after its calls (${mode})`, async () => {
    const r = await run([fixture('exit-after-close.cjs'), mode])
    assert.equal(r.code, 0, r.stderr)
    assert.match(r.stdout, /allowed=true/)
    assert.ok(r.ms < 5_000, `exit took ${r.ms.toFixed(0)} ms`)
  })
}

test('two worker threads share nothing, both work, and the process exits by itself', async () => {
  const r = await run([fixture('workers.mjs'), uniqueKey('workers')], { limitMs: 20_000 })
  assert.equal(r.code, 0, r.stderr)
  const results = JSON.parse(r.stdout.trim().split('\n').at(-1))
  assert.equal(results.length, 2)
  for (const w of results) {
    // Each worker's memory limiter starts empty: the other worker's permits are not seen.
    assert.deepEqual(w.mem, [true, true, false])
    assert.deepEqual(w.modes, ['normal'])
  }
  // Redis is shared by design: together they took 10 permits, 1..10 in some interleaving.
  const used = results.flatMap((w) => w.redisUsed).sort((a, b) => a - b)
  assert.deepEqual(used, [1, 2, 3, 4, 5, 6, 7, 8, 9, 10])
})

test('a pending call keeps the process alive until it settles', async () => {
  const redis = PrivateRedis.start()
  try {
    redis.freeze()
    const running = run([fixture('top-level-await.mjs')], { env: { RL_FIXTURE_URL: redis.url } })
    await sleep(500)
    redis.thaw()
    const r = await running
    assert.equal(r.code, 0, `exit code ${r.code}: ${r.stderr}`)
    assert.match(r.stdout, /allowed=true/)
  } finally {
    await redis.stop()
  }
})
