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

-- The limit argument L: negative for a named state (state_name). The limit, whether named,
-- and the head "L,W," a named value starts with ('' if unnamed).
local function named_limit(L, W)
  if L < 0 then
    return -L, true, fmt(-L) .. ',' .. fmt(W) .. ','
  end
  return L, false, ''
end

-- A named state's (state_name) head "L,W," in the value `v`: L, W and the rest of the value;
-- a value without one is refused as `what`.
local function named_head(v, what)
  local sl, sw, rest = string.match(v, '^(%d+),(%d+),(.*)$')
  if not sl then
    foreign(what)
  end
  return whole(sl, 1, 2251799813685248, what), whole(sw, 1, 2251799813685248, what), rest
end

-- The hold of a call under window W on a named stamped state (sliding log and window)
-- written under window w0, with the hold h0 until u0 (nil if none), its newest entry stamped
-- `newest` (nil if none): {H, U} while the writer counts a longer window than W (its own, or
-- its hold while that lasts), until the newest entry has left the writer's own window (or
-- u0, if later); else nil.
local function named_hold(w0, h0, u0, W, newest, now)
  local hw, hu = w0, 0
  if h0 ~= nil and now < u0 then
    hw, hu = h0, u0
  end
  if hw > W then
    if w0 > W and newest ~= nil then
      hu = math.max(hu, newest + w0)
    end
    if hu > now then
      return {hw, hu}
    end
  end
  return nil
end
