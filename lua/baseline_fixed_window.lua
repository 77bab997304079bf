-- Baseline for `rl bench --compare fixed-window`: the common INCR fixed-window limiter, kept only
-- to show the boundary spike that rl's sliding window exists to prevent. Not used by any client.
--
-- A window is [idx*window, (idx+1)*window) of Redis server milliseconds, counted in its own key.
-- A request admitted at the end of one window and requests at the start of the next are in
-- different keys, so up to 2*limit can be admitted within one window-length span.
--
--   KEYS[1]  base key; the counter for window `idx` is KEYS[1]..':'..idx. The index comes from
--            Redis TIME, so the name is built here; give the base a hash tag (rl:fw:{key}) so every
--            window of one limiter stays in one Cluster slot.
--   ARGV     limit, window_ms, cost
--   reply    {allowed (1|0), count in this window after the increment, now_ms}
--
-- Denied requests are counted too (INCRBY first, compare after): that is how the pattern is
-- usually written, and it does not change what is admitted.

local limit = tonumber(ARGV[1])
local window = tonumber(ARGV[2])
local cost = tonumber(ARGV[3])
if not limit or not window or not cost or limit < 1 or window < 1 or cost < 1 then
  return redis.error_reply('baseline_fixed_window: limit, window_ms and cost must be positive integers')
end

local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local idx = math.floor(now / window)
local key = KEYS[1] .. ':' .. string.format('%.0f', idx)

local count = redis.call('INCRBY', key, cost)
if count == cost then
  -- First hit of this window: the key outlives its window by one window at most.
  redis.call('PEXPIRE', key, window * 2)
end

local allowed = 0
if count <= limit then
  allowed = 1
end
return {allowed, count, now}
