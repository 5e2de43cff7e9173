-- Leads: people a workspace calls or hears from, tagged for segmentation. Deleting a lead hides
-- it (deleted_at); its phone number may then be used by a new lead.
CREATE TABLE leads (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    phone_number TEXT NOT NULL,
    first_name TEXT NOT NULL DEFAULT '',
    last_name TEXT NOT NULL DEFAULT '',
    email TEXT,
    company TEXT NOT NULL DEFAULT '',
    timezone TEXT,
    notes TEXT NOT NULL DEFAULT '',
    metadata TEXT NOT NULL DEFAULT '{}',
    created_at TEXT NOT NULL,
    updated_at TEXT NOT NULL,
    deleted_at TEXT
);
CREATE UNIQUE INDEX leads_phone ON leads(workspace_id, phone_number) WHERE deleted_at IS NULL;
CREATE INDEX leads_workspace ON leads(workspace_id, created_at);

CREATE TABLE lead_tags (
    id BLOB PRIMARY KEY NOT NULL,
    workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    name TEXT NOT NULL,
    color TEXT NOT NULL,
    created_at TEXT NOT NULL
);
CREATE UNIQUE INDEX lead_tags_name ON lead_tags(workspace_id, name COLLATE NOCASE);

CREATE TABLE lead_taggings (
    lead_id BLOB NOT NULL REFERENCES leads(id),
    tag_id BLOB NOT NULL REFERENCES lead_tags(id),
    created_at TEXT NOT NULL,
    PRIMARY KEY (lead_id, tag_id)
);
CREATE INDEX lead_taggings_tag ON lead_taggings(tag_id);
