-- Dashboard sign-ins: a session cookie's token (stored as its SHA-256) stands for the API key
-- it was exchanged for; the key's workspace and scopes are read through it at every request,
-- so revoking or expiring the key ends its sessions. Writes carry the session's CSRF token.
CREATE TABLE dashboard_sessions (
    token_hash BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    key_id BLOB NOT NULL REFERENCES api_keys(id),
    csrf TEXT NOT NULL,
    created_at TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions(expires_at);
