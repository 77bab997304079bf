-- rl: the exact sliding-window rate limiter script. Every rl client (the Rust core, and through it
-- C, Python, Node and Java) runs this file, and so can a gateway that calls it by EVALSHA itself.
--
-- Semantics: at most `limit` permits in ANY span (now - window, now] of Redis server milliseconds.
--
-- Storage: ONE key per limiter, a LIST, so a limiter always lives in one Cluster slot:
--   index 0     "<used>"          permits inside the window (the sum of the buckets)
--   index 1..n  "<ms>:<permits>"  one bucket per millisecond that admitted something, oldest first
-- A bucket at ms t counts while t > now - window. Memory grows with the number of distinct
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

-- Walks buckets oldest first (the first page is already read). Returns how many buckets left the
-- window, their permits, and, when `cost` does not fit, the ms of the bucket whose expiry makes it
-- fit.
local function walk(key, first, edge, total, limit, cost)
  local expired, freed = 0, 0
  local need = nil
  local acc = 0
  local items, base = first, 1
  local page = 64
  while true do
    for j = 1, #items do
      local t, c = parse_bucket(items[j])
      if need == nil then
        if t <= edge then
          expired = expired + 1
          freed = freed + c
        else
          need = (total - freed) + cost - limit
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
    end
    base = base + #items
    items = redis.call('LRANGE', key, base, base + page - 1)
    if #items == 0 then
      return expired, freed, nil
    end
    page = page * 2
  end
end

-- Decides one request of `cost` permits at `now`; writes only when `consume` and it is allowed or
-- buckets expired. Returns allowed (0|1), used, retry_after_ms, reset_after_ms, now.
local function decide(key, now, window, limit, cost, consume, ttl)
  local head = redis.call('LRANGE', key, 0, 15)
  local newest, newest_c = nil, 0
  if #head > 1 then
    if #head < 16 then
      newest, newest_c = parse_bucket(head[#head])
    else
      newest, newest_c = parse_bucket(redis.call('LINDEX', key, -1))
    end
    if newest > now then
      now = newest
    end
  end
  local edge = now - window

  if newest == nil or newest <= edge then
    -- Nothing inside the window.
    if not consume then
      return 1, 0, 0, 0, now
    end
    if newest ~= nil then
      redis.call('DEL', key)
    end
    redis.call('RPUSH', key, fmt(cost), fmt(now) .. ':' .. fmt(cost))
    redis.call('PEXPIRE', key, ttl)
    return 1, cost, 0, window, now
  end

  local total = tonumber(head[1])
  local bucket_page = {}
  for i = 2, #head do
    bucket_page[i - 1] = head[i]
  end
  local expired, freed, fits_at = walk(key, bucket_page, edge, total, limit, cost)
  local used = total - freed
  local allowed = used + cost <= limit
  local reset_after = newest + window - now

  if consume then
    if expired > 0 then
      -- Drop buckets 1..expired; the last dropped slot becomes the new header.
      redis.call('LTRIM', key, expired, -1)
    end
    if allowed then
      if newest == now then
        redis.call('LSET', key, -1, fmt(now) .. ':' .. fmt(newest_c + cost))
      else
        redis.call('RPUSH', key, fmt(now) .. ':' .. fmt(cost))
      end
      used = used + cost
      reset_after = window
      redis.call('PEXPIRE', key, ttl)
    end
    if expired > 0 or allowed then
      redis.call('LSET', key, 0, fmt(used))
    end
  end

  if allowed then
    return 1, used, 0, reset_after, now
  end
  return 0, used, fits_at + window - now, reset_after, now
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
