-- Claim one tick of a periodic entry and enqueue its task, atomically: of all the
-- scheduler replicas that see the same tick, exactly one enqueues it.
-- KEYS: periodic name noti counts legacy...
-- ARGV: entry tick blob enqueue
-- periodic: the queue's hash, entry name -> last tick claimed; counts: adds 1 to 'enqueued' when it
-- enqueues; legacy: (outside a cluster) the hash of every queue's ticks older versions kept, whose
-- tick counts for an entry the queue's own hash does not know yet; tick: unix seconds; enqueue: "1"
-- to enqueue, "0" to claim the tick without enqueueing (a missed tick the entry skips)
-- Returns 1 if this call claimed the tick, 0 if another replica already had.
local last = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not last and KEYS[5] then
    last = tonumber(redis.call('hget', KEYS[5], ARGV[1]))
end
if last and tonumber(ARGV[2]) <= last then
    return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] == '1' then
    redis.call('rpush', KEYS[2], ARGV[3])
    redis.call('rpush', KEYS[3], '1')
    redis.call('hincrby', KEYS[4], 'enqueued', 1)
end
return 1
