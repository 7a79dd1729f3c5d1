-- Cancel a tracked task: one that waits (scheduled, pending, retrying, or a workflow's step waiting on
-- others) is removed and ends cancelled; one a worker runs (or is taking) has its cancel requested,
-- published on the queue's cancels channel: see tracking.lua's track.cancel.
-- KEYS: name noti scheduled record
-- ARGV: cancels
-- uses: tracking
-- Returns {outcome, the record's status, the worker running it ('' if none)}: outcome 'cancelled',
-- 'requested', 'missing', 'not_waiting' or 'lost'.
local outcome, status = tracking('').cancel(KEYS[4], KEYS[1], KEYS[2], KEYS[3], ARGV[1])
return {outcome, status, outcome == 'requested' and redis.call('hget', KEYS[4], 'worker') or ''}
