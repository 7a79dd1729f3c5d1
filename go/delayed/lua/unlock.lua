-- Release unique tasks' locks, each only if it still holds that task's token (it may have
-- expired and been taken by a newer identical task).
-- KEYS: locks...
-- ARGV: tokens...
-- tokens: the locks' tokens, in the same order
-- Returns how many were released.
local released = 0
for i, lock in ipairs(KEYS) do
    if redis.call('get', lock) == ARGV[i] then
        redis.call('del', lock)
        released = released + 1
    end
end
return released
