-- Baseline for `rl throughput`: the minimal sliding-window script a gateway would write by hand,
-- one ZSET member per admitted request. It has no argument checks, no cost, no retry-after and no
-- client-clock support; it is here only to price what rl's script does on top of it.
--
--   KEYS[1]  the window's ZSET
--   ARGV     limit, window_ms, member (unique per request: an equal member would overwrite, and
--            lose, an admitted request)
--   reply    {allowed (1|0), count in the window after the call, now_ms}

local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)

-- Window (now - window, now]: a member exactly one window old has left it.
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', now - window)
local count = redis.call('ZCARD', KEYS[1])
if count < limit then
  redis.call('ZADD', KEYS[1], now, ARGV[3])
  redis.call('PEXPIRE', KEYS[1], window)
  return {1, count + 1, now}
end
return {0, count, now}
