-- SIP trunks on carrier accounts. `trunk` is the trunk as JSON without its password; the
-- password has its own column and is never answered. `status` is `untested` (new, or the trunk
-- changed since the last test), `active` (the last test reached a gateway) or `failing` (it
-- reached none; `status_reason` says which gateway failed how). `updated_at` is the last change
-- of the account's settings; `tested_at` the last test.
ALTER TABLE carrier_accounts ADD COLUMN trunk TEXT;
ALTER TABLE carrier_accounts ADD COLUMN trunk_password TEXT;
ALTER TABLE carrier_accounts ADD COLUMN status_reason TEXT;
ALTER TABLE carrier_accounts ADD COLUMN tested_at TEXT;
ALTER TABLE carrier_accounts ADD COLUMN updated_at TEXT NOT NULL DEFAULT '';
UPDATE carrier_accounts SET updated_at = created_at;

-- Whether a number can call out over SIP follows from its account's trunk and status (or the
-- operator's default trunk); it is computed when read, not stored.
ALTER TABLE phone_numbers DROP COLUMN sip_outbound_configured;
