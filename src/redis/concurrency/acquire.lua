-- acquire: ARGV = {'acquire', limit, n, ttl_us, nonce}.
-- Reply {now, status, token, expiry or wait, held}: status 1 granted (token, the lease's
-- expiry); 0 busy (the time until the first lease ends, a hint: it may be renewed or released
-- earlier); 2 never (n above the limit).
local limit = tonumber(ARGV[2])
local n = tonumber(ARGV[3])
local ttl = tonumber(ARGV[4])
local now = now_us()
local held = purge(now)
if n > limit then
  return {now, 2, 0, 0, held}
end
-- n = 0 takes nothing and is never refused (the method grid's rule), even above a lowered limit.
if n > 0 and held + n > limit then
  local first = redis.call('ZRANGEBYSCORE', K, '(0', '+inf', 'WITHSCORES', 'LIMIT', 0, 1)
  local wait = 0
  if first[2] then
    wait = tonumber(first[2]) - now
  end
  return {now, 0, 0, wait, held}
end
local token = math.max(book('#') + 1, now + 1)
local expiry = now + ttl
held = held + n
redis.call('ZADD', K, -token, '#', -held, '=', expiry, fmt(token) .. ':' .. ARGV[5] .. ':' .. ARGV[3])
expire(token)
return {now, 1, token, expiry, held}
