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
-- never the other way round.
local function ceil_ms(us)
  return idiv(us + 999, 1000)
end
