-- A live call says what it is doing: `dialing` (placed), `ringing` (a 180/183 came back),
-- `in_progress` (answered). Calls answered before this change were left `dialing`.

UPDATE calls SET status = 'in_progress' WHERE status = 'dialing' AND answered_at IS NOT NULL;
DROP INDEX calls_open;
CREATE INDEX calls_open ON calls(workspace_id, status)
    WHERE status IN ('queued', 'dialing', 'ringing', 'in_progress');
