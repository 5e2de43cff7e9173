-- Outbound calls through SIP trunks: what the network answered (the final response, its
-- reason phrase and any Q.850 cause), who answered (answering-machine detection: human,
-- machine or unsure), and the ring timeout a call asked for (null: the service default).
ALTER TABLE calls ADD COLUMN sip_code INTEGER;
ALTER TABLE calls ADD COLUMN sip_reason TEXT;
ALTER TABLE calls ADD COLUMN q850_cause INTEGER;
ALTER TABLE calls ADD COLUMN answered_by TEXT;
ALTER TABLE calls ADD COLUMN ring_timeout_secs INTEGER;
-- The INVITE of a live outbound call as sent (JSON: enough to CANCEL it, or BYE its dialog once
-- answered), so that a restart after a crash ends what the previous process left ringing.
ALTER TABLE calls ADD COLUMN sip_invite TEXT;
