-- Cancel a tracked task that waits (scheduled, pending, retrying, or a workflow's step waiting on
-- others): see tracking.lua's track.cancel.
-- KEYS: name noti scheduled record
-- uses: tracking
-- Returns {outcome, the record's status}: outcome 'cancelled', 'missing', 'not_waiting', 'taking' or 'lost'.
local outcome, status = tracking('').cancel(KEYS[4], KEYS[1], KEYS[2], KEYS[3])
return {outcome, status}
