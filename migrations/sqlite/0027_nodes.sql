-- The nodes that run on this database: each writes a heartbeat every few seconds while it
-- runs and marks itself stopped when it stops; a node whose heartbeat is older than the time
-- a lease is held is gone.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
    -- Where other machines reach the node's SIP and media.
    advertise TEXT NOT NULL,
    version TEXT NOT NULL,
    -- The machine and process it runs as: a restart on the same machine sees at once that the
    -- process before it is gone.
    host TEXT NOT NULL,
    pid INTEGER NOT NULL,
    -- The process's PID namespace (containers on one host each have their own) and a random
    -- id drawn at each start: the row is the process's that wrote this instance.
    pid_ns TEXT NOT NULL,
    instance TEXT NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    draining INTEGER NOT NULL DEFAULT 0,
    stopped_at TEXT
);

-- The node carrying a live call (set when the call is dialled or answered): a node that starts
-- ends as interrupted only the live calls of its own id and of nodes that are gone.
ALTER TABLE calls ADD COLUMN node_id TEXT;

-- A campaign's actor runs on the node that holds its lease. The lease is taken only when it
-- has expired or is already the taker's; `epoch` goes up at every change of owner, so a write
-- fenced by (owner, epoch) does nothing once the lease has passed to another node.
CREATE TABLE campaign_leases (
    campaign_id BLOB PRIMARY KEY NOT NULL REFERENCES campaigns (id) ON DELETE CASCADE,
    owner TEXT NOT NULL,
    epoch INTEGER NOT NULL,
    expires_at TEXT NOT NULL,
    taken_at TEXT NOT NULL
);
CREATE INDEX campaign_leases_owner ON campaign_leases (owner);

-- The API's rate limit per key, counted for every node at once: requests per key and
-- one-minute window (`window_start`: the window's UNIX minute). Used where several nodes share
-- a database (PostgreSQL); one node on SQLite counts in memory.
CREATE TABLE api_rate_windows (
    key_id BLOB NOT NULL,
    window_start INTEGER NOT NULL,
    requests INTEGER NOT NULL,
    PRIMARY KEY (key_id, window_start)
);
