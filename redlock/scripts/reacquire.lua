-- Extend a hold, re-creating its key where the node lost it (WithReacquireOnExtend):
-- PEXPIRE while the key holds this value (1); else, where the key is absent
-- (the node restarted empty, or the key expired), SET it NX for ttl and lift
-- the fence counter to the hold's token (2); else another value holds the key,
-- and nothing is written (0). The waiting set is not read: this is a hold
-- that a quorum granted, not a new acquisition. The client sends it only while
-- the hold's validity lasts, and counts a node only for a 1 or a 2.
-- Counters are compared by below (counter.lua, prepended).
-- KEYS[1] lock key, KEYS[2] fence counter; ARGV[1] value, ARGV[2] ttl in milliseconds, ARGV[3] token
local v = redis.call('GET', KEYS[1])
if v == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
if v then
  return 0
end
local c = redis.call('GET', KEYS[2]) or '0'
if not string.match(c, '^%d+$') then
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is not a counter')
end
redis.call('SET', KEYS[1], ARGV[1], 'PX', ARGV[2], 'NX')
if below(c, ARGV[3]) then
  redis.call('SET', KEYS[2], ARGV[3])
end
return 2
