/*
 * The Lua scripts of RedisViewStore. Each runs as one atomic step on the server: every check (fencing) comes
 * before the first change, so a refused write changes nothing.
 *
 * Layout (all keys of one view share the hash tag `{name}`, so a cluster keeps them in one slot):
 *   rows        hash key → `[lsn,timestampMs,"partition",row]` (JSON, written by the client as is)
 *   tombstones  hash key → `[lsn,timestampMs]`
 *   partitions  hash partition → JSON `{ p: position, e: "epoch", l: "lsn", mn, mx }` (numbers as strings:
 *               cjson would round them to 14 digits)
 *   fences      hash `["min","max"]` → highest epoch a write over that key range carried
 *
 * Strings are compared byte by byte (`lt`), not with Lua's `<`, which follows the server's collation locale.
 */

/** @internal Arguments: mode, commit count, 6 per commit, then 5 per change. See RedisViewStore#write. */
export const WRITE_SCRIPT = `
local rowsKey, tombKey, partsKey, fencesKey = KEYS[1], KEYS[2], KEYS[3], KEYS[4]
local guarded = ARGV[1] == 'guarded'
local commitCount = tonumber(ARGV[2])

local function lt(a, b)
  local la, lb = #a, #b
  for i = 1, math.min(la, lb) do
    local x, y = string.byte(a, i), string.byte(b, i)
    if x ~= y then return x < y end
  end
  return la < lb
end
local function overlaps(amin, amax, bmin, bmax) return lt(amin, bmax) and lt(bmin, amax) end
local function lsnOf(value) return tonumber(string.match(value, '^%[([^,]+)')) end

local fences
local function loadFences()
  if fences then return fences end
  fences = {}
  local flat = redis.call('HGETALL', fencesKey)
  for i = 1, #flat, 2 do
    local range = cjson.decode(flat[i])
    fences[#fences + 1] = { mn = range[1], mx = range[2], e = tonumber(flat[i + 1]) }
  end
  return fences
end

-- The exactly-once mark a partition without one inherits from the stored ranges over [mn, mx): per part, the
-- highest covering mark; over the parts, the lowest; nil when a part is covered by none (see inheritedLsn).
local function inherited(partition, mn, mx)
  local marks = {}
  local flat = redis.call('HGETALL', partsKey)
  for i = 1, #flat, 2 do
    if flat[i] ~= partition then
      local r = cjson.decode(flat[i + 1])
      if r.mx and r.l and overlaps(r.mn, r.mx, mn, mx) then marks[#marks + 1] = r end
    end
  end
  if #marks == 0 then return nil end
  local cuts = { mn, mx }
  for _, m in ipairs(marks) do
    if lt(mn, m.mn) and lt(m.mn, mx) then cuts[#cuts + 1] = m.mn end
    if lt(mn, m.mx) and lt(m.mx, mx) then cuts[#cuts + 1] = m.mx end
  end
  table.sort(cuts, lt)
  local mark
  for i = 1, #cuts - 1 do
    local a, b = cuts[i], cuts[i + 1]
    if a ~= b then
      local best
      for _, m in ipairs(marks) do
        if not lt(a, m.mn) and not lt(m.mx, b) and (best == nil or tonumber(m.l) > tonumber(best)) then best = m.l end
      end
      if best == nil then return nil end
      if mark == nil or tonumber(best) < tonumber(mark) then mark = best end
    end
  end
  return mark
end

-- 1. Fencing, before anything is written: the partition's own epoch, and every key range overlapping the
--    commit's range (or its partition's stored one): a split child or a merge written with a higher epoch
--    fences its parents, and so does another range written at the same epoch.
local commits, marks = {}, {}
local i = 3
for _ = 1, commitCount do
  local c = { part = ARGV[i], epoch = ARGV[i + 1], pos = ARGV[i + 2], lsn = ARGV[i + 3], mn = ARGV[i + 4], mx = ARGV[i + 5] }
  i = i + 6
  if c.lsn == '' then c.lsn = nil end
  if c.mx == '' then c.mn, c.mx = nil, nil end
  local epoch = tonumber(c.epoch)
  local raw = redis.call('HGET', partsKey, c.part)
  if raw then c.rec = cjson.decode(raw) end
  local highest = c.rec and tonumber(c.rec.e) or -1
  local fenced = highest > epoch
  -- The commit's range, or the one stored with its partition when the commit gives none.
  c.fmn, c.fmx = c.mn, c.mx
  if not c.fmx and c.rec and c.rec.mx then c.fmn, c.fmx = c.rec.mn, c.rec.mx end
  if c.fmx then
    for _, f in ipairs(loadFences()) do
      if overlaps(f.mn, f.mx, c.fmn, c.fmx) then
        if f.e > highest then highest = f.e end
        -- Another range at the same epoch: a parent taken again after its children were created (isFenced).
        if f.e > epoch or (f.e == epoch and (f.mn ~= c.fmn or f.mx ~= c.fmx)) then fenced = true end
      end
    end
  end
  if fenced then return { 'FENCED', c.part, c.epoch, tostring(highest) } end
  c.mark = c.rec and c.rec.l
  if c.mark == nil and c.mx then c.mark = inherited(c.part, c.mn, c.mx) end
  marks[c.part] = c.mark
  commits[#commits + 1] = c
end

-- 2. One change per key: exactly-once drops what the partition's mark covers and keeps the last in write
--    order; guarded keeps the highest LSN.
local latest, order, total = {}, {}, 0
while i <= #ARGV do
  local key, lsn, part, ts, value = ARGV[i], ARGV[i + 1], ARGV[i + 2], ARGV[i + 3], ARGV[i + 4]
  i = i + 5
  total = total + 1
  local l = tonumber(lsn)
  local mark = marks[part]
  if guarded or mark == nil or l > tonumber(mark) then
    local previous = latest[key]
    if previous == nil then order[#order + 1] = key end
    if not guarded or previous == nil or l >= previous.l then latest[key] = { l = l, lsn = lsn, ts = ts, value = value } end
  end
end

-- 3. Rows (guarded: never over a newer row or tombstone) and tombstones.
local written, deleted = 0, 0
for _, key in ipairs(order) do
  local c = latest[key]
  local current = redis.call('HGET', rowsKey, key)
  if c.value ~= '' then
    local apply = true
    if guarded then
      local tomb = redis.call('HGET', tombKey, key)
      apply = not (tomb and lsnOf(tomb) >= c.l) and not (current and lsnOf(current) >= c.l)
    end
    if apply then
      redis.call('HSET', rowsKey, key, c.value)
      written = written + 1
    end
  elseif guarded then
    local tomb = redis.call('HGET', tombKey, key)
    if not tomb or lsnOf(tomb) < c.l then redis.call('HSET', tombKey, key, '[' .. c.lsn .. ',' .. c.ts .. ']') end
    if current and lsnOf(current) < c.l then
      redis.call('HDEL', rowsKey, key)
      deleted = deleted + 1
    end
  elseif current then
    redis.call('HDEL', rowsKey, key)
    deleted = deleted + 1
  end
end

-- 4. Partitions: the epoch always rises; a replay (last LSN read at or below the mark) keeps the position.
for _, c in ipairs(commits) do
  local rec = c.rec or {}
  local replayed = c.lsn and c.mark and tonumber(c.lsn) <= tonumber(c.mark)
  local epoch = c.epoch
  if rec.e and tonumber(rec.e) > tonumber(epoch) then epoch = rec.e end
  local lsn = c.lsn
  if lsn == nil or (c.mark and tonumber(c.mark) > tonumber(lsn)) then lsn = c.mark end
  local position = rec.p
  if not replayed then position = c.pos end
  local mn, mx = rec.mn, rec.mx
  if c.mx then mn, mx = c.mn, c.mx end
  redis.call('HSET', partsKey, c.part, cjson.encode({ p = position, e = epoch, l = lsn, mn = mn, mx = mx }))
  if c.fmx then
    local field = cjson.encode({ c.fmn, c.fmx })
    local stored = redis.call('HGET', fencesKey, field)
    if not stored or tonumber(stored) < tonumber(c.epoch) then redis.call('HSET', fencesKey, field, c.epoch) end
  end
end

return { written, deleted, total - written - deleted }
`;

/** @internal Removes tombstones older than ARGV[1] (ms). Returns how many. */
export const PRUNE_SCRIPT = `
local flat = redis.call('HGETALL', KEYS[1])
local before = tonumber(ARGV[1])
local removed = 0
for i = 1, #flat, 2 do
  local ts = tonumber(string.match(flat[i + 1], ',([^%]]+)%]$'))
  if ts < before then
    redis.call('HDEL', KEYS[1], flat[i])
    removed = removed + 1
  end
end
return removed
`;
