-- Switchboard's schema. Timestamps are UTC text in one fixed RFC 3339 form
-- (YYYY-MM-DDTHH:MM:SS.ffffffZ) so that text order is time order. Money is integer cents.

CREATE TABLE workspaces (
    id BLOB PRIMARY KEY NOT NULL,
    name TEXT NOT NULL,
    default_country TEXT NOT NULL DEFAULT 'IL',
    call_window TEXT,
    balance_cents INTEGER NOT NULL DEFAULT 0,
    currency TEXT NOT NULL DEFAULT 'usd',
    billing_email TEXT NOT NULL DEFAULT '',
    payment_method_id TEXT,
    payment_method_label TEXT,
    is_suspended INTEGER NOT NULL DEFAULT 0,
    auto_topup_enabled INTEGER NOT NULL DEFAULT 0,
    auto_topup_amount_cents INTEGER NOT NULL DEFAULT 0,
    low_balance_threshold_cents INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);

CREATE TABLE api_keys (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL DEFAULT '',
    key_hash BLOB NOT NULL UNIQUE,
    key_prefix TEXT NOT NULL,
    scopes TEXT NOT NULL,
    expires_at TEXT,
    revoked_at TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX api_keys_workspace ON api_keys(workspace_id);

CREATE TABLE ledger_entries (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    amount_cents INTEGER NOT NULL,
    balance_after_cents INTEGER NOT NULL,
    kind TEXT NOT NULL,
    description TEXT NOT NULL,
    reference TEXT,
    created_at TEXT NOT NULL
);
CREATE INDEX ledger_entries_workspace ON ledger_entries(workspace_id, created_at);

CREATE TABLE agents (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1,
    max_call_duration_secs INTEGER,
    -- The rest of the agent object, as JSON.
    doc TEXT NOT NULL,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE INDEX agents_workspace ON agents(workspace_id, created_at);

CREATE TABLE carrier_accounts (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    provider TEXT NOT NULL,
    status TEXT NOT NULL DEFAULT 'untested',
    created_at TEXT NOT NULL
);

CREATE TABLE phone_numbers (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    number TEXT NOT NULL,
    friendly_name TEXT NOT NULL DEFAULT '',
    provider TEXT NOT NULL,
    status TEXT NOT NULL,
    is_active INTEGER NOT NULL DEFAULT 1,
    inbound_agent_id BLOB REFERENCES agents(id),
    outbound_agent_id BLOB REFERENCES agents(id),
    sip_inbound_configured INTEGER NOT NULL DEFAULT 0,
    sip_outbound_configured INTEGER NOT NULL DEFAULT 0,
    country_code TEXT NOT NULL,
    monthly_cost_cents INTEGER NOT NULL DEFAULT 0,
    carrier_account_id BLOB REFERENCES carrier_accounts(id),
    ownership_verified_at TEXT,
    -- Purchased numbers become active once this instant has passed (regulatory review).
    activate_after TEXT,
    released_at TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX phone_numbers_held ON phone_numbers(number) WHERE released_at IS NULL;
CREATE INDEX phone_numbers_workspace ON phone_numbers(workspace_id, created_at);
CREATE INDEX phone_numbers_pending ON phone_numbers(activate_after) WHERE status = 'pending_requirements';

CREATE TABLE dispositions (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    label TEXT NOT NULL,
    color TEXT NOT NULL,
    position INTEGER NOT NULL,
    is_protected INTEGER NOT NULL DEFAULT 0,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX dispositions_label ON dispositions(workspace_id, label);

CREATE TABLE dnc_entries (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    phone_number TEXT NOT NULL,
    reason TEXT NOT NULL DEFAULT '',
    source TEXT NOT NULL,
    expires_at TEXT,
    created_by BLOB,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX dnc_entries_number ON dnc_entries(workspace_id, phone_number);
CREATE INDEX dnc_entries_recent ON dnc_entries(workspace_id, created_at);

CREATE TABLE dnc_entry_agents (
    entry_id BLOB NOT NULL REFERENCES dnc_entries(id) ON DELETE CASCADE,
    agent_id BLOB NOT NULL REFERENCES agents(id),
    PRIMARY KEY (entry_id, agent_id)
);

CREATE TABLE campaigns (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    description TEXT NOT NULL DEFAULT '',
    status TEXT NOT NULL,
    agent_id BLOB,
    from_phone_number_id BLOB,
    from_number TEXT,
    regulatory_basis TEXT,
    calling_window TEXT,
    stop_disposition_ids TEXT NOT NULL DEFAULT '[]',
    stop_on_no_answer INTEGER NOT NULL DEFAULT 0,
    stop_on_voicemail INTEGER NOT NULL DEFAULT 0,
    stop_on_unclassified INTEGER NOT NULL DEFAULT 0,
    randomize_retry_time INTEGER NOT NULL DEFAULT 0,
    double_dial_enabled INTEGER NOT NULL DEFAULT 0,
    max_attempts INTEGER NOT NULL,
    max_infra_retries INTEGER NOT NULL,
    retry_no_answer_seconds INTEGER NOT NULL,
    retry_completed_seconds INTEGER NOT NULL,
    double_dial_gap_seconds INTEGER NOT NULL,
    max_calls_per_day INTEGER NOT NULL,
    min_seconds_between_calls INTEGER NOT NULL,
    max_in_flight INTEGER NOT NULL,
    budget_cents INTEGER,
    starts_at TEXT,
    ends_at TEXT,
    daily_admitted_count INTEGER NOT NULL DEFAULT 0,
    daily_window_date TEXT,
    last_admitted_at TEXT,
    estimate_cents INTEGER NOT NULL DEFAULT 0,
    spent_cents INTEGER NOT NULL DEFAULT 0,
    reserved_cents INTEGER NOT NULL DEFAULT 0,
    last_tick_at TEXT,
    last_tick_result TEXT,
    last_error TEXT,
    started_at TEXT,
    completed_at TEXT,
    archived_at TEXT,
    created_by BLOB,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX campaigns_live_name ON campaigns(workspace_id, name) WHERE status <> 'archived';
CREATE INDEX campaigns_workspace ON campaigns(workspace_id, created_at);

CREATE TABLE campaign_events (
    id BLOB PRIMARY KEY NOT NULL,
    campaign_id BLOB NOT NULL REFERENCES campaigns(id),
    kind TEXT NOT NULL,
    from_status TEXT,
    to_status TEXT,
    message TEXT,
    actor_key_id BLOB,
    created_at TEXT NOT NULL
);
CREATE INDEX campaign_events_campaign ON campaign_events(campaign_id, created_at);

CREATE TABLE contacts (
    id BLOB PRIMARY KEY NOT NULL,
    campaign_id BLOB NOT NULL REFERENCES campaigns(id),
    lead_id BLOB,
    phone_number TEXT NOT NULL,
    timezone TEXT,
    variables TEXT NOT NULL DEFAULT '{}',
    metadata TEXT NOT NULL DEFAULT '{}',
    state TEXT NOT NULL,
    attempts INTEGER NOT NULL DEFAULT 0,
    infra_retries INTEGER NOT NULL DEFAULT 0,
    next_attempt_at TEXT,
    last_outcome TEXT,
    last_disposition_id BLOB,
    last_call_id BLOB,
    excluded_reason TEXT,
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL
);
CREATE UNIQUE INDEX contacts_number ON contacts(campaign_id, phone_number);
CREATE INDEX contacts_due ON contacts(campaign_id, state, next_attempt_at);
