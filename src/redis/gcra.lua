-- GCRA on one string key holding the theoretical arrival time (TAT, integer microseconds since
-- the Unix epoch). A missing key, or any TAT <= now, is a full bucket.
-- KEYS[1]: the state key.
-- ARGV: op ('check' | 'batch' | 'reserve' | 'cancel'), burst b, interval T (us), then
--   check:   n;  batch: m, n_1 .. n_m;  reserve: n, max_wait (us, or -1 for none);
--   cancel:  n, the reservation's TAT, its cost (us).
-- Replies (all integers):
--   check:   {now, e} (e below)
--   batch:   {now, e_1 .. e_m}: the checks n_1 .. n_m one after another at the same instant,
--             one write at the end
--   reserve: {now, status (1 reserved, 0 wait over max_wait, 3 past the representable range),
--             wait, new TAT}
--   cancel:  {now, 1 if refunded else 0}
-- Kept cheap (it runs once per decision): three redis.call at most (TIME, GET, SET), numbers
-- passed to redis.call as they are (Redis writes integers below 2^53 exactly), no closures on
-- the check path, two-element replies.
local key = KEYS[1]
local op = ARGV[1]
local b = tonumber(ARGV[2])
local T = tonumber(ARGV[3])
local tau = T * b
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
local tat = 0
local v = redis.call('GET', key)
if v then
  tat = tonumber(v)
  -- Only a TAT this script wrote: a whole number of microseconds, exact in a double.
  if not tat or tat < 0 or tat >= 9007199254740992 or tat % 1 ~= 0 then
    return redis.error_reply('tollgate: the state key holds a value tollgate did not write')
  end
end

-- check and batch reply, per check, e >= 0: the debt (TAT - now, at least 0) after it (admitted,
-- a peek, or more than the burst), or e < 0: denied, with debt -1 - e. The client computes
-- status, remaining and retry_after from e, n, b and T (gcra.rs, `expand`): a shorter reply
-- costs Redis less.
if op == 'check' then
  local n = tonumber(ARGV[4])
  local debt = tat - now
  if debt < 0 then
    debt = 0
  end
  if n > 0 and n <= b then
    local new_debt = debt + n * T
    if new_debt > tau then
      return {now, -1 - debt}
    end
    redis.call('SET', key, now + new_debt, 'PXAT', ceil_ms(now + new_debt))
    return {now, new_debt}
  end
  return {now, debt}
elseif op == 'batch' then
  local m = tonumber(ARGV[4])
  local debt = tat - now
  if debt < 0 then
    debt = 0
  end
  local wrote = false
  local reply = {now}
  for i = 1, m do
    local n = tonumber(ARGV[4 + i])
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
    redis.call('SET', key, now + debt, 'PXAT', ceil_ms(now + debt))
  end
  return reply
end

local base = math.max(tat, now)

-- Stores a TAT with its expiry: the state carries no information once TAT <= now.
local function store(v)
  if v > now then
    redis.call('SET', key, v, 'PXAT', ceil_ms(v))
  else
    redis.call('DEL', key)
  end
end

local n = tonumber(ARGV[4])
if op == 'reserve' then
  local max_wait = tonumber(ARGV[5])
  if n == 0 then
    return {now, 1, 0, tat}
  end
  local new_tat = base + n * T
  if new_tat > 4503599627370496 then -- 2^52: past it, sums would stop being exact
    return {now, 3, 0, 0}
  end
  local wait = math.max(new_tat - tau - now, 0)
  if max_wait >= 0 and wait > max_wait then
    return {now, 0, wait, 0}
  end
  store(new_tat)
  return {now, 1, wait, new_tat}
elseif op == 'cancel' then
  -- Gives back a reservation whose permits were not used: if it is still the latest, the TAT
  -- moves back over it (undoing it exactly, even if it was ready at once), unless its stretch
  -- is already in the past. An earlier one gives nothing back: lowering the TAT under a later
  -- reservation would hand that slot out twice.
  local r_tat = tonumber(ARGV[5])
  local cost = tonumber(ARGV[6])
  if cost > 0 and tat == r_tat and r_tat > now then
    store(r_tat - cost)
    return {now, 1}
  end
  return {now, 0}
end
return redis.error_reply('tollgate: unknown op')
