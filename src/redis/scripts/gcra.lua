-- GCRA on one string key holding the theoretical arrival time (TAT, integer microseconds since
-- the Unix epoch), and, only while the key has any, its holes (below). A missing key, or any
-- TAT <= now, is a full bucket.
-- KEYS[1]: the state key.
-- ARGV: op, burst b, interval T (us), then
--   check:   n;  batch: m, n_1 .. n_m;  reserve: n, max_wait (us, or -1 for none);
--   cancel:  n (unused), the reservation's end, its cost (us);  take: n (a local batch);
--   block:   the block's length (us);  penalize, reward: n;  reset: nothing more.
-- Replies (all integers):
--   check:   {now, e} (e below) on a key without holes; {now, status, remaining, retry_after or
--             -1, reset_after} (status 1 allowed, 0 denied, 2 never: over the burst or past the
--             end of time) on a key with holes, or one near the end of time
--   batch:   {now, e_1 .. e_m}, or {now, then the four fields after now of each check} where a
--             check would reply in full: the checks n_1 .. n_m one after another at the same
--             instant, one write at the end
--   reserve: {now, status (1 reserved, 0 wait over max_wait, 3 past the representable range),
--             wait, the reservation's end}, and the TAT fifth if it was placed in a hole
--   cancel:  {now, 1 if anything was given back else 0} (a local batch goes back this way)
--   take:    {now, g, the TAT after it}: g <= n permits booked at the tail, or {now, 0, 0}
--   reset:   {1} if the key held a state (now deleted), else {0}
--   block, penalize, reward: {now, status, remaining, retry_after or -1, reset_after}: status
--             and retry_after of a one-permit check, remaining and reset_after of a peek, on
--             the state the change left (taking nothing)
-- Kept cheap on a key without holes (almost every key, almost every call): three redis.call at
-- most (TIME, GET, SET), numbers passed to redis.call as they are (Redis writes integers below
-- 2^53 exactly), no closures on the check path but exact.lua's four (prepended for the
-- conversion below), two-element replies.
--
-- Holes (src/algorithm/gcra/holes.rs, the in-process rule this mirrors): stretches (s, e] of
-- the schedule, below the TAT, given back by cancelled reservations that were not the latest;
-- later checks and reservations are placed in the lowest one that holds them before the TAT.
-- A key with holes holds "TAT:a1:b1:a2:b2:..." with hole i = (TAT - a_i, TAT - b_i], lowest
-- first (a1 > b1 > a2 > ... >= 0: sorted, disjoint, not touching, none above the TAT), each
-- number written with %d. It expires with the TAT (every hole lies below it).
--
-- Another quota (a named state written under b0, T0 other than this call's b, T: a rolling
-- deploy changing the limit): the debt is kept in permits, as the in-process set_quota keeps
-- it (src/algorithm/gcra/rule.rs, rescale): TAT' = now + ceil((TAT - now) * T / T0), never
-- forgiving part of a permit, saturating at the end of time; holes are dropped and a cancel
-- gives nothing back (both only ever refuse). A decision that changes nothing on a key without
-- holes (a denial, a peek) writes nothing: the state stays under b0, T0, and the next call
-- converts it the same way.
local key = KEYS[1]
local op = ARGV[1]
local b = tonumber(ARGV[2])
-- A negative burst: a named state (state_name), whose value is "b,T,<the encoding above>": the
-- quota that wrote it next to the TAT, so a process under another quota can read it.
local named = b < 0
if named then
  b = -b
