-- Enqueue (or schedule) tracked tasks, each with its record, atomically (see tracking.lua); sets the
-- queue's tracked marker, so claims look for tracked tasks from now on.
-- KEYS: name noti scheduled counts tracked records...
-- ARGV: ttl due tasks...
-- counts: adds the tasks to 'enqueued'; records: the tasks' records; ttl: seconds a record is kept
-- once its task ended; due: unix seconds, or '' for now; tasks: per task its func path, its blob,
-- its scheduled-set member ('' for now)
-- uses: tracking
-- Returns the number of tasks enqueued.
redis.call('set', KEYS[5], '1')
local track = tracking('')
local count = 0
for i = 3, #ARGV, 3 do
    count = count + 1
    local func, blob, member = ARGV[i], ARGV[i + 1], ARGV[i + 2]
    if ARGV[2] == '' then
        redis.call('rpush', KEYS[1], blob)
        redis.call('rpush', KEYS[2], '1')
    else
        redis.call('zadd', KEYS[3], ARGV[2], member)
    end
    track.enqueued(KEYS[5 + count], func, ARGV[1], blob, ARGV[2], member)
end
redis.call('hincrby', KEYS[4], 'enqueued', count)
return count
