-- tollgate: exact products of two integers below 2^52, in base-2^26 limbs (after prelude.lua
-- in the scripts that need them; in GCRA's, after its hot path, which does not).

local LIMB = 67108864 -- 2^26

-- a * b as three base-2^26 limbs {hi, mid, lo}, for integers 0 <= a, b < 2^52. Every partial
-- product is below 2^52 and every partial sum below 2^53, so each step is exact.
local function mul3(a, b)
  local a0 = a % LIMB
  local a1 = (a - a0) / LIMB
  local b0 = b % LIMB
  local b1 = (b - b0) / LIMB
  local lo = a0 * b0
  local c0 = lo % LIMB
  local mid = a1 * b0 + a0 * b1 + (lo - c0) / LIMB
  local c1 = mid % LIMB
  return a1 * b1 + (mid - c1) / LIMB, c1, c0
end

-- The sign of a*b - c*d (-1, 0, 1), exactly, for integers 0 <= a, b, c, d < 2^52.
local function mul_cmp(a, b, c, d)
  local x2, x1, x0 = mul3(a, b)
  local y2, y1, y0 = mul3(c, d)
  if x2 ~= y2 then
    return x2 < y2 and -1 or 1
  elseif x1 ~= y1 then
    return x1 < y1 and -1 or 1
  elseif x0 ~= y0 then
    return x0 < y0 and -1 or 1
  end
  return 0
end

-- floor(a * b / c), exactly, for integers 0 <= a, b < 2^52, 0 < c < 2^52, when the quotient is
-- below 2^51. The double estimate is within a few units; exact comparisons settle it.
local function muldiv(a, b, c)
  local q = math.floor(a * b / c)
  if q < 0 then
    q = 0
  end
  while q > 0 and mul_cmp(q, c, a, b) > 0 do
    q = q - 1
  end
  while mul_cmp(q + 1, c, a, b) <= 0 do
    q = q + 1
  end
  return q
end

-- ceil(a * b / c), under the same conditions as muldiv.
local function muldiv_ceil(a, b, c)
  local q = muldiv(a, b, c)
  if mul_cmp(q, c, a, b) < 0 then
    q = q + 1
  end
  return q
end

