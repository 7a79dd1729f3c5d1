-- A busy worker's one round trip per batch: release the tasks it finished and
-- claim up to one task per free worker id, each held under its own id (so any
-- sweeper, Python or Go, requeues it if that id's keep-alive key expires), and
-- consume one notification per task popped.
-- An id that still holds a task (the reply to the last claim was lost) gets that
-- task again, so a retried claim never overwrites, and so never loses, a task.
-- It pops no more tasks than there are notifications left: a go-delayed worker
-- that BLPOPed a notification pops the queue in a second round trip, and if we
-- took its task its dequeue script errors on the empty list and it backs off
-- (1 s, 2 s, 4 s ... up to a minute).
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash
-- ARGV[1] r, the number of ids to release; ARGV[2 .. r+1] those ids;
-- ARGV[r+2 ..] the ids to claim tasks for
-- Returns id1, blob1, id2, blob2, ...: the tasks now held, in queue order.
local released = tonumber(ARGV[1])
if released > 0 then
    redis.call('hdel', KEYS[3], unpack(ARGV, 2, released + 1))
end
local claimed = {}
local popped = 0
local notified = redis.call('llen', KEYS[2])
local empty = false
for i = released + 2, #ARGV do
    local task = redis.call('hget', KEYS[3], ARGV[i])
    if not task and not empty and popped < notified then
        task = redis.call('lpop', KEYS[1])
        if task then
            redis.call('hset', KEYS[3], ARGV[i], task)
            popped = popped + 1
        else
            empty = true
        end
    end
    if task then
        claimed[#claimed + 1] = ARGV[i]
        claimed[#claimed + 1] = task
    end
end
if popped > 0 then
    redis.call('ltrim', KEYS[2], popped, -1)
end
return claimed
