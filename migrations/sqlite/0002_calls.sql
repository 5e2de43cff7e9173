-- Calls (direct and campaign) and the engine's indexes.

CREATE TABLE calls (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    direction TEXT NOT NULL,
    status TEXT NOT NULL,
    outcome TEXT,
    end_reason TEXT,
    agent_id BLOB,
    from_phone_number_id BLOB,
    from_number TEXT NOT NULL,
    to_number TEXT NOT NULL,
    campaign_id BLOB,
    contact_id BLOB,
    attempt INTEGER NOT NULL DEFAULT 1,
    priority INTEGER NOT NULL,
    metadata TEXT NOT NULL DEFAULT '{}',
    variables TEXT NOT NULL DEFAULT '{}',
    idempotency_key TEXT,
    request_hash TEXT,
    max_duration_secs INTEGER NOT NULL,
    reserved_cents INTEGER NOT NULL DEFAULT 0,
    cost_cents INTEGER NOT NULL DEFAULT 0,
    duration_secs INTEGER NOT NULL DEFAULT 0,
    disposition_id BLOB,
    disposition_source TEXT,
    queued_at TEXT NOT NULL,
    started_at TEXT,
    answered_at TEXT,
    ended_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX calls_idempotency ON calls(workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX calls_workspace ON calls(workspace_id, created_at);
CREATE INDEX calls_open ON calls(workspace_id, status) WHERE status IN ('queued', 'dialing');
CREATE INDEX calls_campaign ON calls(campaign_id, outcome) WHERE campaign_id IS NOT NULL;
CREATE INDEX calls_contact ON calls(contact_id, created_at) WHERE contact_id IS NOT NULL;

-- next_attempt_at is set exactly when a contact waits to be dialled (pending or scheduled), so
-- one partial index finds the due ones without reading the rest.
UPDATE contacts SET next_attempt_at = created_at WHERE state = 'pending' AND next_attempt_at IS NULL;
DROP INDEX contacts_due;
CREATE INDEX contacts_due ON contacts(campaign_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX contacts_state ON contacts(campaign_id, state);
