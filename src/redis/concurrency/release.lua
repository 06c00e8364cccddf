-- release: ARGV = {'release', token, nonce, n}.
-- Reply {now, 1} if the lease was held and its permits are back, else {now, 0}: it had ended
-- (expired, its permits already back) or was released before. Either way a no-op the second time.
local now = now_us()
local held = purge(now)
if redis.call('ZREM', K, member_at(2)) == 0 then
  return {now, 0}
end
redis.call('ZADD', K, -(held - tonumber(ARGV[4])), '=')
expire(book('#'))
return {now, 1}
