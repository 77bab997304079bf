// A panic inside the addon never aborts Node and never leaves a promise pending: a synchronous
// method throws, a call rejects, both with NativePanicError (code ERR_RL_INTERNAL), the limiter
// keeps working, and the process exits by itself. The panics come from the test-panic hook
// (core/src/unwind.rs), compiled in only by test.sh's `--features test-panic`. Each case runs in
// its own node process: before the fix a panic aborted the process, or hung it forever.
import assert from 'node:assert/strict'
import { spawn } from 'node:child_process'
import { fileURLToPath } from 'node:url'
import { test } from 'node:test'

const fixture = fileURLToPath(new URL('./fixtures/panic.mjs', import.meta.url))
const LIMIT_MS = 20_000

/** Runs the fixture for `which`; rejects if the process has not exited by itself in LIMIT_MS. */
function run(which) {
  return new Promise((resolve, reject) => {
    const child = spawn(process.execPath, [fixture, which], { stdio: ['ignore', 'pipe', 'pipe'] })
    let stdout = ''
    let stderr = ''
    child.stdout.on('data', (d) => (stdout += d))
    child.stderr.on('data', (d) => (stderr += d))
    const timer = setTimeout(() => {
      child.kill('SIGKILL')
      reject(new Error(`panic.mjs ${which}: still running after ${LIMIT_MS} ms (a promise left pending?)\nstdout: ${stdout}\nstderr: ${stderr}`))
    }, LIMIT_MS)
    child.on('exit', (code, signal) => {
      clearTimeout(timer)
      resolve({ code, signal, stderr, results: stdout.trim().split('\n').filter(Boolean).map((l) => JSON.parse(l)) })
    })
  })
}

function assertPanicError(r, how) {
  assert.equal(r.how, how, JSON.stringify(r))
  assert.equal(r.name, 'NativePanicError', JSON.stringify(r))
  assert.equal(r.code, 'ERR_RL_INTERNAL')
  assert.ok(r.limiterError && r.panicError, 'a LimiterError and a NativePanicError')
  assert.match(r.message, /^panic in the rl native library .*test-panic hook/)
}

function assertExited(r) {
  assert.equal(r.signal, null, `killed by ${r.signal} (aborted?): ${r.stderr}`)
  assert.equal(r.code, 0, `exit code ${r.code}: ${r.stderr}`)
}

test('a panic in a synchronous method (the constructor) throws NativePanicError', async () => {
  const r = await run('constructor')
  assertExited(r)
  assertPanicError(r.results[0], 'threw')
  assert.equal(r.results[0].after, true, 'a new limiter works')
})

test('a panic in the native half of acquire rejects its promise', async () => {
  const r = await run('caller')
  assertExited(r)
  assertPanicError(r.results[0], 'rejected')
  assert.equal(r.results[0].after, true, 'the limiter still works')
})

test('a panic while the memory backend decides on the JavaScript thread rejects the promise', async () => {
  const r = await run('future-memory')
  assertExited(r)
  assertPanicError(r.results[0], 'rejected')
  assert.equal(r.results[0].after, true, 'the limiter still works')
})

test('a panic in a task on the runtime rejects its promise, and the process exits by itself', async () => {
  const r = await run('future-redis')
  assertExited(r)
  assert.deepEqual(r.results.map((x) => x.method), ['acquire', 'peek', 'reset', 'after'])
  for (const x of r.results.slice(0, 3)) assertPanicError(x, 'rejected')
  assert.equal(r.results[3].after, true, 'the limiter still works')
})

test('a panic in the middleware\'s decider throws (its native half) or rejects (its future)', async () => {
  const r = await run('decider')
  assertExited(r)
  assert.deepEqual(r.results.map((x) => x.method), ['caller', 'future-memory', 'future-redis', 'after'])
  assertPanicError(r.results[0], 'threw')
  assertPanicError(r.results[1], 'rejected')
  assertPanicError(r.results[2], 'rejected')
  assert.equal(r.results[3].after, true, 'both limiters still work')
})
