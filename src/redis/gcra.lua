-- GCRA on one string key holding the theoretical arrival time (TAT, integer microseconds since
-- the Unix epoch). A missing key, or any TAT <= now, is a full bucket.
-- KEYS[1]: the state key.
-- ARGV: op ('check' | 'reserve' | 'cancel'), burst b, interval T (us), n, then
--   reserve: max_wait (us, or -1 for none);  cancel: the reservation's TAT, its cost (us).
-- Replies (all integers):
--   check:   {now, status (1 allowed, 0 denied, 2 exceeds burst), remaining, retry_after or -1,
--             reset_after}
--   reserve: {now, status (1 reserved, 0 wait over max_wait, 3 past the representable range),
--             wait, new TAT}
--   cancel:  {now, 1 if refunded else 0}
local key = KEYS[1]
local op = ARGV[1]
local b = tonumber(ARGV[2])
local T = tonumber(ARGV[3])
local n = tonumber(ARGV[4])
local tau = T * b
local now = now_us()
local tat = tonumber(redis.call('GET', key) or '0')
local base = math.max(tat, now)

-- Stores a TAT with its expiry: the state carries no information once TAT <= now.
local function store(v)
  if v > now then
    redis.call('SET', key, fmt(v), 'PXAT', fmt(ceil_ms(v)))
  else
    redis.call('DEL', key)
  end
end

-- The fields at TAT t (t = new TAT when allowed, else max(tat, now)).
local function fields(status, t, retry)
  local debt = t - now
  local remaining = 0
  if tau > debt then
    remaining = math.min(idiv(tau - debt, T), b)
  end
  return {now, status, remaining, retry, debt}
end

if op == 'check' then
  if n == 0 then
    return fields(1, base, -1)
  end
  if n > b then
    return fields(2, base, -1)
  end
  local new_tat = base + n * T
  local allow_at = new_tat - tau
  if allow_at <= now then
    store(new_tat)
    return fields(1, new_tat, -1)
  end
  return fields(0, base, allow_at - now)
elseif op == 'reserve' then
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
