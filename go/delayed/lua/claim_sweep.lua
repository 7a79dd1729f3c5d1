-- Claim the next sweep of a queue: the lock that keeps every worker and sweeper of ours, between
-- them, to at most one periodic sweep of the queue per interval. By Redis's clock, so the hosts'
-- clocks do not matter. The record it writes is also what `delayed stats` reads to tell a queue
-- nothing sweeps.
-- KEYS: swept
-- ARGV: interval_ms force
-- swept: "<unix ms of the last claim>:<interval ms of its claimer>"; interval_ms: the caller's
-- interval; force: 1 claims whatever the record says (a sweep asked for now), 0 only once the
-- caller's interval has passed since the last claim.
-- Returns 1 (claimed: sweep now; recorded, expiring three intervals on) or 0 (swept too recently).
-- A full Redis (maxmemory, noeviction) refuses the record: the claim stands unrecorded, as a sweep
-- frees memory and a burst worker sweeps before it stops; meanwhile sweeps are not spaced out.
local clock = redis.call('time')
local now_ms = tonumber(clock[1]) * 1000 + math.floor(tonumber(clock[2]) / 1000)
local interval = tonumber(ARGV[1])
if ARGV[2] ~= '1' then
    local last = tonumber(string.match(redis.call('get', KEYS[1]) or '', '^(%d+):%d+$'))
    if last and now_ms - last < interval then
        return 0
    end
end
redis.pcall('set', KEYS[1], now_ms .. ':' .. interval, 'PX', 3 * interval)
return 1
