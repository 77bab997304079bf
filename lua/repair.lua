-- rl: writes permits an instance admitted back into a window that lacks them (see the README,
-- "Failover repair"). Used rarely (leaving local mode, a new primary), so it favours clarity
-- over speed: it reads the whole window, merges, and rewrites it in the layout of
-- sliding_window.lua (header + closed buckets, oldest first) -- up to MAX_MERGE buckets; a longer
-- window gets a bounded, conservative repair instead (see MAX_MERGE below).
--
--   KEYS[1]  the window's key (as in sliding_window.lua)
--   KEYS[2]  its repair marker, a HASH in the same slot: which repairs were applied. Fields:
--              l:<token>     a local part was applied (kept across epochs, so a flush retried
--                            after a failover is not applied twice; value: its newest bucket's
--                            ms, and dropped at an epoch change once that left the window)
--              epoch         the epoch the fields below belong to (reset when it changes)
--              f:<instance>  this instance's failover part was applied
--              s:<ms>        permits at ms that this epoch's repairs know were admitted: local
--                            parts added and failover parts reported (a local part flushed
--                            before its instance learnt of the epoch is reported again in that
--                            instance's failover part: counted twice, an overcount, never under)
--              c:<token>     a local part already applied is counted in s:
--   ARGV[1]  'rl-repair-1'
--   ARGV[2]  this instance's id
--   ARGV[3]  pack('>dd', window_ms, ttl_ms)
--   ARGV[4]  token of the local part ('' = none): permits this instance admitted while Redis was
--            away, which Redis never saw; added once per token, whatever the epoch (idempotent)
--   ARGV[5]  the local part: pack('>dd', ms, permits) per bucket
--   ARGV[6]  epoch of the failover part ('' = none): the new primary's run id
--   ARGV[7]  the failover part: buckets this instance saw Redis admit before the failover, once
--            per instance and epoch (idempotent). Replication is asynchronous, so the new primary
--            may hold none or part of a bucket: each bucket is topped up to what the repairs of
--            this epoch know was admitted at its ms (s:<ms>, the sum over instances), never
--            lowered. When every instance with permits at that ms reports, it ends exact.
--   reply    {permits added by the local part, permits added by the failover part, permits the
--            window holds after the repair (-1: not read, a window of more than MAX_MERGE
--            buckets), the time of that count}: an instance still deciding locally counts the
--            window's permits from it (a call with neither part only reads it)
if ARGV[1] ~= 'rl-repair-1' or #ARGV ~= 7 then
  return redis.error_reply('rl repair: bad arguments')
end
local call, pack, sunpack, format = redis.call, struct.pack, struct.unpack, string.format
local key, marker, instance = KEYS[1], KEYS[2], ARGV[2]
local window, ttl = sunpack('>dd', ARGV[3])
local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local server = now -- Redis TIME: the TTL's clock

-- The window's layout is sliding_window.lua's: a 56-byte header (running totals modulo 2^52,
-- the longest window the key has seen, the lease horizon), or an older one: 48 bytes (no lease
-- horizon) or 40 (per-bucket counts). This script never reads the lease HASH: a header it
-- rewrites keeps the horizon it had, and one it makes or upgrades says "not known" (the next
-- decision reads the HASH), so a live lease is never hidden from a decision.
local MOD = 4503599627370496
local UNKNOWN = 2 * 1000000000000000 -- sliding_window.lua's "lease horizon not known"
local horizon = UNKNOWN
-- Bounded work: a window of more than MAX_MERGE closed buckets is neither read nor rewritten.
-- The permits such a repair adds are counted at its own `now` instead of at their ms (later than
-- they were admitted: they count in every window they belong to, and in some later ones, an
-- overcount for at most one window, never an undercount), and a failover part adds every bucket
-- it reports (the new primary's copy of it is not read: again an overcount, never under).
local MAX_MERGE = 4096
local buckets = {}
local longest = window
local head = call('LINDEX', key, '0')
-- A 72-byte header is a 56-byte one and a lone call's retry record (lua/sliding_window.lua,
-- Retries), which the rewritten header keeps.
local record = ''
if head and #head == 72 then
  record = string.sub(head, 57)
end
local capped = head and (#head == 56 or #head == 48 or #head == 72) and call('LLEN', key) - 1 > MAX_MERGE
if head and #head >= 56 then
  horizon = select(7, sunpack('>ddddddd', head))
end
if capped then
  local _, open_t, _, _, _, seen = sunpack('>dddddd', head)
  longest = math.max(window, seen)
  if open_t > now then
    now = open_t
  end
elseif head then
  local open_t, open_c
  if #head == 56 or #head == 48 or #head == 72 then
    local cum, t_open, base, _, _, seen = sunpack('>dddddd', head)
    open_t = t_open
    longest = math.max(window, seen)
    local prev = base
    for _, item in ipairs(call('LRANGE', key, '1', '-1')) do
      local bt, bcum = sunpack('>dd', item)
      buckets[bt] = (buckets[bt] or 0) + (bcum - prev) % MOD
      prev = bcum
    end
    open_c = (cum - prev) % MOD
  elseif #head == 40 then
    local _, t_open, c_open = sunpack('>ddddd', head)
    open_t, open_c = t_open, c_open
    for _, item in ipairs(call('LRANGE', key, '1', '-1')) do
      local bt, bc = sunpack('>dd', item)
      buckets[bt] = (buckets[bt] or 0) + bc
    end
  else
    return redis.error_reply('rl: ' .. key .. ' holds something that is not an rl window')
  end
  buckets[open_t] = (buckets[open_t] or 0) + open_c
  if open_t > now then
    now = open_t
  end
end
-- History is kept for the longest window the key has seen, not only this repair's, and the TTL
-- is never shortened (a longer rule on the key set it).
local edge = now - longest
ttl = ttl - window + longest

local epoch = ARGV[6]
if epoch ~= '' and call('HGET', marker, 'epoch') ~= epoch then
  -- A new epoch: what the old one knew is void, except which local parts were applied.
  local fields = call('HGETALL', marker)
  local stale = {}
  for i = 1, #fields, 2 do
    local f = fields[i]
    if string.sub(f, 1, 2) ~= 'l:' or tonumber(fields[i + 1]) <= edge then
      stale[#stale + 1] = f
    end
  end
  for i = 1, #stale, 500 do
    call('HDEL', marker, unpack(stale, i, math.min(i + 499, #stale)))
  end
  call('HSET', marker, 'epoch', epoch)
end
local counting = call('HEXISTS', marker, 'epoch') == 1

local function each(blob, f)
  for i = 1, #blob / 16 do
    local bt, bc = sunpack('>dd', blob, (i - 1) * 16 + 1)
    if bt > now then
      bt = now
    end
    if bt > edge and bc > 0 then
      f(bt, bc)
    end
  end
end

local function newest(blob)
  local m = 0
  for i = 1, #blob / 16 do
    local bt = sunpack('>dd', blob, (i - 1) * 16 + 1)
    if bt > m then
      m = bt
    end
  end
  return m
end

-- Raises a bucket to what this epoch's repairs know was admitted at its ms.
local added_local, added_failover = 0, 0
local function top_up(bt, known, reported)
  if capped then
    buckets[bt] = (buckets[bt] or 0) + reported
    added_failover = added_failover + reported
    return
  end
  local have = buckets[bt] or 0
  if have < known then
    buckets[bt] = known
    added_failover = added_failover + known - have
  end
end

local token = ARGV[4]
if token ~= '' then
  if call('HSETNX', marker, 'l:' .. token, format('%d', newest(ARGV[5]))) == 1 then
    each(ARGV[5], function(bt, bc)
      buckets[bt] = (buckets[bt] or 0) + bc
      added_local = added_local + bc
      if counting then
        call('HINCRBY', marker, format('s:%d', bt), format('%d', bc))
      end
    end)
    if counting then
      call('HSET', marker, 'c:' .. token, '1')
    end
  elseif counting and call('HSETNX', marker, 'c:' .. token, '1') == 1 then
    -- Applied before this epoch began, and the new primary has it (it holds the token): the
    -- permits are in its buckets, and this epoch's count must know them too.
    each(ARGV[5], function(bt, bc)
      top_up(bt, call('HINCRBY', marker, format('s:%d', bt), format('%d', bc)), bc)
    end)
  end
end
if epoch ~= '' and call('HSETNX', marker, 'f:' .. instance, '1') == 1 then
  each(ARGV[7], function(bt, bc)
    top_up(bt, call('HINCRBY', marker, format('s:%d', bt), format('%d', bc)), bc)
  end)
end
call('PEXPIRE', marker, format('%d', 2 * ttl))
-- The permits in (now - window, now] after this repair.
local function held()
  if capped then
    return -1
  end
  local n = 0
  for bt, c in pairs(buckets) do
    if bt > now - window then
      n = n + c
    end
  end
  return n
end
if added_local + added_failover == 0 then
  return {0, 0, held(), now}
end

if capped then
  -- Everything added goes into the newest bucket, at `now`: O(1) reads and writes.
  local cum, open_t, base, oldest, _, _ = sunpack('>dddddd', head)
  if open_t ~= now then
    call('RPUSH', key, pack('>dd', open_t, cum))
    if oldest == 0 then
      oldest = open_t
    end
    open_t = now
  end
  cum = (cum + added_local + added_failover) % MOD
  local expire_ms = math.max(call('PTTL', key), (now - server) + 2 * ttl)
  call('LSET', key, '0', pack('>ddddddd', cum, open_t, base, oldest, server + expire_ms, longest, horizon) .. record)
  call('PEXPIRE', key, format('%d', expire_ms))
  return {added_local, added_failover, -1, now}
end

local times = {}
for bt, _ in pairs(buckets) do
  if bt > edge then
    times[#times + 1] = bt
  end
end
table.sort(times)
local kept_ms = call('PTTL', key)
call('DEL', key)
if #times == 0 then
  return {added_local, added_failover, 0, now}
end
local open_t = times[#times]
local oldest = 0
if #times > 1 then
  oldest = times[1]
end
local expire_ms = math.max(kept_ms, (now - server) + 2 * ttl)
local cum = 0
local chunk = {}
for i = 1, #times - 1 do
  cum = cum + buckets[times[i]]
  chunk[#chunk + 1] = pack('>dd', times[i], cum)
end
cum = cum + buckets[open_t]
call('RPUSH', key, pack('>ddddddd', cum, open_t, 0, oldest, server + expire_ms, longest, horizon) .. record)
for i = 1, #chunk, 500 do
  call('RPUSH', key, unpack(chunk, i, math.min(i + 499, #chunk)))
end
call('PEXPIRE', key, format('%d', expire_ms))
return {added_local, added_failover, held(), now}
