-- A busy worker's one round trip per batch: release the tasks it finished and
-- claim up to one task per free worker id, each held under its own id (so any
-- sweeper, Python or Go, requeues it if that id's keep-alive key expires), and
-- consume one notification per task claimed.
-- KEYS[1] queue list, KEYS[2] notification list, KEYS[3] processing hash
-- ARGV[1] r, the number of ids to release; ARGV[2 .. r+1] those ids;
-- ARGV[r+2 ..] the ids to claim tasks for, in order
-- Returns the claimed blobs: blob i is held by claim id i.
local released = tonumber(ARGV[1])
if released > 0 then
    redis.call('hdel', KEYS[3], unpack(ARGV, 2, released + 1))
end
local tasks = {}
local held = {}
for i = released + 2, #ARGV do
    local task = redis.call('lpop', KEYS[1])
    if not task then
        break
    end
    tasks[#tasks + 1] = task
    held[#held + 1] = ARGV[i]
    held[#held + 1] = task
end
if #tasks > 0 then
    redis.call('hset', KEYS[3], unpack(held))
    redis.call('ltrim', KEYS[2], #tasks, -1)
end
return tasks
