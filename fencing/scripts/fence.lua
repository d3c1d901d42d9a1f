-- Admit a fencing token and, in the same step, apply the write it guards.
-- KEYS[1]: the resource's high-water key.
-- KEYS[2]: the data key (op "set": a string; op "append": a list).
-- ARGV[1]: the token in canonical decimal. ARGV[2]: "admit" | "set" | "append".
-- ARGV[3]: the value to set or the entry to append.
-- Returns {1} when admitted, {0, highest} when the token is stale.
--
-- Tokens are compared as two 10-digit halves, never as one Lua number: Lua
-- numbers are doubles, which cannot tell 2^53 from 2^53+1.
local function halves(s)
  s = string.rep('0', 20 - #s) .. s
  return tonumber(string.sub(s, 1, 10)), tonumber(string.sub(s, 11))
end

local token = ARGV[1]
local highest = redis.call('GET', KEYS[1])
if highest then
  local th, tl = halves(token)
  local hh, hl = halves(highest)
  if th < hh or (th == hh and tl < hl) then
    return {0, highest}
  end
end
redis.call('SET', KEYS[1], token)

local op = ARGV[2]
if op == 'set' then
  redis.call('SET', KEYS[2], ARGV[3])
elseif op == 'append' then
  redis.call('RPUSH', KEYS[2], token .. ' ' .. ARGV[3])
end
return {1}
