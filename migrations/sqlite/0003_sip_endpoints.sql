-- SIP endpoints: sip:<slug>@host addresses that route inbound calls to an agent. The slug is the
-- caller's only credential. A deleted endpoint keeps its row (its calls refer to it) and its slug
-- is never handed out again.
CREATE TABLE sip_endpoints (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    slug TEXT NOT NULL,
    inbound_agent_id BLOB REFERENCES agents(id),
    is_active INTEGER NOT NULL DEFAULT 1,
    -- JSON array of addresses and CIDR blocks; NULL accepts any source.
    allowed_source_ips TEXT,
    last_call_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE UNIQUE INDEX sip_endpoints_slug ON sip_endpoints(slug);
-- Listing, and counting a workspace's creations of the last day (deleted ones included).
CREATE INDEX sip_endpoints_workspace ON sip_endpoints(workspace_id, created_at);
