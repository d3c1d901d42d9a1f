-- Raise the fence counter to a token, only while this hold owns the lock key.
-- The ownership check is what makes a raise count toward the token's quorum.
-- Counters are compared as exact integers (two 10-digit halves), never as
-- doubles, which lose precision past 2^53.
-- KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] value, ARGV[2] token
local function below(a, b)
  a, b = string.rep('0', 20 - #a) .. a, string.rep('0', 20 - #b) .. b
  local ah, bh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  return ah < bh or (ah == bh and tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11)))
end
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if below(redis.call('GET', KEYS[2]) or '0', ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
