-- The dashboard's calls page filters by agent, by direction and by campaign, newest first; each
-- filter walks its own index in time order instead of every call of the workspace.
CREATE INDEX calls_workspace_agent ON calls(workspace_id, agent_id, created_at) WHERE agent_id IS NOT NULL;
CREATE INDEX calls_workspace_direction ON calls(workspace_id, direction, created_at);
CREATE INDEX calls_workspace_campaign ON calls(workspace_id, campaign_id, created_at) WHERE campaign_id IS NOT NULL;
