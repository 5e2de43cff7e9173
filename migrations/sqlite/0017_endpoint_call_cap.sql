-- An endpoint may cap its concurrent calls (ringing or answered); NULL: no cap of its own.
ALTER TABLE sip_endpoints ADD COLUMN max_concurrent_calls INTEGER;
