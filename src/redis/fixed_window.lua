-- Fixed window: windows [kW, (k+1)W) of the server's Unix time in microseconds; admit n iff
-- count_k + n <= L. One string key "k:count", expiring at the end of window k.
-- KEYS[1]: the state key.  ARGV: op ('check'), L, W (us), n.
-- Reply: {now, status (1 allowed, 0 denied, 2 exceeds the limit), remaining, retry_after or -1,
--         reset_after}.
local key = KEYS[1]
local L = tonumber(ARGV[2])
local W = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = now_us()
local k = idiv(now, W)
local window_end = (k + 1) * W
local reset = window_end - now

local count = 0
local v = redis.call('GET', key)
if v then
  local sk, sc = string.match(v, '^(%d+):(%d+)$')
  if tonumber(sk) == k then
    count = tonumber(sc)
  end
end

if n == 0 then
  return {now, 1, L - count, -1, reset}
end
if n > L then
  return {now, 2, L - count, -1, reset}
end
if count + n <= L then
  count = count + n
  redis.call('SET', key, fmt(k) .. ':' .. fmt(count), 'PXAT', ceil_ms(window_end))
  return {now, 1, L - count, -1, reset}
end
return {now, 0, L - count, reset, reset}
