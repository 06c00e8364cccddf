-- tollgate: GCRA's fast way, first in its script (before the prelude, gcra.lua and the rest):
-- a check or batch on a key that holds nothing or a plain TAT this script wrote (almost every
-- call) returns here, before the prelude's closures are built. Each closure, table and string a
-- run makes is an allocation Redis's Lua pays for again when it collects it, and number
-- arguments to redis.call are formatted by printf's double path: per check, these cost about as
-- much server time as the script's own rule. So this way builds one closure (decide), one
-- reply table, passes strings from %d to SET, and reads ARGV once. Whatever it does not
-- decide falls through, with what it read, to gcra.lua, which validates and decides it as
-- before.
local op = ARGV[1]
local t = redis.call('TIME')
local now = t[1] * 1000000 + t[2]
-- The end of time in us: floor(MAX_NANOS / 1000), the in-process limiter's end, to the us (the
-- prelude's MAX_US, not yet defined here). Every sum formed below stays under 2^53 (tau <=
-- 2^51, lengths and now far below).
local MAXT = 4611686018427387
-- The most a burst or an interval is (Params::interval: b * T <= 2^51).
local MAX_SPAN = 2251799813685248

-- The fast way's rule for one check of n permits on a debt (TAT - now, at least 0) under b,
-- T, tau: its reply element e (below) and the debt after it.
local function decide(debt, n, b, T, tau)
  if n > 0 and n <= b then
    local new_debt = debt + n * T
    if new_debt > tau then
      return -1 - debt, debt
    end
    return new_debt, new_debt
  end
  return debt, debt
end

local key, b, named, T, tau, m, first, raw
if op ~= 'group' then
  key = KEYS[1]
  b = tonumber(ARGV[2])
  -- A negative burst: a named state (state_name), whose value is "b,T,<the encoding in
  -- gcra.lua>": the quota that wrote it next to the TAT, so a process under another quota can
  -- read it.
  named = b < 0
  if named then
    b = -b
  end
  T = tonumber(ARGV[3])
  tau = T * b
  -- A check is a batch of one: m checks whose n_i are ARGV[first + i] (a check's n is ARGV[4]).
  m, first = 1, 3
  if op == 'batch' then
    m, first = tonumber(ARGV[4]), 4
  end
  raw = redis.call('GET', key)
  if op == 'check' or op == 'batch' then
    -- The TAT: 0 for no key; else only a value that gcra.lua's read_state would take the same
    -- way, checked here without the prelude's closures: a plain TAT (or, named, this call's
    -- "b,T," then one) of at most 16 digits without a leading zero, at most MAXT. As MAXT <
    -- 2^53, tonumber is exact on every string let through, and a longer number comes out above
    -- MAXT: this is whole(s, 1, MAXT) (prelude.lua). A named value is taken only under a quota
    -- read_state would accept (T >= 1, b * T <= MAX_SPAN), so that nothing it would refuse
    -- passes. Anything else (holes, another quota, a foreign value) goes on to gcra.lua.
    local tat, head
    if named then
      head = string.format('%d,%d,', b, T)
    end
    if not raw then
      tat = 0
    else
      local from = 1
      if named then
        from = nil
        if T >= 1 and tau <= MAX_SPAN and string.find(raw, head, 1, true) == 1 then
          from = #head + 1
        end
      end
      if from and #raw - from < 16 and string.find(raw, '^[1-9]%d*$', from) then
        tat = tonumber(from == 1 and raw or string.sub(raw, from))
      end
    end
    if tat and tat <= MAXT - tau then
      local debt = tat - now
      if debt < 0 then
        debt = 0
      end
      local wrote = false
      local reply = {now, 0}
      for i = 1, m do
        local e, after = decide(debt, tonumber(ARGV[first + i]), b, T, tau)
        if after ~= debt then
          debt, wrote = after, true
        end
        reply[i + 1] = e
      end
      if wrote then
        tat = now + debt
        -- ceil_ms(tat) (the prelude's idiv, its one correction included).
        local ms = math.floor((tat + 999) / 1000)
        if ms * 1000 > tat + 999 then
          ms = ms - 1
        end
        -- The same bytes as fmt (%d) gives, which the SET would write for a number too.
        if named then
          redis.call('SET', key, head .. string.format('%d', tat), 'PXAT', string.format('%d', ms))
        else
          redis.call('SET', key, string.format('%d', tat), 'PXAT', string.format('%d', ms))
        end
      end
      return reply
    end
  end
end
