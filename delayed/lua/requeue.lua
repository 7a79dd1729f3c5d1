-- Put a worker's task back on the queue (a retry) and release it, atomically,
-- so a crash can neither lose the task nor leave two copies.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash
-- ARGV[1] worker id, ARGV[2] the blob to enqueue
redis.call('rpush', KEYS[1], ARGV[2])
redis.call('rpush', KEYS[2], '1')
return redis.call('hdel', KEYS[3], ARGV[1])
