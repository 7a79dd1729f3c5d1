-- Tracked tasks' records: the functions every script that writes one shares (scripts.py puts this
-- file before each of those scripts, so the record's format is written here and nowhere else).
-- uses: flow
-- A tracked task is a PyTask or a GoTask whose options (its blob's last element, a map) hold its id, `id`;
-- its record is the hash <queue>_task:<id> (the prefix comes from keys.py, as an argument):
--   status    scheduled | pending | running | done | retrying | failed | dead | cancelled
--   func      the task's func path            ttl       seconds the record is kept once the task ended
--   enqueued  unix time it was enqueued       attempts  how many times a worker claimed it to run it
--   blob      its blob, as it was enqueued or last requeued or retried: what cancel.lua removes while
--             it waits, and what people read its arguments from until the record expires
--   nonce     (when in the scheduled set) the 8 bytes before the blob in its member
--   due       when it is due (scheduled; retrying: its next run)
--   worker, started   the worker id running it (running, and the last run once it ended) and when
--             that worker claimed it (unix time)
--   finished, seconds  when it ended and how long its last run took (seconds, as the worker measured)
--   result, note   done: the msgpack of the return value; note: why it was stored otherwise, if it was
--   error     retrying, failed, dead: what the last run raised (or why it could not run)
--   letter    failed, dead: the id of its dead letter
--   held      (pending, held back by its concurrency_limit) the list it waits in for a slot (limits.lua)
--   cancel_requested   when a cancel was asked for while a worker held the task, or was taking it
--             (track.cancel, unix time): whatever the task does after, the script that ends it (or
--             would run it again: a retry, a give-back, a sweeper's requeue) ends it cancelled instead,
--             its result not kept (track.ended, track.pending, track.cancelling)
-- A workflow's step has more (see flow.lua), and may wait on others (status waiting) before it is enqueued.
-- A record is written only while it exists: once it expired (or was deleted) nothing recreates a
-- part of it, and the task runs on untracked. It expires `ttl` seconds after the task ended.
-- A queue's tracked marker (<queue>_tracked) exists once a tracked task was enqueued to it: scripts
-- that find tasks by their blob look at blobs only then, so untracked queues pay nothing.
-- tracking(prefix) builds the functions (prefix: the record keys' prefix, for track.key): a script
-- calls it only once it meets a tracked task, so an untracked call does not even create them.
local function tracking(prefix)
    local track, clock, flow = {}, nil, nil

    function track.now()  -- one TIME per script call: every record it writes shares it
        if not clock then
            local time = redis.call('time')
            clock = string.format('%d.%06d', time[1], time[2])
        end
        return clock
    end

    -- Whether a blob has the shape of a task with options, from its first bytes (delayed/wire/task.py's
    -- carries_options, whose WITH_OPTIONS, GO_WITH_OPTIONS and BIN_MARKERS these are): a PyTask's
    -- five-element msgpack array (first byte 0x95), or a GoTask's three (0x93) whose func path (a
    -- fixstr, str8, str16 or str32) is followed by a bin (0xc4, 0xc5, 0xc6); a three-element PyTask
    -- has its args there, an array or nil.
    local function carries_options(blob)
        local first, marker = string.byte(blob, 1, 2)
        if first == 0x95 then
            return true
        elseif first ~= 0x93 or not marker then
            return false
        end
        local after  -- the position of the byte after the func path
        if marker >= 0xa0 and marker <= 0xbf then
            after = 3 + marker - 0xa0
        elseif marker >= 0xd9 and marker <= 0xdb then
            local size, length = 2 ^ (marker - 0xd9), 0
            for i = 3, 2 + size do
                length = length * 256 + (string.byte(blob, i) or 0)
            end
            after = 3 + size + length
        else
            return false
        end
        local bin = string.byte(blob, after)
        return bin == 0xc4 or bin == 0xc5 or bin == 0xc6
    end

    -- The record key of a tracked blob, or nil. A tracked blob has options whose last entry is its
    -- id, 32 hex digits (see delayed/wire/task.py, whose TRACKED_TAIL this is; tests/test_task_options.py
    -- pins these bytes): it ends with "id" (a2 69 64), a str8 of 32 bytes (d9 20), and the id.
    -- Nothing is decoded (Redis's cmsgpack cannot read msgpack bin, which a bytes argument is).
    function track.key(blob)
        if string.sub(blob, -37, -33) ~= '\162id\217\32' or not carries_options(blob) then
            return nil
        end
        return prefix .. string.sub(blob, -32)
    end

    local function set(key, ...)
        if redis.call('exists', key) == 1 then
            redis.call('hset', key, ...)
            return true
        end
        return false
    end

    -- A task enqueued (or scheduled: member is its scheduled-set member, due its score); ...: more
    -- field, value pairs for its record (a workflow's step's, see flow.lua).
    function track.enqueued(key, func, ttl, blob, due, member, ...)
        redis.call('hset', key, 'status', due == '' and 'pending' or 'scheduled', 'func', func, 'ttl', ttl,
                   'enqueued', track.now(), 'blob', blob, ...)
        if due ~= '' then
            redis.call('hset', key, 'due', due, 'nonce', string.sub(member, 1, 8))
        end
    end

    -- A worker claimed the task to run it (a record left with an expiry by an earlier end, as a
    -- requeued dead letter's is, keeps no expiry while it runs again). PTTL tells both at once, and
    -- only such a record (a workflow's stopped step's included: see track.ended) can be a step whose
    -- failure stopped its workflow, which runs on (flow.resumed): a first run reads nothing more.
    function track.running(key, worker_id)
        local ttl = redis.call('pttl', key)
        if ttl ~= -2 then
            redis.call('hset', key, 'status', 'running', 'worker', worker_id, 'started', track.now())
            redis.call('hincrby', key, 'attempts', 1)
            if ttl >= 0 then
                redis.call('persist', key)
                local flow_key = redis.call('hget', key, 'flow')
                if flow_key then
                    flow = flow or flows(track)
                    flow.resumed(key, flow_key)
                end
            end
        end
    end

    -- The task waits in the queue again (given back unstarted: uncounted; or requeued by a sweeper),
    -- unless a cancel was asked for while a worker held it: then it ends cancelled here. Returns
    -- whether the caller puts it back (called before it does): false for a task that ended.
    function track.pending(key, blob, unstarted)
        local fields = redis.call('hmget', key, 'status', 'cancel_requested')
        if not fields[1] then
            return true  -- no record (it expired, or was deleted): the task runs on untracked
        end
        if fields[2] then
            track.ended(key, 'cancelled')
            return false
        end
        redis.call('hset', key, 'status', 'pending', 'blob', blob)
        redis.call('hdel', key, 'worker', 'started', 'due', 'nonce')
        if unstarted then
            redis.call('hincrby', key, 'attempts', -1)
        end
        return true
    end

    -- Whether a cancel was asked for while a worker held the task (track.cancel): a script that would
    -- run it again (a retry) or dead-letter it ends it instead (track.ended makes it cancelled).
    function track.cancelling(key)
        return redis.call('hexists', key, 'cancel_requested') == 1
    end

    -- A claimed task a limit held back before it started (admit.lua): it waits again, in the scheduled
    -- set (its member, due) for its rate, or for a slot of its key (member '': in the list held, which
    -- cancel looks in), its claim not counted as a run.
    function track.held(key, due, member, held)
        if set(key, 'status', member == '' and 'pending' or 'scheduled') then
            redis.call('hdel', key, 'worker', 'started')
            redis.call('hincrby', key, 'attempts', -1)
            if member == '' then
                redis.call('hdel', key, 'due', 'nonce')
                redis.call('hset', key, 'held', held)
            else
                redis.call('hset', key, 'due', due, 'nonce', string.sub(member, 1, 8))
            end
        end
    end

    -- A run failed and the task runs again: at once (member '': blob is in the queue), or when due.
    function track.retrying(key, error, blob, due, member)
        if set(key, 'status', 'retrying', 'error', error, 'blob', blob, 'due', due) then
            redis.call('hdel', key, 'worker', 'started')
            if member == '' then
                redis.call('hdel', key, 'nonce')
            else
                redis.call('hset', key, 'nonce', string.sub(member, 1, 8))
            end
        end
    end

    -- A record ends (see track.ended): fields are its ttl, flow and next.
    local function ended(key, fields, status, ...)
        redis.call('hset', key, 'status', status, 'finished', track.now(), ...)
        redis.call('hdel', key, 'nonce', 'due')
        local cancelled, kept = {}, false
        if fields[2] or fields[3] then
            local added, result = {...}, ''
            for i = 1, #added, 2 do
                if added[i] == 'result' then result = added[i + 1] end
            end
            flow = flow or flows(track)
            cancelled, kept = flow.ended(key, status, result, fields[3], fields[2])
        end
        redis.call('expire', key, kept and KEPT_SECONDS or fields[1])
        for _, successor in ipairs(cancelled) do
            track.ended(successor, 'cancelled')
        end
        return status
    end

    -- The task ended (done, failed, dead, cancelled): field, value pairs to add; it expires ttl seconds
    -- from now. A workflow's step moves its workflow on (flow.lua): successors it cancels end too, and
    -- the record of a step whose failure stopped its workflow is kept until it runs again (it expires
    -- in KEPT_SECONDS: an expiry, which the claim that runs it again finds). A task whose cancel was
    -- asked for while it ran (cancel_requested) ends cancelled whatever status it was given, without
    -- the fields (its result is not kept), and its workflow ends cancelled as a waiting step's cancel
    -- makes it. Returns the status it ended with (nil: no record).
    function track.ended(key, status, ...)
        local fields = redis.call('hmget', key, 'ttl', 'flow', 'next', 'cancel_requested')
        if not fields[1] then
            return nil
        end
        if fields[4] then
            if fields[2] then
                redis.call('hsetnx', fields[2], 'cancelled', key)
            end
            return ended(key, fields, 'cancelled')
        end
        return ended(key, fields, status, ...)
    end

    -- A cancel of a task a worker holds (or is taking): noted in its record, for the script that ends
    -- it (track.ended), and its id published on the queue's cancels channel, for the worker to stop
    -- it (a worker that misses the message still ends it cancelled).
    local function request(key, channel)
        redis.call('hset', key, 'cancel_requested', track.now())
        redis.call('publish', channel, string.sub(key, -32))
        return 'requested'
    end

    -- Cancel a tracked task that waits (scheduled, pending or retrying: removed from the scheduled
    -- set, from the list it waits in for a slot of its limit key, or from the queue with one
    -- notification; waiting on other steps: nowhere to remove it from) and end its record as
    -- cancelled. keys: the queue's name, noti and scheduled keys; channel: its cancels channel. A
    -- running task's cancel is requested (see request).
    -- A task in the queue is removed only if a notification is left for it: a worker (ours or
    -- go-delayed's) between its BLPOP and its pop of the queue's head takes one of the first
    -- (tasks - notifications) tasks; removing one of those would leave that worker a notification
    -- without a task (go-delayed's dequeue then errors and backs off). Such a task is being taken:
    -- its cancel is requested, as a running task's.
    -- Returns the outcome: 'cancelled', 'requested' (it runs, or is being taken), 'missing' (no
    -- record), 'not_waiting' (it ended) or 'lost' (the record says it waits but it is nowhere to be
    -- found: a worker that does not track took it); and the record's status.
    function track.cancel(key, name, noti, scheduled, channel)
        local status = redis.call('hget', key, 'status')
        if not status then
            return 'missing', ''
        end
        if status == 'running' then
            return request(key, channel), status
        end
        if status ~= 'scheduled' and status ~= 'pending' and status ~= 'retrying' and status ~= 'waiting' then
            return 'not_waiting', status
        end
        local blob, nonce = redis.call('hget', key, 'blob'), redis.call('hget', key, 'nonce')
        if not blob then
            return 'lost', status
        end
        local held = status == 'pending' and redis.call('hget', key, 'held')  -- a limit held it back
        if status ~= 'waiting' and not (nonce and redis.call('zrem', scheduled, nonce .. blob) == 1)
                and not (held and redis.call('lrem', held, 1, blob) == 1) then
            local at = redis.call('lpos', name, blob)
            if not at then
                return 'lost', status
            end
            if at < redis.call('llen', name) - redis.call('llen', noti) then
                return request(key, channel), status
            end
            redis.call('lrem', name, 1, blob)
            redis.call('lpop', noti)
        end
        local flow_key = redis.call('hget', key, 'flow')
        if flow_key then  -- its workflow ends cancelled, not done (flow.lua's count)
            redis.call('hsetnx', flow_key, 'cancelled', key)
        end
        track.ended(key, 'cancelled')
        return 'cancelled', status
    end

    return track
end

