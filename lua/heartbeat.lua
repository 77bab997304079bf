-- rl: one instance's heartbeat, and the count of live instances (the local fallback's divisor).
-- It writes, so it doubles as the recovery probe: a Redis that cannot take writes (read-only
-- replica, OOM under noeviction) does not look healthy.
--   KEYS[1]  the fleet's key, '<prefix>instances' (a ZSET: member = instance id, score = last beat)
--   ARGV[1]  this instance's id
--   ARGV[2]  how long (ms) an instance counts as live after its last beat
--   reply    {live instances, server_now_ms}
local t = redis.call('TIME')
local now = tonumber(t[1]) * 1000 + math.floor(tonumber(t[2]) / 1000)
local ttl = tonumber(ARGV[2])
if ttl == nil or ttl < 1 or #ARGV[1] == 0 then
  return redis.error_reply('rl heartbeat: bad arguments')
end
redis.call('ZADD', KEYS[1], string.format('%d', now), ARGV[1])
redis.call('ZREMRANGEBYSCORE', KEYS[1], '-inf', string.format('(%d', now - ttl))
redis.call('PEXPIRE', KEYS[1], string.format('%d', 2 * ttl))
return {redis.call('ZCARD', KEYS[1]), now}
