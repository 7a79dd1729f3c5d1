-- Claim one tick of a periodic entry and enqueue its task, atomically: of all the
-- scheduler replicas that see the same tick, exactly one enqueues it.
-- KEYS: periodic name noti counts legacy...
-- ARGV: entry tick blob enqueue
-- periodic: the queue's hash, entry name -> last tick claimed; counts: adds 1 to 'enqueued' when it
-- enqueues; legacy: (outside a cluster) the hash of every queue's ticks older versions kept, whose
-- tick counts for an entry the queue's own hash does not know yet; tick: unix seconds; enqueue: "1"
-- to enqueue, "0" to claim the tick without enqueueing (a missed tick the entry skips)
-- Returns 1 if this call claimed the tick, 0 if another replica already had, -1 if the tick lies in
-- the future by this server's clock (a replica whose own clock is fast): refused, nothing written, so
-- that it cannot claim a tick early and make the others skip the ticks before it.
local tick = tonumber(ARGV[2])
local clock = redis.call('time')
if tick > tonumber(clock[1]) + tonumber(clock[2]) / 1000000 then
    return -1
end
local last = tonumber(redis.call('hget', KEYS[1], ARGV[1]))
if not last and KEYS[5] then
    last = tonumber(redis.call('hget', KEYS[5], ARGV[1]))
end
if last and tick <= last then
    return 0
end
redis.call('hset', KEYS[1], ARGV[1], ARGV[2])
if ARGV[4] == '1' then
    redis.call('rpush', KEYS[2], ARGV[3])
    redis.call('rpush', KEYS[3], '1')
    redis.call('hincrby', KEYS[4], 'enqueued', 1)
end
return 1
