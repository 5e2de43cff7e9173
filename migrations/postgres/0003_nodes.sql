-- The nodes that run on this database: each writes a heartbeat every few seconds while it
-- runs and marks itself stopped when it stops; a node whose heartbeat is older than the time
-- a lease is held is gone.
CREATE TABLE nodes (
    id text NOT NULL,
    -- Where other machines reach the node's SIP and media.
    advertise text NOT NULL,
    version text NOT NULL,
    started_at timestamptz NOT NULL,
    heartbeat_at timestamptz NOT NULL,
    draining boolean NOT NULL DEFAULT false,
    stopped_at timestamptz,
    CONSTRAINT nodes_pkey PRIMARY KEY (id),
    CONSTRAINT nodes_id_length CHECK (length(id) BETWEEN 1 AND 64)
);
