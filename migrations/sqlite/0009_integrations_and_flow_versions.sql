-- Integrations: third-party accounts (a calendar, a mailbox) that flow agents' integration_call
-- nodes dispatch to. Connecting is an operator step; disconnecting keeps the row.
CREATE TABLE integrations (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    provider TEXT NOT NULL,
    account TEXT NOT NULL,
    status TEXT NOT NULL,
    connected_at TEXT NOT NULL,
    disconnected_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX integrations_workspace ON integrations(workspace_id, created_at);

-- Every save of a flow agent's flow_config, numbered per agent.
CREATE TABLE agent_flow_versions (
    agent_id BLOB NOT NULL REFERENCES agents(id),
    version INTEGER NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    flow_config TEXT NOT NULL,
    created_at TEXT NOT NULL,
    PRIMARY KEY (agent_id, version)
);
