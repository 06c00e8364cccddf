-- renew: ARGV = {'renew', token, nonce, n, ttl_us}.
-- Reply {now, 1, new expiry} if the lease was still held, else {now, 0, 0}: a lease that ended
-- stays ended (its permits may be someone else's by now).
local now = now_us()
purge(now)
local member = member_at(2)
if not redis.call('ZSCORE', K, member) then
  return {now, 0, 0}
end
local expiry = now + tonumber(ARGV[5])
redis.call('ZADD', K, 'XX', 'GT', expiry, member)
-- Read before the expiry is set, which may end the key at once (prelude.lua, ceil_ms).
expiry = tonumber(redis.call('ZSCORE', K, member))
expire(book('#'))
return {now, 1, expiry}