end
local T = tonumber(ARGV[3])
local tau = T * b
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- The end of time in us: floor(MAX_NANOS / 1000), the in-process limiter's end, to the us.
-- Every sum formed below stays under 2^53 (tau <= 2^51, lengths and now far below).
local MAXT = MAX_US
-- The most a burst or an interval is (Params::interval: b * T <= 2^51).
local MAX_SPAN = 2251799813685248
-- A check is a batch of one: m checks whose n_i are ARGV[first + i] (a check's n is ARGV[4]).
local m, first = 1, 3
if op == 'batch' then
  m, first = tonumber(ARGV[4]), 4
end
local tat = 0
local raw = redis.call('GET', key)
local v = raw
local holey = false
local head = ''
local convert = false
local T0 = T
if named then
  head = fmt(b) .. ',' .. fmt(T) .. ','
  if v then
    local sb, st, rest = string.match(v, '^(%d+),(%d+),(.*)$')
    if not sb then
      foreign('a named GCRA state')
    end
    local b0 = whole(sb, 1, MAX_SPAN, 'a named GCRA state')
    T0 = whole(st, 1, MAX_SPAN, 'a named GCRA state')
    -- Inexact past 2^53, but a double product rounds to the same side of 2^51.
    if b0 * T0 > MAX_SPAN then
      foreign('a named GCRA state')
    end
    convert = b0 ~= b or T0 ~= T
    v = rest
  end
end
if v then
  if string.find(v, ':', 1, true) then
    holey = true -- holes: decoded (and validated) off the hot path, below
  else
    -- Only a TAT this script wrote: the digits of a whole number of microseconds, at most
    -- the end of time (not "1e3", " 5", "-0", "0x10": tonumber would take those).
    tat = whole(v, 1, MAXT, 'a GCRA state')
  end
end

-- check and batch reply, per check, e >= 0: the debt (TAT - now, at least 0) after it (admitted,
-- a peek, or more than the burst), or e < 0: denied, with debt -1 - e. The client computes
-- status, remaining and retry_after from e, n, b and T (gcra.rs, `expand`): a shorter reply
-- costs Redis less. A key with holes, or one whose TAT is so far ahead that a check could pass
-- the end of time, goes the general way below.
if not holey and not convert and tat <= MAXT - tau then
  if op == 'check' or op == 'batch' then
    local debt = tat - now
    if debt < 0 then
      debt = 0
    end
    local wrote = false
    local reply = {now}
    for i = 1, m do
      local n = tonumber(ARGV[first + i])
      local e = debt
      if n > 0 and n <= b then
        local new_debt = debt + n * T
        if new_debt > tau then
          e = -1 - debt
        else
          debt = new_debt
          e = debt
          wrote = true
        end
      end
      reply[i + 1] = e
    end
    if wrote then
      if named then
        redis.call('SET', key, head .. fmt(now + debt), 'PXAT', ceil_ms(now + debt))
      else
        redis.call('SET', key, now + debt, 'PXAT', ceil_ms(now + debt))
      end
    end
    return reply
  elseif op == 'reserve' then
    local n = tonumber(ARGV[4])
    local max_wait = tonumber(ARGV[5])
    if n == 0 then
      return {now, 1, 0, tat}
    end
    local new_tat = math.max(tat, now) + n * T
    if new_tat > MAXT then
      return {now, 3, 0, 0}
    end
    local wait = math.max(new_tat - tau - now, 0)
    if max_wait >= 0 and wait > max_wait then
      return {now, 0, wait, 0}
    end
    if named then
      redis.call('SET', key, head .. fmt(new_tat), 'PXAT', ceil_ms(new_tat))
    else
      redis.call('SET', key, new_tat, 'PXAT', ceil_ms(new_tat))
    end
    return {now, 1, wait, new_tat}
  end
end

-- The general way: every op on a key with holes, cancels and adjustments on every key. The
-- holes are a flat list H = {s1, e1, s2, e2, ...} in absolute microseconds.
local H = {}
local bad = 'GCRA holes'
if holey then
  if string.find(v, '[^%d:]') or string.find(v, '::') or not string.find(v, '^%d.*%d$') then
    foreign(bad)
  end
  local first = true
  local prev = nil
  for d in string.gmatch(v, '%d+') do
    if first then
      tat, first = whole(d, 1, MAXT, bad), false
    else
      -- Offsets strictly decreasing (a1 > b1 > a2 > ...), none above the TAT.
      local x = whole(d, 0, tat, bad)
      if prev and x >= prev then
        foreign(bad)
      end
      H[#H + 1] = tat - x
      prev = x
    end
  end
  if #H == 0 or #H % 2 ~= 0 then
    foreign(bad)
  end
end
-- Another quota's state, read in full above: converted (see the top).
if convert then
  if op == 'cancel' then
    return {now, 0}
  end
  H = {}
  if tat > now then
    local d = tat - now
    if mul_cmp(d, T, MAXT - now, T0) > 0 then
      tat = MAXT
    else
      tat = now + muldiv_ceil(d, T, T0)
    end
  end
end
local tat0, count0 = tat, #H
if op == 'reset' then
  return {redis.call('DEL', key)}
end

-- The most holes a key keeps on Redis (a bound on the value's size and the script's work): a
-- cancel that would make one more gives nothing back, which can only refuse, never admit.
local MAX_HOLES = 64

-- Drops the holes that end by now (nothing can be placed below now): a prefix, as they are
-- sorted.
local function prune()
  local k = 1
  while k < #H and H[k + 1] <= now do
    k = k + 2
  end
  if k > 1 then
    H = append({}, H, k)
  end
end

-- The lowest position s >= now with (s, s + len] inside a hole, and the hole's index.
local function place(len)
  for i = 1, #H, 2 do
    local s = math.max(H[i], now)
    if H[i + 1] - s >= len then
      return i, s
    end
  end
  return nil
end

-- The earliest instant >= now at which (s, s + len] fits in a hole within [at, at + tau].
local function earliest_fit(len)
  for i = 1, #H, 2 do
    local at = math.max(now, H[i] + len - tau)
    if H[i + 1] - math.max(H[i], at) >= len then
      return at
    end
  end
  return nil
end

-- Takes (s, s + len] out of hole i (from place); keeps what is left on either side.
local function take(i, s, len)
  local start, stop = H[i], H[i + 1]
  local parts = {}
  if s > start then
    parts[#parts + 1] = start
    parts[#parts + 1] = s
  end
  if stop > s + len then
    parts[#parts + 1] = s + len
    parts[#parts + 1] = stop
  end
  local out = append({}, H, 1, i - 1)
  append(out, parts, 1)
  H = append(out, H, i + 2)
end

-- Adds the free stretch (start, stop], merging it with the holes it touches.
local function give(start, stop)
  if stop <= start then
    return
  end
  local out = {}
  local i = 1
  while i < #H and H[i + 1] < start do
    out[#out + 1] = H[i]
    out[#out + 1] = H[i + 1]
    i = i + 2
  end
  local lo, hi = start, stop
  while i < #H and H[i] <= hi do
    lo = math.min(lo, H[i])
    hi = math.max(hi, H[i + 1])
    i = i + 2
  end
  out[#out + 1] = lo
  out[#out + 1] = hi
  H = append(out, H, i)
end

-- Drops every position at or past the TAT (it moved down: holes stay below it), cutting a hole
-- that straddles it; as the in-process Holes::cut.
local function cut()
  while #H > 0 and H[#H - 1] >= tat do
    H[#H] = nil
    H[#H] = nil
  end
  if #H > 0 and H[#H] > tat then
    H[#H] = tat
  end
end

-- Whole intervals free in [now, now + tau] behind a tail (>= now), holes not counted.
local function free(tail)
  local d = tail - now
  if d >= tau then
    return 0
  end
  return idiv(tau - d, T)
end

-- Whole intervals free inside holes within [now, now + tau].
local function slots()
  local h = now + tau
  local sum = 0
  for i = 1, #H, 2 do
    local a = math.max(H[i], now)
    local e = math.min(H[i + 1], h)
    if e > a then
      sum = sum + idiv(e - a, T)
    end
  end
  return sum
end

-- One check of n at now, as the in-process check_holey: status (1 allowed, 0 denied, 2 never),
-- remaining, retry_after (-1 if none), reset_after. With commit, what it takes is taken (a
-- hole's stretch, or the TAT moved); without, the state is left alone and only status and
-- retry_after are meaningful.
local function decide(n, commit)
  local base = math.max(tat, now)
  local status, tail, retry = 1, base, -1
  local new_tat = nil
  local never = false
  if n > b then
    status = 2
  elseif n > 0 then
    local len = n * T
    local new = base + len
    if new > MAXT then
      status, never = 2, true
    elseif new - tau <= now then
      tail, new_tat = new, new
    else
      status, retry = 0, new - tau - now
    end
    local i, s = place(len)
    if i and s + len <= now + tau then
      status, tail, retry, new_tat, never = 1, base, -1, nil, false
      if commit then
        take(i, s, len)
      end
    elseif status == 0 then
      local at = earliest_fit(len)
      if at and at - now < retry then
        retry = at - now
      end
    end
  end
  if commit and new_tat then
    tat = new_tat
  end
  if never then
    return 2, 0, -1, tail - now
  end
  return status, math.min(free(tail) + slots(), b), retry, tail - now
end

-- Writes the state back if it changed: nothing once the TAT is past (every hole lies below
-- it), the bare TAT without holes (as the hot path writes it), else the encoding above.
local function save()
  if tat <= now then
    if raw then
      redis.call('DEL', key)
    end
    return
  end
  prune()
  if #H == 0 then
    if holey or tat ~= tat0 then
      if named then
        redis.call('SET', key, head .. fmt(tat), 'PXAT', ceil_ms(tat))
      else
        redis.call('SET', key, tat, 'PXAT', ceil_ms(tat))
      end
    end
    return
  end
  local parts = {fmt(tat)}
  for i = 1, #H do
    parts[i + 1] = fmt(tat - H[i])
  end
  local s = head .. table.concat(parts, ':')
  if s ~= raw then
    redis.call('SET', key, s, 'PXAT', ceil_ms(tat))
  end
end

prune()
if op == 'take' then
  -- A local batch: up to n permits booked at the tail (as a reservation that may not wait;
  -- holes are left to checks), however many fit under the burst now. Reply {now, g, the
  -- batch's end: the TAT after it}, or {now, 0, 0}: nothing fits.
  local n = tonumber(ARGV[4])
  local base = math.max(tat, now)
  local room = math.min(now + tau, MAXT)
  local g = 0
  if room > base then
    g = math.min(n, idiv(room - base, T))
  end
  if g <= 0 then
    return {now, 0, 0}
  end
  tat = base + g * T
  save()
  return {now, g, tat}
elseif op == 'check' or op == 'batch' then
  local reply = {now}
  for i = 1, m do
    local st, rem, retry, reset = decide(tonumber(ARGV[first + i]), true)
    reply[#reply + 1] = st
    reply[#reply + 1] = rem
    reply[#reply + 1] = retry
    reply[#reply + 1] = reset
  end
  save()
  return reply
elseif op == 'reserve' then
  -- As the in-process reserve_holey: the lowest hole that holds the whole stretch, else the
  -- tail (a hole below the tail is ready no later than the tail).
  local n = tonumber(ARGV[4])
  local max_wait = tonumber(ARGV[5])
  if n == 0 then
    return {now, 1, 0, tat}
  end
  local len = n * T
  local i, s = place(len)
  local stop = nil
  if i then
    stop = s + len
  else
    stop = math.max(tat, now) + len
    if stop > MAXT then
      return {now, 3, 0, 0}
    end
  end
  local wait = math.max(stop - tau - now, 0)
  if max_wait >= 0 and wait > max_wait then
    return {now, 0, wait, 0}
  end
  if i then
    take(i, s, len)
    save()
    return {now, 1, wait, stop, tat}
  end
  tat = stop
  save()
  return {now, 1, wait, stop}
elseif op == 'cancel' then
  -- As the in-process refund: the latest reservation moves the TAT back over it (and over the
  -- holes that end where it started); an earlier one's part at or after now becomes a hole.
  -- Nothing once its stretch is in the past; only what lies below the TAT once a reward moved
  -- the TAT below its end.
  local stop = tonumber(ARGV[5])
  local cost = tonumber(ARGV[6])
  local start = stop - cost
  if cost <= 0 or stop <= now then
    return {now, 0}
  end
  if tat == stop then
    -- As Holes::coalesce: what lies at or past the lowered TAT is free already (a hole an
    -- earlier cancel gave can reach above it after a reward), then the TAT moves down over
    -- the holes that end where it is.
    tat = start
    cut()
    while #H > 0 and H[#H] == tat do
      tat = H[#H - 1]
      H[#H] = nil
      H[#H] = nil
    end
  else
    local lo, hi = math.max(start, now), math.min(stop, tat)
    if hi <= lo then
      return {now, 0}
    end
    local before = H
    give(lo, hi)
    if #H > 2 * MAX_HOLES then
      H = before
      return {now, 0}
    end
  end
  save()
  return {now, 1}
end

-- Adjustments, as the in-process adjust_holey: block until u: tat = max(tat, u + tau - T),
-- clearing the holes; penalize n: tat = max(tat, now) + n*T, holes kept; reward n: tat =
-- max(tat - n*T, now) when tat > now, dropping what the lowered TAT passes. Saturating at the
-- end of time (refused for good, as in process).
local x = tonumber(ARGV[4])
if op == 'block' then
  if x > 0 then
    tat = math.max(tat, math.min(now + x + tau - T, MAXT))
    H = {}
  end
elseif op == 'penalize' then
  if x > 0 then
    tat = math.min(math.max(tat, now) + x * T, MAXT)
  end
elseif op == 'reward' then
  if tat > now then
    tat = math.max(tat - x * T, now)
    cut()
  end
else
  return redis.error_reply('tollgate: unknown op')
end
save()
local _, rem, _, reset = decide(0, false)
local st, _, retry = decide(1, false)
return {now, st, rem, retry, reset}
