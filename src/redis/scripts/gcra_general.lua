-- tollgate: GCRA's general way (after gcra.lua's hot path and exact.lua, so that a check on a
-- plain key returns before exact.lua's closures are built).

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
