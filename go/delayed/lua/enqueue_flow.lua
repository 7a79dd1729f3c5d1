-- Enqueue a workflow atomically (see flow.lua): its hash, every step's record, the steps that wait on
-- nothing into their queues (or scheduled sets), and the tasks outside it that some steps wait on
-- (depends_on) told of them; or, if one of those has no record or was cancelled, nothing.
-- KEYS: flow counts records...
-- ARGV: ttl final shape step_count steps... dependencies...
-- flow: the workflow's hash; counts: its queue's counts hash (workflows_started grows by 1);
-- records: the steps' records, in the order of steps; ttl: seconds the workflow and its steps'
-- records are kept once ended; final, shape: the workflow's (flow.lua); steps: per step its
-- queue, func path, blob, due ('' for now), scheduled-set member, waits (how many inputs it waits
-- for), inputs ('', 'one' or 'list'), size and next (flow.lua); dependencies: per input taken from a
-- task outside the workflow, that task's record, the index of the step (1, 2, ...) and the slot
-- uses: tracking
-- Returns {1}, or {0, record, status} for a dependency that has none ('') or was cancelled.
local ttl, count = ARGV[1], tonumber(ARGV[4])
local dependencies = 5 + 9 * count
for i = dependencies, #ARGV, 3 do
    local status = redis.call('hget', ARGV[i], 'status')
    if not status or status == 'cancelled' then
        return {0, ARGV[i], status or ''}
    end
end
local track = tracking('')
local flow = flows(track)
local steps = {}
for i = 1, count do
    steps[i] = KEYS[2 + i]
end
redis.call('hset', KEYS[1], 'status', 'running', 'total', count, 'left', count, 'steps', table.concat(steps, '\n'),
           'final', ARGV[2], 'shape', ARGV[3], 'ttl', ttl, 'created', track.now(),
           'queue', string.sub(KEYS[2], 1, -8))
redis.call('hincrby', KEYS[2], 'workflows_started', 1)
local enqueued = {}  -- per queue: how many steps went into it (or its scheduled set); its marker is set
for i = 1, count do
    local at = 5 + 9 * (i - 1)
    local queue, func, blob, due, member = ARGV[at], ARGV[at + 1], ARGV[at + 2], ARGV[at + 3], ARGV[at + 4]
    local waits, inputs, size, next = ARGV[at + 5], ARGV[at + 6], ARGV[at + 7], ARGV[at + 8]
    local key = KEYS[2 + i]
    if not enqueued[queue] then
        redis.call('set', queue .. '_tracked', '1')
        enqueued[queue] = 0
    end
    -- the step's workflow fields, in the one HSET that writes its record (no next: no successors)
    local step = next == '' and {'flow', KEYS[1]} or {'flow', KEYS[1], 'next', next}
    if waits == '0' then
        if due == '' then
            redis.call('rpush', queue, blob)
            redis.call('rpush', queue .. '_noti', '1')
        else
            redis.call('zadd', queue .. '_scheduled', due, member)
        end
        enqueued[queue] = enqueued[queue] + 1
        track.enqueued(key, func, ttl, blob, due, member, unpack(step))
    else
        redis.call('hset', key, 'status', 'waiting', 'func', func, 'ttl', ttl, 'enqueued', track.now(), 'blob', blob,
                   'queue', queue, 'waits', waits, 'inputs', inputs, 'size', size, unpack(step))
    end
end
for queue, steps in pairs(enqueued) do
    if steps > 0 then
        redis.call('hincrby', queue .. '_counts', 'enqueued', steps)
    end
end
for i = dependencies, #ARGV, 3 do
    flow.depend(ARGV[i], KEYS[2 + tonumber(ARGV[i + 1])], ARGV[i + 2])
end
return {1}
