//! The operator commands (everything but `serve`): workspaces and their webhook signing
//! secrets, API keys, owned numbers, credits, integrations, affiliates and carrier accounts,
//! run against the store directly.

use anyhow::{Context, bail};
use chrono::Utc;
use serde_json::json;
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::phone::PhoneNumber;

use super::args::{
    AffiliateCommand, BillingCommand, CarrierAccountCommand, Command, IntegrationCommand,
    KeyCommand, NumberCommand, SigningSecretCommand, WorkspaceCommand,
};
use crate::domain::auth::Scopes;
use crate::domain::trunks::{ACCOUNT_NAME_MAX, PROVIDER_MAX, read_trunk, read_trunk_update};
use crate::store::{AccountUpdate, CarrierAccountUpdate, Store, TrunkUpdate};

/// A carrier account's name or provider from its flag.
fn account_label(flag: &str, raw: &str, max: usize) -> anyhow::Result<String> {
    crate::domain::trunks::account_label(raw, max).map_err(|rule| anyhow::anyhow!("{flag} {rule}"))
}

fn print(json: bool, value: serde_json::Value, text: String) {
    if json {
        println!("{value}");
    } else {
        println!("{text}");
    }
}

async fn workspace_must_exist(store: &Store, id: WorkspaceId) -> anyhow::Result<()> {
    if store.workspace(id).await?.is_none() {
        bail!("no workspace {id}");
    }
    Ok(())
}

