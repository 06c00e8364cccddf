-- Sliding log (exact): admit n iff the permits stamped in (now - W, now] plus n are <= L.
-- One sorted set per key: one member per permit, scored by its stamp (us); members are unique
-- ("stamp:sequence"). Entries stamped after now (the server clock stepped back) keep counting,
-- so a clock step never over-admits. A denial and a peek only read.
-- KEYS[1]: the sorted set.  ARGV: op ('check'), L, W (us), n.
-- Reply: {now, status (1 allowed, 0 denied, 2 exceeds the limit), remaining, retry_after or -1,
--         reset_after}.
local key = KEYS[1]
local L = tonumber(ARGV[2])
local W = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = now_us()
local cutoff = now - W

local expired = redis.call('ZCOUNT', key, '-inf', fmt(cutoff))
local count = redis.call('ZCARD', key) - expired
local newest = 0
if count > 0 then
  newest = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
end

-- Until every entry has left the window.
local function reset()
  if count > 0 then
    return newest + W - now
  end
  return 0
end

if n == 0 then
  return {now, 1, L - count, -1, reset()}
end
if n > L then
  return {now, 2, L - count, -1, reset()}
end
if count + n <= L then
  if expired > 0 then
    redis.call('ZREMRANGEBYSCORE', key, '-inf', fmt(cutoff))
  end
  local stamp = fmt(now)
  local batch = {}
  for i = 1, n do
    batch[#batch + 1] = stamp
    batch[#batch + 1] = stamp .. ':' .. fmt(count + i)
    if #batch >= 1000 or i == n then
      redis.call('ZADD', key, 'NX', unpack(batch))
      batch = {}
    end
  end
  -- A member can only exist already if the clock stepped back onto an old stamp: add fresh
  -- ones until all n are in (bounded: at most the set's size of collisions).
  local want = count + n
  local seq = count + n
  while redis.call('ZCARD', key) < want do
    seq = seq + 1
    redis.call('ZADD', key, 'NX', stamp, stamp .. ':' .. fmt(seq))
  end
  count = want
  newest = math.max(newest, now)
  redis.call('PEXPIREAT', key, ceil_ms(newest + W))
  return {now, 1, L - count, -1, reset()}
end

-- Denied: wait until the oldest (count + n - L) live entries have left; the last of them is
-- at rank expired + count + n - L - 1 in stamp order.
local rank = expired + count + n - L - 1
local oldest = tonumber(redis.call('ZRANGE', key, rank, rank, 'WITHSCORES')[2])
return {now, 0, L - count, oldest + W - now, reset()}
