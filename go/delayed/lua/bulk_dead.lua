-- One chunk of a bulk operation on dead letters (`delayed dead requeue --all`, `dead purge` with a
-- filter, the dashboard's): walk the letters after a cursor, up to the letter `through`, and requeue
-- (each task back into the queue with its notification, its letter deleted), delete, or count those
-- the filter takes, until a bound on letters looked at or on bytes read (records the filter decoded,
-- tasks requeued) is reached, so that no call keeps Redis busy for long. Requeue leaves letters without
-- a task where they are. Letters written after `through` are never touched.
-- KEYS: dead_letters name noti counts
-- ARGV: action task_field after through filter most_letters most_bytes
-- action: 'requeue', 'delete' or 'count' (which writes nothing); counts: adds the tasks requeued to
-- 'enqueued'; task_field: the field of a letter that holds its task; after: the id after which to
-- start ('-': the first letter); filter: which letters (see dead_filter.lua; '': all); most_letters,
-- most_bytes: the bounds (at least one letter is looked at)
-- uses: dead_filter
-- Returns {letters requeued, deleted or counted, letters looked at, the last id looked at ('' if none)}.
local action, max_letters, max_bytes = ARGV[1], tonumber(ARGV[6]), tonumber(ARGV[7])
local matches = dead_filter(ARGV[5])
local done, looked, bytes, last = 0, 0, 0, ''
local start = ARGV[3] == '-' and '-' or '(' .. ARGV[3]
while looked < max_letters and bytes < max_bytes do
    local entries = redis.call('xrange', KEYS[1], start, ARGV[4], 'count', 8)
    if #entries == 0 then break end
    for _, entry in ipairs(entries) do
        if looked >= max_letters or bytes >= max_bytes then break end
        looked, last = looked + 1, entry[1]
        local taken, read = true, 0
        if matches then
            taken, read = matches(entry[2])
            bytes = bytes + read
        end
        if taken and action == 'requeue' then
            local task = nil
            for j = 1, #entry[2], 2 do
                if entry[2][j] == ARGV[2] then task = entry[2][j + 1] end
            end
            if task then
                redis.call('xdel', KEYS[1], last)  -- first: a write that frees memory (see claim_batch.lua)
                redis.call('rpush', KEYS[2], task)
                redis.call('rpush', KEYS[3], '1')
                done, bytes = done + 1, bytes + #task
            end
        elseif taken then
            if action == 'delete' then
                redis.call('xdel', KEYS[1], last)
            end
            done = done + 1
        end
    end
    start = '(' .. last
end
if action == 'requeue' and done > 0 then
    redis.call('hincrby', KEYS[4], 'enqueued', done)
end
return {done, looked, last}
