-- Take a unique task's lock and enqueue (or schedule) it, atomically; nothing if the lock is held.
-- KEYS[1] the lock, KEYS[2] queue list, KEYS[3] notification list, KEYS[4] scheduled sorted set,
-- KEYS[5] counts hash (adds 1 to 'enqueued' when the task is enqueued or scheduled),
-- KEYS[6], KEYS[7] (a tracked task only) the queue's tracked marker and the task's record (see tracking.lua)
-- ARGV[1] lock lifetime (ms), ARGV[2] lock token, ARGV[3] blob, ARGV[4] due time or "" for now,
-- ARGV[5] scheduled-set member (when due is given), ARGV[6], ARGV[7] (tracked) its func path and
-- the seconds its record is kept once it ended
-- Returns 1, or the lock's remaining lifetime in ms, negated, when it is held.
if not redis.call('set', KEYS[1], ARGV[2], 'NX', 'PX', ARGV[1]) then
    return -redis.call('pttl', KEYS[1])
end
if ARGV[4] == '' then
    redis.call('rpush', KEYS[2], ARGV[3])
    redis.call('rpush', KEYS[3], '1')
else
    redis.call('zadd', KEYS[4], ARGV[4], ARGV[5])
end
redis.call('hincrby', KEYS[5], 'enqueued', 1)
if KEYS[6] then
    redis.call('set', KEYS[6], '1')
    tracking('').enqueued(KEYS[7], ARGV[6], ARGV[7], ARGV[3], ARGV[4], ARGV[5])
end
return 1
