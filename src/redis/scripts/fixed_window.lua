-- Fixed window: windows [kW, (k+1)W) of the server's Unix time in microseconds; admit n iff
-- count_k + n <= L. One string key "k:count", expiring at the end of window k. A stored window
-- later than now's (a block's) is decided in, as in process.
-- KEYS, ARGV, ops and reply: window_args (prelude.lua); the adjust ops make the change the
-- in-process fixed window makes (src/algorithm/fixed_window.rs, `adjust`), with `most` its full
-- count.
--
-- A negative L: a named state (state_name), "L,W,k:count", the quota that wrote it first, so
-- that a process under another quota reads it. Under another L the count carries as is (the
-- window is the same). Under another W the count carries while the stored window lasts, into
-- the window of W that holds the stored window's end (decided in it as a block's window is):
-- no permit is released earlier than the quota that counted it would release it.
local key, op, L, W, n = window_args()
local named, head
L, named, head = named_limit(L, W)
local now = now_us()
local k = idiv(now, W)

local count = 0
local v = redis.call('GET', key)
local W0 = W
if v and named then
  local _
  _, W0, v = named_head(v, 'a named fixed window')
end
if v then
  -- Only what this script writes (validated before anything is written): a window no later
  -- than the end of time's, a count of 1 to 2^51 (a window counting nothing is deleted).
  local a, c = nil, nil
  if #v <= 33 then
    a, c = string.match(v, '^(%d+):(%d+)$')
  end
  local sk = whole(a, 0, idiv(MAX_US, W0), 'a fixed window')
  local sc = whole(c, 1, 2251799813685248, 'a fixed window')
  if W0 ~= W then
    -- Below 2^53: sk * W0 <= MAX_US.
    local stop = (sk + 1) * W0
    if stop > now then
      k = math.max(k, idiv(stop - 1, W))
      count = sc
    end
  elseif sk >= k then
    k = sk
    count = sc
  end
end

if op == 'reset' then
  return {redis.call('DEL', key)}
end

local cur = idiv(now, W)
if op == 'take' then
  -- A local batch: up to n permits of the current window, however many it has left (none
  -- in a later window a block counts). Reply {now, g, the window's end}.
  local g = 0
  if count == 0 or k == cur then
    g = math.max(math.min(n, L - count), 0)
  end
  if g > 0 then
    redis.call('SET', key, head .. fmt(cur) .. ':' .. fmt(count + g), 'PXAT', ceil_ms((cur + 1) * W))
  end
  return {now, g, (cur + 1) * W}
elseif op == 'give' then
  -- A local batch's unused n permits, taken in window ARGV[7]: given back only while that
  -- window is the current one (a later window counts from zero anyway). {now, 1 or 0}.
  local w = tonumber(ARGV[7])
  if count == 0 or k ~= cur or w ~= cur then
    return {now, 0}
  end
  count = math.max(count - n, 0)
  if count > 0 then
    redis.call('SET', key, head .. fmt(k) .. ':' .. fmt(count), 'PXAT', ceil_ms((k + 1) * W))
  else
    redis.call('DEL', key)
  end
  return {now, 1}
end

if op ~= 'check' then
  local most = tonumber(ARGV[6])
  local changed = false
  if op == 'block' and n > 0 then
    k = math.max(k, block_window(now, n, W))
    count = most
    changed = true
  elseif op == 'penalize' and n > 0 then
    count = math.min(count + n, most)
    changed = true
  elseif op == 'reward' and count > 0 then
    count = math.max(count - n, 0)
    changed = true
  end
  if changed then
    if count > 0 then
      redis.call('SET', key, head .. fmt(k) .. ':' .. fmt(count), 'PXAT', ceil_ms((k + 1) * W))
    else
      redis.call('DEL', key)
    end
  end
  n = 1
end

if count == 0 then
  k = idiv(now, W)
end
local reset = (k + 1) * W - now
local remaining = math.max(L - count, 0)

if n == 0 or op ~= 'check' and count + n <= L then
  return {now, 1, remaining, -1, reset}
end
if n > L then
  return {now, 2, remaining, -1, reset}
end
if count + n <= L then
  count = count + n
  redis.call('SET', key, head .. fmt(k) .. ':' .. fmt(count), 'PXAT', ceil_ms((k + 1) * W))
  return {now, 1, L - count, -1, reset}
end
return {now, 0, remaining, reset, reset}
