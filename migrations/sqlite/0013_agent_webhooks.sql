-- Agent webhooks: the outbox of events for agents' webhook URLs, and each workspace's signing
-- secret.
--
-- A row is written in the same transaction as the change that causes it (a call placed,
-- answered, ended, ...), so an event is never lost and never sent for a change that did not
-- commit. `seq` orders a call's events: its next event is not sent before the one before it
-- was delivered or failed for good. `tool.called` rows record a function tool's one exchange
-- (delivered or failed at once) and are never retried.
CREATE TABLE webhook_deliveries (
    seq INTEGER PRIMARY KEY AUTOINCREMENT,
    -- The event's id: the envelope's `id` and the X-Switchboard-Delivery header.
    id BLOB NOT NULL UNIQUE,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    agent_id BLOB NOT NULL REFERENCES agents(id),
    call_id BLOB NOT NULL,
    type TEXT NOT NULL,
    -- The agent's webhook_url when the event was written.
    url TEXT NOT NULL,
    -- The JSON body sent: {id, type, created_at, call_id, data}.
    envelope TEXT NOT NULL,
    -- pending, delivered or failed.
    status TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    last_attempt_at TEXT,
    -- Set exactly while pending.
    next_attempt_at TEXT,
    last_status_code INTEGER,
    last_error TEXT,
    created_at TEXT NOT NULL,
    delivered_at TEXT
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries(next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_call_pending ON webhook_deliveries(call_id, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_workspace ON webhook_deliveries(workspace_id, created_at);

-- The secret deliveries are signed with (`whsec_` and 64 hex characters), made on first use
-- and replaced by a rotation.
CREATE TABLE webhook_signing_secrets (
    workspace_id BLOB PRIMARY KEY NOT NULL REFERENCES workspaces(id),
    secret TEXT NOT NULL,
    created_at TEXT NOT NULL
);
