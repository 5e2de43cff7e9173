//! The operator commands (everything but `serve`): workspaces and their webhook signing
//! secrets, API keys, owned numbers, credits, integrations, affiliates and carrier accounts,
//! run against the store directly.

use anyhow::{Context, bail};
use chrono::Utc;
use serde_json::json;
use switchboard_actors::campaign::NumberStatus;
use switchboard_actors::ids::WorkspaceId;
use switchboard_actors::phone::PhoneNumber;

use super::args::{
    AffiliateCommand, BillingCommand, CarrierAccountCommand, Command, IntegrationCommand,
    KeyCommand, NumberCommand, SigningSecretCommand, WorkspaceCommand,
};
use crate::app::carrier_accounts;
use crate::app::error::AppError;
use crate::app::keys::NewKey;
use crate::domain::auth::Scopes;
use crate::domain::integrations::Provider;
use crate::domain::trunks::{read_trunk, read_trunk_update};
use crate::store::{CarrierAccountUpdate, LedgerKind, Store, TrunkUpdate};

/// An operation's refusal as the command line says it: a field's rule under its flag
/// (`--name must be ...`).
fn flagged(e: AppError) -> anyhow::Error {
    match e {
        AppError::InvalidField { field, rule } => match field.split_once('.') {
            // A part of a JSON flag: `--trunk: gateways[0].host: must be ...`.
            Some((flag, part)) => anyhow::anyhow!("--{}: {part}: {rule}", flag.replace('_', "-")),
            None => anyhow::anyhow!("--{} {rule}", field.replace('_', "-")),
        },
        other => anyhow::anyhow!(other),
    }
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
        Command::Integration(command) => integration(store, command, secrets_key_file).await,
        Command::Affiliate(command) => affiliate(store, command).await,
        Command::CarrierAccount(command) => carrier_account(store, command).await,
        Command::Workspace(command) => workspace_command(store, command).await,
        Command::Key(command) => key(store, command).await,
        Command::Number(command) => number(store, command).await,
        Command::Billing(command) => billing(store, command).await,
        Command::Copy { from, to } => copy(&from, &to).await,
        Command::Nodes { json } => super::nodes::list(store, json).await,
        Command::Migrate => {
            let engine = match store.engine() {
                crate::store::Engine::Sqlite => "SQLite",
                crate::store::Engine::Postgres => "PostgreSQL",
            };
            println!(
                "The {engine} database is at schema version {} (this version's).",
                store.schema_version().await?
            );
            Ok(())
        }
    }
}

