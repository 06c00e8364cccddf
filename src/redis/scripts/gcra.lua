-- GCRA on one string key holding the theoretical arrival time (TAT, integer microseconds since
-- the Unix epoch), and, only while the key has any, its holes (below). A missing key, or any
-- TAT <= now, is a full bucket.
-- KEYS[1]: the state key (the group op: several, see it below).
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
--   group:   {now, e_1 .. e_k}: a check on each of KEYS[1 .. k] (below, before the one key's ops)
--   block, penalize, reward: {now, status, remaining, retry_after or -1, reset_after}: status
--             and retry_after of a one-permit check, remaining and reset_after of a peek, on
--             the state the change left (taking nothing)
-- Kept cheap on a key without holes (almost every key, almost every call): three redis.call at
-- most (TIME, GET, SET), a check or batch decided in gcra_fast.lua before any closure but its
-- rule is built (exact.lua, which the conversion below needs, comes after this file:
-- gcra_general.lua), integers passed to SET as %d strings (a Lua number is formatted by
-- printf's double path, dearer; the bytes are the same), two-element replies. Of the ops,
-- gcra_fast.lua has already read TIME, the arguments and (but for group) the key's value.
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
-- The state in `v`, a value read at a state key (nil: none), named (`named`) or not: the TAT
-- (0 for none, and on a key with holes, which the general way decodes), whether the key has
-- holes, the quota b0, T0 a named state was written under (nil: none), and the value after
-- that quota. Anything no tollgate script wrote is foreign().
local function read_state(v, named)
  local b0, T0
  if named and v then
    local sb, st, rest = string.match(v, '^(%d+),(%d+),(.*)$')
    if not sb then
      foreign('a named GCRA state')
    end
    b0 = whole(sb, 1, MAX_SPAN, 'a named GCRA state')
    T0 = whole(st, 1, MAX_SPAN, 'a named GCRA state')
    -- Inexact past 2^53, but a double product rounds to the same side of 2^51.
    if b0 * T0 > MAX_SPAN then
      foreign('a named GCRA state')
    end
    v = rest
  end
  if v then
    if string.find(v, ':', 1, true) then
      return 0, true, b0, T0, v -- holes: decoded (and validated) off the hot path, below
    end
    -- Only a TAT this script wrote: the digits of a whole number of microseconds, at most
    -- the end of time (not "1e3", " 5", "-0", "0x10": tonumber would take those).
    return whole(v, 1, MAXT, 'a GCRA state'), false, b0, T0, v
  end
  return 0, false, b0, T0, v
end

-- group: one check on each of several keys (KEYS[i], with ARGV[3i - 1 .. 3i + 1] = its b, T
-- and n: b negative for a named state), replying {now, e_1 .. e_k}: each e as a check's
-- (below), or ALONE for a check the fast rule cannot decide (holes, another quota, near the
-- end of time, a value no tollgate script wrote): nothing is written for it, and the client
-- sends it as a check of its own, which decides it (or refuses the value) as always. A key
-- met twice is decided in order on the state the earlier checks left, as a batch is.
-- Every key is read and validated before the first write (a script is not rolled back).
if op == 'group' then
  local ALONE = -4503599627370496 -- -2^52: below every denial's -1 - debt (debt <= 2^51)
  local reply = {now}
  -- Each key's state, at S[j ..], j its slot (at[key], given at its first check): S[j] its TAT
  -- (false: its checks go alone), S[j + 1] named, S[j + 2], S[j + 3] the quota it is under
  -- (false: none), S[j + 4] whether it is to be written. One flat table, not a table per key:
  -- each is an allocation the server pays for again when it collects it. A key is read at its
  -- first check and decided at each in order (nothing is written before the last key is
  -- read), as reading them all first would.
  local at, S, slots = {}, {}, 0
  for i = 1, #KEYS do
    local k = KEYS[i]
    local b = tonumber(ARGV[3 * i - 1])
    local named = b < 0
    if named then
      b = -b
    end
    local j = at[k]
    if j == nil then
      j = slots + 1
      slots = slots + 5
      at[k] = j
      -- pcall: a key of another type (WRONGTYPE) or a foreign value is that check's alone.
      local raw = redis.pcall('GET', k)
      local ok, tat, holey, b0, T0 = true, 0, false, nil, nil
      if type(raw) == 'table' then
        ok = false
      elseif raw then -- no key (false) is a TAT of 0, read_state's answer, without a pcall
        ok, tat, holey, b0, T0 = pcall(read_state, raw, named)
      end
      S[j], S[j + 1], S[j + 2], S[j + 3], S[j + 4] = ok and not holey and tat, named,
        b0 or false, T0 or false, false
    end
    local tat = S[j]
    local T = tonumber(ARGV[3 * i])
    local tau = T * b
    local e = ALONE
    if tat and S[j + 1] == named and (not S[j + 2] or (S[j + 2] == b and S[j + 3] == T))
        and tat <= MAXT - tau then
      local debt = tat - now
      if debt < 0 then
        debt = 0
      end
      local after
      e, after = decide(debt, tonumber(ARGV[3 * i + 1]), b, T, tau)
      if after ~= debt then
        S[j], S[j + 4] = now + after, true
        if named then
          S[j + 2], S[j + 3] = b, T
        end
      end
    end
    reply[i + 1] = e
  end
  for i = 1, #KEYS do
    local j = at[KEYS[i]]
    if S[j + 4] then
      S[j + 4] = false
      local tat = S[j]
      if S[j + 1] then
        redis.call('SET', KEYS[i], string.format('%d,%d,%d', S[j + 2], S[j + 3], tat), 'PXAT',
          fmt(ceil_ms(tat)))
      else
        redis.call('SET', KEYS[i], fmt(tat), 'PXAT', fmt(ceil_ms(tat)))
      end
    end
  end
  return reply
end

local tat, holey, b0, T0, v = read_state(raw, named)
local convert = b0 ~= nil and (b0 ~= b or T0 ~= T)
T0 = T0 or T
local head = ''
if named then
  head = fmt(b) .. ',' .. fmt(T) .. ','
end

-- check and batch reply, per check, e >= 0: the debt (TAT - now, at least 0) after it (admitted,
-- a peek, or more than the burst), or e < 0: denied, with debt -1 - e. The client computes
-- status, remaining and retry_after from e, n, b and T (gcra.rs, `expand`): a shorter reply
-- costs Redis less. A key with holes, or one whose TAT is so far ahead that a check could pass
-- the end of time, goes the general way below.
if not holey and not convert and tat <= MAXT - tau then
  if op == 'reserve' then
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
      redis.call('SET', key, head .. fmt(new_tat), 'PXAT', fmt(ceil_ms(new_tat)))
    else
      redis.call('SET', key, fmt(new_tat), 'PXAT', fmt(ceil_ms(new_tat)))
    end
    return {now, 1, wait, new_tat}
  end
end
