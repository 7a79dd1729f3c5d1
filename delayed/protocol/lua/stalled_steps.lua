-- Where workflows' waiting steps are, for people to look at (it writes nothing). A step whose record
-- says it waits (scheduled, pending or retrying) has its blob in its queue or its scheduled set: every
-- script of ours that takes it from there marks its record in the same call (tracking.lua). A worker
-- that does not track tasks (a stock go-delayed worker: its dequeue pops the blob and HSETs it into
-- <queue>_processing under its own id, and never writes the record) leaves the record waiting while
-- it holds the blob, and once it took another task the blob is nowhere: the step ran, or will, but
-- nothing reports its end, so its successors wait and the workflow never ends.
-- Bounded: it looks at the first `limit` steps of each workflow, in the order it lists them, and at
-- `budget` steps in all; through the first `depth` tasks of each queue and, if it has at most `depth`
-- of them, the entries of its processing hash (each read once a call, however many workflows it
-- looks at: the workflows of one queue are best looked at in one call). A waiting step not found
-- there, in a longer queue or processing hash, is counted as unchecked, never called stalled.
-- KEYS: flows...
-- ARGV: limit budget depth
-- Returns, per workflow in order: its status ('' if there is none), the steps looked at, those
-- unchecked, the number of stalled ones, then per stalled step its record key, status, func, and the
-- id of the worker holding its blob ('' when it is nowhere). Only a running or failed workflow's
-- steps (which may still wait) are looked at.
local limit, budget, depth = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])

-- Per queue, its first `depth` tasks (blob -> true) and the blobs its workers hold (blob -> worker id)
-- if it has at most `depth` holders, each with whether it is the whole of them: read once.
local queued, held = {}, {}
local function looked_through(queue)
    if not queued[queue] then
        local tasks, holders = {}, {}
        for _, blob in ipairs(redis.call('lrange', queue, 0, depth - 1)) do
            tasks[blob] = true
        end
        local processing = queue .. '_processing'
        local holding = redis.call('hlen', processing)
        if holding <= depth then
            local entries = redis.call('hgetall', processing)
            for i = 1, #entries, 2 do
                holders[entries[i + 1]] = entries[i]
            end
        end
        queued[queue] = {tasks = tasks, whole = redis.call('llen', queue) <= depth and holding <= depth}
        held[queue] = holders
    end
    return queued[queue], held[queue]
end

-- The workflow's stalled steps (appended to reply: key, status, func, worker id), and how many steps it
-- looked at and could not tell.
local function look(flow, reply, most)
    local looked, unchecked = 0, 0
    for key in string.gmatch(redis.call('hget', flow, 'steps') or '', '[^\n]+') do
        if looked >= most then
            break
        end
        looked = looked + 1
        local fields = redis.call('hmget', key, 'status', 'blob', 'nonce', 'func')
        local step, blob, nonce = fields[1], fields[2], fields[3]
        local queue = string.sub(key, 1, #key - 38)  -- a record key is <queue>_task:<32 hex digits>
        if blob and (step == 'pending' or step == 'scheduled' or step == 'retrying')
                and not (nonce and redis.call('zscore', queue .. '_scheduled', nonce .. blob)) then
            local pending, holders = looked_through(queue)
            local holder = holders[blob] or (not pending.tasks[blob] and pending.whole and '')
            if holder then
                for _, value in ipairs({key, step, fields[4] or '', holder}) do
                    reply[#reply + 1] = value
                end
            elseif not pending.tasks[blob] then
                unchecked = unchecked + 1
            end
        end
    end
    return looked, unchecked
end

local reply = {}
for _, flow in ipairs(KEYS) do
    local status = redis.call('hget', flow, 'status')
    local at = #reply
    reply[at + 1], reply[at + 2], reply[at + 3], reply[at + 4] = status or '', 0, 0, 0
    if status == 'running' or status == 'failed' then
        local looked, unchecked = look(flow, reply, math.min(limit, budget))
        budget = budget - looked
        reply[at + 2], reply[at + 3], reply[at + 4] = looked, unchecked, (#reply - at - 4) / 4
    end
end
return reply
