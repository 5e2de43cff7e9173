-- Shared links: a public page for one agent, reached with a random token, until the link
-- expires or is revoked. Lookups go through the token's SHA-256.
CREATE TABLE shared_links (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    agent_id BLOB NOT NULL REFERENCES agents(id),
    token TEXT NOT NULL,
    token_hash BLOB NOT NULL,
    created_by BLOB NOT NULL,
    expires_at TEXT NOT NULL,
    revoked_at TEXT,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX shared_links_token ON shared_links(token_hash);
CREATE INDEX shared_links_workspace ON shared_links(workspace_id, created_at);
