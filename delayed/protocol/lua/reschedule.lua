-- Hold a failed task for a later attempt (a retry with backoff) and release it, atomically.
-- Fenced as requeue.lua is: only if the worker's id still holds the blob it claimed. A limit slot the
-- id held is freed, and a blob waiting for it goes to the head of the queue (limits.lua).
-- KEYS: processing scheduled counts name noti limit_holders record...
-- ARGV: worker_id claimed due member limit_running_prefix limit_waiting_prefix error...
-- counts: adds 1 to 'retried'; record: a tracked task's record, which says retrying, with error
-- (see tracking.lua); due: unix seconds; member: the scheduled-set member to add. A tracked task
-- whose cancel was requested while it ran is not retried: it ends cancelled (uncounted).
-- uses: tracking limits
-- Returns 1, or 0 when fenced off.
if redis.call('hget', KEYS[1], ARGV[1]) ~= ARGV[2] then
    return 0
end
redis.call('hdel', KEYS[1], ARGV[1])  -- first: a write that frees memory (see claim_batch.lua)
limits.freed(KEYS[6], ARGV[5], ARGV[6], KEYS[4], KEYS[5], {ARGV[1]})
local track = KEYS[7] and tracking('')
if track and track.cancelling(KEYS[7]) then
    track.ended(KEYS[7], 'cancelled')
    return 1
end
redis.call('zadd', KEYS[2], ARGV[3], ARGV[4])
redis.call('hincrby', KEYS[3], 'retried', 1)
if track then
    track.retrying(KEYS[7], ARGV[7], string.sub(ARGV[4], 9), ARGV[3], ARGV[4])
end
return 1
