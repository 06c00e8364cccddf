-- tollgate: what the window scripts share (prepended after the prelude to fixed_window,
-- sliding_log, sliding_window and weighted only: each function defined is a closure built on
-- every run).

-- The window scripts' (fixed_window, sliding_log, sliding_window, weighted) first arguments,
-- as key, op, L, W, n. KEYS[1]: the state key.  ARGV: op, L, W (us), n, k (the sub-windows of
-- sliding_window, unused by the others), most.
--   op 'check': take n permits.
--   op 'reset': delete the state (reply {1}, or {0} if there was none).
--   op 'take', 'give' (the fixed window only): a local batch taken and given back
--   (fixed_window.lua).
--   op 'block' (n: the block's length in us), 'penalize', 'reward' (n permits): the change the
--   in-process algorithm makes (its `adjust`), with `most` as the script says; the reply is
--   then the state left, taking nothing (a one-permit check's status and retry_after, a peek's
--   remaining and reset_after).
-- Reply: {now, status (1 allowed, 0 denied, 2 exceeds the limit), remaining, retry_after or -1,
--         reset_after}.
local function window_args()
  return KEYS[1], ARGV[1], tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
end

-- Where a block lasting `len` us from `now` puts its entry in a sliding log or window (as in
-- process, src/algorithm/sliding.rs, `adjust`): at its end less W (not below 0), and within W
-- of the newest stamp `newest` (nil if none), so that after a partly rewarded longer block a
-- shorter one lasts as long as that block's entry would.
local function block_stamp(now, len, W, newest)
  local floor = 0
  if newest ~= nil then
    floor = math.max(newest + 1 - W, 0)
  end
  return math.max(now + len - W, 0, floor)
end

-- The window (of W us) that a block lasting `len` us from `now` ends in, on a clock that ends at
-- MAX_US as the in-process one does: the fixed and weighted windows count it full.
local function block_window(now, len, W)
  return idiv(math.min(now + len - 1, MAX_US), W)
end
