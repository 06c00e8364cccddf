-- Sliding window of k sub-windows: the window W split into k sub-windows of g = W / k (whole us,
-- aligned to the Unix epoch on the server's clock); admit n iff the permits of the current
-- sub-window and the k - 1 before it, plus n, are <= L.
-- One string key "s:c1:c2:...:cj": s is the index (time / g) of the newest sub-window holding
-- permits, ci the count of sub-window s - i + 1 (c1 > 0, empty sub-windows between kept as 0,
-- empty ones at the old end dropped, j <= k). It expires when sub-window s leaves the window, at
-- (s + k) * g. A denial and a peek only read.
-- As in process, a clock that stepped back behind sub-window s decides at s's start: time never
-- runs backwards within a key, so a clock step never over-admits.
-- KEYS[1]: the state key.  ARGV: op ('check'), L, W (us), n, k (k divides W: checked by the
-- client).
-- Reply: {now, status (1 allowed, 0 denied, 2 exceeds the limit), remaining, retry_after or -1,
--         reset_after}.
local key = KEYS[1]
local L = tonumber(ARGV[2])
local W = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local k = tonumber(ARGV[5])
local g = W / k
local now = now_us()

local s = nil
local counts = {}
local v = redis.call('GET', key)
if v then
  for x in string.gmatch(v, '%d+') do
    if s == nil then
      s = tonumber(x)
    elseif #counts < k then
      counts[#counts + 1] = tonumber(x)
    end
  end
end

local at = now
if s ~= nil and s * g > now then
  at = s * g
end
local cur = idiv(at, g)

-- Sub-window s - i + 1 still counts iff it is at least cur - k + 1: the first `live` counts.
local live = 0
if s ~= nil then
  live = math.min(#counts, s - cur + k)
  if live < 0 then
    live = 0
  end
end
local total = 0
for i = 1, live do
  total = total + counts[i]
end

local remaining = L - total
if remaining < 0 then
  remaining = 0
end

-- Until the newest counted sub-window leaves (the key holds nothing counted any more).
local function reset()
  if total > 0 then
    return (s + k) * g - now
  end
  return 0
end

if n == 0 then
  return {now, 1, remaining, -1, reset()}
end
if n > L then
  return {now, 2, remaining, -1, reset()}
end
if total + n <= L then
  -- The current sub-window first, then empty ones back to s, then the live counts.
  local kept = {}
  if live > 0 and cur == s then
    kept[1] = counts[1] + n
    for i = 2, live do
      kept[i] = counts[i]
    end
  else
    kept[1] = n
    if live > 0 then
      for _ = 1, cur - s - 1 do
        kept[#kept + 1] = 0
      end
      for i = 1, live do
        kept[#kept + 1] = counts[i]
      end
    end
  end
  while #kept > 1 and kept[#kept] == 0 do
    kept[#kept] = nil
  end
  local parts = {fmt(cur)}
  for i = 1, #kept do
    parts[i + 1] = fmt(kept[i])
  end
  s = cur
  total = total + n
  redis.call('SET', key, table.concat(parts, ':'), 'PXAT', ceil_ms((s + k) * g))
  return {now, 1, L - total, -1, reset()}
end

-- Denied: until enough of the oldest sub-windows have left for n to fit (sub-window s - i + 1
-- leaves at (s - i + 1) * g + W).
local left = total
local retry_at = at
for i = live, 1, -1 do
  left = left - counts[i]
  retry_at = (s - i + 1) * g + W
  if left + n <= L then
    break
  end
end
return {now, 0, remaining, retry_at - now, reset()}
