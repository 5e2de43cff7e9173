-- Counting at each write took a third of an admission's time: the admitted call was added to
-- five timeline buckets and the dialled contact moved between two counts, each an upsert in
-- the admission's transaction. Those triggers now append a row to a log instead (a contact
-- that changes state: one row out of its old count and one into its new; a call admitted or
-- ended: one row at its time). The store folds the logs into the counts in batches, and the
-- counts are read as what was folded plus what the logs hold, so every look is exact.
--
-- Contacts enrolled are still counted at once, once per statement (below).
CREATE TABLE contact_count_log (
    campaign_id uuid NOT NULL,
    state text NOT NULL,
    -- '' for a contact without an outcome yet.
    last_outcome text NOT NULL,
    contacts bigint NOT NULL,
    attempts bigint NOT NULL
);

-- `at` is switchboard_time_text() of the time the call is counted at: its prefixes name its
-- buckets, as in campaign_call_buckets.
CREATE TABLE call_count_log (
    campaign_id uuid NOT NULL,
    at text NOT NULL,
    kind text NOT NULL,
    calls bigint NOT NULL
);

CREATE OR REPLACE FUNCTION contacts_counted_again() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_count_log (campaign_id, state, last_outcome, contacts, attempts) VALUES
        (OLD.campaign_id, OLD.state, COALESCE(OLD.last_outcome, ''), -1, -OLD.attempts),
        (NEW.campaign_id, NEW.state, COALESCE(NEW.last_outcome, ''), 1, NEW.attempts);
    RETURN NULL;
END
$$;

-- Every call trigger counts through this function: it now logs the call at `at`.
CREATE OR REPLACE FUNCTION campaign_calls_counted(campaign uuid, at timestamptz, of_kind text, delta bigint)
RETURNS void LANGUAGE plpgsql AS $$
BEGIN
    IF campaign IS NULL OR at IS NULL THEN
        RETURN;
    END IF;
    INSERT INTO call_count_log (campaign_id, at, kind, calls)
    VALUES (campaign, switchboard_time_text(at), of_kind, delta);
END
$$;

-- Contacts enrolled or deleted are counted per statement, from the statement's rows: an
-- enrollment is one transaction of many statements, and an upsert of the same count row for
-- each of a million contacts in it walks every version of that row the transaction made.
DROP TRIGGER contacts_counted_in ON contacts;
DROP TRIGGER contacts_counted_out ON contacts;
DROP FUNCTION contacts_counted_in();
DROP FUNCTION contacts_counted_out();

CREATE FUNCTION contacts_counted_in() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO campaign_contact_counts AS n (campaign_id, state, last_outcome, contacts, attempts)
    SELECT campaign_id, state, COALESCE(last_outcome, ''), count(*), COALESCE(sum(attempts), 0)
    FROM enrolled GROUP BY campaign_id, state, COALESCE(last_outcome, '')
    ON CONFLICT (campaign_id, state, last_outcome)
    DO UPDATE SET contacts = n.contacts + EXCLUDED.contacts, attempts = n.attempts + EXCLUDED.attempts;
    RETURN NULL;
END
$$;

CREATE FUNCTION contacts_counted_out() RETURNS trigger LANGUAGE plpgsql AS $$
BEGIN
    INSERT INTO contact_count_log (campaign_id, state, last_outcome, contacts, attempts)
    SELECT campaign_id, state, COALESCE(last_outcome, ''), -count(*), -COALESCE(sum(attempts), 0)
    FROM removed GROUP BY campaign_id, state, COALESCE(last_outcome, '');
    RETURN NULL;
END
$$;

CREATE TRIGGER contacts_counted_in AFTER INSERT ON contacts
    REFERENCING NEW TABLE AS enrolled FOR EACH STATEMENT EXECUTE FUNCTION contacts_counted_in();
CREATE TRIGGER contacts_counted_out AFTER DELETE ON contacts
    REFERENCING OLD TABLE AS removed FOR EACH STATEMENT EXECUTE FUNCTION contacts_counted_out();
