-- A flow call's path through its nodes: [{node_id, node_name, entered_ms, reason}], as JSON.
ALTER TABLE call_details ADD COLUMN flow_path TEXT NOT NULL DEFAULT '[]';
