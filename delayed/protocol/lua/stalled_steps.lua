-- Where a workflow's waiting steps are, for people to look at (it writes nothing). A step whose record
-- says it waits (scheduled, pending or retrying) has its blob in its queue or its scheduled set: every
-- script of ours that takes it from there marks its record in the same call (tracking.lua). A worker
-- that does not track tasks (a stock go-delayed worker: its dequeue pops the blob and HSETs it into
-- <queue>_processing under its own id, and never writes the record) leaves the record waiting while
-- it holds the blob, and once it took another task the blob is nowhere: the step ran, or will, but
-- nothing reports its end, so its successors wait and the workflow never ends.
-- Bounded: it looks at the workflow's first `limit` steps, in the order it lists them, and through the
-- first `depth` tasks of each queue and the first `depth` entries of each processing hash (each read
-- once); a waiting step not found there, in a longer queue or processing hash, is counted as
-- unchecked, never called stalled.
-- KEYS: flow
-- ARGV: limit depth
-- Returns {status, looked, unchecked, then per stalled step: its record key, status, func, and the
-- id of the worker holding its blob ('' when it is nowhere)}: status is the workflow's ('' if there
-- is none), and nothing is looked at unless it is running or failed (steps may still wait).
local limit, depth = tonumber(ARGV[1]), tonumber(ARGV[2])
local status = redis.call('hget', KEYS[1], 'status')
if status ~= 'running' and status ~= 'failed' then
    return {status or '', 0, 0}
end

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

local reply, looked, unchecked = {status}, 0, 0
for key in string.gmatch(redis.call('hget', KEYS[1], 'steps') or '', '[^\n]+') do
    if looked >= limit then
        break
    end
    looked = looked + 1
    local fields = redis.call('hmget', key, 'status', 'blob', 'nonce', 'func')
    local step, blob, nonce = fields[1], fields[2], fields[3]
    if blob and (step == 'pending' or step == 'scheduled' or step == 'retrying') then
        local queue = string.sub(key, 1, #key - 38)  -- a record key is <queue>_task:<32 hex digits>
        local scheduled = nonce and redis.call('zscore', queue .. '_scheduled', nonce .. blob)
        if not scheduled then
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
end
table.insert(reply, 2, looked)
table.insert(reply, 3, unchecked)
return reply
