-- Weighted sliding-window counter (two fixed windows). With k = floor(now / W), e = now - kW,
-- cur = the count of window k and prev = the count of window k-1: admit n iff
-- prev*(W - e) + (cur + n)*W <= L*W, in exact integer arithmetic (mul_cmp, muldiv).
-- One string key "k:cur:prev", expiring when neither count weighs anything any more.
-- KEYS[1]: the state key.  ARGV: op ('check'), L, W (us), n.
-- Reply: {now, status (1 allowed, 0 denied, 2 exceeds the limit), remaining, retry_after or -1,
--         reset_after}.
local key = KEYS[1]
local L = tonumber(ARGV[2])
local W = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local now = now_us()
local k = idiv(now, W)
local e = now - k * W

local cur, prev = 0, 0
local v = redis.call('GET', key)
if v then
  local sk, sc, sp = string.match(v, '^(%d+):(%d+):(%d+)$')
  sk = tonumber(sk)
  if sk == k then
    cur = tonumber(sc)
    prev = tonumber(sp)
  elseif sk == k - 1 then
    prev = tonumber(sc)
  end
end

-- Permits grantable right now on top of cur: the largest m with
-- prev*(W - e) + (cur + m)*W <= L*W.
local function remaining()
  local r = L - cur - muldiv_ceil(prev, W - e, W)
  if r < 0 then
    return 0
  end
  return r
end

-- Until the full limit is grantable again: both weighted counts must have gone.
local function reset()
  if cur > 0 then
    return 2 * W - e
  elseif prev > 0 then
    return W - e
  end
  return 0
end

if n == 0 then
  return {now, 1, remaining(), -1, reset()}
end
if n > L then
  return {now, 2, remaining(), -1, reset()}
end
if cur + n <= L and mul_cmp(prev, W - e, L - cur - n, W) <= 0 then
  cur = cur + n
  local expire_at = (k + 2) * W
  redis.call('SET', key, fmt(k) .. ':' .. fmt(cur) .. ':' .. fmt(prev), 'PXAT',
    ceil_ms(expire_at))
  return {now, 1, remaining(), -1, reset()}
end

-- Denied: the earliest time the same request fits, with no other admissions meanwhile.
local retry
if cur + n <= L then
  -- Later in this window: the least e' with prev*(W - e') <= (L - cur - n)*W.
  retry = W - muldiv(L - cur - n, W, prev) - e
else
  -- In the next window (prev' = cur, cur' = 0): the least e'' with cur*(W - e'') <= (L - n)*W.
  retry = W - e + W - muldiv(L - n, W, cur)
end
return {now, 0, remaining(), retry, reset()}
