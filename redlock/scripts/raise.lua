-- Raise the fence counter to a token, only while this hold owns the lock key.
-- The ownership check is what makes a raise count toward the token's quorum.
-- Counters are compared by below (counter.lua, prepended).
-- KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] value, ARGV[2] token
if redis.call('GET', KEYS[1]) ~= ARGV[1] then
  return 0
end
if below(redis.call('GET', KEYS[2]) or '0', ARGV[2]) then
  redis.call('SET', KEYS[2], ARGV[2])
end
return 1
