-- A dashboard's OAuth handshake in flight: the state the provider must send back (stored as its
-- SHA-256), the session that started it, the workspace and provider it connects, and the PKCE
-- code verifier. Taken (deleted) by the answer that uses it; worthless after its expiry.
CREATE TABLE oauth_handshakes (
    state_hash BLOB PRIMARY KEY NOT NULL,
    session_hash BLOB NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    provider TEXT NOT NULL,
    verifier TEXT NOT NULL,
    expires_at TEXT NOT NULL
);
