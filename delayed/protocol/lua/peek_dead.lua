-- Dead letters for people to look at: each letter's fields cut to their first bytes, with their full
-- lengths, so that a reader never downloads a large task (a too_large letter holds the whole blob).
-- KEYS: dead_letters
-- ARGV: start end count head
-- start: '-', '(' .. id, or an id; end: '+' or an id; count: most letters (0: all); head: most
-- bytes of each field returned
-- Returns per letter: {id, {field, head, field, head, ...}, {field, length, field, length, ...}}
local limit = tonumber(ARGV[4])
local entries
if tonumber(ARGV[3]) > 0 then
    entries = redis.call('xrange', KEYS[1], ARGV[1], ARGV[2], 'count', ARGV[3])
else
    entries = redis.call('xrange', KEYS[1], ARGV[1], ARGV[2])
end
local letters = {}
for i, entry in ipairs(entries) do
    local heads, lengths = {}, {}
    for j = 1, #entry[2], 2 do
        local field, value = entry[2][j], entry[2][j + 1]
        heads[j], heads[j + 1] = field, string.sub(value, 1, limit)
        lengths[j], lengths[j + 1] = field, #value
    end
    letters[i] = {entry[1], heads, lengths}
end
return letters
