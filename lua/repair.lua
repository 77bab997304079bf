-- rl: writes permits an instance admitted back into a window that lacks them (see the README,
-- "Failover repair"). Used rarely (leaving local mode, a new primary), so it favours clarity
-- over speed: it reads the whole window, merges, and rewrites it in the layout of
-- sliding_window.lua (header + closed buckets, oldest first).
--
--   KEYS[1]  the window's key (as in sliding_window.lua)
--   KEYS[2]  its repair marker, a HASH in the same slot: which repairs were applied, per epoch
--   ARGV[1]  'rl-repair-1'
--   ARGV[2]  this instance's id
--   ARGV[3]  pack('>dd', window_ms, ttl_ms)
--   ARGV[4]  token of the local part ('' = none): permits this instance admitted while Redis was
--            away, which Redis never saw; added once per token (idempotent)
--   ARGV[5]  the local part: pack('>dd', ms, permits) per bucket
--   ARGV[6]  epoch of the failover part ('' = none): the new primary's run id
--   ARGV[7]  the failover part: buckets this instance saw Redis admit before the failover. A
--            bucket missing here was lost with the old primary (replication is asynchronous) and
--            is added back; one present was replicated and is left alone. Once per instance and
--            epoch (idempotent); a bucket that an earlier repair of this epoch made or touched
--            does not count as present (other instances may have lost permits in the same ms).
--   reply    {permits added by the local part, permits added by the failover part}
if ARGV[1] ~= 'rl-repair-1' or #ARGV ~= 7 then
  return redis.error_reply('rl repair: bad arguments')
end
local call, pack, sunpack, format = redis.call, struct.pack, struct.unpack, string.format
local key, marker, instance = KEYS[1], KEYS[2], ARGV[2]
local window, ttl = sunpack('>dd', ARGV[3])
local t = call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local server = now -- Redis TIME: the TTL's clock

-- The window's layout is sliding_window.lua's: a 48-byte header (running totals modulo 2^52,
-- the longest window the key has seen), or the previous 40-byte one (per-bucket counts).
local MOD = 4503599627370496
local buckets = {}
local longest = window
local head = call('LINDEX', key, '0')
if head then
  local open_t, open_c
  if #head == 48 then
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
  call('DEL', marker)
  call('HSET', marker, 'epoch', epoch)
end

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

local added_local, added_failover = 0, 0
local token = ARGV[4]
if token ~= '' and call('HSETNX', marker, 'l:' .. token, '1') == 1 then
  each(ARGV[5], function(bt, bc)
    buckets[bt] = (buckets[bt] or 0) + bc
    added_local = added_local + bc
    if epoch ~= '' then
      call('HSET', marker, format('t:%d', bt), '1')
    end
  end)
end
if epoch ~= '' and call('HSETNX', marker, 'f:' .. instance, '1') == 1 then
  each(ARGV[7], function(bt, bc)
    local tf = format('t:%d', bt)
    if buckets[bt] == nil or call('HEXISTS', marker, tf) == 1 then
      buckets[bt] = (buckets[bt] or 0) + bc
      added_failover = added_failover + bc
      call('HSET', marker, tf, '1')
    end
  end)
end
call('PEXPIRE', marker, format('%d', 2 * ttl))
if added_local + added_failover == 0 then
  return {0, 0}
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
  return {added_local, added_failover}
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
call('RPUSH', key, pack('>dddddd', cum, open_t, 0, oldest, server + expire_ms, longest))
for i = 1, #chunk, 500 do
  call('RPUSH', key, unpack(chunk, i, math.min(i + 499, #chunk)))
end
call('PEXPIRE', key, format('%d', expire_ms))
return {added_local, added_failover}
