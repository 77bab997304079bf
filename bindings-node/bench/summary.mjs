// Reads the JSON lines bench.mjs wrote (one per pinning mode) and prints one table: per scenario
// and mode, decisions/s and P99 of each contender and rl's ratios to rate-limiter-flexible.
import { readFileSync } from 'node:fs'

const reports = readFileSync(process.argv[2], 'utf8').trim().split('\n').filter(Boolean).map((l) => JSON.parse(l))
const rows = {}
for (const r of reports) {
  for (const [name, m] of Object.entries(r.scenarios)) {
    const row = {}
    for (const [id, v] of Object.entries(m)) row[`${id} /s`] = Math.round(v.decisionsPerSec)
    for (const [id, v] of Object.entries(m)) row[`${id} P99 ms`] = v.p99ms
    if (m.rlf) {
      for (const id of Object.keys(m).filter((i) => i !== 'rlf')) row[`${id}/rlf`] = +(m[id].decisionsPerSec / m.rlf.decisionsPerSec).toFixed(2)
    }
    rows[`${name}, ${r.label}`] = row
  }
}
console.log('\nsummary (medians; rl = defaults, denial cache on; rl-nodc = denialCache: false, every decision a Redis call)')
console.table(rows)
