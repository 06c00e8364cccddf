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

-- Validates every member and score of the key before anything is written (a script is not
-- rolled back): what the scripts write and nothing else, else foreign() and nothing changes.
-- Reads every member: O(leases), as many as are held at most (each holds a permit, or none).
--   '#' scored -(a token in 1 .. 2^53 - 1);
--   '=' scored -(the permits held, at most 2^51), equal to the sum of the leases' permits;
--   leases '<token>:<nonce>:<n>' as acquire.lua writes them (a token no later than '#', the
--   nonce a client sends, 0 <= n <= 2^51), scored by an expiry in 1 .. now + 2^51 (a lease
--   is at most 2^51 us long): the key's expiry, the latest of them, stays bounded.
-- A key that exists has '#' and '=' (acquire writes them with the first lease).
local function validate(now)
  local all = redis.call('ZRANGE', K, 0, -1, 'WITHSCORES')
  if #all == 0 then
    return
  end
  local what = 'a semaphore'
  local most = 2251799813685248
  local last, held, sum, top = nil, nil, 0, 0
  for i = 1, #all, 2 do
    local m, score = all[i], all[i + 1]
    if m == '#' then
      last = -whole_score(score, -9007199254740991, -1, what)
    elseif m == '=' then
      held = -whole_score(score, -most, 0, what)
    else
      local t, nonce, n = string.match(m, '^(%d+):(%d+):(%d+)$')
      t = whole(t, 1, 9007199254740991, what)
      -- The nonce: a non-negative i64 in decimal, as the client formats it.
      if nonce == nil or #nonce > 19 or nonce ~= '0' and not string.find(nonce, '^[1-9]') or
          #nonce == 19 and nonce > '9223372036854775807' then
        foreign(what)
      end
      sum = sum + whole(n, 0, most, what)
      whole_score(score, 1, now + most, what)
      top = math.max(top, t)
    end
  end
  if last == nil or held == nil or held ~= sum or top > last then
    foreign(what)
  end
end

-- Drops the leases that ended at or before `now`, gives their permits back, and returns the
-- permits still held. Validates the key first (every script starts here).
local function purge(now)
  validate(now)
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
