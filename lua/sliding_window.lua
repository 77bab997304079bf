-- rl: the exact sliding-window rate limiter script. Every rl client (the Rust core, and through it
-- C, Python, Node and Java) runs this file, and so can a gateway that calls it by EVALSHA itself.
--
-- Semantics: at most `limit` permits in ANY span (now - window, now] of Redis server milliseconds.
--
-- Storage: ONE key per limiter, a LIST, so a limiter always lives in one Cluster slot:
--   index 0     the header, struct.pack('>ddddd', sum, open ms, open permits, oldest ms, deadline)
--               sum: permits in all stored buckets; open: the newest bucket (the millisecond that
--               admitted last); oldest: the oldest closed bucket's ms (0 = none); deadline: until
--               when (on this script's clock) the key's TTL is known to keep it
--   index 1..n  the closed buckets, struct.pack('>dd', ms, permits): one per millisecond that
--               admitted something, oldest first
-- Numbers are stored packed (exact integers in doubles) because converting decimal text costs a
-- script call more than anything else it does (strtod per number read, printf per number written).
-- A bucket at ms t counts while t > now - window. A typical call reads only index 0: a denial
-- writes nothing, an admission rewrites index 0 (and pushes the previous open bucket when the
-- millisecond changed); the first admission after a bucket left the window drops it. Memory
-- grows with the number of distinct milliseconds that admitted something (at most `window` of
-- them), never with permits: 5000 permits/s in a 1 s window is at most 1000 small listpack
-- strings, not 5000 ZSET members. There is no member to collide, so nothing can overwrite an
-- admitted permit (the seed design's "{now}:{client}:{random}" member lost entries that way).
--
-- Cost: the script keeps redis.call() and number/text conversions to a minimum; numbers handed to
-- redis.call are formatted with string.format('%d') (Lua's own number-to-string is a float printf).
--
-- Time never runs backwards for a window: `now` is raised to the open bucket's ms if the clock
-- (server or client) is behind it, so a bucket is never "in the future".
--
-- Every argument is checked (a decimal integer string, in range) BEFORE the first write: Redis does
-- not roll a script back, so a failure after a write would leave a half-done state.
--
-- Calling convention 1, the seed design's (kept so existing gateways work unchanged):
--   KEYS[1]  the limiter's key, e.g. "rl:{api:order:create}" (see README: key layout)
--   KEYS[2]  the design's "config prefix": declared and checked for presence, holds nothing now.
--            Give it the same hash tag, e.g. "rl:cfg:{api:order:create}".
--   ARGV     now_ms, window_ms, max_req, pre_alloc, degraded_until, client_id
--            now_ms is validated and then IGNORED: decisions use Redis TIME (the design's own
--            scenario B). pre_alloc / degraded_until are validated and ignored: the design's
--            degraded pool was never filled and rejected everything; falling back when Redis is
--            unhealthy is the client library's job. client_id must be present (audit only).
--   reply    {allowed (1|0), remaining, current, 'normal'};  {-1, 0, 0, 'invalid_args'} on bad input
--
-- Calling convention 2, the native one (rl-core): a batch of requests on one key, decided in
-- order at one instant, so a process can coalesce concurrent requests for a hot key into one call.
-- Numbers travel packed as big-endian doubles (struct.pack('>d...')), not as decimal text: parsing
-- text is the costliest thing a script call does.
--   KEYS[1]  the limiter's key
--   ARGV[1]  'rl1'
--   ARGV[2]  pack('>dd', client_now_ms (0 = use Redis TIME), max_skew_ms)
--   ARGV[3]  per request pack('>dddd', op (1 acquire, 0 peek), window_ms, limit, cost), 1..1000
--            requests one after the other
--   reply    {0, allowed, used, retry_after_ms, reset_after_ms, now_ms, ...5 more per request}
--            {-1, '<name of the bad argument>', <request number, 0 for the batch's own>}
--            {-2, server_now_ms}   client_now_ms is further than max_skew_ms from Redis TIME

local MAX_WINDOW_MS = 2592000000     -- 30 days
local MAX_PERMITS = 1000000000000000 -- 1e15: every sum stays an exact integer in a Lua double
local MAX_TIME_MS = 1000000000000000
local TTL_SLACK_MS = 1000
local MAX_BATCH = 1000

local find, sub, format, tonumber = string.find, string.sub, string.format, tonumber
local pack, unpack = struct.pack, struct.unpack
local call = redis.call
local HEADER, BUCKET = '>ddddd', '>dd'


-- A packed number that is an integer in [lo, hi] (NaN and infinities fail the comparisons).
local function int_in(x, lo, hi)
  return x ~= nil and x >= lo and x <= hi and x == math.floor(x)
end

local function server_ms()
  local t = call('TIME')
  return tonumber(t[1] .. sub('000000' .. t[2], -6, -4))
end

-- Walks the buckets oldest first: the closed ones from index 1, then the open one. Returns how
-- many closed buckets left the window, their permits, the ms of the bucket whose expiry makes
-- `cost` fit (nil if it fits now), and the oldest closed bucket still inside (0 if none).
local function walk(key, edge, sum, limit, cost, open_t, open_c, has_closed)
  local expired, freed, need, acc, first_live = 0, 0, nil, 0, 0
  local items, k, next_index, page, closed_left = {}, 1, 1, 4, has_closed
  while true do
    local t, c, last
    if k <= #items then
      t, c = unpack(BUCKET, items[k])
      k = k + 1
    elseif closed_left then
      items = call('LRANGE', key, format('%d', next_index), format('%d', next_index + page - 1))
      closed_left = #items == page
      next_index = next_index + #items
      page = page * 2
      k = 1
    else
      t, c, last = open_t, open_c, true
    end
    if t ~= nil then
      if need == nil then
        if t <= edge then
          expired = expired + 1
          freed = freed + c
        else
          if not last then
            first_live = t
          end
          need = (sum - freed) + cost - limit
          if need <= 0 then
            return expired, freed, nil, first_live
          end
        end
      end
      if need ~= nil then
        acc = acc + c
        if acc >= need then
          return expired, freed, t, first_live
        end
      end
      if last then
        return expired, freed, nil, first_live
      end
    end
  end
end

-- Decides `n` identical requests of `cost` permits at `now`, in order, and appends each one's
-- {allowed (0|1), used, retry_after_ms, reset_after_ms, now} to `out`. Deciding a run of equal
-- requests at once is what makes a coalesced batch cheap: one read and one write for all of them.
-- Writes only when `consume` and something is admitted. Returns an error reply, or nil.
local function decide(out, key, now, window, limit, cost, consume, ttl, n)
  local head = call('LINDEX', key, '0')
  local sum, open_t, open_c, oldest, deadline
  if head then
    if #head ~= 40 then
      return redis.error_reply('rl: ' .. key .. ' holds something that is not an rl window')
    end
    sum, open_t, open_c, oldest, deadline = unpack(HEADER, head)
    if open_t > now then
      now = open_t
    end
  end
  local edge = now - window
  local o = #out

  if open_t == nil or open_t <= edge then
    -- Nothing inside the window.
    if not consume then
      for i = 1, n do
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, 0, 0, 0, now
        o = o + 5
      end
      return nil
    end
    if head then
      call('DEL', key)
    end
    local k = math.min(n, math.floor(limit / cost))
    call('RPUSH', key, pack(HEADER, k * cost, now, k * cost, 0, now + 2 * ttl))
    call('PEXPIRE', key, format('%d', 2 * ttl))
    for i = 1, n do
      if i <= k then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, i * cost, 0, window, now
      else
        -- Only the bucket just made holds permits: the request fits once it leaves.
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, k * cost, window, window, now
      end
      o = o + 5
    end
    return nil
  end

  local expired, freed, fits_at = 0, 0, nil
  if (oldest ~= 0 and oldest <= edge) or sum + cost > limit then
    expired, freed, fits_at, oldest = walk(key, edge, sum, limit, cost, open_t, open_c, oldest ~= 0)
  end
  local used = sum - freed
  local k = 0
  if used + cost <= limit then
    k = n
    if consume then
      k = math.min(n, math.floor((limit - used) / cost))
    end
  end
  local reset_after = open_t + window - now
  if consume and k > 0 then
    if k < n then
      -- The requests after the k admitted ones wait for the k admissions too: find when the
      -- next one fits, on the window as it will be (read before it is rewritten below).
      local _, _, at = walk(key, edge, sum + k * cost, limit, cost, open_t, open_c, oldest ~= 0 or expired > 0)
      fits_at = at or now
    end
    if expired > 0 then
      -- Drop closed buckets 1..expired; the last dropped slot becomes the header, rewritten below.
      call('LTRIM', key, format('%d', expired), '-1')
    end
    if open_t == now then
      open_c = open_c + k * cost
    else
      call('RPUSH', key, pack(BUCKET, open_t, open_c))
      if oldest == 0 then
        oldest = open_t
      end
      open_t, open_c = now, k * cost
    end
    -- The TTL must outlive the newest bucket under THIS call's window (a later call may bring a
    -- longer window than the one that set it); set it for twice that, so it is renewed rarely.
    if deadline < now + ttl then
      deadline = now + 2 * ttl
      call('PEXPIRE', key, format('%d', 2 * ttl))
    end
    call('LSET', key, '0', pack(HEADER, used + k * cost, open_t, open_c, oldest, deadline))
    reset_after = window
  end
  for i = 1, n do
    if i <= k then
      local u = used
      if consume then
        u = used + i * cost
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, u, 0, reset_after, now
    else
      local u = used
      if consume then
        u = used + k * cost
      end
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, u, fits_at + window - now, reset_after, now
    end
    o = o + 5
  end
  return nil
end

if ARGV[1] == 'rl1' then
  local key = KEYS[1]
  if key == nil then return {-1, 'key', 0} end
  if #ARGV ~= 3 or #ARGV[2] ~= 16 then return {-1, 'batch', 0} end
  local client_now, max_skew = unpack('>dd', ARGV[2])
  if not int_in(max_skew, 0, MAX_TIME_MS) then return {-1, 'max_skew_ms', 0} end
  if not int_in(client_now, 0, MAX_TIME_MS) then return {-1, 'client_now_ms', 0} end
  local blob = ARGV[3]
  local n = #blob / 32
  if n < 1 or n > MAX_BATCH or n ~= math.floor(n) then return {-1, 'batch', 0} end
  -- Every request of the batch is checked before the first write.
  local consume, windows, limits, costs = {}, {}, {}, {}
  for i = 1, n do
    local op, window, limit, cost = unpack('>dddd', blob, (i - 1) * 32 + 1)
    if op ~= 0 and op ~= 1 then return {-1, 'op', i} end
    if not int_in(window, 1, MAX_WINDOW_MS) then return {-1, 'window_ms', i} end
    if not int_in(limit, 1, MAX_PERMITS) then return {-1, 'limit', i} end
    if not int_in(cost, 1, limit) then return {-1, 'cost', i} end
    consume[i], windows[i], limits[i], costs[i] = op == 1, window, limit, cost
  end
  local now
  local slack = TTL_SLACK_MS
  if client_now == 0 then
    now = server_ms()
  else
    now = client_now
    local server = server_ms()
    if math.abs(now - server) > max_skew then
      return {-2, server}
    end
    -- A bucket made on the client's clock may outlive the server-clock TTL by twice the skew.
    slack = slack + 2 * max_skew
  end
  -- The requests are decided in order, at one instant; each run of identical requests at once.
  local out = {0}
  local i = 1
  while i <= n do
    local j = i
    while j < n and consume[j + 1] == consume[i] and windows[j + 1] == windows[i]
      and limits[j + 1] == limits[i] and costs[j + 1] == costs[i] do
      j = j + 1
    end
    local err = decide(out, key, now, windows[i], limits[i], costs[i], consume[i], windows[i] + slack, j - i + 1)
    if err then return err end
    i = j + 1
  end
  return out
end

-- The seed design's convention. (Defined down here so the native path does not pay for it.)
-- A decimal integer in [lo, hi], or nil. The pattern rejects what tonumber would let through:
-- 'inf', 'nan', '0x10', '1e3', '1.5', ' 5', '+5', '-5'.
local function int_arg(s, lo, hi)
  if type(s) ~= 'string' or #s > 16 or not find(s, '^%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n < lo or n > hi then
    return nil
  end
  return n
end

-- Redis TIME in ms, with one text-to-number conversion: seconds .. the microseconds' first 3 of 6 digits.
local invalid = {-1, 0, 0, 'invalid_args'}
if #KEYS ~= 2 or #ARGV ~= 6 then return invalid end
if int_arg(ARGV[1], 1, MAX_TIME_MS) == nil then return invalid end
local window = int_arg(ARGV[2], 1, MAX_WINDOW_MS)
local max_req = int_arg(ARGV[3], 1, MAX_PERMITS)
if window == nil or max_req == nil then return invalid end
if int_arg(ARGV[4], 0, MAX_PERMITS) == nil then return invalid end
if int_arg(ARGV[5], 0, MAX_TIME_MS) == nil then return invalid end
if #ARGV[6] == 0 or #ARGV[6] > 256 then return invalid end

local out = {}
local err = decide(out, KEYS[1], server_ms(), window, max_req, 1, true, window + TTL_SLACK_MS, 1)
if err then return err end
return {out[1], max_req - out[2], out[2], 'normal'}
