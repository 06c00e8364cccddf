-- Sliding window of k sub-windows: the window W split into k sub-windows of g = W / k (whole us,
-- aligned to the Unix epoch on the server's clock). The state is the in-process one
-- (src/algorithm/sliding.rs): a log of (stamp, count) entries, oldest first, a grant stamped
-- with the start of its sub-window; with at = max(now, the newest grant's stamp), the permits
-- counted are those of entries stamped after at - W, and n is admitted iff they plus n are
-- <= L. As in process, a clock that stepped back behind the newest grant's stamp decides at
-- that stamp: time never runs backwards within a key, so a clock step never over-admits.
-- The newest entries may be *block entries*: a block's entries stamped after every grant and
-- penalty (a block longer than the window stamps its entry after now). The decision instant
-- and a grant's or a penalty's stamp read the newest stamp but theirs: a grant beside a
-- block's later entry is stamped at its sub-window's start, goes before that entry, and counts
-- one window, not until the block's end.
-- One string key, in one of three forms:
--   "s:c1:c2:...:cj" when there is no block entry and every stamp is a sub-window start less
--   than W before the newest (encode, below): s is the index (time / g) of the newest
--   sub-window holding permits, ci the count of sub-window s - i + 1 (c1 > 0, empty
--   sub-windows between kept as 0, j <= k);
--   "=t1:c1:t2:c2:..." otherwise, when there is no block entry (a block stamps its entry at
--   its end less W, anywhere): the entries' stamps (us) and counts, oldest first;
--   "=t1:c1:t2:c2:...=b" when the newest b entries (1 <= b <= their number) are block entries.
-- A value written before block entries were stored has none: it decides at its newest stamp,
-- as it did (never later than a grant's own clock reading would: only under-admits).
-- It expires when its newest entry leaves the window. A denial and a peek only read.
-- KEYS, ARGV, ops and reply: window_args (prelude.lua), with k dividing W (checked by the
-- client); the adjust ops make the change the in-process sliding window makes (`adjust` there),
-- the total saturating at `most`.
--
-- A negative L: a named state (state_name), "L,W,k,<value>", the quota that wrote it first, or
-- "L,W,k,H,U,<value>" while it holds its entries for a longer window H (> W) until U (us).
-- Stamps mean the same under any quota: another quota (L, W or k) decodes the value on the
-- writer's grid and decides on the same entries, stored again on its own (off-grid stamps in
-- the long form). No entry is released earlier than the quota that wrote the state would
-- release it: while that quota counts a longer window than this call's (its own W, or the H
-- it held until U), this call counts and expires by that window, until the newest entry has
-- left the writer's own window (or U, if later); counting longer only refuses.
local key, op, L, W, n = window_args()
local k = tonumber(ARGV[5])
local named = L < 0
if named then
  L = -L
end
-- The grid: this call's own window (what `encode` and a block's length are measured by), and
-- its sub-windows g; W becomes the window counted.
local own, ownk = W, k
local g = W / k
local now = now_us()

-- The log, oldest first: {stamp, count}; its newest `blocks` entries are block entries.
local log = {}
local blocks = 0
local v = redis.call('GET', key)

