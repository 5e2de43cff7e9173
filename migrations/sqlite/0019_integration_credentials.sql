-- An integration's OAuth grant (client id, client secret, refresh token), sealed under the
-- service's secrets key; absent for an account connected without one.
ALTER TABLE integrations ADD COLUMN credentials TEXT;
-- Connecting an account again reconnects its row (same id), so flows pointing at it work
-- again; the lookup is by workspace, provider and account.
CREATE INDEX integrations_account ON integrations(workspace_id, provider, account);
