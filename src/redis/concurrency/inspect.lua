-- inspect: ARGV = {'inspect', token} (token 0: none).
-- Reply {now, held, last token (0 if the key is gone), token held (0/1), its expiry or 0}.
-- Finding a token reads every live lease: O(leases), at most the limit.
local now = now_us()
local held = purge(now)
local found, expiry = 0, 0
if ARGV[2] ~= '0' then
  local prefix = ARGV[2] .. ':'
  local live = redis.call('ZRANGEBYSCORE', K, '(0', '+inf', 'WITHSCORES')
  for i = 1, #live, 2 do
    if string.sub(live[i], 1, #prefix) == prefix then
      found, expiry = 1, tonumber(live[i + 1])
      break
    end
  end
end
return {now, held, book('#'), found, expiry}
