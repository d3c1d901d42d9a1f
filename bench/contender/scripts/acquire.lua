-- Acquire one node's share of a lock and draw a fencing counter value.
-- KEYS[1] lock key (the user's key), KEYS[2] fence counter of its hash slot
-- ARGV[1] this hold's value, ARGV[2] ttl in milliseconds
-- Returns {1, counter} when granted, {0, pttl, counter} when refused.
if redis.call('SET', KEYS[1], ARGV[1], 'NX', 'PX', ARGV[2]) then
  return {1, redis.call('INCR', KEYS[2])}
end
return {0, redis.call('PTTL', KEYS[1]), tonumber(redis.call('GET', KEYS[2]) or '0')}
