-- Move the next dead letters after a cursor back into the queue, each task with its notification,
-- until a bound on letters or on bytes is reached: one chunk of `dead requeue --all`, so that no call
-- keeps Redis busy for long. Letters without a task stay where they are.
-- KEYS: dead_letters name noti counts
-- ARGV: task_field after most_letters most_bytes
-- counts: adds the tasks moved to 'enqueued'; task_field: the field of a letter that holds its
-- task; after: the id after which to start ('-': the first letter); most_letters, most_bytes: the
-- most letters and task bytes to move (at least one letter moves)
-- Returns {moved, skipped, the last id looked at ('' when there were none)}.
local max_letters, max_bytes = tonumber(ARGV[3]), tonumber(ARGV[4])
local moved, skipped, bytes, last = 0, 0, 0, ''
local start = ARGV[2] == '-' and '-' or '(' .. ARGV[2]
while moved + skipped < max_letters and bytes < max_bytes do
    local entries = redis.call('xrange', KEYS[1], start, '+', 'count', 8)
    if #entries == 0 then break end
    for _, entry in ipairs(entries) do
        if moved + skipped >= max_letters or bytes >= max_bytes then break end
        local task = nil
        for j = 1, #entry[2], 2 do
            if entry[2][j] == ARGV[1] then task = entry[2][j + 1] end
        end
        last = entry[1]
        if task then
            redis.call('xdel', KEYS[1], last)  -- first: a write that frees memory (see claim_batch.lua)
            redis.call('rpush', KEYS[2], task)
            redis.call('rpush', KEYS[3], '1')
            moved = moved + 1
            bytes = bytes + #task
        else
            skipped = skipped + 1
        end
    end
    start = '(' .. last
end
if moved > 0 then
    redis.call('hincrby', KEYS[4], 'enqueued', moved)
end
return {moved, skipped, last}
