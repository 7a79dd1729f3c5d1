-- Move a worker's task to the dead-letter list and release it, atomically.
-- Fenced as requeue.lua is: only if the worker's id still holds the blob it claimed.
-- KEYS[1] dead-letter list, KEYS[2] processing hash
-- ARGV[1] worker id, ARGV[2] the blob it claimed, ARGV[3] the dead-letter record
-- Returns 1, or 0 when fenced off.
if redis.call('hget', KEYS[2], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('rpush', KEYS[1], ARGV[3])
redis.call('hdel', KEYS[2], ARGV[1])
return 1
