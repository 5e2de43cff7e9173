-- The nodes that run on this database: each writes a heartbeat every few seconds while it
-- runs and marks itself stopped when it stops; a node whose heartbeat is older than the time
-- a lease is held is gone.
CREATE TABLE nodes (
    id TEXT PRIMARY KEY NOT NULL CHECK (length(id) BETWEEN 1 AND 64),
    -- Where other machines reach the node's SIP and media.
    advertise TEXT NOT NULL,
    version TEXT NOT NULL,
    started_at TEXT NOT NULL,
    heartbeat_at TEXT NOT NULL,
    draining INTEGER NOT NULL DEFAULT 0,
    stopped_at TEXT
);
