-- Tools agents call during calls: webhooks (config validated, URL under the egress policy) and
-- functions (config free-form). Deleting a tool deactivates it.
CREATE TABLE tools (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    description TEXT NOT NULL,
    type TEXT NOT NULL,
    -- JSON object.
    config TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1,
    idempotency_key TEXT,
    request_hash TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX tools_idempotency ON tools(workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX tools_workspace ON tools(workspace_id, created_at);

-- Which tools an agent uses, in which order, with per-agent config overrides.
CREATE TABLE agent_tools (
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    agent_id BLOB NOT NULL REFERENCES agents(id),
    tool_id BLOB NOT NULL REFERENCES tools(id),
    execution_order INTEGER NOT NULL,
    -- JSON object or NULL.
    config_override TEXT,
    created_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, tool_id)
);
CREATE INDEX agent_tools_tool ON agent_tools(tool_id);

-- Every webhook delivery, test deliveries included. Headers are never stored.
CREATE TABLE tool_deliveries (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    tool_id BLOB NOT NULL REFERENCES tools(id),
    kind TEXT NOT NULL,
    method TEXT NOT NULL,
    -- The URL without its query string.
    url TEXT NOT NULL,
    outcome TEXT NOT NULL,
    status_code INTEGER,
    duration_ms INTEGER NOT NULL,
    created_at TEXT NOT NULL
);
CREATE INDEX tool_deliveries_tool ON tool_deliveries(tool_id, created_at);
