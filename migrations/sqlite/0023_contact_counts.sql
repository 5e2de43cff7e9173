-- A campaign's contacts counted by state and last outcome, kept by triggers as contacts are
-- enrolled, dialled and closed, so a campaign's progress is read from a few rows instead of
-- counting a million contacts at each look.
CREATE TABLE campaign_contact_counts (
    campaign_id BLOB NOT NULL,
    state TEXT NOT NULL,
    -- '' for a contact without an outcome yet.
    last_outcome TEXT NOT NULL,
    contacts INTEGER NOT NULL,
    attempts INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, state, last_outcome)
) WITHOUT ROWID;

INSERT INTO campaign_contact_counts (campaign_id, state, last_outcome, contacts, attempts)
SELECT campaign_id, state, COALESCE(last_outcome, ''), COUNT(*), COALESCE(SUM(attempts), 0)
FROM contacts GROUP BY campaign_id, state, COALESCE(last_outcome, '');

CREATE TRIGGER contacts_counted_in AFTER INSERT ON contacts BEGIN
    INSERT OR IGNORE INTO campaign_contact_counts VALUES (NEW.campaign_id, NEW.state, COALESCE(NEW.last_outcome, ''), 0, 0);
    UPDATE campaign_contact_counts SET contacts = contacts + 1, attempts = attempts + NEW.attempts
    WHERE campaign_id = NEW.campaign_id AND state = NEW.state AND last_outcome = COALESCE(NEW.last_outcome, '');
END;

CREATE TRIGGER contacts_counted_out AFTER DELETE ON contacts BEGIN
    UPDATE campaign_contact_counts SET contacts = contacts - 1, attempts = attempts - OLD.attempts
    WHERE campaign_id = OLD.campaign_id AND state = OLD.state AND last_outcome = COALESCE(OLD.last_outcome, '');
END;

CREATE TRIGGER contacts_counted_again AFTER UPDATE OF campaign_id, state, last_outcome, attempts ON contacts BEGIN
    UPDATE campaign_contact_counts SET contacts = contacts - 1, attempts = attempts - OLD.attempts
    WHERE campaign_id = OLD.campaign_id AND state = OLD.state AND last_outcome = COALESCE(OLD.last_outcome, '');
    INSERT OR IGNORE INTO campaign_contact_counts VALUES (NEW.campaign_id, NEW.state, COALESCE(NEW.last_outcome, ''), 0, 0);
    UPDATE campaign_contact_counts SET contacts = contacts + 1, attempts = attempts + NEW.attempts
    WHERE campaign_id = NEW.campaign_id AND state = NEW.state AND last_outcome = COALESCE(NEW.last_outcome, '');
END;

-- The dashboard pages through a campaign's contacts in the order they were enrolled (by rowid,
-- from where the last page ended), not by an offset that reads every row before it.
CREATE INDEX contacts_campaign ON contacts(campaign_id);

-- Calls filtered by status are counted and listed from the index.
CREATE INDEX calls_workspace_status ON calls(workspace_id, status, created_at);
