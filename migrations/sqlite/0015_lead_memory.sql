-- Lead memory. Whether an agent's lead memory trusts the caller-ID of inbound SIP endpoint
-- calls: agents saved before this do not (the key is written out so every stored document has
-- the same keys).
UPDATE agents
SET doc = json_set(doc, '$.lead_memory_trust_caller_id', json('false'))
WHERE json_type(doc, '$.lead_memory_trust_caller_id') IS NULL;

-- A call's earlier calls with the same person: outbound by the number dialled, inbound by the
-- caller's number. Neither column changes after the insert, so the indexes cost one write per
-- call.
CREATE INDEX calls_to_number ON calls(workspace_id, to_number);
CREATE INDEX calls_from_number ON calls(workspace_id, from_number);