/// Runs an operator command (everything but `serve`).
pub async fn run_operator(
    store: &Store,
    command: Command,
    secrets_key_file: &std::path::Path,
) -> anyhow::Result<()> {
    match command {
        Command::Serve(_) => unreachable!("serve is handled by main"),
        Command::Integration(IntegrationCommand::Connect {
            workspace,
            provider,
            account,
            client_id,
            client_secret,
            refresh_token,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            if !crate::runtime::flows::CATALOG
                .iter()
                .any(|(p, _)| *p == provider)
            {
                let known: Vec<&str> = crate::runtime::flows::CATALOG
                    .iter()
                    .map(|(p, _)| *p)
                    .collect();
                bail!("--provider must be one of {}", known.join(", "));
            }
            let account = account.trim();
            if account.is_empty() {
                bail!("--account must not be empty");
            }
            let grant = match (client_id, client_secret, refresh_token) {
                (Some(client_id), Some(client_secret), Some(refresh_token)) => {
                    let [client_id, client_secret, refresh_token] =
                        [client_id, client_secret, refresh_token].map(|v| v.trim().to_string());
                    if client_id.is_empty() || client_secret.is_empty() || refresh_token.is_empty()
                    {
                        bail!("--client-id, --client-secret and --refresh-token must not be empty");
                    }
                    Some(crate::edge::google::OAuthGrant {
                        client_id,
                        client_secret,
                        refresh_token,
                    })
                }
                (None, None, None) => None,
                _ => bail!("--client-id, --client-secret and --refresh-token go together"),
            };
            let secrets = crate::domain::secrets::Secrets::load_or_create(secrets_key_file)?;
            let i = crate::runtime::integrations::connect(
                store,
                &secrets,
                workspace,
                &provider,
                account,
                grant.as_ref(),
            )
            .await?;
            print(
                json,
                json!({"id": i.id, "provider": i.provider, "account": i.account}),
                format!(
                    "{} integration {} connected: {}",
                    i.provider, i.account, i.id
                ),
            );
        }
        Command::Affiliate(AffiliateCommand::Enroll {
            workspace,
            parent,
            commission_bps,
            override_bps,
            at,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            if !(0..=10_000).contains(&commission_bps) || !(0..=10_000).contains(&override_bps) {
                bail!("rates are basis points from 0 to 10000");
            }
            if let Some(p) = parent {
                if p == workspace {
                    bail!("a partner cannot be its own parent");
                }
                if !store.is_affiliate(p).await? {
                    bail!("the parent {p} is not an enrolled partner");
                }
            }
            store
                .enroll_affiliate(
                    workspace,
                    parent,
                    commission_bps,
                    override_bps,
                    at.unwrap_or_else(Utc::now),
                )
                .await?;
            print(
                json,
                json!({"workspace": workspace, "parent": parent, "commission_bps": commission_bps, "override_bps": override_bps}),
                format!("workspace {workspace} is a partner"),
            );
        }
        Command::Affiliate(AffiliateCommand::Refer {
            referrer,
            customer,
            at,
            json,
        }) => {
            workspace_must_exist(store, customer).await?;
            if !store.is_affiliate(referrer).await? {
                bail!("the referrer {referrer} is not an enrolled partner");
            }
            if referrer == customer {
                bail!("a partner cannot refer itself");
            }
            let recorded = store
                .record_referral(referrer, customer, at.unwrap_or_else(Utc::now))
                .await?;
            if !recorded {
                bail!("{customer} was already referred");
            }
            print(
                json,
                json!({"referrer": referrer, "customer": customer}),
                format!("{referrer} referred {customer}"),
            );
        }
        Command::Affiliate(AffiliateCommand::Revenue {
            customer,
            amount_cents,
            at,
            json,
        }) => {
            workspace_must_exist(store, customer).await?;
            if amount_cents <= 0 {
                bail!("--amount-cents must be positive");
            }
            store
                .record_revenue(customer, amount_cents, at.unwrap_or_else(Utc::now))
                .await?;
            print(
                json,
                json!({"customer": customer, "amount_cents": amount_cents}),
                format!("{amount_cents} cents of revenue from {customer}"),
            );
        }
        Command::CarrierAccount(CarrierAccountCommand::Add {
            workspace,
            name,
            provider,
            trunk,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            let name = account_label("--name", &name, ACCOUNT_NAME_MAX)?;
            let provider = account_label("--provider", &provider, PROVIDER_MAX)?;
            let trunk = trunk
                .as_deref()
                .map(read_trunk)
                .transpose()
                .context("--trunk")?;
            let account = store
                .create_carrier_account(workspace, &name, &provider, trunk.as_ref())
                .await?;
            print(
                json,
                serde_json::to_value(&account)?,
                format!("carrier account {} created: {}", account.name, account.id),
            );
        }
        Command::CarrierAccount(CarrierAccountCommand::Update {
            workspace,
            id,
            name,
            provider,
            trunk,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            let update = CarrierAccountUpdate {
                name: name
                    .map(|n| account_label("--name", &n, ACCOUNT_NAME_MAX))
                    .transpose()?,
                provider: provider
                    .map(|p| account_label("--provider", &p, PROVIDER_MAX))
                    .transpose()?,
                trunk: match trunk.as_deref().map(str::trim) {
                    None => None,
                    Some("null") => Some(TrunkUpdate::Remove),
                    Some(value) => {
                        let (trunk, password) = read_trunk_update(value).context("--trunk")?;
                        Some(TrunkUpdate::Replace {
                            trunk: Box::new(trunk),
                            password,
                        })
                    }
                },
            };
            if update.name.is_none() && update.provider.is_none() && update.trunk.is_none() {
                bail!("nothing to change: give --name, --provider or --trunk");
            }
            let account = match store.update_carrier_account(workspace, id, update).await? {
                AccountUpdate::Updated(account) => account,
                AccountUpdate::NotFound => {
                    bail!("no carrier account {id} in workspace {workspace}")
                }
                AccountUpdate::Invalid(err) => bail!("--trunk: {err}"),
            };
            print(
                json,
                serde_json::to_value(&account)?,
                format!(
                    "carrier account {} updated: {}",
                    account.name,
                    account.status.as_str()
                ),
            );
        }
        Command::CarrierAccount(CarrierAccountCommand::Show {
            workspace,
            id,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            let account = store
                .carrier_account(workspace, id)
                .await?
                .with_context(|| format!("no carrier account {id} in workspace {workspace}"))?;
            let trunk = match &account.trunk {
                Some(shown) => {
                    let gateways: Vec<String> = shown
                        .trunk()
                        .gateways
                        .iter()
                        .map(ToString::to_string)
                        .collect();
                    let password = if shown.has_password() {
                        "a password"
                    } else {
                        "no password"
                    };
                    format!("trunk via {} ({password})", gateways.join(", "))
                }
                None => "no trunk".into(),
            };
            let reason = account
                .status_reason
                .as_deref()
                .map(|r| format!(": {r}"))
                .unwrap_or_default();
            print(
                json,
                serde_json::to_value(&account)?,
                format!(
                    "{} ({}) {}: {}{reason}, {trunk}",
                    account.name,
                    account.provider,
                    account.id,
                    account.status.as_str()
                ),
            );
        }
        Command::CarrierAccount(CarrierAccountCommand::Assign {
            workspace,
            account,
            number,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            if !store
                .assign_number_to_account(workspace, account, number)
                .await?
            {
                bail!(
                    "no carrier account {account} and held number {number} in workspace {workspace}"
                );
            }
            print(
                json,
                json!({"account": account, "number": number}),
                format!("number {number} is on carrier account {account}"),
            );
        }
        Command::Workspace(WorkspaceCommand::Create {
            name,
            country,
            json,
        }) => {
            let name = name.trim();
            if name.is_empty() {
                bail!("--name must not be empty");
            }
            let country = switchboard_actors::phone::parse_country(&country)?;
            let ws = store
                .create_workspace(name, &format!("{country:?}"))
                .await?;
            print(
                json,
                json!({"id": ws.id, "name": ws.name}),
                format!("workspace {} created: {}", ws.name, ws.id),
            );
        }
        Command::Workspace(WorkspaceCommand::SigningSecret(command)) => {
            let (workspace, json, rotate) = match command {
                SigningSecretCommand::Show { workspace, json } => (workspace, json, false),
                SigningSecretCommand::Rotate { workspace, json } => (workspace, json, true),
            };
            workspace_must_exist(store, workspace).await?;
            let (secret, created_at) = if rotate {
                store.rotate_webhook_signing_secret(workspace).await?
            } else {
                store.webhook_signing_secret(workspace).await?
            };
            print(
                json,
                json!({"workspace": workspace, "secret": secret.expose(), "created_at": created_at}),
                secret.expose().to_owned(),
            );
        }
        Command::Key(KeyCommand::Create {
            workspace,
            scopes,
            expires_at,
            name,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            let scopes = Scopes::parse(&scopes)?;
            if expires_at.is_some_and(|at| at <= Utc::now()) {
                bail!("--expires-at is in the past");
            }
            let (key, secret) = store
                .create_key(workspace, &name, &scopes, expires_at)
                .await?;
            print(
                json,
                json!({"id": key.id, "key": secret, "scopes": key.scopes, "expires_at": key.expires_at}),
                format!("key {} created (shown once):\n{secret}", key.id),
            );
        }
        Command::Key(KeyCommand::List { workspace, json }) => {
            workspace_must_exist(store, workspace).await?;
            let keys = store.list_keys(workspace).await?;
            let text = keys
                .iter()
                .map(|k| {
                    let state = if k.revoked_at.is_some() {
                        "revoked"
                    } else {
                        "active"
                    };
                    format!("{}  {}…  {}  {}", k.id, k.prefix, state, k.scopes.join(","))
                })
                .collect::<Vec<_>>()
                .join("\n");
            print(json, json!({"data": keys}), text);
        }
        Command::Key(KeyCommand::Revoke { id, json }) => {
            if !store.revoke_key(id).await? {
                bail!("no active key {id}");
            }
            print(
                json,
                json!({"id": id, "revoked": true}),
                format!("key {id} revoked"),
            );
        }
        Command::Number(NumberCommand::Add {
            workspace,
            number,
            status,
            json,
        }) => {
            workspace_must_exist(store, workspace).await?;
            if status != "active" && status != "pending_requirements" {
                bail!("--status must be active or pending_requirements");
            }
            let country = store.default_country(workspace).await?;
            let parsed = PhoneNumber::parse(&number, country)
                .with_context(|| format!("--number {number}"))?;
            let added = store.add_owned_number(workspace, &parsed, &status).await?;
            print(
                json,
                serde_json::to_value(&added)?,
                format!("number {} added: {}", added.number, added.id),
            );
        }
        Command::Billing(BillingCommand::Credit {
            workspace,
            amount_cents,
            json,
        }) => {
            if amount_cents == 0 {
                bail!("--amount-cents must not be zero");
            }
            let entry = store
                .apply_ledger_entry(workspace, amount_cents, "credit", "operator credit", None)
                .await?
                .with_context(|| format!("no workspace {workspace}"))?;
            print(
                json,
                json!({"workspace_id": workspace, "amount_cents": amount_cents, "balance_cents": entry.balance_after_cents}),
                format!(
                    "balance of {workspace} is now {} cents",
                    entry.balance_after_cents
                ),
            );
        }
    }
    Ok(())
}
