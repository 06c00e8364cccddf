-- Sliding log (exact): with at = max(now, the newest grant's stamp) (as in process, time never
-- runs backwards within a key), admit n iff the permits stamped in (at - W, at] plus n are <= L.
-- One sorted set per key. A grant adds one member per permit, scored by its stamp (us), named
-- "stamp:sequence" (unique). The changes an operator makes (block, penalize) add one member of
-- many permits each, scored -1 (below every stamp, so the stamp ranges count grants only); there
-- are few (each block drops every entry it outlasts). A penalty's, and a block's entry once a
-- grant or a penalty is stamped at or after it, is named "h:stamp:count"; a block's entry
-- stamped after every grant and penalty (a *block entry*, src/algorithm/sliding.rs) is named
-- "b:stamp:count". Block entries are the newest entries; the decision instant and a grant's or
-- a penalty's stamp read the newest stamp but theirs, so a grant beside a block's later entry
-- is stamped now and counts one window, not until the block's end. A set written before block
-- entries were named has none: it decides at its newest stamp, as it did (never later than a
-- grant's own clock reading would: only under-admits). A denial and a peek only read.
-- KEYS (the state key is the sorted set), ARGV, ops and reply: window_args (prelude.lua); the
-- adjust ops make the change the in-process sliding log makes (src/algorithm/sliding.rs,
-- `adjust`), the total saturating at `most`.
--
-- A negative L: a named state (state_name). Its set holds one more member, scored -2, naming
-- the quota that wrote it: "q:L:W", or "q:L:W:H:U" while it holds its entries for a longer
-- window H (> W) until U (us). Stamps mean the same under any quota, so another quota decides
-- on the same entries; but no entry is released earlier than the quota that wrote the set
-- would release it: while that quota counts a longer window than this call's (its own W, or
-- the H it held until U), this call counts, trims and expires by that window, until the
-- newest entry has left the writer's own window (or U, if later). A shorter window counted
-- longer only refuses; a longer one needs no hold (every entry it lacks was released by the
-- quota that counted it).
local key, op, L, W, n = window_args()
local named = L < 0
if named then
  L = -L
end
-- This call's own window (a block's length is measured by it); W becomes the window counted.
local own = W
local now = now_us()

-- Only members this script writes, validated before anything is written: the heavy entries
-- (all read here: one per stamp, the block entries the newest of all), every score -1 or a stamp
-- in range (counted), and the grants this call reads by name (the oldest and the newest here,
-- those a denial reads below).
local what = 'a sliding log'
local STAMPS = 6755399441055743 -- 2^53 - 2^51 - 1: a stamp plus a window stays exact

-- A grant member `m` ("stamp:sequence") scored `score`, validated; its stamp.
local function grant(m, score)
  local s, q = string.match(m, '^(%d+):(%d+)$')
  local stamp = whole(s, 0, STAMPS, what)
  whole(q, 1, STAMPS, what)
  if whole_score(score, 0, STAMPS, what) ~= stamp then
    foreign(what)
  end
  return stamp
end

-- The heavy entries, oldest first: {stamp, count, member, whether a block entry}.
local heavy = {}
local low = redis.call('ZRANGEBYSCORE', key, -1, -1)
for _, m in ipairs(low) do
  local kind, s, c = string.match(m, '^([hb]):(%d+):(%d+)$')
  heavy[#heavy + 1] = {whole(s, 0, STAMPS, what), whole(c, 1, 2251799813685248, what), m,
    kind == 'b'}
end
table.sort(heavy, function(a, b) return a[1] < b[1] end)
for i = 2, #heavy do
  -- One heavy entry per stamp (add_heavy merges); no block entry before another heavy one.
  if heavy[i][1] == heavy[i - 1][1] or heavy[i - 1][4] and not heavy[i][4] then
    foreign(what)
  end
end
low = #low
local card = redis.call('ZCARD', key)
-- A named set's quota member (nil if none): {member, L, W, H or nil, U or nil}.
local meta = nil
if named and card > 0 then
  local q = redis.call('ZRANGEBYSCORE', key, -2, -2)
  if #q ~= 1 then
    foreign('a named sliding log')
  end
  local sl, sw, rest = string.match(q[1], '^q:(%d+):(%d+)(.*)$')
  meta = {q[1], whole(sl, 1, 2251799813685248, what), whole(sw, 1, 2251799813685248, what)}
  if rest ~= '' then
    local sh, su = string.match(rest, '^:(%d+):(%d+)$')
    meta[4] = whole(sh, meta[3] + 1, 2251799813685248, what)
    meta[5] = whole(su, 1, 9007199254740991, what)
  end
  -- The quota member sorts first: ranks below count it with the heavy entries.
  low = low + 1
