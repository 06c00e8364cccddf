-- Weighted sliding-window counter (two fixed windows). With k the window in force (now's, or a
-- later one a block stored: decided in, as in process), start = kW, e = now - start (0 before
-- the start), cur = the count of window k and prev = the count of window k-1: admit n iff
-- prev*(W - e) + (cur + n)*W <= L*W, in exact integer arithmetic (mul_cmp, muldiv).
-- One string key "k:cur:prev", expiring when neither count weighs anything any more.
-- KEYS, ARGV, ops and reply: window_args (prelude.lua); the adjust ops make the change the
-- in-process weighted window makes (src/algorithm/weighted.rs, `adjust`), counts saturating at
-- `most`.
--
-- A negative L: a named state (state_name), "L,W,k:cur:prev", the quota that wrote it first.
-- Under another L the counts carry as they are (the windows are the same). Under another W
-- each count moves to the window of W whose end is at least as late as the stored count's
-- full weight ends and whose weight reaches zero no earlier: at any instant each permit
-- weighs at least what it weighed under the quota that counted it (moved later only ever
-- refuses).
local key, op, L, W, n = window_args()
local named, head
L, named, head = named_limit(L, W)
local now = now_us()
local k = idiv(now, W)

local sk = nil
local cur, prev = 0, 0
local v = redis.call('GET', key)
local W0 = W
if v and named then
  local _
  _, W0, v = named_head(v, 'a named weighted window')
end
if v then
  -- Only what this script writes (validated before anything is written): a window no later
  -- than the end of time's, counts up to 2^51, not both 0 (such a state is deleted).
  local a, sc, sp = nil, nil, nil
  if #v <= 50 then
    a, sc, sp = string.match(v, '^(%d+):(%d+):(%d+)$')
  end
  sk = whole(a, 0, idiv(MAX_US, W0), 'a weighted window')
  cur = whole(sc, 0, 2251799813685248, 'a weighted window')
  prev = whole(sp, 0, 2251799813685248, 'a weighted window')
  if cur + prev == 0 then
    foreign('a weighted window')
  end
  if W0 ~= W then
    -- A count of the writer's window j weighs fully until (j + 1) * W0 and nothing from
    -- (j + 2) * W0: in the window of W that ends at or after (j + 1) * W0 + max(W0 - W, 0),
    -- it weighs at least as much at every instant. Below 2^53: (j + 1) * W0 <= MAX_US + W0.
    local late = math.max(W0 - W, 0)
    local kc = math.min(idiv((sk + 1) * W0 + late - 1, W), idiv(MAX_US, W))
    local kp = idiv(math.max(sk * W0 + late, 1) - 1, W)
    if kp == kc then
      cur, prev = math.min(cur + prev, 2251799813685248), 0
    end
    -- An older window's count moves up to the one before (later: it weighs more).
    sk = kc
  end
end

if op == 'reset' then
  return {redis.call('DEL', key)}
end

-- The stored state seen from window `to` (rolled forward if that is later).
local function roll(to)
  if sk == nil then
    sk, cur, prev = to, 0, 0
  elseif sk + 1 == to then
    sk, prev, cur = to, cur, 0
  elseif sk < to then
    sk, cur, prev = to, 0, 0
  end
end

if op ~= 'check' then
  local most = tonumber(ARGV[6])
  local changed = true
  if op == 'block' and n > 0 then
    roll(math.max(block_window(now, n, W), k))
    cur = math.max(cur, L)
  elseif op == 'penalize' and n > 0 then
    roll(k)
    cur = math.min(cur + n, most)
  elseif op == 'reward' and n > 0 and cur + prev > 0 then
    roll(k)
    local from_cur = math.min(n, cur)
    cur = cur - from_cur
    prev = math.max(prev - (n - from_cur), 0)
  else
    changed = false
  end
  if changed then
    if cur + prev > 0 then
      redis.call('SET', key, head .. fmt(sk) .. ':' .. fmt(cur) .. ':' .. fmt(prev), 'PXAT',
        ceil_ms((sk + 2) * W))
    else
      redis.call('DEL', key)
    end
  end
  n = 1
end

roll(k)
k = sk
local start = k * W
local w_end = start + W
local e = math.min(math.max(now - start, 0), W)

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
    return w_end + W - now
  elseif prev > 0 then
    return w_end - now
  end
  return 0
end

local fits = cur + n <= L and mul_cmp(prev, W - e, L - cur - n, W) <= 0
if n == 0 or op ~= 'check' and fits then
  return {now, 1, remaining(), -1, reset()}
end
if n > L then
  return {now, 2, remaining(), -1, reset()}
end
if fits then
  cur = cur + n
  redis.call('SET', key, head .. fmt(k) .. ':' .. fmt(cur) .. ':' .. fmt(prev), 'PXAT',
    ceil_ms(w_end + W))
  return {now, 1, remaining(), -1, reset()}
end

-- Denied: the earliest time the same request fits, with no other admissions meanwhile.
local retry_at
if cur + n <= L then
  -- Later in this window: the least t with prev*(w_end - t) <= (L - cur - n)*W.
  retry_at = w_end - muldiv(L - cur - n, W, prev)
else
  -- In the next window (prev' = cur, cur' = 0): the least e'' with cur*(W - e'') <= (L - n)*W.
  retry_at = w_end + W - muldiv(L - n, W, cur)
end
return {now, 0, remaining(), retry_at - now, reset()}
