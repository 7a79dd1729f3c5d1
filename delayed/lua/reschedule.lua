-- Hold a failed task for a later attempt (a retry with backoff) and release it, atomically.
-- Fenced as requeue.lua is: only if the worker's id still holds the blob it claimed.
-- KEYS[1] processing hash, KEYS[2] scheduled sorted set, KEYS[3] counts hash (adds 1 to 'retried')
-- ARGV[1] worker id, ARGV[2] the blob it claimed, ARGV[3] due (unix seconds), ARGV[4] the member to add
-- Returns 1, or 0 when fenced off.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('zadd', KEYS[2], ARGV[3], ARGV[4])
redis.call('hdel', KEYS[1], ARGV[1])
redis.call('hincrby', KEYS[3], 'retried', 1)
return 1