-- The value that holds `log` (one of the three forms above), nil for an empty log.
local function encode()
  local e = log[#log]
  if e == nil then
    return nil
  end
  -- The short form needs every stamp on a sub-window start, all within one window, and no
  -- block entry.
  for _, x in ipairs(log) do
    if blocks > 0 or idiv(x[1], g) * g ~= x[1] or e[1] - x[1] >= own then
      local parts = {}
      for _, y in ipairs(log) do
        parts[#parts + 1] = fmt(y[1]) .. ':' .. fmt(y[2])
      end
      local tail = ''
      if blocks > 0 then
        tail = '=' .. fmt(blocks)
      end
      return '=' .. table.concat(parts, ':') .. tail
    end
  end
  local s = e[1] / g
  local parts = {fmt(s)}
  local i = #log
  for m = s, log[1][1] / g, -1 do
    if log[i][1] == m * g then
      parts[#parts + 1] = fmt(log[i][2])
      i = i - 1
    else
      parts[#parts + 1] = '0'
    end
  end
  return table.concat(parts, ':')
end

-- A named state's quota: {L, W, k, H or nil, U or nil}.
local meta = nil
if v and named then
  local nw = 'a named sliding window'
  local l0, w0, rest = named_head(v, nw)
  local sk, tail = string.match(rest, '^(%d+),(.*)$')
  meta = {l0, w0, whole(sk, 1, 64, nw)}
  rest = tail or ''
  local sh, su
  sh, su, tail = string.match(rest, '^(%d+),(%d+),(.*)$')
  if sh then
    meta[4] = whole(sh, meta[2] + 1, 2251799813685248, nw)
    meta[5] = whole(su, 1, 9007199254740991, nw)
    rest = tail
  end
  if meta[2] % meta[3] ~= 0 then
    foreign(nw)
  end
  -- Decoded (and checked against encode) on the writer's grid.
  own, k = meta[2], meta[3]
  g = own / k
  v = rest
end

if v then
  -- Only a value this script wrote, validated before anything is written: every number as
  -- fmt writes it, stamps (and sub-window indices) in range and strictly increasing, counts
  -- at least 1 (0 only for an empty sub-window between two counted ones) and 2^51 in all, a
  -- block count from 1 to the number of entries, in exactly the form encode() gives the log
  -- they make.
  local what = 'a sliding window'
  local most = 2251799813685248
  local sum = 0
  if string.sub(v, 1, 1) == '=' then
    local entries = v
    local tail = string.find(v, '=', 2, true)
    if tail then
      entries = string.sub(v, 1, tail - 1)
      blocks = whole(string.sub(v, tail + 1), 1, most, what)
    end
    local t = nil
    for x in string.gmatch(entries, '%d+') do
      if t == nil then
        t = whole(x, 0, 6755399441055743, what)
        if log[#log] and log[#log][1] >= t then
          foreign(what)
        end
      else
        log[#log + 1] = {t, whole(x, 1, most, what)}
        sum = sum + log[#log][2]
        t = nil
      end
    end
  else
    local s = nil
    local i = 0
    for x in string.gmatch(v, '%d+') do
      if s == nil then
        s = whole(x, 0, idiv(MAX_US, g), what)
      else
        local c = whole(x, 0, most, what)
        i = i + 1
        if i > k or c > 0 and s - i + 1 < 0 then
          foreign(what)
        end
        if c > 0 then
          table.insert(log, 1, {(s - i + 1) * g, c})
          sum = sum + c
        end
      end
    end
  end
  if sum > most or blocks > #log or encode() ~= v then
    foreign(what)
  end
end

-- Back on this call's grid.
own, k = W, ownk
g = own / k
-- A named state: the window counted, and the head this call writes with its value.
local head = ''
if named then
  local hold = nil
  if meta ~= nil then
    hold = named_hold(meta[2], meta[4], meta[5], W, log[#log] and log[#log][1], now)
  end
  head = fmt(L) .. ',' .. fmt(own) .. ',' .. fmt(k) .. ','
  if hold ~= nil then
    W = hold[1]
    head = head .. fmt(hold[1]) .. ',' .. fmt(hold[2]) .. ','
  end
end

local total = 0
for _, e in ipairs(log) do
  total = total + e[2]
end

local function newest()
  local e = log[#log]
  return e and e[1]
end

-- The newest stamp but the block entries' (nil if every entry is one).
local function newest_grant()
  local e = log[#log - blocks]
  return e and e[1]
end

-- Drops the oldest entries while `gone(stamp)`.
local function drop_front(gone)
  local i = 1
  while log[i] and gone(log[i][1]) do
    total = total - log[i][2]
    i = i + 1
  end
  if i > 1 then
    log = append({}, log, i)
    -- Block entries leave last: only once every entry left was one.
    blocks = math.min(blocks, #log)
  end
end

-- `c` permits of a grant or a penalty stamped `s` (not before the newest grant's stamp), in
-- stamp order: merged into an entry of that stamp, else a new entry before the block entries
-- stamped later, which stay block entries (those stamped at or before `s` no longer are).
local function record(s, c)
  local i = #log - blocks + 1
  while log[i] and log[i][1] < s do
    i = i + 1
  end
  if log[i] and log[i][1] == s then
    log[i][2] = log[i][2] + c
  elseif log[i - 1] and log[i - 1][1] == s then
    i = i - 1
    log[i][2] = log[i][2] + c
  else
    table.insert(log, i, {s, c})
  end
  blocks = #log - i
  total = total + c
end

local at
-- The instant decisions are made at, and the log pruned to what counts then.
local function settle()
  at = now
  local s = newest_grant()
  if s and s > at then
    at = s
  end
  drop_front(function(stamp) return stamp + W <= at end)
end

-- The start of at's sub-window, never before the newest grant's stamp.
local function slot()
  local s = idiv(at, g) * g
  local e = newest_grant()
  if e and e > s then
    s = e
  end
  return s
end

local function store()
  local e = newest()
  if e == nil then
    redis.call('DEL', key)
    return
  end
  redis.call('SET', key, head .. encode(), 'PXAT', ceil_ms(e + W))
end

if op == 'reset' then
  return {redis.call('DEL', key)}
end

settle()

if op ~= 'check' then
  local most = tonumber(ARGV[6])
  local changed = true
  if op == 'block' and n > 0 then
    local stamp = block_stamp(now, n, own, newest())
    drop_front(function(s) return s <= stamp end)
    local add = math.min(L, most - total)
    if add > 0 then
      -- A block entry iff every entry left is one (none is a grant or a penalty).
      if blocks == #log then
        blocks = blocks + 1
      end
      table.insert(log, 1, {stamp, add})
      total = total + add
    end
  elseif op == 'penalize' and n > 0 then
    local add = math.min(n, most - total)
    if add > 0 then
      record(slot(), add)
    end
  elseif op == 'reward' and n > 0 and total > 0 then
    while n > 0 and log[#log] do
      local e = log[#log]
      local take = math.min(n, e[2])
      e[2] = e[2] - take
      total = total - take
      n = n - take
      if e[2] > 0 then
        break
      end
      log[#log] = nil
      blocks = math.max(blocks - 1, 0)
    end
  else
    changed = false
  end
  if changed then
    store()
  end
  settle()
  n = 1
end

local remaining = math.max(L - total, 0)

-- Until the newest counted entry leaves (the key holds nothing counted any more).
local function reset()
  local e = newest()
  if e then
    return e + W - now
  end
  return 0
end

if n == 0 or op ~= 'check' and total + n <= L then
  return {now, 1, remaining, -1, reset()}
end
if n > L then
  return {now, 2, remaining, -1, reset()}
end
if total + n <= L then
  record(slot(), n)
  store()
  return {now, 1, L - total, -1, reset()}
end

-- Denied: until enough of the oldest entries have left for n to fit.
local left = total
local retry_at = at
for _, e in ipairs(log) do
  left = left - e[2]
  retry_at = e[1] + W
  if left + n <= L then
    break
  end
end
return {now, 0, remaining, retry_at - now, reset()}
