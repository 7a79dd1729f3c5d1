-- A busy worker's one round trip per batch: release the tasks it finished and
-- claim up to one task per free worker id, each held under its own id (so any
-- sweeper, Python or Go, requeues it if that id's keep-alive key expires), and
-- consume one notification per task taken.
-- An id that still holds a task (the reply to the last claim was lost) gets that
-- task again (HSETNX refuses to overwrite it, and the task read for it stays at
-- the head of the queue for the next id), so a retried claim never loses a task.
-- A write that frees memory comes first (the releases, else trimming the notifications it may
-- take, those it did not take given back after): Redis at its maxmemory (noeviction) refuses a
-- script's first write when it would grow memory, not the later ones, so a full Redis still lets a
-- worker drain it.
-- It takes no more tasks than there are notifications left: a go-delayed worker
-- that BLPOPed a notification pops the queue in a second round trip, and if we
-- took its task its dequeue script errors on the empty list and it backs off
-- (1 s, 2 s, 4 s ... up to a minute).
-- Released tasks are done: 'done' in the counts hash grows by how many ids still held one (one
-- HINCRBY per batch; a resent release, or one of a task a sweeper took, deletes and counts nothing;
-- a tracked one whose cancel was requested while it ran ends cancelled, uncounted: tracking.lua).
-- A paused queue (its paused key exists) gives no new task: the ids only get back what they hold.
-- Tracked tasks (see tracking.lua): a tracked release writes its result into the record, if its id
-- still held the task; a task claimed while the queue's tracked marker exists is looked at, and
-- its record, if it has one, says running (the one key a script of ours writes undeclared: found
-- in the blob, it cannot be named before the claim; named after the queue, it is in the queue's
-- slot, which Redis Cluster accepts). Untracked traffic costs one EXISTS per claim.
-- The worker's notes of when its ids claimed tasks they no longer hold go first (unnoted: fields of
-- its description, info; see note_claims.lua), so that no id claims again under an old note.
-- A released id that held a slot of a limit key frees it, and a blob waiting for one goes to the head
-- of the queue (limits.lua), before the claims: this call may take it.
-- KEYS: name noti processing counts paused tracked info limit_holders records...
-- ARGV: task_prefix limit_running_prefix limit_waiting_prefix released_count tracked_count unnoted_count released... results... unnoted... claim_ids...
-- records: those of the tracked releases; released_count: the untracked ids to release (released...);
-- tracked_count: the tracked ones, each in results... as its id, the result, the note, the seconds
-- it ran; unnoted_count: how many ids' notes to delete (unnoted...); claim_ids: the ids to claim tasks for
-- uses: tracking limits
-- Returns paused (1 or 0), then id1, blob1, id2, blob2, ...: the tasks now held, in queue order.
local released, tracked, unnoted = tonumber(ARGV[4]), tonumber(ARGV[5]), tonumber(ARGV[6])
local done = 0
if released > 0 then
    done = redis.call('hdel', KEYS[3], unpack(ARGV, 7, released + 6))
end
local freeing = done > 0  -- holds ended in this call: the limit slots they held go free
local at = released + 7
local track = tracked > 0 and tracking(ARGV[1])
for i = 1, tracked do
    if redis.call('hdel', KEYS[3], ARGV[at]) == 1 then
        freeing = true
        if track.ended(KEYS[8 + i], 'done', 'result', ARGV[at + 1], 'note', ARGV[at + 2], 'seconds', ARGV[at + 3])
                ~= 'cancelled' then
            done = done + 1
        end
    end
    at = at + 4
end
if done > 0 then
    redis.call('hincrby', KEYS[4], 'done', done)
end
if freeing and limits.holding(KEYS[8]) then
    local ended = {unpack(ARGV, 7, released + 6)}
    for i = 0, tracked - 1 do
        ended[#ended + 1] = ARGV[released + 7 + 4 * i]
    end
    limits.free(KEYS[8], ARGV[2], ARGV[3], KEYS[1], KEYS[2], ended)
end
if unnoted > 0 then
    redis.call('hdel', KEYS[7], unpack(ARGV, at, at + unnoted - 1))
end
local first = at + unnoted
local paused = redis.call('exists', KEYS[5])
local wanted = 0
if paused == 0 then
    wanted = math.min(#ARGV - first + 1, redis.call('llen', KEYS[2]))
end
local head = {}
local marked = false  -- the queue has seen tracked tasks: note who takes what
if wanted > 0 then
    head = redis.call('lrange', KEYS[1], 0, wanted - 1)
    marked = redis.call('exists', KEYS[6]) == 1
    redis.call('ltrim', KEYS[2], wanted, -1)
end
local claimed, takers = {paused}, {}
local taken = 0
for i = first, #ARGV do
    local task = head[taken + 1]
    if task and redis.call('hsetnx', KEYS[3], ARGV[i], task) == 1 then
        taken = taken + 1
        if marked then
            takers[taken] = ARGV[i]
        end
    else
        task = redis.call('hget', KEYS[3], ARGV[i])
    end
    if task then
        claimed[#claimed + 1] = ARGV[i]
        claimed[#claimed + 1] = task
    end
end
if wanted > taken then  -- an id still held a task, or the queue had fewer tasks than notifications
    local back = {}
    for i = 1, wanted - taken do
        back[i] = '1'
    end
    redis.call('lpush', KEYS[2], unpack(back))
end
if taken > 0 then
    redis.call('ltrim', KEYS[1], taken, -1)
    if marked then
        track = track or tracking(ARGV[1])
        for i = 1, taken do
            local key = track.key(head[i])
            if key then
                track.running(key, takers[i])
            end
        end
    end
end
return claimed
