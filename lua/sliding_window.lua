-- rl: the exact sliding-window rate limiter script. Every rl client (the Rust core, and through it
-- C, Python, Node and Java) runs this file, and so can a gateway that calls it by EVALSHA itself.
--
-- Semantics: at most `limit` permits in ANY span (now - window, now] of Redis server milliseconds.
--
-- Storage: ONE key per limiter, a LIST, so a limiter always lives in one Cluster slot:
--   index 0     the header, struct.pack('>ddddddd', cum, open ms, base, oldest ms, deadline,
--               longest, lease horizon)
--               cum: permits admitted through the open bucket (the newest, the millisecond that
--               admitted last), counted since the key was made, modulo 2^52; base: the same count
--               just before the oldest stored bucket; oldest: the oldest closed bucket's ms (0 =
--               none); deadline: until when (Redis server ms) the key's TTL is known to keep it;
--               longest: the longest window any call brought while the key lived; lease horizon:
--               no lease in the key's lease HASH (convention 3) ends later (0 = no lease; 2e15 =
--               not known, read the HASH); then, where a lone call with an id (convention 2)
--               admitted something on the key, that call's id (16 bytes, 72 in all): its retry
--               record (see Retries)
--   index 1..n  the closed buckets, struct.pack('>dd', ms, cum through this bucket): one per
--               millisecond that admitted something, oldest first
-- A window's count is a difference of two running totals, and the totals grow with time, so one
-- binary search over the list (LINDEX, O(log n) reads) finds where any window begins and when a
-- denied request fits: no call reads the window bucket by bucket, whatever its cost or window.
-- Totals are kept modulo 2^52 so they stay exact doubles forever; a difference is exact while the
-- stored buckets hold fewer than 2^52 permits (an admission that would break that keeps only its
-- own window's history).
-- History is kept for the LONGEST window seen while the key lives, so a call with a short window
-- never drops buckets that a longer rule on the same key still counts. A 40-byte header (the
-- previous layout: per-bucket counts, '>ddddd' sum, open ms, open permits, oldest, deadline on
-- the caller's clock) is rewritten once into this layout when first read; its longest window is
-- unknown and taken to be that call's.
-- Leases (convention 3) live in a second key, `<key>:l`, a HASH. A decision counts the leases
-- that end after its window's edge, and reads the HASH only when the lease horizon is after that
-- edge, or the window key is missing: a key nobody leases costs no read of it. That skips only
-- reads that would have found no lease to count, so a decision is the same as if it always read
-- the HASH, because the horizon is never below a lease's end: a lease call sets it to the latest
-- end left in the HASH after it granted and returned; a header made or rewritten without
-- reading the HASH (a refund's bucket on a missing key, a 40-byte upgrade, lua/repair.lua) says
-- "not known"; the 48-byte header before this one (no horizon) reads as "not known"; a decision
-- that reads the HASH for a "not known" header writes what it learnt. Leases that ended age out
-- of it with no write: once the horizon is before the edge, no lease counts and nothing is read.
-- The key's TTL need not cover the leases: once the key is gone, a decision reads the HASH.
-- The HASH is not declared in KEYS: it is usually missing, and Redis Cluster answers TRYAGAIN to
-- every call naming a missing key while its slot migrates (a whole migration of refused calls);
-- undeclared, it is read only while a lease may count, and a read refused as "non local" during
-- a migration is retried by rl like TRYAGAIN.
-- Numbers are stored packed (exact integers in doubles) because converting decimal text costs a
-- script call more than anything else it does (strtod per number read, printf per number written).
-- A bucket at ms t counts while t > now - window. A typical call reads index 0 and at most a
-- couple of buckets: a denial writes nothing (unless it brings a longer window than the key has
-- seen), an admission rewrites index 0 (and pushes the previous open bucket when the millisecond
-- changed); the first admission after buckets left the longest window drops them. Memory grows
-- with the number of distinct milliseconds that admitted something (at most `longest` of them),
-- never with permits: 5000 permits/s in a 1 s window is at most 1000 small listpack strings, not
-- 5000 ZSET members. There is no member to collide, so nothing can overwrite an admitted permit
-- (the seed design's "{now}:{client}:{random}" member lost entries that way).
--
-- The key's TTL is kept on Redis server time: it must outlive the newest bucket by the longest
-- window, whichever clock (server or an accepted client clock) placed that bucket.
--
-- Cost: the script keeps redis.call() and number/text conversions to a minimum; numbers handed to
-- redis.call are formatted with string.format('%d') (Lua's own number-to-string is a float printf).
-- It makes no closure per call (every function is defined once at the top level: once per call
-- under EVAL, once per FUNCTION LOAD as a library, see `entry` at the bottom) and no table it can
-- do without. As a library (FCALL) it also remembers what the last call's arguments and Redis
-- TIME's seconds unpacked to (`memo`), and a denial whose window holds every stored bucket and no
-- lease is decided from the header alone (see `decide`). dev/script_cost/cost.sh prices a call
-- against the raw ZSET script.
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
--            The lease HASH, KEYS[1] .. ':l', is read only when the key's lease horizon says a
--            lease may count (see Leases above).
--   reply    {allowed (1|0), remaining, current, 'normal'};  {-1, 0, 0, 'invalid_args'} on bad input
--
-- Calling convention 2, the native one (rl-core): a batch of requests on one key, decided in
-- order at one instant, so a process can coalesce concurrent requests for a hot key into one call.
-- Numbers travel packed as big-endian doubles (struct.pack('>d...')), not as decimal text: parsing
-- text is the costliest thing a script call does.
--   KEYS[1]  the limiter's key
--   ARGV[1]  'rl1'
--   ARGV[2]  pack('>dd', client_now_ms (0 = use Redis TIME), max_skew_ms), then, where the call
--            asks for a record (ARGV[4]), the instance's 8 bytes (the first 8 of its call ids,
--            see Retries) and how long records are kept, ms, decimal text (1..MAX_WINDOW_MS): the same in
--            every call, so it is parsed once (see `memo`)
--   ARGV[3]  per request pack('>dddd', op (1 acquire, 0 peek), window_ms, limit, cost), 1..1000
--            requests one after the other
--   ARGV[4]  optional: the call's id, 16 bytes, unique per call: the instance's 8 bytes, then 8
--            of its own (see Retries)
--   ARGV[5]  optional, on a retry: per request its earlier attempt, 16 bytes of that call's id
--            then pack('>d', its place in that call, 1-based; 0 = not a retry)
--   reply    {0, allowed, used, retry_after_ms, reset_after_ms, now_ms, ...5 more per request}
--            allowed is 2 for a retried request its earlier attempt already admitted: admitted,
--            not counted again, used/retry/reset as the window stands now
--            {-1, '<name of the bad argument>', <request number, 0 for the batch's own>}
--            {-2, server_now_ms}   client_now_ms is further than max_skew_ms from Redis TIME
--   ARGV[1] 'rl1P' instead of 'rl1' asks for the same reply packed: on success one string,
--            per request pack('>ddddd', allowed, used, retry_after_ms, reset_after_ms, now_ms)
--            (the leading 0 left out); errors as above. A reply of six integers is six values to
--            convert in Redis and six to parse and allocate in the client; a string is one, and
--            the client reads it without parsing text (rl-core sends 'rl1P').
--
-- Retries: a call whose reply was lost (a connection reset mid-reply) may have run, and its
-- requests' retries must not take a second permit for the same request. A call that brings an id
-- (ARGV[4], 16 bytes, or 17 ending in '!', see below) and admits anything leaves a record of
-- what it admitted; a retry names the failed call and its place there
-- (ARGV[5]), and a request its record shows as admitted is answered `allowed = 2` and not
-- decided again. No record (the first attempt never ran, or did not admit it, or the record is
-- gone) means the request is decided afresh. That never over-admits: a permit a lost reply took
-- still counts, so deciding afresh at worst spends a second permit on one request.
-- Where the record lives:
-- - a lone call's (one request) is the id at the end of the window's header, written by the
--   header write its admission makes anyway: no key and no command of its own. The next lone
--   admission on the key replaces it; first it moves the record to a key of its own, as below, if
--   another instance wrote it (whose retry this call cannot know about) or if the caller says it
--   still has calls that lost their reply (ARGV[4] ending in '!'). One instance's calls on a
--   key are one at a time (rl-core sends the next only once the last answered or timed out), so a
--   record of its own that it replaces without the '!' belongs to a call that was answered;
-- - a batch's is `<key>:r:<id>`, one byte per request ('1' where this call admitted it), with a
--   short TTL (the tail of ARGV[2]); a record moved out of a header is such a key of one byte.
-- The header keeps the key alive at least that TTL after a record is written. A record key shares
-- the window key's hash tag, so it lives in its slot; like the lease HASH it is not declared in
-- KEYS and is read and written with redis.pcall, so a refused access (a slot migrating) costs
-- only the deduplication, never the decision. dev/script_cost/cost.sh prices a lone admission
-- with its record; a client that never retries sends no id.

-- Calling convention 'rl1C', composite (rl-core's acquire_all): several rules, on one or more keys
-- of one Cluster slot, decided all-or-nothing at one instant. See `composite` below.
--   KEYS     the distinct window keys (1..16), each used by at least one rule
--   ARGV[1]  'rl1C'
--   ARGV[2]  pack('>dd', client_now_ms (0 = use Redis TIME), max_skew_ms)
--   ARGV[3]  per rule pack('>dddd', key index (1-based, into KEYS), window_ms, limit, cost), 1..16
--            rules; rules on one key share one cost (one admission of it is checked against
--            every (limit, window) of that key)
--   ARGV[4]  optional, a batch of requests (rl-core coalesces concurrent composite calls on one
--            slot): per request pack('>d', its number of rules, 1..16), summing to the rules of
--            ARGV[3], which then hold each request's rules one request after the other; KEYS are
--            the distinct keys of the whole batch (1..1000), 1..1000 rules in all, 1..1000
--            requests. Without it the call is one request of 1..16 rules on 1..16 keys. Requests
--            are decided in order, each all-or-nothing as alone; a later one sees what the
--            earlier ones admitted.
--   reply    {0, then per request: allowed, retry_after_ms, now_ms, then per rule of it: allowed,
--            used, retry_after_ms, reset_after_ms, now_ms}; errors as for convention 2 (the number
--            is the rule's, counted across the batch; 'requests' names a bad ARGV[4]); with ARGV[4]
--            and more than one request, {-3, k, ...} when keys KEYS[k] hold something that is not
--            an rl window (another type, or a list that is not one): nothing decided or written

local MAX_WINDOW_MS = 2592000000     -- 30 days
local MAX_PERMITS = 1000000000000000 -- 1e15: every sum stays an exact integer in a Lua double
local MAX_TIME_MS = 1000000000000000
local TTL_SLACK_MS = 1000
local MAX_BATCH = 1000
local MAX_RULES = 16

local MOD = 4503599627370496 -- 2^52: running totals wrap here, so every sum stays exact

local HEADER, BUCKET = '>ddddddd', '>dd'
-- The header and the retry record after it ('' for none: 56 bytes, else 72).
local HEADER_REC = '>dddddddc0'
local HEADER_48 = '>dddddd' -- the layout before the lease horizon (read, rewritten when written)
-- Every header size a window key's index 0 may have: this one (56, or 72 with a record), 48, 40.
local HEADER_SIZES = {[40] = true, [48] = true, [56] = true, [72] = true}
local LEASE = '>ddd'
-- A lease horizon meaning "not known: read the lease HASH" (later than any window edge).
local UNKNOWN = 2 * MAX_TIME_MS
local MAX_LEASES = 64

-- Lua and Redis library functions, bound by bind() when a call starts: the top level of a Redis
-- Functions library runs at FUNCTION LOAD, where no library but `redis.register_function` is
-- visible, so nothing above `entry` may touch a global while it is being defined.
local call, pack, sunpack, unpack_list, find, sub, format, tonumber_, floor, min, max, abs, type_
local sort

local function bind()
  call, pack, sunpack, unpack_list = redis.call, struct.pack, struct.unpack, unpack
  find, sub, format, tonumber_ = string.find, string.sub, string.format, tonumber
  floor, min, max, abs, type_ = math.floor, math.min, math.max, math.abs, type
  sort = table.sort
end

-- A packed number that is an integer in [lo, hi] (NaN and infinities fail the comparisons).
local function int_in(x, lo, hi)
  return x ~= nil and x >= lo and x <= hi and x % 1 == 0
end

-- What the last call's arguments and Redis TIME's seconds unpacked to. A library's upvalues
-- outlive a call, and a hot key's calls repeat their arguments byte for byte; equal Lua strings
-- are one interned object, so recognising one is a pointer compare instead of a conversion (text
-- to number is strtod) or an unpack and its checks, each a large part of a lone call. Only
-- arguments that passed every check are kept, so a hit answers as the checks would. Under EVAL
-- the file runs afresh every call and nothing is ever found here. One table, not a local per
-- value: under EVAL every top-level local a function uses is a new upvalue object per call.
local memo = {
  false, 0,           -- [1] TIME's seconds (text), [2] in ms (server_ms)
  false, 0, 0,        -- [3] clock argument, [4] client_now_ms, [5] max_skew_ms (native)
  false, 0, 0, 0, 0,  -- [6] lone request, [7] consume, [8] window, [9] limit, [10] cost (native)
  false,              -- [11] the record TTL (text) the clock argument [3] brought, or false
  0,                  -- [12] the same TTL, a number
  false, false,       -- [13] this lone call's id, to record on admission, or false (see
                      -- Retries; cleared by every call); [14] whether a record of this instance
                      -- must be moved, not replaced
  false,              -- [15] the instance's 8 bytes the clock argument [3] brought, or false
  {0, 0, 0, 0, 0, 0}, -- [16] a lone call's decision, reused by packed calls: their reply is a
                      -- string, so the table never leaves the script (every decision writes
                      -- all five fields)
}

-- The retry record a header being written ends with (see Retries): this lone call's id when it
-- `admitted` something, after moving the record it replaces to a
-- key of its own where a retry may still need it; otherwise the record the header had (`head`:
-- the header read, or false). Whose record it replaces is found by `find` at a known place: a
-- string made by `sub` costs a lone call more than the rest of this.
local function record_tail(key, head, admitted)
  local m = memo
  local mine = m[13]
  if mine and admitted then
    if head and #head == 72 and (m[14] or find(head, m[15], 57, true) ~= 57) then
      redis.pcall('SET', key .. ':r:' .. sub(head, 57), '1', 'PX', m[11])
    end
    return mine
  end
  if head and #head == 72 then
    return sub(head, 57)
  end
  return ''
end

-- How long past now a header written with this call's record must keep its key (0: no record).
local function record_ms(admitted)
  local m = memo
  if m[13] and admitted then
    return m[12]
  end
  return 0
end

-- Redis TIME in ms (no string is built: each one made is work for the garbage collector).
-- The microseconds' whole ms are their digits but the last three (TIME gives them unpadded, at
-- most 6), read by string.byte: cheaper than tonumber's strtod.
local function server_ms()
  local t = call('TIME')
  local s, us, m = t[1], t[2], memo
  if s ~= m[1] then
    m[1], m[2] = s, tonumber_(s) * 1000
  end
  local last_s_ms = m[2]
  local l = #us
  if l < 4 then
    return last_s_ms
  end
  local a, b, c = string.byte(us, 1, l - 3) -- a global, not bound: see memo
  if c then
    return last_s_ms + a * 100 + b * 10 + c - 5328 -- 5328 = 48 * 111: the digits' '0's
  elseif b then
    return last_s_ms + a * 10 + b - 528
  end
  return last_s_ms + a - 48
end

-- Permits between two running totals (a later minus an earlier one).
local function between(later, earlier)
  return (later - earlier) % MOD
end

-- Closed bucket i (list index 1..n), read once per call: its ms and running total, or nil past
-- the last closed bucket.
local function bucket(key, cache, i)
  local item = cache[i]
  if item == nil then
    item = call('LINDEX', key, format('%d', i)) or false
    cache[i] = item
  end
  if item then
    return sunpack(BUCKET, item)
  end
  return nil
end

-- The number of closed buckets, read once per call.
local function closed(key, cache)
  local n = cache.n
  if n == nil then
    n = call('LLEN', key) - 1
    cache.n = n
  end
  return n
end

-- Whether closed bucket i is past the boundary `first` looks for: by time, its ms > x; by total,
-- more than x - 1 permits since the running total `base`. One past the last closed bucket is.
local function past(key, cache, i, by_total, x, base)
  local t, c = bucket(key, cache, i)
  if t == nil then
    return true
  end
  if by_total then
    return between(c, base) >= x
  end
  return t > x
end

-- The first closed bucket from `lo` that is `past` (one past the last closed bucket if none);
-- `past` is false then true along the list. From the front it probes lo, lo+1, then doubles its
-- steps (the steady state's boundary is at the first or second bucket, so that is one or two
-- reads, and no list length is needed); from the back (`hi` = the last closed bucket) it doubles
-- from there. Then it bisects: O(log d) reads, d the distance from that end.
local function first(key, cache, lo, hi, from_back, by_total, x, base)
  local a, b = lo, hi -- the answer lies in a..b+1 (b nil: not known yet)
  local step = 1
  if from_back then
    while a <= b do
      local i = a
      if b - step + 1 > a then
        i = b - step + 1
      end
      if past(key, cache, i, by_total, x, base) then
        b = i - 1
      else
        a = i + 1
        break
      end
      step = step * 2
    end
  else
    if cache[a] == nil and cache[a + 1] == nil then
      -- The first two probes in one read.
      local items = call('LRANGE', key, format('%d', a), format('%d', a + 1))
      cache[a], cache[a + 1] = items[1] or false, items[2] or false
    end
    local grow = false
    while b == nil or a <= b do
      local i = a + step - 1
      if b ~= nil and i > b then
        i = b
      end
      if past(key, cache, i, by_total, x, base) then
        b = i - 1
        break
      end
      a = i + 1
      if grow then
        step = step * 2
      end
      grow = true
    end
  end
  while a <= b do
    local mid = floor((a + b) / 2)
    if past(key, cache, mid, by_total, x, base) then
      b = mid - 1
    else
      a = mid + 1
    end
  end
  return a
end

-- Orders live leases {end, permits} by end.
local function earlier_end(a, b)
  return a[1] < b[1]
end

-- The leases on a window (`<key>:l`, a HASH: instance id -> pack('>ddd', end ms, permits, seq))
-- that still count in a window whose span begins after `edge`: a lease granted at t counts in
-- every span that meets [t, end], so while end > edge. Returns their permits, the live ones as
-- {end, permits} sorted by end (nil if none), the latest live end, and the latest end of any
-- lease in the HASH (0 if none: the key's lease horizon).
local function live_leases(lkey, edge)
  -- HGETALL, not HVALS: the README's ACL rules already allow it.
  local vals = call('HGETALL', lkey)
  if #vals == 0 then
    return 0, nil, nil, 0
  end
  local sum, ends, lmax, hmax = 0, {}, nil, 0
  for i = 2, #vals, 2 do
    local e, k = sunpack(LEASE, vals[i])
    if e > hmax then
      hmax = e
    end
    if e > edge then
      sum = sum + k
      ends[#ends + 1] = {e, k}
      if lmax == nil or e > lmax then
        lmax = e
      end
    end
  end
  if #ends == 0 then
    return 0, nil, nil, hmax
  end
  sort(ends, earlier_end)
  return sum, ends, lmax, hmax
end

-- Rewrites a key in the 40-byte layout (per-bucket counts) into this one. Runs once per key, the
-- first time a new script reads it; keeps the key's TTL. Its lease horizon is not known.
local function upgrade(key, head, window)
  local _, open_t, open_c, oldest = sunpack('>ddddd', head)
  local ttl = call('PTTL', key)
  local items = call('LRANGE', key, '1', '-1')
  local cum = 0
  for i = 1, #items do
    local t, c = sunpack(BUCKET, items[i])
    cum = cum + c
    items[i] = pack(BUCKET, t, cum)
  end
  cum = cum + open_c
  call('DEL', key)
  local header = pack(HEADER, cum, open_t, 0, oldest, 0, window, UNKNOWN)
  call('RPUSH', key, header)
  for i = 1, #items, 500 do
    call('RPUSH', key, unpack_list(items, i, min(i + 499, #items)))
  end
  if ttl > 0 then
    call('PEXPIRE', key, format('%d', ttl))
  end
  return header
end

-- When a denied request fits if `extra` more permits are admitted now and `lrest` lease permits
-- still count: the ms of the bucket whose leaving frees enough (now: only the bucket being made
-- holds what is needed; -MAX_TIME_MS: it fits already; nil: it can never fit while those lease
-- permits count). `e` is the last closed bucket at or before the window's edge (-1: the window
-- is empty), `cum_e` the total through it, `used` the window's bucket permits (leases not
-- counted), `oldest` the oldest closed bucket's ms (0: none).
local function fits_at(key, cache, e, cum_e, cum, open_t, oldest, now, used, lrest, extra, cost, limit)
  local need = used + lrest + extra + cost - limit
  if need <= 0 then
    return -MAX_TIME_MS
  end
  if e < 0 or used < need then
    -- The stored buckets cannot free enough: the one made now must leave too, if that is enough.
    if need <= used + extra then
      return now
    end
    return nil
  end
  if need == 1 then
    -- The bucket right after the edge (every closed bucket holds a permit): no search, and no
    -- read when that is the oldest bucket, whose ms the header holds.
    if e == 0 then
      return oldest ~= 0 and oldest or open_t
    end
    return bucket(key, cache, e + 1) or open_t
  end
  cache = cache or {}
  local back = need > used / 2
  local j = first(key, cache, e + 1, back and closed(key, cache) or nil, back, true, need, cum_e)
  return bucket(key, cache, j) or open_t
end

-- Decides `n` identical requests when no bucket counts, only leases (`lsum` permits, `ends` and
-- `lmax` from `live_leases`): decided from them alone; the key is made on admission. See `decide`.
local function leases_only(out, o, key, head, now, server, window, limit, cost, consume, slack, n, lsum, ends, lmax, horizon)
  local k = 0
  if lsum + cost <= limit then
    k = n
    if consume then
      k = min(n, floor((limit - lsum) / cost))
    end
  end
  local made = consume and k > 0
  if made then
    local rec = record_tail(key, head, true)
    if head then
      call('DEL', key)
    end
    local ttl = max((now > server and now - server or 0) + 2 * (window + slack), record_ms(true) + window + slack)
    call('RPUSH', key, pack(HEADER_REC, k * cost, now, 0, 0, server + ttl, window, horizon, rec))
    call('PEXPIRE', key, format('%d', ttl))
  end
  local reset_after = lmax + window - now
  if made and window > reset_after then
    reset_after = window
  end
  local retry = 0
  if k < n then
    -- Only leases (and the bucket just made) count: the first moment enough of them left.
    local need, free, at = lsum + (made and k * cost or 0) + cost - limit, 0, nil
    for j = 1, #ends do
      free = free + ends[j][2]
      if free >= need then
        at = ends[j][1]
        break
      end
    end
    if at == nil then
      -- The leases and the bucket made now must all leave.
      at = max(lmax, now)
    end
    retry = at + window - now
  end
  for i = 1, n do
    if i <= k then
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, lsum + (consume and i * cost or 0), 0, reset_after, now
    else
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, lsum + (consume and k * cost or 0), retry, reset_after, now
    end
    o = o + 5
  end
  return nil
end

-- Decides `n` identical requests of `cost` permits at `now`, in order, and writes each one's
-- {allowed (0|1), used, retry_after_ms, reset_after_ms, now} to `out` after index `o`. Deciding a run of equal
-- requests at once is what makes a coalesced batch cheap: one read and one write for all of them.
-- `server` is Redis TIME (the TTL's clock); `slack` how long past the longest window the key must
-- outlive its newest bucket. Writes only when `consume` and something is admitted, or when the
-- call brings a longer window than the key has seen. `leases`: whether the key's lease HASH
-- (`<key>:l`, named only when read) counts (false for a refund's bucket): every live lease counts
-- in the window as permits that leave at the lease's end + window. The HASH is read only when the header's lease horizon
-- says a lease may count (or the key is missing): the same answer, without the read in the
-- common case of a key nobody leases. Returns an error reply, or nil.
local function decide(out, o, key, leases, now, server, window, limit, cost, consume, slack, n)
  local head = call('LINDEX', key, '0')
  local cum, open_t, base, oldest, deadline, longest, horizon
  local stale = false -- the header must be rewritten even if nothing else changes
  if head then
    local size = #head
    if size == 56 or size == 72 then
      cum, open_t, base, oldest, deadline, longest, horizon = sunpack(HEADER, head)
    elseif size == 48 then
      cum, open_t, base, oldest, deadline, longest = sunpack(HEADER_48, head)
      horizon, stale = UNKNOWN, true
    elseif size == 40 then
      head = upgrade(key, head, window)
      cum, open_t, base, oldest, deadline, longest, horizon = sunpack(HEADER, head)
    else
      return redis.error_reply('rl: ' .. key .. ' holds something that is not an rl window')
    end
    if open_t > now then
      now = open_t
    end
  else
    -- A key made without reading the HASH (a refund's bucket) must not claim there are no leases.
    horizon = UNKNOWN
  end
  local edge = now - window
  -- The commonest call on a hot key over its limit, decided from the header alone: no lease can
  -- count (the horizon is at or before the edge; "not known", a missing key and the older headers
  -- are later than any edge), the key has seen this window, and every stored bucket is inside it
  -- (so the window holds cum - base). A denial then reads no bucket and writes nothing; its
  -- answer is the one the general path below gives (core/tests/lone_call.rs checks both).
  if horizon <= edge and window <= longest and open_t > edge and (oldest == 0 or oldest > edge) then
    local used = (cum - base) % MOD
    if used + cost > limit then
      local retry_at
      if used + cost - limit == 1 then
        retry_at = oldest ~= 0 and oldest or open_t -- fits_at's first case: no read
      else
        retry_at = fits_at(key, nil, 0, base, cum, open_t, oldest, now, used, 0, 0, cost, limit)
      end
      local retry, reset_after = retry_at + window - now, open_t + window - now
      if n == 1 then
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, used, retry, reset_after, now
        return nil
      end
      for _ = 1, n do
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, used, retry, reset_after, now
        o = o + 5
      end
      return nil
    end
  end
  local grew = head and window > longest
  if grew then
    longest = window
  end
  -- Leases that still count in this window (see `live_leases`), and the last one's end. No lease
  -- in the HASH ends after the horizon, so none counts when the horizon is at or before the edge.
  local lsum, ends, lmax = 0, nil, nil
  if leases and horizon > edge then
    local hmax
    lsum, ends, lmax, hmax = live_leases(key .. ':l', edge)
    if horizon == UNKNOWN then
      -- Learnt: written with the header (once; a missing key gets it when it is made).
      horizon, stale = hmax, true
    end
  end

  if lsum > 0 and (open_t == nil or open_t <= now - longest) then
    return leases_only(out, o, key, head, now, server, window, limit, cost, consume, slack, n, lsum, ends, lmax, horizon)
  end

  if open_t == nil or open_t <= now - longest then
    -- Nothing inside even the longest window: the key starts afresh.
    if not consume then
      for _ = 1, n do
        out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 1, 0, 0, 0, now
        o = o + 5
      end
      return nil
    end
    local k = min(n, floor(limit / cost))
    local rec = record_tail(key, head, k > 0)
    if head then
      call('DEL', key)
    end
    local ttl = max((now > server and now - server or 0) + 2 * (window + slack), record_ms(k > 0) + window + slack)
    call('RPUSH', key, pack(HEADER_REC, k * cost, now, 0, 0, server + ttl, window, horizon, rec))
    call('PEXPIRE', key, format('%d', ttl))
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

  local cache -- closed buckets read, made on the first read (a denial may read none)
  -- e: the last closed bucket at or before `edge` (0 = none); cum_e: the total through it.
  local used, e, cum_e = 0, 0, base
  if open_t > edge then
    if oldest ~= 0 and oldest <= edge then
      -- Near the front when the window is the longest one, near the back for a shorter one.
      local back = edge - oldest > open_t - edge
      cache = {}
      e = first(key, cache, 1, back and closed(key, cache) or nil, back, false, edge) - 1
      if e > 0 then
        local _, c = bucket(key, cache, e)
        cum_e = c
      end
    end
    used = (cum - cum_e) % MOD -- between(), inlined: a call is a measurable part of a denial
  else
    -- The whole window is empty, but the key keeps history for a longer one.
    e = -1
  end

  local k = 0
  if used + lsum + cost <= limit then
    k = n
    if consume then
      k = min(n, floor((limit - used - lsum) / cost))
    end
  end
  local reset_after = 0
  if e >= 0 then
    reset_after = open_t + window - now
  end
  if lmax and lmax + window - now > reset_after then
    reset_after = lmax + window - now
  end
  local retry_at
  if k < n then
    local extra = consume and k * cost or 0
    if ends then
      cache = cache or {} -- shared by the searches below
    end
    if e == 0 and used > 0 and used + lsum + extra + cost - limit == 1 then
      -- fits_at's commonest case, inlined for a lone denial (a call is a measurable part of it):
      -- the bucket right after the edge is the oldest one, whose ms the header holds.
      retry_at = oldest ~= 0 and oldest or open_t
    else
      retry_at = fits_at(key, cache, e, cum_e, cum, open_t, oldest, now, used, lsum, extra, cost, limit)
    end
    if ends then
      -- Leases leave at their end + window, earliest first: the request fits at the first moment
      -- the buckets that left and the leases that left free enough.
      local left = 0
      for j = 1, #ends do
        left = left + ends[j][2]
        local b = fits_at(key, cache, e, cum_e, cum, open_t, oldest, now, used, lsum - left, extra, cost, limit)
        if b ~= nil then
          local at = max(b, ends[j][1])
          if retry_at == nil or at < retry_at then
            retry_at = at
          end
        end
      end
    end
  end
  if consume and k > 0 then
    -- Drop the closed buckets that left the longest window (1..cut).
    cache = cache or {}
    local keep_edge = now - longest
    local cut = 0
    if oldest ~= 0 and oldest <= keep_edge then
      if keep_edge == edge and e >= 0 then
        cut = e
      else
        cut = first(key, cache, 1, nil, false, false, keep_edge) - 1
      end
    end
    local cum_cut = base
    if cut > 0 then
      local _, c = bucket(key, cache, cut)
      cum_cut = c
    end
    if between(cum, cum_cut) + k * cost >= MOD then
      -- The stored totals would stop being exact: keep only this call's window.
      longest = window
      if e > 0 then
        cut, cum_cut = e, cum_e
      elseif e < 0 then
        cut, cum_cut = closed(key, cache), cum
      end
    end
    if cut > 0 then
      oldest = bucket(key, cache, cut + 1) or 0
      -- Drop closed buckets 1..cut; the last dropped slot becomes the header, rewritten below.
      call('LTRIM', key, format('%d', cut), '-1')
      base = cum_cut
    end
    if open_t ~= now then
      call('RPUSH', key, pack(BUCKET, open_t, cum))
      if oldest == 0 then
        oldest = open_t
      end
      open_t = now
    end
    cum = (cum + k * cost) % MOD
    if reset_after < window then
      reset_after = window
    end
    grew = true
  end
  local admitted = consume and k > 0
  if grew then
    -- The TTL (server time) must outlive the newest bucket by the longest window, even when a
    -- client clock ahead of Redis placed that bucket, and a retry record written now by its TTL;
    -- set for the longest window more than that, so it is renewed rarely.
    local ahead = now > server and now - server or 0
    local rec_ms = admitted and memo[13] and memo[12] or 0 -- record_ms(admitted), inlined
    if deadline < server + ahead + longest + slack or deadline < server + rec_ms then
      local ttl = max(ahead + 2 * (longest + slack), rec_ms + longest + slack)
      deadline = server + ttl
      call('PEXPIRE', key, format('%d', ttl))
    end
  end
  if grew or stale then
    call('LSET', key, '0', pack(HEADER_REC, cum, open_t, base, oldest, deadline, longest, horizon, record_tail(key, head, admitted)))
  end
  used = used + lsum
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
      out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5] = 0, u, retry_at + window - now, reset_after, now
    end
    o = o + 5
  end
  return nil
end

-- A decimal integer in [lo, hi], or nil. The pattern rejects what tonumber would let through:
-- 'inf', 'nan', '0x10', '1e3', '1.5', ' 5', '+5', '-5'.
local function int_arg(s, lo, hi)
  if type_(s) ~= 'string' or #s > 16 or not find(s, '^%d+$') then
    return nil
  end
  local n = tonumber_(s)
  if n < lo or n > hi then
    return nil
  end
  return n
end

-- Retries (convention 2's ARGV[5]): which of this call's requests an earlier attempt of theirs
-- already admitted, by that attempt's record (true per such request; nil when none). A record is
-- read with redis.pcall: it is not declared in KEYS (see `Retries` at the top), and a refused or
-- missing one only means the request is decided afresh.
local function retried(key, r, n)
  local done, records = nil, {}
  local head = call('LINDEX', key, '0')
  if head and #head == 72 then
    -- The last lone admission's record: it admitted its one request.
    records[sub(head, 57)] = '1'
  end
  for i = 1, n do
    local off = i * 24 - 23
    local j = sunpack('>d', r, off + 16)
    if j ~= 0 then
      local id = sub(r, off, off + 15)
      local rec = records[id]
      if rec == nil then
        rec = redis.pcall('GET', key .. ':r:' .. id)
        if type_(rec) ~= 'string' then rec = '' end
        records[id] = rec
      end
      if sub(rec, j, j) == '1' then
        done = done or {}
        done[i] = true
      end
    end
  end
  return done
end

-- Calling convention 2 (see the top).
-- A batch's success reply `out` ({0, then 5 numbers per request}) packed for 'rl1P' (see the top).
local function packed_reply(out)
  local n = (#out - 1) / 5
  local parts = {}
  for r = 1, n do
    local o = r * 5 - 4
    parts[r] = pack('>ddddd', out[o + 1], out[o + 2], out[o + 3], out[o + 4], out[o + 5])
  end
  return table.concat(parts)
end

local function native(KEYS, ARGV, packed)
  local key = KEYS[1]
  if key == nil then return {-1, 'key', 0} end
  local nargs = #ARGV
  if nargs ~= 3 and nargs ~= 4 and nargs ~= 5 then return {-1, 'batch', 0} end
  -- A clock argument and a lone request seen last time are taken from `memo`.
  local clock, m, client_now, max_skew = ARGV[2], memo
  if clock == m[3] then
    client_now, max_skew = m[4], m[5]
  else
    local size = #clock
    if size < 16 then return {-1, 'batch', 0} end
    client_now, max_skew = sunpack('>dd', clock)
    -- int_in, inlined (unpacked doubles are never nil)
    if not (max_skew >= 0 and max_skew <= MAX_TIME_MS and max_skew % 1 == 0) then return {-1, 'max_skew_ms', 0} end
    if client_now ~= 0 and not (client_now > 0 and client_now <= MAX_TIME_MS and client_now % 1 == 0) then return {-1, 'client_now_ms', 0} end
    local ttl, ttl_ms, tag = false, 0, false
    if size > 16 then
      tag, ttl = sub(clock, 17, 24), sub(clock, 25)
      ttl_ms = int_arg(ttl, 1, MAX_WINDOW_MS)
      if ttl_ms == nil then return {-1, 'record_ms', 0} end
    end
    m[3], m[4], m[5], m[11], m[12], m[15] = clock, client_now, max_skew, ttl, ttl_ms, tag
  end
  local blob = ARGV[3]
  local consume, windows, limits, costs
  local c1, w1, l1, k1
  local n = 1
  if blob == m[6] then
    c1, w1, l1, k1 = m[7], m[8], m[9], m[10]
  else
    n = #blob / 32
    if n < 1 or n > MAX_BATCH or n % 1 ~= 0 then return {-1, 'batch', 0} end
    -- Every request of the batch is checked before the first write: op (1 acquire, 0 peek),
    -- window, limit, cost. (Checked here, not in a function per request, and int_in inlined: a
    -- function call is a measurable part of a lone call.) The first request is kept in locals, and
    -- only a batch gets tables.
    for i = 1, n do
      local op, w, l, k = sunpack('>dddd', blob, i * 32 - 31)
      if op ~= 0 and op ~= 1 then return {-1, 'op', i} end
      if not (w >= 1 and w <= MAX_WINDOW_MS and w % 1 == 0) then return {-1, 'window_ms', i} end
      if not (l >= 1 and l <= MAX_PERMITS and l % 1 == 0) then return {-1, 'limit', i} end
      if not (k >= 1 and k <= l and k % 1 == 0) then return {-1, 'cost', i} end
      if i == 1 then
        c1, w1, l1, k1 = op == 1, w, l, k
      else
        if i == 2 then
          consume, windows, limits, costs = {c1}, {w1}, {l1}, {k1}
        end
        consume[i], windows[i], limits[i], costs[i] = op == 1, w, l, k
      end
    end
    if n == 1 then
      m[6], m[7], m[8], m[9], m[10] = blob, c1, w1, l1, k1
    end
  end
  -- The call's record (see `Retries`): its name, its TTL (text, as SET takes it) and, on a retry,
  -- which requests an earlier attempt already admitted (`done`, true per such request).
  local call_id, ttl, done, keep = nil, m[11], nil, false
  if nargs >= 4 then
    call_id = ARGV[4]
    local size = #call_id
    if size == 17 and sub(call_id, 17) == '!' then
      call_id, keep = sub(call_id, 1, 16), true
    elseif size ~= 16 then
      return {-1, 'call_id', 0}
    end
    if not ttl then return {-1, 'record_ms', 0} end
    if nargs == 5 then
      local r = ARGV[5]
      if #r ~= n * 24 then return {-1, 'retry', 0} end
      for i = 1, n do
        local j = sunpack('>d', r, i * 24 - 7)
        if not (j >= 0 and j <= MAX_BATCH and j % 1 == 0) then return {-1, 'retry', i} end
      end
      done = retried(key, r, n)
    end
  end
  local now
  local slack = TTL_SLACK_MS
  local server = server_ms()
  if client_now == 0 then
    now = server
  else
    now = client_now
    if abs(now - server) > max_skew then
      return {-2, server}
    end
    -- A bucket made on the client's clock may outlive the server-clock TTL by twice the skew.
    slack = slack + 2 * max_skew
  end
  if n == 1 then
    local out = packed and m[16] or {0, 0, 0, 0, 0, 0} -- sized once
    local again = c1 and done and done[1]
    if call_id and c1 and not again then
      -- Its record is the header's tail (see Retries), written by decide on admission.
      m[13], m[14] = call_id, keep
    end
    local err = decide(out, 1, key, true, now, server, w1, l1, k1, c1 and not again, slack, 1)
    m[13] = false
    if err then return err end
    if again then
      out[2], out[4] = 2, 0
    end
    if packed then
      return pack('>ddddd', out[2], out[3], out[4], out[5], out[6]) -- packed_reply, inlined
    end
    return out
  end
  if done then
    -- Admitted by the earlier attempt: decided as a peek now, answered as admitted below.
    for i = 1, n do
      if done[i] and not consume[i] then
        done[i] = nil -- a peek was never admitted: nothing to answer from a record
      elseif done[i] then
        consume[i] = false
      end
    end
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
    local err = decide(out, #out, key, true, now, server, windows[i], limits[i], costs[i], consume[i], slack, j - i + 1)
    if err then return err end
    i = j + 1
  end
  if call_id then
    -- One byte per request: '1' where this call admitted (consumed) it.
    local marks, any = {}, false
    for r = 1, n do
      if done and done[r] then
        out[r * 5 - 3], out[r * 5 - 1] = 2, 0
        marks[r] = '0'
      elseif consume[r] and out[r * 5 - 3] == 1 then
        marks[r], any = '1', true
      else
        marks[r] = '0'
      end
    end
    if any then
      redis.pcall('SET', key .. ':r:' .. call_id, table.concat(marks), 'PX', ttl)
    end
  end
  if packed then return packed_reply(out) end
  return out
end

-- Writes the key's lease horizon: no lease in its HASH ends later. A missing key needs none (a
-- decision on it reads the HASH).
local function set_horizon(key, horizon)
  local head = call('LINDEX', key, '0')
  if head == false then
    return
  end
  local cum, open_t, base, oldest, deadline, longest, h
  if #head >= 56 then
    cum, open_t, base, oldest, deadline, longest, h = sunpack(HEADER, head)
  else -- 48 bytes (a peek that found nothing in its window does not rewrite the header)
    cum, open_t, base, oldest, deadline, longest = sunpack(HEADER_48, head)
  end
  if h ~= horizon then
    call('LSET', key, '0', pack(HEADER_REC, cum, open_t, base, oldest, deadline, longest, horizon, sub(head, 57)))
  end
end

-- Calling convention 3, leases (rl-core): returns a lease's unused permits and/or takes a new one,
-- in one call. A lease of k permits granted at t for lease_ms counts in every span of the window
-- that meets [t, t + lease_ms] (see `live_leases`), so permits the instance grants from it at any
-- moment of that lifetime never make a span hold more than the limit. A refund of a lease of
-- which `used` permits were granted deletes it and admits `used` permits as a bucket at now,
-- later than every grant: every span from now on that holds one of those grants holds now, so
-- the bucket counts them exactly (a little longer); the rest are free again. A lease that no
-- longer counts in the longest window is only deleted: its grants lie before every future span.
--   KEYS[1]  the limiter's key; the leases live in KEYS[1] .. ':l' (same hash tag, same slot)
--   ARGV[1]  'rl1L'
--   ARGV[2]  pack('>dd', client_now_ms (0 = use Redis TIME), max_skew_ms)
--   ARGV[3]  pack('>dddddddd', window_ms, limit, want, min, lease_ms, seq, old_seq, old_used):
--            seq 0 = take no new lease; old_seq 0 = nothing to return
--   ARGV[4]  the instance id (one lease per instance and key)
--   reply    {0, permits leased (0: none), now_ms, used (the window's count with the new lease),
--            reset_after_ms}; errors as for convention 2
-- The lease is at most a fair share of what is left: (limit - used) / (2 * (holders + 1)),
-- holders being the other instances with a live lease; below `min`, or with MAX_LEASES holders,
-- none is granted and the caller asks per request, so the last permits are decided by Redis.
local function lease(KEYS, ARGV)
  local key = KEYS[1]
  if key == nil then return {-1, 'key', 0} end
  if #ARGV ~= 4 or #ARGV[2] ~= 16 or #ARGV[3] ~= 64 then return {-1, 'batch', 0} end
  local client_now, max_skew = sunpack('>dd', ARGV[2])
  if not int_in(max_skew, 0, MAX_TIME_MS) then return {-1, 'max_skew_ms', 0} end
  if not int_in(client_now, 0, MAX_TIME_MS) then return {-1, 'client_now_ms', 0} end
  local window, limit, want, least, lease_ms, seq, old_seq, old_used = sunpack('>dddddddd', ARGV[3])
  if not int_in(window, 1, MAX_WINDOW_MS) then return {-1, 'window_ms', 1} end
  if not int_in(limit, 1, MAX_PERMITS) then return {-1, 'limit', 1} end
  if not int_in(want, 0, limit) then return {-1, 'want', 1} end
  if not int_in(least, 1, MAX_PERMITS) then return {-1, 'min', 1} end
  if not int_in(lease_ms, 1, MAX_WINDOW_MS) then return {-1, 'lease_ms', 1} end
  if not int_in(seq, 0, MAX_TIME_MS) then return {-1, 'seq', 1} end
  if not int_in(old_seq, 0, MAX_TIME_MS) then return {-1, 'old_seq', 1} end
  if not int_in(old_used, 0, MAX_PERMITS) then return {-1, 'old_used', 1} end
  local id = ARGV[4]
  if #id == 0 or #id > 256 then return {-1, 'instance', 1} end
  local lkey = key .. ':l'
  local slack = TTL_SLACK_MS
  local server = server_ms()
  local now = server
  if client_now ~= 0 then
    now = client_now
    if abs(now - server) > max_skew then
      return {-2, server}
    end
    slack = slack + 2 * max_skew
  end
  local longest = window
  local head = call('LINDEX', key, '0')
  if head and (#head == 56 or #head == 48 or #head == 72) then
    local _, open_t, _, _, _, l = sunpack(HEADER_48, head)
    if open_t > now then
      now = open_t
    end
    if l > longest then
      longest = l
    end
  end
  -- Every lease that counts in no window any more is deleted; the others are counted.
  local all = call('HGETALL', lkey)
  local holders, mine = 0, nil
  local horizon = 0 -- the latest end of the other leases kept
  for i = 1, #all, 2 do
    local e, k, s = sunpack(LEASE, all[i + 1])
    if e <= now - longest then
      call('HDEL', lkey, all[i])
    elseif all[i] == id then
      mine = {e, k, s}
    else
      holders = holders + 1
      if e > horizon then
        horizon = e
      end
    end
  end
  if old_seq ~= 0 and mine and mine[3] == old_seq then
    call('HDEL', lkey, id)
    local u = min(old_used, mine[2])
    if u > 0 then
      local tmp = {}
      local err = decide(tmp, 0, key, false, now, server, window, MAX_PERMITS, u, true, slack, 1)
      if err then return err end
      now = tmp[5]
    end
    mine = nil
  end
  local out = {}
  local err = decide(out, 0, key, true, now, server, window, limit, 1, false, slack, 1)
  if err then return err end
  now = out[5]
  local used, reset_after = out[2], out[4]
  local k = 0
  if seq ~= 0 and mine == nil and holders < MAX_LEASES and used < limit then
    k = min(want, floor((limit - used) / (2 * (holders + 1))))
    if k < least then
      k = 0
    end
  end
  if k > 0 then
    local e = now + lease_ms
    call('HSET', lkey, id, pack(LEASE, e, k, seq))
    local ttl = (e > server and e - server or 0) + longest + slack
    if call('PTTL', lkey) < ttl then
      call('PEXPIRE', lkey, format('%d', ttl))
    end
    used = used + k
    if e + window - now > reset_after then
      reset_after = e + window - now
    end
    mine = {e}
  end
  -- The key's lease horizon is now exactly the latest end left in the HASH (see `decide`).
  if mine and mine[1] > horizon then
    horizon = mine[1]
  end
  set_horizon(key, horizon)
  return {0, k, now, used, reset_after}
end

-- Calling convention 'rl1C', composite (see the top). Each request in turn: phase 1 decides every
-- rule like a peek of its cost (live leases counted, as for any decision); only if every rule fits
-- does phase 2 admit the cost once per distinct key of the request, by deciding that key's
-- longest-window rule with consume, so the key keeps history for every window its rules count.
-- Nothing changes between the phases (one script, one instant), so phase 2 admits what phase 1
-- allowed, and the next request sees what this one admitted. A rule's `allowed` says whether it
-- alone would admit; a request's retry is the latest of its denying rules' retries (each one, once
-- met, stays met while nothing else is admitted). Phase 1 writes nothing but a longer window than
-- a key has seen (as a peek does); every argument of every request is checked before the first
-- write.
local function composite(KEYS, ARGV)
  local nkeys, nargs = #KEYS, #ARGV
  if (nargs ~= 3 and nargs ~= 4) or #ARGV[2] ~= 16 then return {-1, 'batch', 0} end
  -- One request (no ARGV[4]) or a batch: the bounds on keys and rules are a request's or a batch's.
  local most = nargs == 4 and MAX_BATCH or MAX_RULES
  if nkeys < 1 or nkeys > most then return {-1, 'key', 0} end
  local client_now, max_skew = sunpack('>dd', ARGV[2])
  if not int_in(max_skew, 0, MAX_TIME_MS) then return {-1, 'max_skew_ms', 0} end
  if not int_in(client_now, 0, MAX_TIME_MS) then return {-1, 'client_now_ms', 0} end
  local blob = ARGV[3]
  local n = #blob / 32
  if n < 1 or n > most or n ~= floor(n) then return {-1, 'rules', 0} end
  -- Each request's number of rules, summing to n.
  local sizes, m = nil, 1
  if nargs == 4 then
    local s = ARGV[4]
    m = #s / 8
    if m < 1 or m > MAX_BATCH or m ~= floor(m) then return {-1, 'requests', 0} end
    sizes = {}
    local total = 0
    for r = 1, m do
      local c = sunpack('>d', s, r * 8 - 7)
      if not int_in(c, 1, MAX_RULES) then return {-1, 'requests', r} end
      sizes[r], total = c, total + c
    end
    if total ~= n then return {-1, 'requests', 0} end
  elseif n > MAX_RULES then
    return {-1, 'rules', 0}
  else
    sizes = {n}
  end
  local seen = {}
  for k = 1, nkeys do
    if seen[KEYS[k]] ~= nil then return {-1, 'key', 0} end
    seen[KEYS[k]] = false -- true once a rule uses it
  end
  -- Per rule: key index, window, limit, cost. Per request, per distinct key: its cost (`owner`
  -- says which request set `key_cost`) and the rule with its longest window, the one phase 2
  -- admits by; `admit` lists those rules request after request, `admit_end[r]` where r's end.
  local idx, windows, limits, costs = {}, {}, {}, {}
  local key_cost, owner, place, admit, admit_end = {}, {}, {}, {}, {}
  local i = 0
  for r = 1, m do
    for _ = 1, sizes[r] do
      i = i + 1
      local k, w, l, c = sunpack('>dddd', blob, i * 32 - 31)
      if not int_in(k, 1, nkeys) then return {-1, 'key', i} end
      if not int_in(w, 1, MAX_WINDOW_MS) then return {-1, 'window_ms', i} end
      if not int_in(l, 1, MAX_PERMITS) then return {-1, 'limit', i} end
      if not int_in(c, 1, l) then return {-1, 'cost', i} end
      if owner[k] == r then
        if key_cost[k] ~= c then return {-1, 'cost', i} end
        if w > windows[admit[place[k]]] then admit[place[k]] = i end
      else
        owner[k], key_cost[k] = r, c
        admit[#admit + 1] = i
        place[k] = #admit
      end
      seen[KEYS[k]] = true
      idx[i], windows[i], limits[i], costs[i] = k, w, l, c
    end
    admit_end[r] = #admit
  end
  for k = 1, nkeys do
    if not seen[KEYS[k]] then return {-1, 'key', 0} end
  end
  local slack = TTL_SLACK_MS
  local server = server_ms()
  local now = server
  if client_now ~= 0 then
    now = client_now
    if abs(now - server) > max_skew then
      return {-2, server}
    end
    slack = slack + 2 * max_skew
  end
  -- A batch's keys are checked before anything is decided. A key holding another program's value
  -- would otherwise fail the call part-way: after the requests before it were admitted in Redis,
  -- and for every request of the call. {-3, k, ...}: the keys (their places in KEYS) that are not
  -- rl windows; nothing was written, and the client decides the requests without such a key
  -- again (and fails the others, naming the key).
  if m > 1 then
    local bad
    for k = 1, nkeys do
      local h = redis.pcall('LINDEX', KEYS[k], '0')
      if type_(h) == 'table' or (h and not HEADER_SIZES[#h]) then
        bad = bad or {-3}
        bad[#bad + 1] = k
      end
    end
    if bad then return bad end
  end
  local out, tmp = {0}, {0, 0, 0, 0, 0}
  local head, first, a = 1, 1, 1
  for r = 1, m do
    local last = first + sizes[r] - 1
    out[head + 1], out[head + 2], out[head + 3] = 1, 0, now
    local allowed, retry, latest = true, 0, now
    for q = first, last do
      local o = head + 3 + (q - first) * 5
      local err = decide(out, o, KEYS[idx[q]], true, now, server, windows[q], limits[q], costs[q], false, slack, 1)
      if err then return err end
      if out[o + 1] == 0 then
        allowed = false
        if out[o + 3] > retry then retry = out[o + 3] end
      end
      if out[o + 5] > latest then latest = out[o + 5] end
    end
    out[head + 3] = latest
    if allowed then
      for j = a, admit_end[r] do
        local q = admit[j]
        local key = KEYS[idx[q]]
        local err = decide(tmp, 0, key, true, now, server, windows[q], limits[q], costs[q], true, slack, 1)
        if err then return err end
        if tmp[1] ~= 1 then
          return redis.error_reply('rl: composite admission on ' .. key .. ' denied after its check')
        end
      end
      for q = first, last do
        local o = head + 3 + (q - first) * 5
        out[o + 2] = out[o + 2] + costs[q]
        if out[o + 4] < windows[q] then out[o + 4] = windows[q] end
      end
    else
      out[head + 1], out[head + 2] = 0, retry
    end
    a = admit_end[r] + 1
    head = head + 3 + sizes[r] * 5
    first = last + 1
  end
  return out
end

-- Calling convention 1, the seed design's (see the top).
local function design(KEYS, ARGV)
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
  local server = server_ms()
  local err = decide(out, 0, KEYS[1], true, server, server, window, max_req, 1, true, TTL_SLACK_MS, 1)
  if err then return err end
  return {out[1], max_req - out[2], out[2], 'normal'}
end

-- Every convention. A Functions library registers this function (its top level above runs once,
-- at FUNCTION LOAD; see core/src/backend/script.rs); EVAL runs the whole file every call.
local function entry(KEYS, ARGV)
  if call == nil then
    bind()
  end
  memo[13] = false -- no record but a lone native call's (it sets it), even after an error
  local conv = ARGV[1]
  if conv == 'rl1P' then
    return native(KEYS, ARGV, true)
  elseif conv == 'rl1' then
    return native(KEYS, ARGV, false)
  elseif conv == 'rl1L' then
    return lease(KEYS, ARGV)
  elseif conv == 'rl1C' then
    return composite(KEYS, ARGV)
  end
  return design(KEYS, ARGV)
end
-- rl: the lines below run only under EVAL/EVALSHA; a Functions library ends above them.
return entry(KEYS, ARGV)
