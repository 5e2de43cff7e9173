-- The affiliate program. A partner is a workspace enrolled in the program, possibly beneath a
-- parent partner (it is then the parent's sub-affiliate). Partners refer customers (other
-- workspaces); revenue from a referred customer earns its referrer a commission, and the
-- referrer's parent an override on top, both only for revenue after the referral (and, for
-- the override, after the sub-affiliate's enrollment). Rates are in basis points.
CREATE TABLE affiliates (
    workspace_id BLOB PRIMARY KEY NOT NULL REFERENCES workspaces(id),
    parent_workspace_id BLOB REFERENCES workspaces(id),
    commission_bps INTEGER NOT NULL,
    override_bps INTEGER NOT NULL,
    enrolled_at TEXT NOT NULL
);
CREATE INDEX affiliates_parent ON affiliates(parent_workspace_id);

CREATE TABLE affiliate_referrals (
    customer_workspace_id BLOB PRIMARY KEY NOT NULL REFERENCES workspaces(id),
    referrer_workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    referred_at TEXT NOT NULL
);
CREATE INDEX affiliate_referrals_referrer ON affiliate_referrals(referrer_workspace_id);

CREATE TABLE affiliate_revenue (
    id BLOB PRIMARY KEY NOT NULL,
    customer_workspace_id BLOB NOT NULL REFERENCES workspaces(id),
    amount_cents INTEGER NOT NULL,
    occurred_at TEXT NOT NULL
);
CREATE INDEX affiliate_revenue_customer ON affiliate_revenue(customer_workspace_id, occurred_at);
