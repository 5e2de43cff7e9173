-- Switchboard's schema on PostgreSQL (15 and later): the final state of SQLite's schema
-- (migrations/sqlite, 0001 to 0025) as one migration, for new databases. Keep the two in step:
-- a change to the schema is a new migration in each directory.
--
-- How SQLite's types map here:
-- - Ids (16-byte BLOBs, bound as uuid::Uuid) are `uuid`. Hashes and secrets made of bytes
--   (api_keys.key_hash, shared_links.token_hash, dashboard_sessions.token_hash,
--   oauth_handshakes.state_hash and session_hash, service_secrets.value) are `bytea`.
-- - Instants (TEXT in one fixed RFC 3339 form, YYYY-MM-DDTHH:MM:SS.ffffffZ) are `timestamptz`.
--   campaigns.daily_window_date is a calendar date as text (YYYY-MM-DD) and stays `text`.
-- - JSON documents are `jsonb` (PostgreSQL reorders keys and drops insignificant whitespace:
--   a value reads back equal, not byte for byte as written).
-- - Flags (INTEGER 0/1, read as bool) are `boolean`; every other integer is `bigint` (the
--   store reads integers as i64). Money is integer cents.
-- - Every constraint and index is named. A unique rule's name starts with its table's name
--   and `_`: the store tells which rule a violation broke from it. Keys are `<table>_pkey`,
--   foreign keys `<table>_<column>_fkey`.
--
-- `rowid`: SQLite gives `calls` and `contacts` an implicit row number, in insert order, which
-- the store pages by (`calls_before`, `contacts_after`) and which ends every SQLite index of
-- those tables. Here it is a column of its own (an identity), named as SQLite's so the same
-- queries read it, and the indexes those pages walk end with it as SQLite's implicitly do.
-- The tables SQLite keeps WITHOUT ROWID (the counts) have none.

-- The form SQLite stores an instant in: its prefixes name the timeline's buckets
-- (campaign_call_buckets.bucket is the first `width` characters of it).
CREATE FUNCTION switchboard_time_text(t timestamptz) RETURNS text
LANGUAGE sql IMMUTABLE STRICT PARALLEL SAFE
RETURN to_char(t AT TIME ZONE 'UTC', 'YYYY-MM-DD"T"HH24:MI:SS.US"Z"');

CREATE TABLE workspaces (
    id uuid NOT NULL,
    name text NOT NULL,
    default_country text NOT NULL DEFAULT 'IL',
    -- The workspace's default calling hours (PUT /call-windows), as JSON; NULL: the built-in.
    call_window jsonb,
    balance_cents bigint NOT NULL DEFAULT 0,
    currency text NOT NULL DEFAULT 'usd',
    billing_email text NOT NULL DEFAULT '',
    payment_method_id text,
    payment_method_label text,
    is_suspended boolean NOT NULL DEFAULT FALSE,
    auto_topup_enabled boolean NOT NULL DEFAULT FALSE,
    auto_topup_amount_cents bigint NOT NULL DEFAULT 0,
    low_balance_threshold_cents bigint NOT NULL DEFAULT 0,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT workspaces_pkey PRIMARY KEY (id)
);

CREATE TABLE api_keys (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL DEFAULT '',
    -- SHA-256 of the key.
    key_hash bytea NOT NULL,
    key_prefix text NOT NULL,
    -- `all` or a comma-separated list of scopes (not JSON).
    scopes text NOT NULL,
    expires_at timestamptz,
    revoked_at timestamptz,
    created_at timestamptz NOT NULL,
    CONSTRAINT api_keys_pkey PRIMARY KEY (id),
    CONSTRAINT api_keys_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT api_keys_key_hash_key UNIQUE (key_hash)
);
CREATE INDEX api_keys_workspace ON api_keys (workspace_id);

