-- tollgate semaphore: what every semaphore script shares (after prelude.lua).
-- One key per semaphore key, a sorted set (one key: cluster-safe whatever the user's key is):
--   '<token>:<nonce>:<n>'  a lease of n permits, scored by its expiry (server µs, > 0);
--   '#'                    scored -(the last fencing token granted);
--   '=' (absent if none)   scored -(the permits held by the leases in the set).
-- Bookkeeping scores are <= 0 and every expiry is > 0, so '(0' .. now selects leases only.
-- A lease is held while now < expiry.
local K = KEYS[1]

-- The magnitude of a bookkeeping member's score (0 when absent).
local function book(member)
  local s = redis.call('ZSCORE', K, member)
  if s then
    return -tonumber(s)
  end
  return 0
end

-- Drops the leases that ended at or before `now`, gives their permits back, and returns the
-- permits still held.
local function purge(now)
  local held = book('=')
  local ended = redis.call('ZRANGEBYSCORE', K, '(0', now)
  if #ended > 0 then
    for _, m in ipairs(ended) do
      held = held - tonumber(string.match(m, ':(%d+)$'))
    end
    redis.call('ZREMRANGEBYSCORE', K, '(0', now)
    redis.call('ZADD', K, -held, '=')
  end
  return held
end

-- The key lives until its last lease ends, and at least until the server's clock passes the
-- last token: a token is max(last + 1, now + 1), so once the key (and '#') is gone, the next
-- token is still above every token granted before.
local function expire(last)
  local top = redis.call('ZRANGE', K, -1, -1, 'WITHSCORES')
  local until_us = last
  if top[2] and tonumber(top[2]) > until_us then
    until_us = tonumber(top[2])
  end
  redis.call('PEXPIREAT', K, ceil_ms(until_us))
end

-- The lease member named by ARGV[first], ARGV[first + 1], ARGV[first + 2] (token, nonce,
-- permits), in the decimal form the client received and acquire.lua wrote.
local function member_at(first)
  return ARGV[first] .. ':' .. ARGV[first + 1] .. ':' .. ARGV[first + 2]
end
