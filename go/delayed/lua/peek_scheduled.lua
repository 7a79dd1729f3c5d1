-- Scheduled tasks for people to look at, in the order they are due: each task cut to its first
-- bytes, with its full length, its due time, and what names its member exactly (its 8-byte nonce and
-- the sha1 of the whole member: see scheduled_task.lua), so that a reader never downloads a large task.
-- KEYS: scheduled
-- ARGV: start count head
-- start: the first position (0: due soonest); count: most tasks; head: most bytes of each task returned
-- Returns per task: {due (the score as Redis writes it), length, head, nonce, sha1}, in that order.
local start, limit = tonumber(ARGV[1]), tonumber(ARGV[3])
local members = redis.call('zrange', KEYS[1], start, start + tonumber(ARGV[2]) - 1, 'withscores')
local tasks = {}
for i = 1, #members, 2 do
    local member = members[i]
    tasks[#tasks + 1] = {members[i + 1], math.max(#member - 8, 0), string.sub(member, 9, 8 + limit),
                         string.sub(member, 1, 8), redis.sha1hex(member)}
end
return tasks
