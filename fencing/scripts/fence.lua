-- Admit a fencing token and, in the same step, apply the write it guards.
-- KEYS[1]: the resource's high-water key (a string).
-- KEYS[2]: this call's op key: present once the call was applied.
-- KEYS[3]: the data key (op "set": a string; op "append": a list); absent for "admit".
-- ARGV[1]: the token in canonical decimal. ARGV[2]: "admit" | "set" | "append".
-- ARGV[3]: the value to set or the entry to append.
-- ARGV[4]: how long to keep the op key, in milliseconds.
-- Returns {1} when admitted (now, or by an earlier run of the same call),
-- {0, highest} when the token is stale.
--
-- Redis does not roll a script back: a command that fails leaves the writes
-- before it in place. So everything that can fail is checked before the first
-- write, and the writes themselves cannot fail (SET overwrites any type; RPUSH
-- goes to a key known to be a list; a server over maxmemory refuses only a
-- script's first write, before anything changed).
--
-- Tokens are compared as two 10-digit halves, never as one Lua number: Lua
-- numbers are doubles, which cannot tell 2^53 from 2^53+1.
local function halves(s)
  s = string.rep('0', 20 - #s) .. s
  return tonumber(string.sub(s, 1, 10)), tonumber(string.sub(s, 11))
end

-- A retry of a call that was applied (its reply was lost): report it again.
if redis.call('EXISTS', KEYS[2]) == 1 then
  return {1}
end

local token, op = ARGV[1], ARGV[2]
local highest = redis.call('GET', KEYS[1]) -- fails on a key of the wrong type
if highest and not (#highest <= 20 and string.match(highest, '^[0-9]+$')) then
  return redis.error_reply('ERR fencing: high-water key ' .. KEYS[1] .. ' holds ' .. highest .. ', not a token')
end
if op == 'append' then
  local t = redis.call('TYPE', KEYS[3]).ok
  if t ~= 'none' and t ~= 'list' then
    return redis.error_reply('WRONGTYPE fencing: log key ' .. KEYS[3] .. ' holds a ' .. t .. ', not a list')
  end
end
if highest then
  local th, tl = halves(token)
  local hh, hl = halves(highest)
  if th < hh or (th == hh and tl < hl) then
    return {0, highest}
  end
end

redis.call('SET', KEYS[1], token)
if op == 'set' then
  redis.call('SET', KEYS[3], ARGV[3])
elseif op == 'append' then
  redis.call('RPUSH', KEYS[3], token .. ' ' .. ARGV[3])
end
redis.call('SET', KEYS[2], '1', 'PX', ARGV[4])
return {1}
