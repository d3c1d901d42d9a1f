-- Read a resource's fencing state without changing it.
-- KEYS[1]: the high-water key. KEYS[2]: the log key.
-- ARGV[1]: "highest" (returns the token or nil) | "log" (returns the entries).
if ARGV[1] == 'highest' then
  return redis.call('GET', KEYS[1])
end
return redis.call('LRANGE', KEYS[2], 0, -1)
