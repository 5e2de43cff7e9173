-- Counting at each write took a third of an admission's time: the admitted call was added to
-- five timeline buckets and the dialled contact moved between two counts, each an upsert in
-- the admission's transaction. Those triggers now append a row to a log instead (a contact
-- that changes state: one row out of its old count and one into its new; a call admitted or
-- ended: one row at its time). The store folds the logs into the counts in batches, and the
-- counts are read as what was folded plus what the logs hold, so every look is exact.
--
-- Contacts enrolled or deleted are still counted at once (a batch of a thousand is one
-- transaction that would otherwise leave a thousand rows to fold).
CREATE TABLE contact_count_log (
    campaign_id BLOB NOT NULL,
    state TEXT NOT NULL,
    -- '' for a contact without an outcome yet.
    last_outcome TEXT NOT NULL,
    contacts INTEGER NOT NULL,
    attempts INTEGER NOT NULL
);

-- `at` is the stored ISO 8601 time the call is counted at; its prefixes name its buckets.
CREATE TABLE call_count_log (
    campaign_id BLOB NOT NULL,
    at TEXT NOT NULL,
    kind TEXT NOT NULL,
    calls INTEGER NOT NULL
);

DROP TRIGGER contacts_counted_again;
CREATE TRIGGER contacts_counted_again AFTER UPDATE OF campaign_id, state, last_outcome, attempts ON contacts BEGIN
    INSERT INTO contact_count_log (campaign_id, state, last_outcome, contacts, attempts) VALUES
        (OLD.campaign_id, OLD.state, COALESCE(OLD.last_outcome, ''), -1, -OLD.attempts),
        (NEW.campaign_id, NEW.state, COALESCE(NEW.last_outcome, ''), 1, NEW.attempts);
END;

DROP TRIGGER calls_timeline_in;
CREATE TRIGGER calls_timeline_in AFTER INSERT ON calls WHEN NEW.campaign_id IS NOT NULL BEGIN
    INSERT INTO call_count_log (campaign_id, at, kind, calls) VALUES (NEW.campaign_id, NEW.created_at, 'admitted', 1);
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1 WHERE NEW.ended_at IS NOT NULL;
END;

DROP TRIGGER calls_timeline_out;
CREATE TRIGGER calls_timeline_out AFTER DELETE ON calls WHEN OLD.campaign_id IS NOT NULL BEGIN
    INSERT INTO call_count_log (campaign_id, at, kind, calls) VALUES (OLD.campaign_id, OLD.created_at, 'admitted', -1);
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1 WHERE OLD.ended_at IS NOT NULL;
END;

DROP TRIGGER calls_timeline_ended;
CREATE TRIGGER calls_timeline_ended AFTER UPDATE OF ended_at, outcome ON calls
WHEN NEW.campaign_id IS NOT NULL AND OLD.campaign_id IS NEW.campaign_id AND OLD.created_at IS NEW.created_at
  AND (OLD.ended_at IS NOT NEW.ended_at OR OLD.outcome IS NOT NEW.outcome) BEGIN
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1 WHERE OLD.ended_at IS NOT NULL;
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1 WHERE NEW.ended_at IS NOT NULL;
END;

DROP TRIGGER calls_timeline_moved;
CREATE TRIGGER calls_timeline_moved AFTER UPDATE OF campaign_id, created_at ON calls
WHEN OLD.campaign_id IS NOT NEW.campaign_id OR OLD.created_at IS NOT NEW.created_at BEGIN
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT OLD.campaign_id, OLD.created_at, 'admitted', -1 WHERE OLD.campaign_id IS NOT NULL;
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT OLD.campaign_id, OLD.ended_at, COALESCE(OLD.outcome, 'unknown'), -1
    WHERE OLD.campaign_id IS NOT NULL AND OLD.ended_at IS NOT NULL;
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT NEW.campaign_id, NEW.created_at, 'admitted', 1 WHERE NEW.campaign_id IS NOT NULL;
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    SELECT NEW.campaign_id, NEW.ended_at, COALESCE(NEW.outcome, 'unknown'), 1
    WHERE NEW.campaign_id IS NOT NULL AND NEW.ended_at IS NOT NULL;
END;
