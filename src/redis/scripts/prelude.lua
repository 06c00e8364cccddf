-- tollgate: shared prelude of every script (prepended at compile time).
-- Lua numbers are doubles, exact for integers below 2^53. Every time (integer microseconds) and
-- count that these scripts see stays below 2^52, so sums and differences are exact; products
-- of two such values are not, and go through mul_cmp / muldiv (exact.lua, prepended only to
-- the scripts that need them: each function defined is a closure built on every run). Replies
-- are integers only (Redis truncates a Lua float reply). A number passed to redis.call is
-- written exactly (Redis formats it with 17 digits); a stored value built by concatenation
-- goes through fmt (%d), as tostring would print 1.8e+15.

-- The server's clock, in microseconds since the Unix epoch (about 1.8e15 today).
local function now_us()
  local t = redis.call('TIME')
  return tonumber(t[1]) * 1000000 + tonumber(t[2])
end

local function fmt(x)
  return string.format('%d', x)
end

-- floor(a / b) for integers a >= 0, b > 0, a + b < 2^53. The double quotient is correctly
-- rounded, so its floor is the true floor or one above it (when the true quotient is just below
-- an integer): one correction makes it exact.
local function idiv(a, b)
  local q = math.floor(a / b)
  if q * b > a then
    q = q - 1
  end
  return q
end

-- Milliseconds for PEXPIREAT, rounded up: a key may outlive its information by under 1 ms,
-- never the other way round. Redis compares an expiry with its live clock, which runs on while
-- a script does: one ahead of the script's `now` may be past when it is set, and the key goes
-- at once. So a script sets its key's expiry after its last read of the key.
local function ceil_ms(us)
  return idiv(us + 999, 1000)
end

-- The latest instant the scripts' clock reaches (us since the epoch): floor(MAX_NANOS / 1000),
-- the in-process limiter's end of time. No time a script stores is later.
local MAX_US = 4611686018427387

-- A value at the key that no tollgate script wrote (another program's, or a bug's): refused
-- before anything is written, since a script is not rolled back and a guess would overwrite
-- the value or admit on it. The error code TOLLGATE makes it ServerErrorKind::Script
-- (failure.rs). Every script validates all it reads through this before its first write.
local function foreign(what)
  error({err = 'TOLLGATE the state key holds a value tollgate did not write (' .. what ..
    '): nothing was changed'})
end

-- The decimal digits `s` as a number, if they are exactly what fmt writes for an integer in
-- [lo, hi] (no sign, no leading zero, no exponent, exact in a double); else foreign(what).
local function whole(s, lo, hi, what)
  if s == nil or #s > 16 or not string.find(s, '^%d+$') then
    foreign(what)
  end
  local x = tonumber(s)
  if x < lo or x > hi or fmt(x) ~= s then
    foreign(what)
  end
  return x
end

-- The same for a sorted-set score (a double as Redis replies it): an integer in [lo, hi].
local function whole_score(s, lo, hi, what)
  local x = tonumber(s)
  if x == nil or x ~= x or x < lo or x > hi or x % 1 ~= 0 then
    foreign(what)
  end
  return x
end

-- The list `out` with t[i], t[i + 1], ..., t[j] (j: #t if nil) appended.
local function append(out, t, i, j)
  for x = i, j or #t do
    out[#out + 1] = t[x]
  end
  return out
end
