-- Pass a hold to the next waiter of the same process in one step: the
-- release of the old value (release.lua, unannounced), then the acquire of
-- the new one (acquire.lua, unannounced). Waiters in other processes are
-- not woken: the key is taken again at once.
-- KEYS[1] lock key (the user's key), KEYS[2] fence counter of its hash slot
-- ARGV[1] the new hold's value, ARGV[2] ttl in milliseconds, ARGV[3] the
-- old hold's value
-- Returns acquire.lua's reply, {1, counter} or {0, pttl, counter, holder},
-- with one more element: 1 when the old value held the key here (and was
-- released), else 0. Counters travel as decimal strings (see acquire.lua).
local c = redis.call('GET', KEYS[2]) or '0'
if not string.match(c, '^%d+$') then
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is not a counter')
end
if c == '9223372036854775807' then
  -- Refuse before writing anything: the old hold stays, for its Unlock.
  return redis.error_reply('fencedlock: fence counter ' .. KEYS[2] .. ' is exhausted')
end
local had = 0
if redis.call('GET', KEYS[1]) == ARGV[3] then
  redis.call('DEL', KEYS[1])
  had = 1
end
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  redis.call('INCR', KEYS[2])
  return {1, redis.call('GET', KEYS[2]), had}
end
return {0, redis.call('PTTL', KEYS[1]), c, redis.call('GET', KEYS[1]), had}