CREATE TABLE ledger_entries (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    amount_cents bigint NOT NULL,
    balance_after_cents bigint NOT NULL,
    kind text NOT NULL,
    description text NOT NULL,
    reference text,
    created_at timestamptz NOT NULL,
    CONSTRAINT ledger_entries_pkey PRIMARY KEY (id),
    CONSTRAINT ledger_entries_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX ledger_entries_workspace ON ledger_entries (workspace_id, created_at);

CREATE TABLE agents (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    is_active boolean NOT NULL DEFAULT TRUE,
    max_call_duration_secs bigint,
    -- The rest of the agent object, as JSON.
    doc jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT agents_pkey PRIMARY KEY (id),
    CONSTRAINT agents_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX agents_workspace ON agents (workspace_id, created_at);

-- SIP trunks on carrier accounts. `trunk` is the trunk as JSON without its password; the
-- password has its own column and is never answered. `status` is `untested`, `active` or
-- `failing` (`status_reason` says why). `updated_at` is the last change of the account's
-- settings; `tested_at` the last test.
CREATE TABLE carrier_accounts (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    provider text NOT NULL,
    status text NOT NULL DEFAULT 'untested',
    created_at timestamptz NOT NULL,
    trunk jsonb,
    trunk_password text,
    status_reason text,
    tested_at timestamptz,
    -- SQLite's DEFAULT '' only filled rows older than the column; every insert writes it.
    updated_at timestamptz NOT NULL,
    CONSTRAINT carrier_accounts_pkey PRIMARY KEY (id),
    CONSTRAINT carrier_accounts_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);

CREATE TABLE phone_numbers (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    number text NOT NULL,
    friendly_name text NOT NULL DEFAULT '',
    provider text NOT NULL,
    status text NOT NULL,
    is_active boolean NOT NULL DEFAULT TRUE,
    inbound_agent_id uuid,
    outbound_agent_id uuid,
    sip_inbound_configured boolean NOT NULL DEFAULT FALSE,
    country_code text NOT NULL,
    monthly_cost_cents bigint NOT NULL DEFAULT 0,
    carrier_account_id uuid,
    ownership_verified_at timestamptz,
    -- Purchased numbers become active once this instant has passed (regulatory review).
    activate_after timestamptz,
    released_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT phone_numbers_pkey PRIMARY KEY (id),
    CONSTRAINT phone_numbers_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT phone_numbers_inbound_agent_id_fkey FOREIGN KEY (inbound_agent_id) REFERENCES agents (id),
    CONSTRAINT phone_numbers_outbound_agent_id_fkey FOREIGN KEY (outbound_agent_id) REFERENCES agents (id),
    CONSTRAINT phone_numbers_carrier_account_id_fkey FOREIGN KEY (carrier_account_id) REFERENCES carrier_accounts (id)
);
-- Whether a number can call out over SIP is computed when read (from its account's trunk), not
-- stored: SQLite's sip_outbound_configured was dropped (0010).
CREATE UNIQUE INDEX phone_numbers_held ON phone_numbers (number) WHERE released_at IS NULL;
CREATE INDEX phone_numbers_workspace ON phone_numbers (workspace_id, created_at);
CREATE INDEX phone_numbers_pending ON phone_numbers (activate_after) WHERE status = 'pending_requirements';

CREATE TABLE dispositions (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    label text NOT NULL,
    color text NOT NULL,
    position bigint NOT NULL,
    is_protected boolean NOT NULL DEFAULT FALSE,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- What a disposition means, for the end-of-call analysis that chooses one.
    description text NOT NULL DEFAULT '',
    CONSTRAINT dispositions_pkey PRIMARY KEY (id),
    CONSTRAINT dispositions_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE UNIQUE INDEX dispositions_label ON dispositions (workspace_id, label);

CREATE TABLE dnc_entries (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    phone_number text NOT NULL,
    reason text NOT NULL DEFAULT '',
    source text NOT NULL,
    expires_at timestamptz,
    -- The API key that added it (no foreign key, as in SQLite).
    created_by uuid,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT dnc_entries_pkey PRIMARY KEY (id),
    CONSTRAINT dnc_entries_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE UNIQUE INDEX dnc_entries_number ON dnc_entries (workspace_id, phone_number);
CREATE INDEX dnc_entries_recent ON dnc_entries (workspace_id, created_at);

CREATE TABLE dnc_entry_agents (
    entry_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    CONSTRAINT dnc_entry_agents_pkey PRIMARY KEY (entry_id, agent_id),
    CONSTRAINT dnc_entry_agents_entry_id_fkey FOREIGN KEY (entry_id) REFERENCES dnc_entries (id) ON DELETE CASCADE,
    CONSTRAINT dnc_entry_agents_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id)
);

CREATE TABLE campaigns (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    description text NOT NULL DEFAULT '',
    status text NOT NULL,
    agent_id uuid,
    from_phone_number_id uuid,
    from_number text,
    regulatory_basis text,
    -- The campaign's calling hours as JSON; NULL: the workspace's.
    calling_window jsonb,
    -- JSON array of disposition ids.
    stop_disposition_ids jsonb NOT NULL DEFAULT '[]',
    stop_on_no_answer boolean NOT NULL DEFAULT FALSE,
    stop_on_voicemail boolean NOT NULL DEFAULT FALSE,
    stop_on_unclassified boolean NOT NULL DEFAULT FALSE,
    randomize_retry_time boolean NOT NULL DEFAULT FALSE,
    double_dial_enabled boolean NOT NULL DEFAULT FALSE,
    max_attempts bigint NOT NULL,
    max_infra_retries bigint NOT NULL,
    retry_no_answer_seconds bigint NOT NULL,
    retry_completed_seconds bigint NOT NULL,
    double_dial_gap_seconds bigint NOT NULL,
    max_calls_per_day bigint NOT NULL,
    min_seconds_between_calls bigint NOT NULL,
    max_in_flight bigint NOT NULL,
    budget_cents bigint,
    starts_at timestamptz,
    ends_at timestamptz,
    daily_admitted_count bigint NOT NULL DEFAULT 0,
    -- The local calendar date (YYYY-MM-DD) daily_admitted_count counts for: a date, not an
    -- instant, compared as text with the one the engine binds.
    daily_window_date text,
    last_admitted_at timestamptz,
    estimate_cents bigint NOT NULL DEFAULT 0,
    spent_cents bigint NOT NULL DEFAULT 0,
    reserved_cents bigint NOT NULL DEFAULT 0,
    last_tick_at timestamptz,
    -- `admitted:3`, `daily_cap_reached`, ... (not JSON).
    last_tick_result text,
    last_error text,
    started_at timestamptz,
    completed_at timestamptz,
    archived_at timestamptz,
    -- The API key that created it (no foreign key, as in SQLite).
    created_by uuid,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT campaigns_pkey PRIMARY KEY (id),
    CONSTRAINT campaigns_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE UNIQUE INDEX campaigns_live_name ON campaigns (workspace_id, name) WHERE status <> 'archived';
CREATE INDEX campaigns_workspace ON campaigns (workspace_id, created_at);

CREATE TABLE campaign_events (
    id uuid NOT NULL,
    campaign_id uuid NOT NULL,
    kind text NOT NULL,
    from_status text,
    to_status text,
    message text,
    actor_key_id uuid,
    created_at timestamptz NOT NULL,
    CONSTRAINT campaign_events_pkey PRIMARY KEY (id),
    CONSTRAINT campaign_events_campaign_id_fkey FOREIGN KEY (campaign_id) REFERENCES campaigns (id)
);
CREATE INDEX campaign_events_campaign ON campaign_events (campaign_id, created_at);

CREATE TABLE contacts (
    id uuid NOT NULL,
    campaign_id uuid NOT NULL,
    lead_id uuid,
    phone_number text NOT NULL,
    -- An IANA zone name.
    timezone text,
    variables jsonb NOT NULL DEFAULT '{}',
    metadata jsonb NOT NULL DEFAULT '{}',
    state text NOT NULL,
    attempts bigint NOT NULL DEFAULT 0,
    infra_retries bigint NOT NULL DEFAULT 0,
    -- Set exactly when the contact waits to be dialled (pending or scheduled).
    next_attempt_at timestamptz,
    last_outcome text,
    last_disposition_id uuid,
    last_call_id uuid,
    excluded_reason text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- SQLite's implicit rowid (see the top): enrollment order, the dashboard's page cursor.
    -- Not indexed alone (nothing looks a contact up by it), only after campaign_id.
    rowid bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    CONSTRAINT contacts_pkey PRIMARY KEY (id),
    CONSTRAINT contacts_campaign_id_fkey FOREIGN KEY (campaign_id) REFERENCES campaigns (id)
);
CREATE UNIQUE INDEX contacts_number ON contacts (campaign_id, phone_number);
CREATE INDEX contacts_due ON contacts (campaign_id, next_attempt_at) WHERE next_attempt_at IS NOT NULL;
CREATE INDEX contacts_state ON contacts (campaign_id, state, rowid);
-- The dashboard pages through a campaign's contacts in enrollment order (by rowid, from where
-- the last page ended), not by an offset that reads every row before it.
CREATE INDEX contacts_campaign ON contacts (campaign_id, rowid);

-- SIP endpoints: sip:<slug>@host addresses that route inbound calls to an agent. A deleted
-- endpoint keeps its row (its calls refer to it) and its slug is never handed out again.
CREATE TABLE sip_endpoints (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    slug text NOT NULL,
    inbound_agent_id uuid,
    is_active boolean NOT NULL DEFAULT TRUE,
    -- JSON array of addresses and CIDR blocks; NULL accepts any source.
    allowed_source_ips jsonb,
    last_call_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    -- Concurrent calls (ringing or answered) the endpoint allows; NULL: no cap of its own.
    max_concurrent_calls bigint,
    CONSTRAINT sip_endpoints_pkey PRIMARY KEY (id),
    CONSTRAINT sip_endpoints_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT sip_endpoints_inbound_agent_id_fkey FOREIGN KEY (inbound_agent_id) REFERENCES agents (id)
);
CREATE UNIQUE INDEX sip_endpoints_slug ON sip_endpoints (slug);
-- Listing, and counting a workspace's creations of the last day (deleted ones included).
CREATE INDEX sip_endpoints_workspace ON sip_endpoints (workspace_id, created_at);

-- Calls (direct, campaign and inbound). campaign_id, contact_id, agent_id, ... have no foreign
-- keys, as in SQLite.
CREATE TABLE calls (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    direction text NOT NULL,
    status text NOT NULL,
    outcome text,
    end_reason text,
    agent_id uuid,
    from_phone_number_id uuid,
    from_number text NOT NULL,
    to_number text NOT NULL,
    campaign_id uuid,
    contact_id uuid,
    attempt bigint NOT NULL DEFAULT 1,
    priority bigint NOT NULL,
    metadata jsonb NOT NULL DEFAULT '{}',
    variables jsonb NOT NULL DEFAULT '{}',
    idempotency_key text,
    request_hash text,
    max_duration_secs bigint NOT NULL,
    reserved_cents bigint NOT NULL DEFAULT 0,
    cost_cents bigint NOT NULL DEFAULT 0,
    duration_secs bigint NOT NULL DEFAULT 0,
    disposition_id uuid,
    disposition_source text,
    queued_at timestamptz NOT NULL,
    started_at timestamptz,
    answered_at timestamptz,
    ended_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    -- The SIP endpoint an inbound call came through, its codec, whether it was recorded.
    sip_endpoint_id uuid,
    codec text,
    recorded boolean NOT NULL DEFAULT FALSE,
    -- What the network answered an outbound call through a trunk: the final response, its
    -- reason phrase, any Q.850 cause; who answered (human, machine, unsure); its ring timeout
    -- (NULL: the service default).
    sip_code bigint,
    sip_reason text,
    q850_cause bigint,
    answered_by text,
    ring_timeout_secs bigint,
    -- The INVITE of a live outbound call as sent, as JSON (enough to CANCEL or BYE it).
    sip_invite jsonb,
    -- SQLite's implicit rowid (see the top): insert order, the calls list's page cursor.
    rowid bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    CONSTRAINT calls_pkey PRIMARY KEY (id),
    CONSTRAINT calls_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT calls_sip_endpoint_id_fkey FOREIGN KEY (sip_endpoint_id) REFERENCES sip_endpoints (id),
    -- A page of calls starts after the call of a given rowid.
    CONSTRAINT calls_rowid_key UNIQUE (rowid)
);
CREATE UNIQUE INDEX calls_idempotency ON calls (workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX calls_workspace ON calls (workspace_id, created_at, rowid);
CREATE INDEX calls_campaign ON calls (campaign_id, outcome) WHERE campaign_id IS NOT NULL;
CREATE INDEX calls_contact ON calls (contact_id, created_at) WHERE contact_id IS NOT NULL;
-- A call's earlier calls with the same person: outbound by the number dialled, inbound by the
-- caller's number.
CREATE INDEX calls_to_number ON calls (workspace_id, to_number);
CREATE INDEX calls_from_number ON calls (workspace_id, from_number);
CREATE INDEX calls_open ON calls (workspace_id, status)
    WHERE status IN ('queued', 'dialing', 'ringing', 'in_progress');
-- The calls list filtered by status, agent, direction or campaign, newest first: each filter
-- walks its own index in time (then rowid) order.
CREATE INDEX calls_workspace_status ON calls (workspace_id, status, created_at, rowid);
CREATE INDEX calls_workspace_agent ON calls (workspace_id, agent_id, created_at, rowid) WHERE agent_id IS NOT NULL;
CREATE INDEX calls_workspace_direction ON calls (workspace_id, direction, created_at, rowid);
CREATE INDEX calls_workspace_campaign ON calls (workspace_id, campaign_id, created_at, rowid) WHERE campaign_id IS NOT NULL;

-- Secrets the service makes for itself on first start (the recording URL signing key).
CREATE TABLE service_secrets (
    name text NOT NULL,
    value bytea NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT service_secrets_pkey PRIMARY KEY (name)
);

-- Tools agents call during calls: webhooks and functions. Deleting a tool deactivates it.
CREATE TABLE tools (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    description text NOT NULL,
    type text NOT NULL,
    -- JSON object.
    config jsonb NOT NULL,
    is_active boolean NOT NULL DEFAULT TRUE,
    idempotency_key text,
    request_hash text,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    CONSTRAINT tools_pkey PRIMARY KEY (id),
    CONSTRAINT tools_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE UNIQUE INDEX tools_idempotency ON tools (workspace_id, idempotency_key) WHERE idempotency_key IS NOT NULL;
CREATE INDEX tools_workspace ON tools (workspace_id, created_at);

-- Which tools an agent uses, in which order, with per-agent config overrides.
CREATE TABLE agent_tools (
    workspace_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    execution_order bigint NOT NULL,
    -- JSON object or NULL.
    config_override jsonb,
    created_at timestamptz NOT NULL,
    CONSTRAINT agent_tools_pkey PRIMARY KEY (agent_id, tool_id),
    CONSTRAINT agent_tools_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT agent_tools_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id),
    CONSTRAINT agent_tools_tool_id_fkey FOREIGN KEY (tool_id) REFERENCES tools (id)
);
CREATE INDEX agent_tools_tool ON agent_tools (tool_id);

-- Every webhook delivery, test deliveries included. Headers are never stored.
CREATE TABLE tool_deliveries (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    tool_id uuid NOT NULL,
    kind text NOT NULL,
    method text NOT NULL,
    -- The URL without its query string.
    url text NOT NULL,
    outcome text NOT NULL,
    status_code bigint,
    duration_ms bigint NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT tool_deliveries_pkey PRIMARY KEY (id),
    CONSTRAINT tool_deliveries_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT tool_deliveries_tool_id_fkey FOREIGN KEY (tool_id) REFERENCES tools (id)
);
CREATE INDEX tool_deliveries_tool ON tool_deliveries (tool_id, created_at);

-- Leads. Deleting a lead hides it (deleted_at); its phone number may then be used by a new one.
CREATE TABLE leads (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    phone_number text NOT NULL,
    first_name text NOT NULL DEFAULT '',
    last_name text NOT NULL DEFAULT '',
    email text,
    company text NOT NULL DEFAULT '',
    timezone text,
    notes text NOT NULL DEFAULT '',
    metadata jsonb NOT NULL DEFAULT '{}',
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    deleted_at timestamptz,
    CONSTRAINT leads_pkey PRIMARY KEY (id),
    CONSTRAINT leads_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE UNIQUE INDEX leads_phone ON leads (workspace_id, phone_number) WHERE deleted_at IS NULL;
CREATE INDEX leads_workspace ON leads (workspace_id, created_at);

CREATE TABLE lead_tags (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    name text NOT NULL,
    color text NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT lead_tags_pkey PRIMARY KEY (id),
    CONSTRAINT lead_tags_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
-- A tag's name is unique in its workspace regardless of case: SQLite's `name COLLATE NOCASE`.
-- (NOCASE folds ASCII letters only; lower() folds every letter the database's locale knows.)
CREATE UNIQUE INDEX lead_tags_name ON lead_tags (workspace_id, lower(name));

CREATE TABLE lead_taggings (
    lead_id uuid NOT NULL,
    tag_id uuid NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT lead_taggings_pkey PRIMARY KEY (lead_id, tag_id),
    CONSTRAINT lead_taggings_lead_id_fkey FOREIGN KEY (lead_id) REFERENCES leads (id),
    CONSTRAINT lead_taggings_tag_id_fkey FOREIGN KEY (tag_id) REFERENCES lead_tags (id)
);
CREATE INDEX lead_taggings_tag ON lead_taggings (tag_id);

-- Shared links: a public page for one agent, reached with a random token until the link
-- expires or is revoked. Lookups go through the token's SHA-256.
CREATE TABLE shared_links (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    token text NOT NULL,
    token_hash bytea NOT NULL,
    -- The API key that made it (no foreign key, as in SQLite).
    created_by uuid NOT NULL,
    expires_at timestamptz NOT NULL,
    revoked_at timestamptz,
    created_at timestamptz NOT NULL,
    CONSTRAINT shared_links_pkey PRIMARY KEY (id),
    CONSTRAINT shared_links_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT shared_links_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id)
);
CREATE UNIQUE INDEX shared_links_token ON shared_links (token_hash);
CREATE INDEX shared_links_workspace ON shared_links (workspace_id, created_at);

-- The affiliate program (rates in basis points).
CREATE TABLE affiliates (
    workspace_id uuid NOT NULL,
    parent_workspace_id uuid,
    commission_bps bigint NOT NULL,
    override_bps bigint NOT NULL,
    enrolled_at timestamptz NOT NULL,
    CONSTRAINT affiliates_pkey PRIMARY KEY (workspace_id),
    CONSTRAINT affiliates_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT affiliates_parent_workspace_id_fkey FOREIGN KEY (parent_workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX affiliates_parent ON affiliates (parent_workspace_id);

CREATE TABLE affiliate_referrals (
    customer_workspace_id uuid NOT NULL,
    referrer_workspace_id uuid NOT NULL,
    referred_at timestamptz NOT NULL,
    CONSTRAINT affiliate_referrals_pkey PRIMARY KEY (customer_workspace_id),
    CONSTRAINT affiliate_referrals_customer_workspace_id_fkey FOREIGN KEY (customer_workspace_id) REFERENCES workspaces (id),
    CONSTRAINT affiliate_referrals_referrer_workspace_id_fkey FOREIGN KEY (referrer_workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX affiliate_referrals_referrer ON affiliate_referrals (referrer_workspace_id);

CREATE TABLE affiliate_revenue (
    id uuid NOT NULL,
    customer_workspace_id uuid NOT NULL,
    amount_cents bigint NOT NULL,
    occurred_at timestamptz NOT NULL,
    CONSTRAINT affiliate_revenue_pkey PRIMARY KEY (id),
    CONSTRAINT affiliate_revenue_customer_workspace_id_fkey FOREIGN KEY (customer_workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX affiliate_revenue_customer ON affiliate_revenue (customer_workspace_id, occurred_at);

-- Integrations: third-party accounts flow agents dispatch to. Disconnecting keeps the row;
-- connecting the same account again reconnects it (same id).
CREATE TABLE integrations (
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    provider text NOT NULL,
    account text NOT NULL,
    status text NOT NULL,
    connected_at timestamptz NOT NULL,
    disconnected_at timestamptz,
    created_at timestamptz NOT NULL,
    -- The OAuth grant sealed under the service's secrets key (opaque text, not JSON); NULL for
    -- an account connected without one.
    credentials text,
    CONSTRAINT integrations_pkey PRIMARY KEY (id),
    CONSTRAINT integrations_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX integrations_workspace ON integrations (workspace_id, created_at);
CREATE INDEX integrations_account ON integrations (workspace_id, provider, account);

-- Every save of a flow agent's flow_config, numbered per agent.
CREATE TABLE agent_flow_versions (
    agent_id uuid NOT NULL,
    version bigint NOT NULL,
    workspace_id uuid NOT NULL,
    flow_config jsonb NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT agent_flow_versions_pkey PRIMARY KEY (agent_id, version),
    CONSTRAINT agent_flow_versions_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id),
    CONSTRAINT agent_flow_versions_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);

-- The outbox of events for agents' webhook URLs, written in the transaction of the change that
-- causes it. `seq` orders a call's events (SQLite's INTEGER PRIMARY KEY AUTOINCREMENT: never
-- reused).
CREATE TABLE webhook_deliveries (
    seq bigint GENERATED BY DEFAULT AS IDENTITY NOT NULL,
    -- The event's id: the envelope's `id` and the X-Switchboard-Delivery header.
    id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    agent_id uuid NOT NULL,
    call_id uuid NOT NULL,
    type text NOT NULL,
    -- The agent's webhook_url when the event was written.
    url text NOT NULL,
    -- The JSON body sent: {id, type, created_at, call_id, data}. As jsonb it is sent (and
    -- signed) in PostgreSQL's normal form of it, keys reordered.
    envelope jsonb NOT NULL,
    -- pending, delivered or failed.
    status text NOT NULL,
    attempts bigint NOT NULL DEFAULT 0,
    last_attempt_at timestamptz,
    -- Set exactly while pending.
    next_attempt_at timestamptz,
    last_status_code bigint,
    last_error text,
    created_at timestamptz NOT NULL,
    delivered_at timestamptz,
    CONSTRAINT webhook_deliveries_pkey PRIMARY KEY (seq),
    CONSTRAINT webhook_deliveries_id_key UNIQUE (id),
    CONSTRAINT webhook_deliveries_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT webhook_deliveries_agent_id_fkey FOREIGN KEY (agent_id) REFERENCES agents (id)
);
CREATE INDEX webhook_deliveries_due ON webhook_deliveries (next_attempt_at) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_call_pending ON webhook_deliveries (call_id, seq) WHERE status = 'pending';
CREATE INDEX webhook_deliveries_workspace ON webhook_deliveries (workspace_id, created_at);

-- The secret deliveries are signed with (`whsec_` and 64 hex characters).
CREATE TABLE webhook_signing_secrets (
    workspace_id uuid NOT NULL,
    secret text NOT NULL,
    created_at timestamptz NOT NULL,
    CONSTRAINT webhook_signing_secrets_pkey PRIMARY KEY (workspace_id),
    CONSTRAINT webhook_signing_secrets_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);

-- What a call's conversation left and its end-of-call analysis: one row per call that
-- conversed. transcript, events, vendor_failures and flow_path are JSON arrays; extracted a
-- JSON object. analysis_status is pending, completed, failed or skipped; analysis_due_at is set
-- exactly while it is pending.
CREATE TABLE call_details (
    call_id uuid NOT NULL,
    workspace_id uuid NOT NULL,
    transcript jsonb NOT NULL DEFAULT '[]',
    events jsonb NOT NULL DEFAULT '[]',
    vendor_failures jsonb NOT NULL DEFAULT '[]',
    omitted_turns bigint NOT NULL DEFAULT 0,
    omitted_events bigint NOT NULL DEFAULT 0,
    analysis_status text NOT NULL,
    analysis_attempts bigint NOT NULL DEFAULT 0,
    analysis_due_at timestamptz,
    analysis_error text,
    summary text,
    extracted jsonb,
    analyzed_at timestamptz,
    created_at timestamptz NOT NULL,
    updated_at timestamptz NOT NULL,
    flow_path jsonb NOT NULL DEFAULT '[]',
    CONSTRAINT call_details_pkey PRIMARY KEY (call_id),
    CONSTRAINT call_details_call_id_fkey FOREIGN KEY (call_id) REFERENCES calls (id),
    CONSTRAINT call_details_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);
CREATE INDEX call_details_due ON call_details (analysis_due_at) WHERE analysis_due_at IS NOT NULL;

-- Dashboard sign-ins: a session cookie's token (as its SHA-256) stands for the API key it was
-- exchanged for.
CREATE TABLE dashboard_sessions (
    token_hash bytea NOT NULL,
    workspace_id uuid NOT NULL,
    key_id uuid NOT NULL,
    csrf text NOT NULL,
    created_at timestamptz NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT dashboard_sessions_pkey PRIMARY KEY (token_hash),
    CONSTRAINT dashboard_sessions_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id),
    CONSTRAINT dashboard_sessions_key_id_fkey FOREIGN KEY (key_id) REFERENCES api_keys (id)
);
CREATE INDEX dashboard_sessions_expiry ON dashboard_sessions (expires_at);

-- A dashboard's OAuth handshake in flight: the state (as its SHA-256), the session that
-- started it (its token's SHA-256), and the PKCE code verifier.
CREATE TABLE oauth_handshakes (
    state_hash bytea NOT NULL,
    session_hash bytea NOT NULL,
    workspace_id uuid NOT NULL,
    provider text NOT NULL,
    verifier text NOT NULL,
    expires_at timestamptz NOT NULL,
    CONSTRAINT oauth_handshakes_pkey PRIMARY KEY (state_hash),
    CONSTRAINT oauth_handshakes_workspace_id_fkey FOREIGN KEY (workspace_id) REFERENCES workspaces (id)
);

-- A campaign's contacts counted by state and last outcome, kept by the contacts' triggers below.
CREATE TABLE campaign_contact_counts (
    campaign_id uuid NOT NULL,
    state text NOT NULL,
    -- '' for a contact without an outcome yet.
    last_outcome text NOT NULL,
    contacts bigint NOT NULL,
    attempts bigint NOT NULL,
    CONSTRAINT campaign_contact_counts_pkey PRIMARY KEY (campaign_id, state, last_outcome)
);

-- The widths of the timeline's buckets: the length of the prefix of switchboard_time_text()
-- that names a bucket. 18: ten seconds, 16: a minute, 15: ten minutes, 13: an hour, 10: a day.
CREATE TABLE timeline_widths (
    width bigint NOT NULL,
    CONSTRAINT timeline_widths_pkey PRIMARY KEY (width)
);
INSERT INTO timeline_widths (width) VALUES (18), (16), (15), (13), (10);

-- A campaign's calls counted per bucket of each width, kept by the calls' triggers below.
-- `kind` is `admitted` (counted by created_at) or the outcome of an ended call (counted by
-- ended_at; `unknown` when it has none). `bucket` is text: a prefix of the time's text form,
-- e.g. '2026-12-01T10' for the hour.
CREATE TABLE campaign_call_buckets (
    campaign_id uuid NOT NULL,
    width bigint NOT NULL,
    bucket text NOT NULL,
    kind text NOT NULL,
    calls bigint NOT NULL,
    CONSTRAINT campaign_call_buckets_pkey PRIMARY KEY (campaign_id, width, bucket, kind)
);

-- The contacts' counts (SQLite's contacts_counted_in, _out and _again). Adding a contact to a
-- count inserts its row if missing and adds to it: SQLite's INSERT OR IGNORE of a zero row and
-- UPDATE, as one upsert.
-- Counts `delta` contacts (and their `attempts`) of `campaign` in `state` with `outcome`.
CREATE FUNCTION campaign_contacts_counted(campaign uuid, in_state text, outcome text, tries bigint, delta bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF delta < 0 THEN
        UPDATE campaign_contact_counts n SET contacts = n.contacts + delta, attempts = n.attempts - tries
        WHERE n.campaign_id = campaign AND n.state = in_state AND n.last_outcome = COALESCE(outcome, '');
    ELSE
        INSERT INTO campaign_contact_counts AS n (campaign_id, state, last_outcome, contacts, attempts)
        VALUES (campaign, in_state, COALESCE(outcome, ''), delta, tries)
        ON CONFLICT (campaign_id, state, last_outcome)
        DO UPDATE SET contacts = n.contacts + delta, attempts = n.attempts + EXCLUDED.attempts;
    END IF;
END
$$;

CREATE FUNCTION contacts_counted_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_contacts_counted(NEW.campaign_id, NEW.state, NEW.last_outcome, NEW.attempts, 1);
    RETURN NULL;
END
$$;

CREATE FUNCTION contacts_counted_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_contacts_counted(OLD.campaign_id, OLD.state, OLD.last_outcome, OLD.attempts, -1);
    RETURN NULL;
END
$$;

CREATE FUNCTION contacts_counted_again() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_contacts_counted(OLD.campaign_id, OLD.state, OLD.last_outcome, OLD.attempts, -1);
    PERFORM campaign_contacts_counted(NEW.campaign_id, NEW.state, NEW.last_outcome, NEW.attempts, 1);
    RETURN NULL;
END
$$;

CREATE TRIGGER contacts_counted_in AFTER INSERT ON contacts
    FOR EACH ROW EXECUTE FUNCTION contacts_counted_in();
CREATE TRIGGER contacts_counted_out AFTER DELETE ON contacts
    FOR EACH ROW EXECUTE FUNCTION contacts_counted_out();
-- As in SQLite, it fires whenever the UPDATE sets one of these columns, changed or not (taking
-- the contact out of its count and putting it back).
CREATE TRIGGER contacts_counted_again AFTER UPDATE OF campaign_id, state, last_outcome, attempts ON contacts
    FOR EACH ROW EXECUTE FUNCTION contacts_counted_again();

-- The calls' timeline counts (SQLite's calls_timeline_in, _out, _ended and _moved), each
-- trigger under the same WHEN as SQLite's (its `IS` and `IS NOT` are IS NOT DISTINCT FROM and
-- IS DISTINCT FROM). A bucket is a prefix of switchboard_time_text() of the time, of each
-- width of timeline_widths. Taking a call out leaves its bucket's row (at zero, perhaps), as
-- in SQLite.
-- Counts `delta` calls of `campaign` of `kind` at `at` in the bucket of each width. Taking
-- out (`delta` -1) finds the buckets the call was counted in; adding makes a missing one.
CREATE FUNCTION campaign_calls_counted(campaign uuid, at timestamptz, of_kind text, delta bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF campaign IS NULL OR at IS NULL THEN
        RETURN;
    END IF;
    IF delta < 0 THEN
        UPDATE campaign_call_buckets b SET calls = b.calls + delta
        WHERE b.campaign_id = campaign AND b.kind = of_kind
          AND (b.width, b.bucket) IN (SELECT w.width, substr(switchboard_time_text(at), 1, w.width::integer)
                                      FROM timeline_widths w);
    ELSE
        INSERT INTO campaign_call_buckets AS b (campaign_id, width, bucket, kind, calls)
        SELECT campaign, w.width, substr(switchboard_time_text(at), 1, w.width::integer),
               of_kind, delta
        FROM timeline_widths w
        ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = b.calls + delta;
    END IF;
END
$$;

CREATE FUNCTION calls_timeline_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_calls_counted(NEW.campaign_id, NEW.created_at, 'admitted', 1);
    PERFORM campaign_calls_counted(NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1);
    RETURN NULL;
END
$$;

-- Takes OLD out of its admitted buckets and (when it had ended) its ended ones.
CREATE FUNCTION calls_timeline_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_calls_counted(OLD.campaign_id, OLD.created_at, 'admitted', -1);
    PERFORM campaign_calls_counted(OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1);
    RETURN NULL;
END
$$;

-- A call's end (or a change of its outcome) moves it from its old ended bucket to its new one.
CREATE FUNCTION calls_timeline_ended() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_calls_counted(OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1);
    PERFORM campaign_calls_counted(NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1);
    RETURN NULL;
END
$$;

-- A call moved to another campaign or time (not done by the service, but kept true): out of
-- every old bucket, into every new one.
CREATE FUNCTION calls_timeline_moved() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    PERFORM campaign_calls_counted(OLD.campaign_id, OLD.created_at, 'admitted', -1);
    PERFORM campaign_calls_counted(OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1);
    PERFORM campaign_calls_counted(NEW.campaign_id, NEW.created_at, 'admitted', 1);
    PERFORM campaign_calls_counted(NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1);
    RETURN NULL;
END
$$;

CREATE TRIGGER calls_timeline_in AFTER INSERT ON calls
    FOR EACH ROW WHEN (NEW.campaign_id IS NOT NULL)
    EXECUTE FUNCTION calls_timeline_in();
CREATE TRIGGER calls_timeline_out AFTER DELETE ON calls
    FOR EACH ROW WHEN (OLD.campaign_id IS NOT NULL)
    EXECUTE FUNCTION calls_timeline_out();
CREATE TRIGGER calls_timeline_ended AFTER UPDATE OF ended_at, outcome ON calls
    FOR EACH ROW WHEN (NEW.campaign_id IS NOT NULL
        AND OLD.campaign_id IS NOT DISTINCT FROM NEW.campaign_id
        AND OLD.created_at IS NOT DISTINCT FROM NEW.created_at
        AND (OLD.ended_at IS DISTINCT FROM NEW.ended_at OR OLD.outcome IS DISTINCT FROM NEW.outcome))
    EXECUTE FUNCTION calls_timeline_ended();
CREATE TRIGGER calls_timeline_moved AFTER UPDATE OF campaign_id, created_at ON calls
    FOR EACH ROW WHEN (OLD.campaign_id IS DISTINCT FROM NEW.campaign_id OR OLD.created_at IS DISTINCT FROM NEW.created_at)
    EXECUTE FUNCTION calls_timeline_moved();