/// Connects a flow integration for a workspace.
async fn integration(
    store: &Store,
    command: IntegrationCommand,
    secrets_key_file: &std::path::Path,
) -> anyhow::Result<()> {
    match command {
        IntegrationCommand::Connect {
            workspace,
            provider,
            account,
            client_id,
            client_secret,
            refresh_token,
            json,
        } => {
            workspace_must_exist(store, workspace).await?;
            if Provider::parse(&provider).is_none() {
                let known: Vec<&str> = Provider::ALL.iter().map(|p| p.name()).collect();
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
    }
    Ok(())
}

/// Affiliate partners: enrolment, referrals and revenue.
async fn affiliate(store: &Store, command: AffiliateCommand) -> anyhow::Result<()> {
    match command {
        AffiliateCommand::Enroll {
            workspace,
            parent,
            commission_bps,
            override_bps,
            at,
            json,
        } => {
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
        AffiliateCommand::Refer {
            referrer,
            customer,
            at,
            json,
        } => {
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
        AffiliateCommand::Revenue {
            customer,
            amount_cents,
            at,
            json,
        } => {
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
    }
    Ok(())
}

/// Carrier accounts and their SIP trunks, through the same operations as the API.
async fn carrier_account(store: &Store, command: CarrierAccountCommand) -> anyhow::Result<()> {
    match command {
        CarrierAccountCommand::Add {
            workspace,
            name,
            provider,
            trunk,
            json,
        } => {
            workspace_must_exist(store, workspace).await?;
            let trunk = trunk
                .as_deref()
                .map(read_trunk)
                .transpose()
                .context("--trunk")?;
            let account = carrier_accounts::create(store, workspace, &name, &provider, trunk)
                .await
                .map_err(flagged)?;
            print(
                json,
                serde_json::to_value(&account)?,
                format!("carrier account {} created: {}", account.name, account.id),
            );
        }
        CarrierAccountCommand::Update {
            workspace,
            id,
            name,
            provider,
            trunk,
            json,
        } => {
            workspace_must_exist(store, workspace).await?;
            let update = CarrierAccountUpdate {
                name: name
                    .map(|n| carrier_accounts::name(&n))
                    .transpose()
                    .map_err(flagged)?,
                provider: provider
                    .map(|p| carrier_accounts::provider(&p))
                    .transpose()
                    .map_err(flagged)?,
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
            let account = carrier_accounts::update(store, workspace, id, update)
                .await
                .map_err(|e| match e {
                    AppError::CodedNotFound { .. } => {
                        anyhow::anyhow!("no carrier account {id} in workspace {workspace}")
                    }
                    other => flagged(other),
                })?;
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
        CarrierAccountCommand::Show {
            workspace,
            id,
            json,
        } => {
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
        CarrierAccountCommand::Assign {
            workspace,
            account,
            number,
            json,
        } => {
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
    }
    Ok(())
}

/// Workspaces and their webhook signing secrets.
async fn workspace_command(store: &Store, command: WorkspaceCommand) -> anyhow::Result<()> {
    match command {
        WorkspaceCommand::Create {
            name,
            country,
            json,
        } => {
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
        WorkspaceCommand::SigningSecret(command) => {
            let (workspace, json, rotate) = match command {
                SigningSecretCommand::Show { workspace, json } => (workspace, json, false),
                SigningSecretCommand::Rotate { workspace, json } => (workspace, json, true),
            };
            workspace_must_exist(store, workspace).await?;
            let (secret, created_at) =
                crate::app::webhooks::signing_secret(store, workspace, rotate).await?;
            print(
                json,
                json!({"workspace": workspace, "secret": secret.expose(), "created_at": created_at}),
                secret.expose().to_owned(),
            );
        }
    }
    Ok(())
}

/// API keys, through the same operations as the dashboard.
async fn key(store: &Store, command: KeyCommand) -> anyhow::Result<()> {
    match command {
        KeyCommand::Create {
            workspace,
            scopes,
            expires_at,
            name,
            json,
        } => {
            let scopes = Scopes::parse(&scopes)?;
            let key = NewKey {
                name: &name,
                scopes: &scopes,
                expires_at,
            };
            let (key, secret) = crate::app::keys::create(store, workspace, key)
                .await
                .map_err(flagged)?;
            print(
                json,
                json!({"id": key.id, "key": secret, "scopes": key.scopes, "expires_at": key.expires_at}),
                format!("key {} created (shown once):\n{secret}", key.id),
            );
        }
        KeyCommand::List { workspace, json } => {
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
        KeyCommand::Revoke { id, json } => {
            if !crate::app::keys::revoke(store, id).await.map_err(flagged)? {
                bail!("no active key {id}");
            }
            print(
                json,
                json!({"id": id, "revoked": true}),
                format!("key {id} revoked"),
            );
        }
    }
    Ok(())
}

/// Numbers a workspace already owns.
async fn number(store: &Store, command: NumberCommand) -> anyhow::Result<()> {
    match command {
        NumberCommand::Add {
            workspace,
            number,
            status,
            json,
        } => {
            workspace_must_exist(store, workspace).await?;
            let Some(status) = NumberStatus::parse(&status) else {
                bail!("--status must be active or pending_requirements");
            };
            let country = store.default_country(workspace).await?;
            let parsed = PhoneNumber::parse(&number, country)
                .with_context(|| format!("--number {number}"))?;
            let added = store.add_owned_number(workspace, &parsed, status).await?;
            print(
                json,
                serde_json::to_value(&added)?,
                format!("number {} added: {}", added.number, added.id),
            );
        }
    }
    Ok(())
}

/// Credits to a workspace's balance.
async fn billing(store: &Store, command: BillingCommand) -> anyhow::Result<()> {
    match command {
        BillingCommand::Credit {
            workspace,
            amount_cents,
            json,
        } => {
            if amount_cents == 0 {
                bail!("--amount-cents must not be zero");
            }
            let entry = store
                .apply_ledger_entry(
                    workspace,
                    amount_cents,
                    LedgerKind::Credit,
                    "operator credit",
                    None,
                )
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

/// `switchboard copy`: both stores brought to this version, then every row of `from` (SQLite)
/// moved into `to` (an empty PostgreSQL database), the rows of each table counted on both.
pub async fn copy(from: &str, to: &str) -> anyhow::Result<()> {
    use crate::store::{Engine, engine_of};
    if engine_of(from)? != Engine::Sqlite || engine_of(to)? != Engine::Postgres {
        bail!(
            "copy moves an SQLite store (--from sqlite://PATH) into a PostgreSQL database (--to postgres://...)"
        );
    }
    let source = Store::open(from).await?;
    let target = Store::open(to).await?;
    let report = source.copy_into(&target).await?;
    let rows: u64 = report.tables.values().sum();
    for (table, n) in &report.tables {
        if *n > 0 {
            println!("{table:<28} {n:>10}");
        }
    }
    println!(
        "Copied {rows} rows of {} tables; each table's rows counted alike on both databases.",
        report.tables.len()
    );
    source.close().await;
    target.close().await;
    Ok(())
}
