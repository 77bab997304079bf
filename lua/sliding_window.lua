-- rl: the exact sliding-window rate limiter script. Every rl client (the Rust core, and through it
-- C, Python, Node and Java) runs this file, and so can a gateway that calls it by EVALSHA itself.
--
-- Semantics: at most `limit` permits in ANY span (now - window, now] of Redis server milliseconds.
--
-- Storage: ONE key per limiter, a LIST, so a limiter always lives in one Cluster slot:
--   index 0     "<sum>:<ms>:<permits>"  the sum of all stored buckets, and the newest ("open")
--                                       bucket: the millisecond that admitted last and its permits
--   index 1..n  "<ms>:<permits>"        older ("closed") buckets, one per millisecond that admitted
--                                       something, oldest first
-- A bucket at ms t counts while t > now - window. The common calls touch only index 0 and 1: a
-- denial reads two elements and writes nothing; an admission in the same millisecond rewrites
-- index 0. Buckets that left the window are dropped by the next admission. Memory grows with the number of distinct
-- milliseconds that admitted something (at most `window` of them), never with permits: 5000
-- permits/s in a 1 s window is at most 1000 small listpack strings, not 5000 ZSET members. There is
-- no member to collide, so nothing can overwrite an admitted permit (the seed design's
-- "{now}:{client}:{random}" member lost entries that way).
--
-- Time never runs backwards for a window: `now` is raised to the newest bucket's ms if the clock
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
-- Calling convention 2, the native one (rl-core):
--   KEYS[1]  the limiter's key
--   ARGV     'rl1', op ('acquire'|'peek'), window_ms, limit, cost, client_now_ms ('' = server
--            TIME), max_skew_ms
--   reply    {0, allowed, used, retry_after_ms, reset_after_ms, now_ms}
--            {-1, '<name of the bad argument>'}
--            {-2, server_now_ms}   client_now_ms is further than max_skew_ms from Redis TIME

local MAX_WINDOW_MS = 2592000000     -- 30 days
local MAX_PERMITS = 1000000000000000 -- 1e15: every sum stays an exact integer in a Lua double
local MAX_TIME_MS = 1000000000000000
local TTL_SLACK_MS = 1000

-- A decimal integer in [lo, hi], or nil. The pattern rejects what tonumber would let through:
-- 'inf', 'nan', '0x10', '1e3', '1.5', ' 5', '+5', '-5'.
local function int_arg(s, lo, hi)
  if type(s) ~= 'string' or #s == 0 or #s > 16 or not string.find(s, '^%d+$') then
    return nil
  end
  local n = tonumber(s)
  if n < lo or n > hi then
    return nil
  end
  return n
end

local function fmt(n)
  return string.format('%.0f', n)
end

local function server_ms()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
end

local function parse_bucket(s)
  local c = string.find(s, ':', 1, true)
  return tonumber(string.sub(s, 1, c - 1)), tonumber(string.sub(s, c + 1))
end

local function parse_header(s)
  local sum, t, c = string.match(s, '^(%d+):(%d+):(%d+)$')
  return tonumber(sum), tonumber(t), tonumber(c)
end

-- Walks the buckets oldest first: the closed ones (the first is already read), then the open one.
-- Returns how many closed buckets left the window, their permits, and, when `cost` does not fit,
-- the ms of the bucket whose expiry makes it fit.
local function walk(key, first, edge, sum, limit, cost, open_t, open_c)
  local expired, freed, need, acc = 0, 0, nil, 0
  local items, k, next_index, page = first, 1, 2, 32
  local closed_left = #first > 0
  while true do
    local t, c, last
    if k <= #items then
      t, c = parse_bucket(items[k])
      k = k + 1
    elseif closed_left then
      items = redis.call('LRANGE', key, next_index, next_index + page - 1)
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
          need = (sum - freed) + cost - limit
          if need <= 0 then
            return expired, freed, nil
          end
        end
      end
      if need ~= nil then
        acc = acc + c
        if acc >= need then
          return expired, freed, t
        end
      end
      if last then
        return expired, freed, nil
      end
    end
  end
end

