-- A page of the queue for people to look at: each task cut to its first bytes, with its full length,
-- so that a reader never downloads a large task.
-- KEYS: name
-- ARGV: start count head
-- start: the first position (0: the next task a worker takes); count: most tasks; head: most bytes
-- of each task returned
-- Returns {length, head, length, head, ...}, in queue order.
local start, limit = tonumber(ARGV[1]), tonumber(ARGV[3])
local blobs = redis.call('lrange', KEYS[1], start, start + tonumber(ARGV[2]) - 1)
local page = {}
for i, blob in ipairs(blobs) do
    page[2 * i - 1], page[2 * i] = #blob, string.sub(blob, 1, limit)
end
return page
