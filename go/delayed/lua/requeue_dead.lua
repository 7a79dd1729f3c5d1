-- Move dead letters, named by id, back into the queue, each task with its notification: all of them,
-- or, if any id names no letter or a letter without a task, none.
-- KEYS: dead_letters name noti counts
-- ARGV: task_field letter_ids...
-- counts: adds the tasks moved to 'enqueued' (they come into the queue again); task_field: the
-- field of a letter that holds its task
-- Returns {count requeued}, or {0, id, problem, id, problem, ...} having changed nothing.
local tasks, problems, seen = {}, {}, {}
for i = 2, #ARGV do
    local id = ARGV[i]
    if not seen[id] then
        seen[id] = true
        local entry = redis.call('xrange', KEYS[1], id, id)[1]
        local task = nil
        if entry then
            for j = 1, #entry[2], 2 do
                if entry[2][j] == ARGV[1] then task = entry[2][j + 1] end
            end
        end
        if not entry then
            problems[#problems + 1] = id
            problems[#problems + 1] = 'no such dead letter'
        elseif not task then
            problems[#problems + 1] = id
            problems[#problems + 1] = 'no task to requeue'
        else
            tasks[#tasks + 1] = {id, task}
        end
    end
end
if #problems > 0 then
    return {0, unpack(problems)}
end
for _, pair in ipairs(tasks) do
    redis.call('xdel', KEYS[1], pair[1])  -- first: a write that frees memory (see claim_batch.lua)
    redis.call('rpush', KEYS[2], pair[2])
    redis.call('rpush', KEYS[3], '1')
end
if #tasks > 0 then
    redis.call('hincrby', KEYS[4], 'enqueued', #tasks)
end
return {#tasks}
