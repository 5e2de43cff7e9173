-- A campaign's chart counts its calls by when they were admitted and by when, and how, they
-- ended. Counting them at each look read every call of the campaign (135-200 ms at 100,000
-- calls); these counts are kept by triggers instead, per bucket of each width the chart draws
-- with, so a look reads at most a few hundred rows whatever the campaign's size.
--
-- `width` is the length of the stored ISO 8601 time's prefix that names the bucket: 18 (ten
-- seconds), 16 (a minute), 15 (ten minutes), 13 (an hour), 10 (a day). `kind` is `admitted`
-- (counted by `created_at`) or the outcome of an ended call (counted by `ended_at`; `unknown`
-- when it has none).
--
-- The chart was the only reader of the index `calls_campaign_timeline`; it goes (a campaign's
-- calls are listed through `calls_workspace_campaign`).
DROP INDEX calls_campaign_timeline;
CREATE TABLE timeline_widths (width INTEGER PRIMARY KEY NOT NULL);
INSERT INTO timeline_widths (width) VALUES (18), (16), (15), (13), (10);

CREATE TABLE campaign_call_buckets (
    campaign_id BLOB NOT NULL,
    width INTEGER NOT NULL,
    bucket TEXT NOT NULL,
    kind TEXT NOT NULL,
    calls INTEGER NOT NULL,
    PRIMARY KEY (campaign_id, width, bucket, kind)
) WITHOUT ROWID;

INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
SELECT c.campaign_id, w.width, substr(c.created_at, 1, w.width), 'admitted', COUNT(*)
FROM calls c, timeline_widths w WHERE c.campaign_id IS NOT NULL
GROUP BY c.campaign_id, w.width, substr(c.created_at, 1, w.width);

INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
SELECT c.campaign_id, w.width, substr(c.ended_at, 1, w.width), COALESCE(c.outcome, 'unknown'), COUNT(*)
FROM calls c, timeline_widths w WHERE c.campaign_id IS NOT NULL AND c.ended_at IS NOT NULL
GROUP BY c.campaign_id, w.width, substr(c.ended_at, 1, w.width), COALESCE(c.outcome, 'unknown');

CREATE TRIGGER calls_timeline_in AFTER INSERT ON calls WHEN NEW.campaign_id IS NOT NULL BEGIN
    INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
    SELECT NEW.campaign_id, width, substr(NEW.created_at, 1, width), 'admitted', 1 FROM timeline_widths WHERE true
    ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = calls + 1;
    INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
    SELECT NEW.campaign_id, width, substr(NEW.ended_at, 1, width), COALESCE(NEW.outcome, 'unknown'), 1
    FROM timeline_widths WHERE NEW.ended_at IS NOT NULL
    ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = calls + 1;
END;

CREATE TRIGGER calls_timeline_out AFTER DELETE ON calls WHEN OLD.campaign_id IS NOT NULL BEGIN
    UPDATE campaign_call_buckets SET calls = calls - 1
    WHERE campaign_id = OLD.campaign_id AND kind = 'admitted'
      AND (width, bucket) IN (SELECT width, substr(OLD.created_at, 1, width) FROM timeline_widths);
    UPDATE campaign_call_buckets SET calls = calls - 1
    WHERE campaign_id = OLD.campaign_id AND OLD.ended_at IS NOT NULL AND kind = COALESCE(OLD.outcome, 'unknown')
      AND (width, bucket) IN (SELECT width, substr(OLD.ended_at, 1, width) FROM timeline_widths);
END;

-- A call's end (or a change of its outcome) moves it from its old ended bucket to its new one.
CREATE TRIGGER calls_timeline_ended AFTER UPDATE OF ended_at, outcome ON calls
WHEN NEW.campaign_id IS NOT NULL AND OLD.campaign_id IS NEW.campaign_id AND OLD.created_at IS NEW.created_at
  AND (OLD.ended_at IS NOT NEW.ended_at OR OLD.outcome IS NOT NEW.outcome) BEGIN
    UPDATE campaign_call_buckets SET calls = calls - 1
    WHERE campaign_id = OLD.campaign_id AND OLD.ended_at IS NOT NULL AND kind = COALESCE(OLD.outcome, 'unknown')
      AND (width, bucket) IN (SELECT width, substr(OLD.ended_at, 1, width) FROM timeline_widths);
    INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
    SELECT NEW.campaign_id, width, substr(NEW.ended_at, 1, width), COALESCE(NEW.outcome, 'unknown'), 1
    FROM timeline_widths WHERE NEW.ended_at IS NOT NULL
    ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = calls + 1;
END;

-- A call moved to another campaign or time (not done by the service, but kept true): out of
-- every old bucket, into every new one.
CREATE TRIGGER calls_timeline_moved AFTER UPDATE OF campaign_id, created_at ON calls
WHEN OLD.campaign_id IS NOT NEW.campaign_id OR OLD.created_at IS NOT NEW.created_at BEGIN
    UPDATE campaign_call_buckets SET calls = calls - 1
    WHERE campaign_id = OLD.campaign_id AND kind = 'admitted'
      AND (width, bucket) IN (SELECT width, substr(OLD.created_at, 1, width) FROM timeline_widths);
    UPDATE campaign_call_buckets SET calls = calls - 1
    WHERE campaign_id = OLD.campaign_id AND OLD.ended_at IS NOT NULL AND kind = COALESCE(OLD.outcome, 'unknown')
      AND (width, bucket) IN (SELECT width, substr(OLD.ended_at, 1, width) FROM timeline_widths);
    INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
    SELECT NEW.campaign_id, width, substr(NEW.created_at, 1, width), 'admitted', 1
    FROM timeline_widths WHERE NEW.campaign_id IS NOT NULL
    ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = calls + 1;
    INSERT INTO campaign_call_buckets (campaign_id, width, bucket, kind, calls)
    SELECT NEW.campaign_id, width, substr(NEW.ended_at, 1, width), COALESCE(NEW.outcome, 'unknown'), 1
    FROM timeline_widths WHERE NEW.campaign_id IS NOT NULL AND NEW.ended_at IS NOT NULL
    ON CONFLICT (campaign_id, width, bucket, kind) DO UPDATE SET calls = calls + 1;
END;
