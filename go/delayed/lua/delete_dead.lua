-- Delete dead letters named by id: all of them, or, if any id names no letter, none.
-- KEYS: dead_letters
-- ARGV: letter_ids...
-- Returns {count deleted}, or {0, missing id, ...} having changed nothing.
local missing, seen, ids = {}, {}, {}
for _, id in ipairs(ARGV) do
    if not seen[id] then
        seen[id] = true
        if #redis.call('xrange', KEYS[1], id, id) == 0 then
            missing[#missing + 1] = id
        else
            ids[#ids + 1] = id
        end
    end
end
if #missing > 0 then
    return {0, unpack(missing)}
end
for _, id in ipairs(ids) do
    redis.call('xdel', KEYS[1], id)
end
return {#ids}
