-- The nodes that run on this database: each writes a heartbeat every few seconds while it
-- runs and marks itself stopped when it stops; a node whose heartbeat is older than the time
-- a lease is held is gone.
CREATE TABLE nodes (
    id text NOT NULL,
    -- Where other machines reach the node's SIP and media.
    advertise text NOT NULL,
    version text NOT NULL,
    -- The machine and process it runs as: a restart on the same machine sees at once that the
    -- process before it is gone.
    host text NOT NULL,
    pid bigint NOT NULL,
    -- The process's PID namespace (containers on one host each have their own) and a random
    -- id drawn at each start: the row is the process's that wrote this instance.
    pid_ns text NOT NULL,
    instance text NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    draining boolean NOT NULL DEFAULT false,
    stopped_at timestamptz,
    CONSTRAINT nodes_pkey PRIMARY KEY (id),
    CONSTRAINT nodes_id_length CHECK (length(id) BETWEEN 1 AND 64)
);

-- The node carrying a live call (set when the call is dialled or answered): a node that starts
-- ends as interrupted only the live calls of its own id and of nodes that are gone.
ALTER TABLE calls ADD COLUMN node_id text;

-- A campaign's actor runs on the node that holds its lease. The lease is taken only when it
-- has expired or is already the taker's; `epoch` goes up at every change of owner, so a write
-- fenced by (owner, epoch) does nothing once the lease has passed to another node.
CREATE TABLE campaign_leases (
    campaign_id uuid NOT NULL,
    owner text NOT NULL,
    epoch bigint NOT NULL,
    expires_at timestamptz NOT NULL,
    taken_at timestamptz NOT NULL,
    CONSTRAINT campaign_leases_pkey PRIMARY KEY (campaign_id),
    CONSTRAINT campaign_leases_campaign_id_fkey FOREIGN KEY (campaign_id)
        REFERENCES campaigns (id) ON DELETE CASCADE
);
CREATE INDEX campaign_leases_owner ON campaign_leases (owner);

-- The API's rate limit per key, counted for every node at once: requests per key and
-- one-minute window (`window_start`: the window's UNIX minute).
CREATE TABLE api_rate_windows (
    key_id uuid NOT NULL,
    window_start bigint NOT NULL,
    requests bigint NOT NULL,
    CONSTRAINT api_rate_windows_pkey PRIMARY KEY (key_id, window_start)
);
