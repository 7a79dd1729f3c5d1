-- Take a unique task's lock and enqueue (or schedule) it, atomically; nothing if the lock is held.
-- KEYS: lock name noti scheduled counts tracking_keys...
-- ARGV: lock_ms token blob due member tracking_args...
-- counts: adds 1 to 'enqueued' when the task is enqueued or scheduled; tracking_keys: (a tracked
-- task only) the queue's tracked marker and the task's record; lock_ms: the lock's lifetime; due:
-- unix seconds or "" for now; member: the scheduled-set member (when due is given); tracking_args:
-- (tracked) its func path and the seconds its record is kept once it ended
-- uses: tracking
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
