-- Lift a lagging fence counter to a token already issued: counter = max(counter, token).
-- Unconditional on purpose: raising a counter to an issued token can only make
-- later tokens larger, so it is safe even after the hold was released.
-- Counters are compared as exact integers (two 10-digit halves), never as
-- doubles, which lose precision past 2^53.
-- KEYS[1] fence counter; ARGV[1] token
local function below(a, b)
  a, b = string.rep('0', 20 - #a) .. a, string.rep('0', 20 - #b) .. b
  local ah, bh = tonumber(string.sub(a, 1, 10)), tonumber(string.sub(b, 1, 10))
  return ah < bh or (ah == bh and tonumber(string.sub(a, 11)) < tonumber(string.sub(b, 11)))
end
if below(redis.call('GET', KEYS[1]) or '0', ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
