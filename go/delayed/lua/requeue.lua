-- Put a worker's task back on the queue (a retry) and release it, atomically,
-- so a crash can neither lose the task nor leave two copies. Fenced: nothing
-- happens unless the worker's id still holds the blob it claimed (a sweeper
-- that took the worker for dead has already requeued that task). A limit slot the id held is freed
-- (limits.lua).
-- KEYS: name noti processing counts limit_holders record...
-- ARGV: worker_id claimed blob limit_running_prefix limit_waiting_prefix error...
-- counts: adds 1 to 'retried'; record: a tracked task's record, which says retrying, with error
-- (see tracking.lua); blob: the blob to enqueue. A tracked task whose cancel was requested while it
-- ran is not retried: it ends cancelled (uncounted).
-- uses: tracking limits
-- Returns 1, or 0 when fenced off.
if redis.call('hget', KEYS[3], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('hdel', KEYS[3], ARGV[1])  -- first: a write that frees memory (see claim_batch.lua)
limits.freed(KEYS[5], ARGV[4], ARGV[5], KEYS[1], KEYS[2], {ARGV[1]})
local track = KEYS[6] and tracking('')
if track and track.cancelling(KEYS[6]) then
    track.ended(KEYS[6], 'cancelled')
    return 1
end
redis.call('rpush', KEYS[1], ARGV[3])
redis.call('rpush', KEYS[2], '1')
redis.call('hincrby', KEYS[4], 'retried', 1)
if track then
    track.retrying(KEYS[6], ARGV[6], ARGV[3], track.now(), '')
end
return 1
