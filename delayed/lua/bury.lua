-- Move a worker's task to the dead-letter list and release it, atomically.
-- KEYS[1] dead-letter list, KEYS[2] processing hash
-- ARGV[1] worker id, ARGV[2] the dead-letter record
redis.call('rpush', KEYS[1], ARGV[2])
return redis.call('hdel', KEYS[2], ARGV[1])
