-- Workflows (chains, groups, depends_on, on_success, on_failure): the functions that move a workflow
-- on as its steps end, shared by every script that ends a tracked task (tracking.lua's track.ended),
-- so a step's successors are released in the same script call that settles the step: no crash can
-- fall between the two (see delayed/wire/flow.py, which writes what these read).
-- Every step is a tracked task. Besides a record's fields (tracking.lua), a step's record holds:
--   flow      the key of its workflow's hash, <queue>_flow:<id>
--   next      its successors: per successor "<when>|<record key>|<slot>;", when 's' (runs once this
--             step succeeded), 'f' (once it failed: on_failure) or 'a' (either: a group member whose
--             failure is passed on), slot the successor's input this step fills (1, 2, ...)
--   counted   1 once this step counted in its workflow's `left`
--   stopped   1 while its failure stops its workflow (it is one of the workflow's `failed`)
-- A step that waits on others has status 'waiting' and, until all have ended:
--   waits     how many inputs it still waits for    queue   the queue it goes into when released
--   inputs    '' (it takes no result), 'one' (the one input, as an extra last argument) or 'list'
--             (all inputs, in slot order, as one list)   size   how many inputs it takes
--   in:<slot> what each input was: a result's msgpack, or a failure (an ext value: see failure())
-- A workflow's hash: status (running | done | failed | cancelled), total and left (its steps, and
-- those not ended yet), steps (every step's record key, one per line), final (the record keys whose
-- results are the workflow's, one per line) and shape ('one' or 'list'), ttl, created, finished,
-- failed (the steps whose failure stops it, one per line), handled (the first step whose failure an
-- on_failure step took), error (the last such failure), cancelled (a step a user cancelled),
-- counted_failed (it was counted in workflows_failed), queue (whose counts hash counts workflows).
-- flows(track) builds these functions on a script's tracking functions.

-- How long a record is kept that must outlive a run to come (a failed step that stopped its
-- workflow, a failed task a workflow depends on): ten years (delayed/wire/options.py's MAX_SECONDS),
-- in effect until it runs again; an expiry all the same, which tells the claim of that run apart.
local KEPT_SECONDS = 316224000

local function flows(track)
    local flow = {}

    -- The position after the msgpack value at pos in s (no value is decoded: Redis's cmsgpack cannot
    -- read bin, which a GoTask's payload and every bytes argument is).
    local function skip(s, pos)
        local b = string.byte(s, pos)
        local function length(bytes)
            local n = 0
            for i = 1, bytes do
                n = n * 256 + string.byte(s, pos + i)
            end
            return n
        end
        local function items(count, from)
            for _ = 1, count do
                from = skip(s, from)
            end
            return from
        end
        if b <= 0x7f or b >= 0xe0 or b == 0xc0 or b == 0xc2 or b == 0xc3 then
            return pos + 1
        elseif b <= 0x8f then
            return items(2 * (b - 0x80), pos + 1)
        elseif b <= 0x9f then
            return items(b - 0x90, pos + 1)
        elseif b <= 0xbf then
            return pos + 1 + b - 0xa0
        elseif b >= 0xc4 and b <= 0xc6 then  -- bin 8, 16, 32
            local size = 2 ^ (b - 0xc4)
            return pos + 1 + size + length(size)
        elseif b >= 0xc7 and b <= 0xc9 then  -- ext 8, 16, 32
            local size = 2 ^ (b - 0xc7)
            return pos + 2 + size + length(size)
        elseif b >= 0xca and b <= 0xd3 then  -- float 32, 64; uint 8 .. 64; int 8 .. 64
            local sizes = {4, 8, 1, 2, 4, 8, 1, 2, 4, 8}
            return pos + 1 + sizes[b - 0xc9]
        elseif b >= 0xd4 and b <= 0xd8 then  -- fixext 1 .. 16
            return pos + 2 + 2 ^ (b - 0xd4)
        elseif b >= 0xd9 and b <= 0xdb then  -- str 8, 16, 32
            local size = 2 ^ (b - 0xd9)
            return pos + 1 + size + length(size)
        elseif b == 0xdc or b == 0xdd then
            local size = b == 0xdc and 2 or 4
            return items(length(size), pos + 1 + size)
        else  -- map 16, 32
            local size = b == 0xde and 2 or 4
            return items(2 * length(size), pos + 1 + size)
        end
    end

    local function sized(marker, count, bytes)
        local out = {string.char(marker)}
        for i = bytes - 1, 0, -1 do
            out[#out + 1] = string.char(math.floor(count / 256 ^ i) % 256)
        end
        return table.concat(out)
    end

    local function array_header(count)
        if count < 16 then
            return string.char(0x90 + count)
        end
        return count < 65536 and sized(0xdc, count, 2) or sized(0xdd, count, 4)
    end

    -- The msgpack array at pos in s with value appended: its new bytes, and the position after the old.
    local function appended(s, pos, value)
        local b = string.byte(s, pos)
        if b == 0xc0 then  -- nil: no arguments
            return array_header(1) .. value, pos + 1
        end
        local count, header
        if b >= 0x90 and b <= 0x9f then
            count, header = b - 0x90, 1
        elseif b == 0xdc or b == 0xdd then
            header = b == 0xdc and 3 or 5
            count = 0
            for i = 1, header - 1 do
                count = count * 256 + string.byte(s, pos + i)
            end
        else  -- one value (a GoTask's single argument): it and the new one
            local after = skip(s, pos)
            return array_header(2) .. string.sub(s, pos, after - 1) .. value, after
        end
        local after = pos + header
        for _ = 1, count do
            after = skip(s, after)
        end
        return array_header(count + 1) .. string.sub(s, pos + header, after - 1) .. value, after
    end

    -- A task's blob with value (msgpack) as an extra last argument: a PyTask's args array grows by one;
    -- a GoTask's payload (a bin holding its argument, or the array of its arguments) does, but for no
    -- argument (nil): a Go handler of one parameter takes the whole payload, so the payload is value.
    function flow.with_argument(blob, value)
        local args = skip(blob, 2)  -- after the func path
        local b = string.byte(blob, args)
        if b >= 0xc4 and b <= 0xc6 then
            local size = 2 ^ (b - 0xc4)
            local length = 0
            for i = 1, size do
                length = length * 256 + string.byte(blob, args + i)
            end
            local payload = string.sub(blob, args + 1 + size, args + size + length)
            local grown = payload == '\192' and value or appended(payload, 1, value)
            local header = #grown < 256 and sized(0xc4, #grown, 1) or
                (#grown < 65536 and sized(0xc5, #grown, 2) or sized(0xc6, #grown, 4))
            return string.sub(blob, 1, args - 1) .. header .. grown .. string.sub(blob, args + 1 + size + length)
        end
        local grown, after = appended(blob, args, value)
        return string.sub(blob, 1, args - 1) .. grown .. string.sub(blob, after)
    end

    -- A failed step as an input: msgpack ext type 68 ("D") holding the map {id, func, status, error}
    -- (delayed.wire.flow.StepFailed reads it).
    local function failure(key, status)
        local fields = redis.call('hmget', key, 'func', 'error')
        local body = cmsgpack.pack({id = string.sub(key, -32), func = fields[1] or '', status = status,
                                    error = fields[2] or ''})
        local header = #body < 256 and sized(0xc7, #body, 1) or sized(0xc8, #body, 2)
        return header .. 'D' .. body
    end

    local function counts(flow_key)
        return redis.call('hget', flow_key, 'queue') .. '_counts'
    end

    -- A workflow counts in its queue's workflows_failed once, however often its steps fail.
    local function failed_once(flow_key)
        if redis.call('hsetnx', flow_key, 'counted_failed', '1') == 1 then
            redis.call('hincrby', counts(flow_key), 'workflows_failed', 1)
        end
    end

    -- The workflow of a step that ended moves on: `left` counts the step once, and the workflow ends
    -- when no step is left: failed if an on_failure step took a failure, cancelled if a step was
    -- cancelled (tracking.lua's track.cancel), else done.
    local function count(key, flow_key)
        if not flow_key or redis.call('hsetnx', key, 'counted', '1') == 0 then
            return
        end
        if redis.call('hincrby', flow_key, 'left', -1) == 0 then
            local fields = redis.call('hmget', flow_key, 'status', 'handled', 'cancelled')
            if fields[1] == 'running' or fields[1] == 'failed' then
                local ended = fields[2] and 'failed' or (fields[3] and 'cancelled' or 'done')
                redis.call('hset', flow_key, 'status', ended, 'finished', track.now())
                if ended == 'failed' then
                    failed_once(flow_key)
                elseif ended == 'done' then
                    redis.call('hincrby', counts(flow_key), 'workflows_done', 1)
                end
            end
            redis.call('expire', flow_key, redis.call('hget', flow_key, 'ttl'))
        end
    end

    -- A step's failure stops its workflow: the step joins the workflow's `failed` steps (one per line)
    -- until it runs again (flow.resumed); its record is `stopped`.
    local function stopped(key, flow_key, status)
        if not flow_key then
            return
        end
        if redis.call('hsetnx', key, 'stopped', '1') == 1 then
            local failed = redis.call('hget', flow_key, 'failed')
            redis.call('hset', flow_key, 'failed', failed and failed .. '\n' .. key or key)
        end
        redis.call('hset', flow_key, 'error', status .. ': ' .. (redis.call('hget', key, 'error') or ''))
        if redis.call('hget', flow_key, 'status') == 'running' then
            redis.call('hset', flow_key, 'status', 'failed')
        end
        failed_once(flow_key)
    end

    -- A step's failure went to an on_failure step: the workflow runs on to its end, and ends failed.
    local function handled(key, flow_key, status)
        redis.call('hsetnx', flow_key, 'handled', key)
        redis.call('hset', flow_key, 'error', status .. ': ' .. (redis.call('hget', key, 'error') or ''))
    end

    -- A waiting step whose inputs are all in goes into its queue, each input where it asked for them;
    -- first: the one input of an on_failure step, the failure that releases it before the rest are in.
    local function release(key, first)
        local fields = redis.call('hmget', key, 'queue', 'blob', 'inputs', 'size')
        local queue, blob, inputs, size = fields[1], fields[2], fields[3], tonumber(fields[4])
        local names = {}
        for slot = 1, size do
            names[slot] = 'in:' .. slot
        end
        if first and inputs ~= '' then
            blob = flow.with_argument(blob, first)
        elseif inputs ~= '' then
            local values = {}
            for first = 1, size, 4000 do
                local chunk = redis.call('hmget', key, unpack(names, first, math.min(size, first + 3999)))
                for i = 1, #chunk do
                    values[#values + 1] = chunk[i] ~= '' and chunk[i] or '\192'
                end
            end
            local value = inputs == 'one' and values[1] or array_header(size) .. table.concat(values)
            blob = flow.with_argument(blob, value)
        end
        for first = 1, size, 4000 do  -- first: writes that free memory (see claim_batch.lua)
            redis.call('hdel', key, unpack(names, first, math.min(size, first + 3999)))
        end
        redis.call('hdel', key, 'waits', 'queue', 'inputs', 'size')
        redis.call('hset', key, 'status', 'pending', 'blob', blob)
        redis.call('rpush', queue, blob)
        redis.call('rpush', queue .. '_noti', '1')
        redis.call('hincrby', queue .. '_counts', 'enqueued', 1)
    end

    -- A predecessor filled a waiting step's slot (value: its result, or its failure); a slot filled
    -- again (a failed member that ran again) changes the input and waits for nothing more.
    local function fill(key, slot, value)
        if redis.call('hset', key, 'in:' .. slot, value) == 1 and redis.call('hincrby', key, 'waits', -1) == 0 then
            release(key)
        end
    end

    -- A step ended with status (done: result is its msgpack): its successors move on, and its workflow.
    -- edges, flow_key: its record's `next` and `flow` (false where it has none), which the caller read.
    -- An on_failure step ('f' edges, from every step it watches) runs at the first failure among them,
    -- and is cancelled once they all succeeded. A failure it takes is handled: the steps that needed
    -- the failed one to succeed are cancelled, and the workflow runs on to its end. A failure nobody
    -- takes stops the workflow until the step runs again.
    -- Returns the record keys of waiting successors to cancel (which the caller ends), and whether its
    -- failure stopped the workflow (its record is then kept until it runs again).
    function flow.ended(key, status, result, edges, flow_key)
        local cancelled, stalled, taken = {}, {}, false
        for when, successor, slot in string.gmatch(edges or '', '(%a)|([^|]*)|(%d+);') do
            if redis.call('hget', successor, 'status') == 'waiting' then
                if when == 'f' then
                    if status == 'done' then
                        if redis.call('hset', successor, 'in:' .. slot, '\192') == 1 and
                            redis.call('hincrby', successor, 'waits', -1) == 0 then
                            cancelled[#cancelled + 1] = successor  -- every step it watched succeeded
                        end
                    elseif status == 'cancelled' then
                        cancelled[#cancelled + 1] = successor
                    else
                        release(successor, failure(key, status))
                        taken = true
                    end
                elseif status == 'done' then
                    fill(successor, slot, result ~= '' and result or '\192')
                elseif when == 'a' then
                    fill(successor, slot, failure(key, status))
                elseif status == 'cancelled' then
                    cancelled[#cancelled + 1] = successor
                else
                    stalled[#stalled + 1] = successor
                end
            end
        end
        if taken then  -- its on_failure step runs now: what needed it to succeed never will
            for _, successor in ipairs(stalled) do
                cancelled[#cancelled + 1] = successor
            end
            stalled = {}
            handled(key, flow_key, status)
        end
        if status ~= 'done' and status ~= 'cancelled' and (#stalled > 0 or not edges) then
            stopped(key, flow_key, status)  -- nobody takes its failure: the workflow stops here
            return cancelled, true
        end
        count(key, flow_key)
        return cancelled, false
    end

    -- A successor takes its slot from a task outside its workflow (depends_on): at once if that task
    -- is done, else once it ends (as its own successors do). Returns the task's status ('' if it has
    -- no record).
    function flow.depend(task, successor, slot)
        local fields = redis.call('hmget', task, 'status', 'result', 'next')
        local status = fields[1] or ''
        if status == 'done' then
            fill(successor, slot, fields[2] ~= '' and fields[2] or '\192')
        elseif status ~= '' and status ~= 'cancelled' then
            redis.call('hset', task, 'next', (fields[3] or '') .. 's|' .. successor .. '|' .. slot .. ';')
            if status == 'failed' or status == 'dead' then  -- ended: its record would expire before it runs again
                redis.call('expire', task, KEPT_SECONDS)
            end
        end
        return status
    end

    -- A step claimed to run (again), flow_key its record's `flow`: a step whose failure stopped its
    -- workflow no longer does, and the workflow runs on once no failed step stops it.
    function flow.resumed(key, flow_key)
        if redis.call('hdel', key, 'stopped') == 0 then
            return
        end
        local rest = {}
        for step in string.gmatch(redis.call('hget', flow_key, 'failed') or '', '[^\n]+') do
            if step ~= key then
                rest[#rest + 1] = step
            end
        end
        if #rest > 0 then
            redis.call('hset', flow_key, 'failed', table.concat(rest, '\n'))
            return
        end
        redis.call('hdel', flow_key, 'failed', 'error')
        if redis.call('hget', flow_key, 'status') == 'failed' then
            redis.call('hset', flow_key, 'status', 'running')
        end
    end

    return flow
end
