-- Release a hold: delete the key only while it holds this value, and tell
-- waiters on the release channel (the message is the released value). The fence counter is never deleted.
-- KEYS[1] lock key; ARGV[1] value, ARGV[2] release channel
if redis.call('GET', KEYS[1]) == ARGV[1] then
  redis.call('DEL', KEYS[1])
  redis.call('PUBLISH', ARGV[2], ARGV[1])
  return 1
end
return 0
