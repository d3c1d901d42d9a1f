-- Extend a hold: PEXPIRE only while the key still holds this value.
-- A vanished key is never re-created.
-- KEYS[1] lock key; ARGV[1] value, ARGV[2] ttl in milliseconds
if redis.call('GET', KEYS[1]) == ARGV[1] then
  return redis.call('PEXPIRE', KEYS[1], ARGV[2])
end
return 0
