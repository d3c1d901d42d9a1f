-- Lift a lagging fence counter to a token already issued: counter = max(counter, token).
-- Unconditional on purpose: raising a counter to an issued token can only make
-- later tokens larger, so it is safe even after the hold was released.
-- Counters are compared by below (counter.lua, prepended).
-- KEYS[1] fence counter; ARGV[1] token
if below(redis.call('GET', KEYS[1]) or '0', ARGV[1]) then
  redis.call('SET', KEYS[1], ARGV[1])
  return 1
end
return 0
