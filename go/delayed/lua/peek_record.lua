-- A tracked task's record for people to look at (see tracking.lua): its fields, its blob cut to its
-- first bytes, with the blob's full length, so that a reader never downloads a large task.
-- KEYS: record
-- ARGV: head
-- head: most bytes of the blob returned
-- Returns {the record's TTL (as TTL says it), the blob's length (-1: none), field, value, field, value, ...}.
local fields = redis.call('hgetall', KEYS[1])
local reply = {redis.call('ttl', KEYS[1]), -1}
for i = 1, #fields, 2 do
    if fields[i] == 'blob' then
        reply[2] = #fields[i + 1]
        fields[i + 1] = string.sub(fields[i + 1], 1, tonumber(ARGV[1]))
    end
    reply[#reply + 1] = fields[i]
    reply[#reply + 1] = fields[i + 1]
end
return reply