-- Decides one request of `cost` permits at `now`; writes only when `consume` and it is allowed.
-- Returns allowed (0|1), used, retry_after_ms, reset_after_ms, now.
local function decide(key, now, window, limit, cost, consume, ttl)
  local head = redis.call('LRANGE', key, 0, 1)
  local sum, open_t, open_c
  if #head > 0 then
    sum, open_t, open_c = parse_header(head[1])
    if open_t > now then
      now = open_t
    end
  end
  local edge = now - window

  if open_t == nil or open_t <= edge then
    -- Nothing inside the window.
    if not consume then
      return 1, 0, 0, 0, now
    end
    if open_t ~= nil then
      redis.call('DEL', key)
    end
    redis.call('RPUSH', key, fmt(cost) .. ':' .. fmt(now) .. ':' .. fmt(cost))
    redis.call('PEXPIRE', key, ttl)
    return 1, cost, 0, window, now
  end

  local expired, freed, fits_at = walk(key, { head[2] }, edge, sum, limit, cost, open_t, open_c)
  local used = sum - freed
  if used + cost > limit then
    return 0, used, fits_at + window - now, open_t + window - now, now
  end
  if consume then
    if expired > 0 then
      -- Drop closed buckets 1..expired; the last dropped slot becomes the header, rewritten below.
      redis.call('LTRIM', key, expired, -1)
    end
    if open_t == now then
      open_c = open_c + cost
    else
      redis.call('RPUSH', key, fmt(open_t) .. ':' .. fmt(open_c))
      open_t, open_c = now, cost
    end
    used = used + cost
    redis.call('LSET', key, 0, fmt(used) .. ':' .. fmt(open_t) .. ':' .. fmt(open_c))
    -- Every admission: a later call may have brought a longer window than the one that set the TTL.
    redis.call('PEXPIRE', key, ttl)
    return 1, used, 0, window, now
  end
  return 1, used, 0, open_t + window - now, now
end

if ARGV[1] == 'rl1' then
  local key = KEYS[1]
  local op = ARGV[2]
  local window = int_arg(ARGV[3], 1, MAX_WINDOW_MS)
  local limit = int_arg(ARGV[4], 1, MAX_PERMITS)
  if key == nil then return {-1, 'key'} end
  if op ~= 'acquire' and op ~= 'peek' then return {-1, 'op'} end
  if window == nil then return {-1, 'window_ms'} end
  if limit == nil then return {-1, 'limit'} end
  local cost = int_arg(ARGV[5], 1, limit)
  if cost == nil then return {-1, 'cost'} end
  local max_skew = int_arg(ARGV[7], 0, MAX_TIME_MS)
  if max_skew == nil then return {-1, 'max_skew_ms'} end
  local now
  local ttl = window + TTL_SLACK_MS
  if ARGV[6] == '' then
    now = server_ms()
  else
    now = int_arg(ARGV[6], 1, MAX_TIME_MS)
    if now == nil then return {-1, 'client_now_ms'} end
    local server = server_ms()
    if math.abs(now - server) > max_skew then
      return {-2, server}
    end
    -- A bucket made on the client's clock may outlive the server-clock TTL by twice the skew.
    ttl = ttl + 2 * max_skew
  end
  local allowed, used, retry_after, reset_after, at =
    decide(key, now, window, limit, cost, op == 'acquire', ttl)
  return {0, allowed, used, retry_after, reset_after, at}
end

-- The seed design's convention.
local invalid = {-1, 0, 0, 'invalid_args'}
if #KEYS ~= 2 or #ARGV ~= 6 then return invalid end
if int_arg(ARGV[1], 1, MAX_TIME_MS) == nil then return invalid end
local window = int_arg(ARGV[2], 1, MAX_WINDOW_MS)
local max_req = int_arg(ARGV[3], 1, MAX_PERMITS)
if window == nil or max_req == nil then return invalid end
if int_arg(ARGV[4], 0, MAX_PERMITS) == nil then return invalid end
if int_arg(ARGV[5], 0, MAX_TIME_MS) == nil then return invalid end
if #ARGV[6] == 0 or #ARGV[6] > 256 then return invalid end

local allowed, used = decide(KEYS[1], server_ms(), window, max_req, 1, true, window + TTL_SLACK_MS)
return {allowed, max_req - used, used, 'normal'}
