-- Inbound SIP calls: which endpoint a call came through, its codec and whether it was recorded
-- (the recording is <data_dir>/recordings/<call id>.wav).
ALTER TABLE calls ADD COLUMN sip_endpoint_id BLOB REFERENCES sip_endpoints(id);
ALTER TABLE calls ADD COLUMN codec TEXT;
ALTER TABLE calls ADD COLUMN recorded INTEGER NOT NULL DEFAULT 0;

-- Secrets the service makes for itself on first start (the recording URL signing key), kept
-- so that signed URLs stay valid across restarts.
CREATE TABLE service_secrets (
    name TEXT PRIMARY KEY NOT NULL,
    value BLOB NOT NULL,
    created_at TEXT NOT NULL
);
