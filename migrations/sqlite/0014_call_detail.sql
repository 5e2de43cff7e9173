-- What a call's conversation left and its end-of-call analysis: one row per call that
-- conversed, written in the transaction that ends the call, so `calls` (and the list of calls)
-- stays light. transcript, events and vendor_failures are JSON arrays, already cut to their
-- caps; omitted_turns and omitted_events count what the caps left out.
--
-- analysis_status is pending, completed, failed or skipped. analysis_due_at is set exactly
-- while the analysis is pending: when its next attempt may run (a running attempt holds it a
-- few minutes ahead, so a process that dies mid-attempt leaves it to be taken up again).
CREATE TABLE call_details (
    call_id BLOB PRIMARY KEY NOT NULL REFERENCES calls(id),
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    transcript TEXT NOT NULL DEFAULT '[]',
    events TEXT NOT NULL DEFAULT '[]',
    vendor_failures TEXT NOT NULL DEFAULT '[]',
    omitted_turns INTEGER NOT NULL DEFAULT 0,
    omitted_events INTEGER NOT NULL DEFAULT 0,
    analysis_status TEXT NOT NULL,
    analysis_attempts INTEGER NOT NULL DEFAULT 0,
    analysis_due_at TEXT,
    analysis_error TEXT,
    summary TEXT,
    extracted TEXT,
    analyzed_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX call_details_due ON call_details(analysis_due_at) WHERE analysis_due_at IS NOT NULL;

-- What a disposition means, for the end-of-call analysis that chooses one.
ALTER TABLE dispositions ADD COLUMN description TEXT NOT NULL DEFAULT '';
UPDATE dispositions SET description = CASE label
    WHEN 'Interested' THEN 'The person wants what was offered, or agreed to the next step.'
    WHEN 'Not interested' THEN 'The person declined what was offered.'
    WHEN 'Callback requested' THEN 'The person asked to be called back at another time.'
    WHEN 'Do not call' THEN 'The person asked not to be called again.'
    WHEN 'Wrong number' THEN 'The person who answered is not the one the call was for.'
    WHEN 'Voicemail left' THEN 'An answering machine took the call and the agent left a message.'
    WHEN 'Unclassified' THEN 'The call''s result is unclear.'
    ELSE description END
WHERE is_protected = 1;