end
local top = nil
if card > low then
  if redis.call('ZCOUNT', key, 0, STAMPS) ~= card - low then
    foreign(what)
  end
  local first = redis.call('ZRANGE', key, low, low, 'WITHSCORES')
  grant(first[1], first[2])
  local last = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  top = grant(last[1], last[2])
  -- A block entry is stamped after every grant (a grant at its stamp or later unblocks it).
  for _, h in ipairs(heavy) do
    if h[4] and h[1] <= top then
      foreign(what)
    end
  end
end

if meta ~= nil and card == 1 then
  -- A quota member alone: never written.
  foreign('a named sliding log')
end

if op == 'reset' then
  return {redis.call('DEL', key)}
end

-- A named set: the window counted, and the quota member this call writes with a change.
local hold = nil
if meta ~= nil then
  local newest_any = top
  if #heavy > 0 and (newest_any == nil or heavy[#heavy][1] > newest_any) then
    newest_any = heavy[#heavy][1]
  end
  hold = named_hold(meta[3], meta[4], meta[5], W, newest_any, now)
  if hold ~= nil then
    W = hold[1]
  end
end

local at, cutoff, expired, lights, total, newest

-- Reads the state at max(now, the newest stamp but the block entries'): at, cutoff, the expired
-- and live grants' counts, the live total and the newest stamp, block entries included (nil if
-- nothing counts).
local function read()
  local grants = nil
  local top = redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')
  if top[2] and tonumber(top[2]) >= 0 then
    grants = tonumber(top[2])
  end
  newest = grants
  for _, h in ipairs(heavy) do
    if not h[4] and (grants == nil or h[1] > grants) then
      grants = h[1]
    end
  end
  if #heavy > 0 and (newest == nil or heavy[#heavy][1] > newest) then
    newest = heavy[#heavy][1]
  end
  at = now
  if grants ~= nil and grants > at then
    at = grants
  end
  cutoff = at - W
  expired = redis.call('ZCOUNT', key, 0, fmt(cutoff))
  lights = redis.call('ZCARD', key) - low - expired
  total = lights
  for _, h in ipairs(heavy) do
    if h[1] > cutoff then
      total = total + h[2]
    end
  end
  if total == 0 then
    newest = nil
  end
end

-- Drops the grants and the heavy entries stamped <= upto (`grants`: how many grants that is,
-- if known).
local function prune(upto, grants)
  if (grants or redis.call('ZCOUNT', key, 0, fmt(upto))) > 0 then
    redis.call('ZREMRANGEBYSCORE', key, 0, fmt(upto))
  end
  local kept = {}
  for _, h in ipairs(heavy) do
    if h[1] > upto then
      kept[#kept + 1] = h
    else
      redis.call('ZREM', key, h[3])
      low = low - 1
    end
  end
  heavy = kept
end

-- A heavy entry's member: its kind, stamp and count.
local function name(h)
  local kind = 'h:'
  if h[4] then
    kind = 'b:'
  end
  return kind .. fmt(h[1]) .. ':' .. fmt(h[2])
end

-- Sets heavy entry i's count and kind (removing it at count 0).
local function set_heavy(i, c, block)
  local h = heavy[i]
  redis.call('ZREM', key, h[3])
  low = low - 1
  if c > 0 then
    low = low + 1
    h[2], h[4] = c, block
    h[3] = name(h)
    redis.call('ZADD', key, -1, h[3])
  else
    table.remove(heavy, i)
  end
end

-- Adds `c` permits stamped `s` as a heavy entry, a block entry if `block` (merged with one of
-- the same stamp).
local function add_heavy(s, c, block)
  for i, h in ipairs(heavy) do
    if h[1] == s then
      set_heavy(i, h[2] + c, block)
      return
    end
  end
  local h = {s, c, nil, block}
  h[3] = name(h)
  redis.call('ZADD', key, -1, h[3])
  low = low + 1
  heavy[#heavy + 1] = h
  table.sort(heavy, function(a, b) return a[1] < b[1] end)
end

-- Before a grant or a penalty stamped `s`: the block entries stamped at or before it are no
-- longer stamped after every grant (the later ones stay block entries).
local function unblock(s)
  for i, h in ipairs(heavy) do
    if h[4] and h[1] <= s then
      set_heavy(i, h[2], false)
    end
  end
end

-- The key's expiry, set by `done` after the reply's last read: Redis compares an expiry with
-- its live clock, which runs on while the script does, so one ahead of `now` may be past by
-- then, and the key goes at once.
local expire_at = nil
-- A change was made (named sets: the quota member is then rewritten, or the set deleted once
-- it holds nothing else).
local changed = false
local function done(reply)
  if named and changed then
    local q = 'q:' .. fmt(L) .. ':' .. fmt(own)
    if hold ~= nil then
      q = q .. ':' .. fmt(hold[1]) .. ':' .. fmt(hold[2])
    end
    if meta ~= nil and meta[1] ~= q then
      redis.call('ZREM', key, meta[1])
      meta = nil
    end
    if redis.call('ZCARD', key) == (meta and 1 or 0) then
      redis.call('DEL', key)
      expire_at = nil
    elseif meta == nil then
      redis.call('ZADD', key, -2, q)
    end
  end
  if expire_at ~= nil then
    redis.call('PEXPIREAT', key, ceil_ms(expire_at))
  end
  return reply
end

read()

if op ~= 'check' then
  local most = tonumber(ARGV[6])
  changed = true
  prune(cutoff, expired)
  if op == 'block' and n > 0 then
    local stamp = block_stamp(now, n, own, newest)
    prune(stamp)
    read()
    local add = math.min(L, most - total)
    if add > 0 then
      -- A block entry iff every entry left is one (none is a grant or a penalty).
      local block = redis.call('ZCARD', key) == low
      for _, h in ipairs(heavy) do
        block = block and h[4]
      end
      add_heavy(stamp, add, block)
    end
  elseif op == 'penalize' and n > 0 then
    local add = math.min(n, most - total)
    if add > 0 then
      unblock(at)
      add_heavy(at, add, false)
    end
  elseif op == 'reward' then
    while n > 0 and total > 0 do
      local h = heavy[#heavy]
      local light_top = nil
      if lights > 0 then
        light_top = tonumber(redis.call('ZRANGE', key, -1, -1, 'WITHSCORES')[2])
      end
      if h ~= nil and (light_top == nil or h[1] >= light_top) then
        local take = math.min(n, h[2])
        set_heavy(#heavy, h[2] - take, h[4])
        n, total = n - take, total - take
      else
        local above = cutoff
        if h ~= nil then
          above = h[1]
        end
        local c = redis.call('ZCOUNT', key, '(' .. fmt(above), '+inf')
        local take = math.min(n, c)
        redis.call('ZPOPMAX', key, take)
        n, total, lights = n - take, total - take, lights - take
      end
    end
  end
  read()
  if newest ~= nil then
    expire_at = newest + W
  end
  n = 1
end

-- Until every entry has left the window.
local function reset()
  if total > 0 then
    return newest + W - now
  end
  return 0
end

local remaining = math.max(L - total, 0)
if n == 0 or op ~= 'check' and total + n <= L then
  return done({now, 1, remaining, -1, reset()})
end
if n > L then
  return done({now, 2, remaining, -1, reset()})
end
if total + n <= L then
  changed = true
  prune(cutoff, expired)
  unblock(at)
  local stamp = fmt(at)
  local card = redis.call('ZCARD', key)
  local batch = {}
  for i = 1, n do
    batch[#batch + 1] = stamp
    batch[#batch + 1] = stamp .. ':' .. fmt(lights + i)
    if #batch >= 1000 or i == n then
      redis.call('ZADD', key, 'NX', unpack(batch))
      batch = {}
    end
  end
  -- A member can only exist already if the clock stepped back onto an old stamp: add fresh
  -- ones until all n are in (bounded: at most the set's size of collisions).
  local want = card + n
  local seq = lights + n
  while redis.call('ZCARD', key) < want do
    seq = seq + 1
    redis.call('ZADD', key, 'NX', stamp, stamp .. ':' .. fmt(seq))
  end
  total = total + n
  -- A block entry stamped later stays the newest: the key lives until it leaves.
  if newest == nil or at > newest then
    newest = at
  end
  expire_at = newest + W
  return done({now, 1, L - total, -1, reset()})
end

-- Denied: until the oldest (total + n - L) counted permits have left, walking the grants and
-- the heavy entries in stamp order. Grants sit at ranks from #heavy + expired on.
local need = total + n - L
local got, passed = 0, 0
local base = low + expired
local function grant_at(i)
  local r = base + i - 1
  local m = redis.call('ZRANGE', key, r, r, 'WITHSCORES')
  return grant(m[1], m[2])
end
for _, h in ipairs(heavy) do
  if h[1] > cutoff then
    local before = redis.call('ZCOUNT', key, '(' .. fmt(cutoff), '(' .. fmt(h[1])) - passed
    if got + before >= need then
      return done({now, 0, remaining, grant_at(passed + need - got) + W - now, reset()})
    end
    got, passed = got + before, passed + before
    got = got + h[2]
    if got >= need then
      return done({now, 0, remaining, h[1] + W - now, reset()})
    end
  end
end
return done({now, 0, remaining, grant_at(passed + need - got) + W - now, reset()})
