//! `switchboard copy`: a whole SQLite store moved into an empty PostgreSQL one, with the
//! service stopped. Every table is copied row by row in the order its foreign keys need, each
//! value read as SQLite keeps it and written as the PostgreSQL column's type (`uuid`,
//! `timestamptz`, `jsonb`, `boolean`, `bigint`, `bytea`, `text`); SQLite's implicit `rowid` of
//! calls and contacts goes to their `rowid` column, so that page cursors stay valid. The counts
//! the triggers keep are not copied: the copied rows' triggers count them again. Last, every
//! table's rows are counted on both sides.

use std::collections::{BTreeMap, BTreeSet};

use chrono::{DateTime, Utc};
use futures_util::TryStreamExt;
use sqlx::{Column, Row, TypeInfo, ValueRef};
use sqlx::{PgPool, SqlitePool};

use super::{Pool, Store, StoreError, StoreResult};

/// Tables the copy leaves to the target: its migrations' own records, and what its triggers
/// and migrations fill in.
const DERIVED: [&str; 6] = [
    "_sqlx_migrations",
    "timeline_widths",
    "campaign_contact_counts",
    "campaign_call_buckets",
    "contact_count_log",
    "call_count_log",
];

/// Values bound in one INSERT, at most (PostgreSQL takes 65,535).
const VALUES_PER_INSERT: usize = 30_000;

/// What was copied: rows per table, as counted on both sides afterwards.
#[derive(Debug, Default)]
pub struct CopyReport {
    pub tables: BTreeMap<String, u64>,
}

fn refused(message: impl Into<String>) -> StoreError {
    StoreError::DatabaseUrl(message.into())
}

fn bad_value(table: &str, column: &str, why: impl std::fmt::Display) -> StoreError {
    StoreError::Corrupt(format!("{table}.{column}: {why}"))
}

/// A PostgreSQL column: its name, `information_schema` type and whether it is an identity.
struct Target {
    name: String,
    kind: String,
    identity: bool,
}

impl Store {
    /// Copies every row of the SQLite store `self` into `to`, a PostgreSQL store with no rows
    /// of its own (both already migrated to this version), and checks the counts.
    pub async fn copy_into(&self, to: &Store) -> StoreResult<CopyReport> {
        let (Pool::Sqlite(from), Pool::Postgres(into)) = (&self.pool, &to.pool) else {
            return Err(refused(
                "copy moves an SQLite store (--from sqlite://...) into a PostgreSQL one (--to postgres://...)",
            ));
        };
        let tables = copy_order(into).await?;
        for table in &tables {
            let n: i64 = sqlx::query_scalar(sqlx::AssertSqlSafe(format!(
                "SELECT COUNT(*) FROM (SELECT 1 FROM {table} LIMIT 1) AS t"
            )))
            .fetch_one(into)
            .await?;
            if n > 0 {
                return Err(refused(format!(
                    "the PostgreSQL database already holds rows ({table} has some): copy into an empty one"
                )));
            }
        }
        let mut report = CopyReport::default();
        for table in &tables {
            let copied = copy_table(from, into, table).await?;
            let there: i64 =
                sqlx::query_scalar(sqlx::AssertSqlSafe(format!("SELECT COUNT(*) FROM {table}")))
                    .fetch_one(into)
                    .await?;
            if there as u64 != copied {
                return Err(StoreError::Corrupt(format!(
                    "{table}: {copied} rows read, {there} in PostgreSQL"
                )));
            }
            report.tables.insert(table.clone(), copied);
        }
        to.fold_counts().await?;
        Ok(report)
    }
}

/// The target's tables, each after the tables its foreign keys point at.
async fn copy_order(into: &PgPool) -> StoreResult<Vec<String>> {
    let tables: Vec<String> = sqlx::query_scalar(
        "SELECT table_name::text FROM information_schema.tables \
         WHERE table_schema = current_schema() AND table_type = 'BASE TABLE' ORDER BY table_name",
    )
    .fetch_all(into)
    .await?;
    let edges: Vec<(String, String)> = sqlx::query_as(
        "SELECT c.conrelid::regclass::text, c.confrelid::regclass::text FROM pg_constraint c \
         WHERE c.contype = 'f' AND c.conrelid <> c.confrelid",
    )
    .fetch_all(into)
    .await?;
    let mut ordered = Vec::new();
    let mut placed = BTreeSet::new();
    let mut left: Vec<String> = tables
        .into_iter()
        .filter(|t| !DERIVED.contains(&t.as_str()))
        .collect();
    while !left.is_empty() {
        let before = left.len();
        left.retain(|table| {
            let ready = edges
                .iter()
                .filter(|(from, _)| from == table)
                .all(|(_, to)| placed.contains(to) || DERIVED.contains(&to.as_str()));
            if ready {
                placed.insert(table.clone());
                ordered.push(table.clone());
            }
            !ready
        });
        if left.len() == before {
            return Err(StoreError::Corrupt(format!(
                "the tables {left:?} refer to each other"
            )));
        }
    }
    Ok(ordered)
}

/// Copies one table; answers the rows read.
async fn copy_table(from: &SqlitePool, into: &PgPool, table: &str) -> StoreResult<u64> {
    let columns: Vec<Target> = sqlx::query_as::<_, (String, String, bool)>(
        "SELECT column_name::text, data_type::text, is_identity = 'YES' FROM information_schema.columns \
         WHERE table_schema = current_schema() AND table_name = $1 ORDER BY ordinal_position",
    )
    .bind(table)
    .fetch_all(into)
    .await?
    .into_iter()
    .map(|(name, kind, identity)| Target {
        name,
        kind,
        identity,
    })
    .collect();
    let names: Vec<&str> = columns.iter().map(|c| c.name.as_str()).collect();
    // `rowid` is SQLite's implicit row number; the rest are read by name.
    let read = names.join(", ");
    let placeholders = |row: usize| {
        let values: Vec<String> = columns
            .iter()
            .enumerate()
            .map(|(i, c)| {
                let n = row * columns.len() + i + 1;
                match c.kind.as_str() {
                    "jsonb" => format!("CAST(${n} AS jsonb)"),
                    _ => format!("${n}"),
                }
            })
            .collect();
        format!("({})", values.join(", "))
    };
    let per_insert = (VALUES_PER_INSERT / columns.len().max(1)).max(1);
    let mut rows = sqlx::query(sqlx::AssertSqlSafe(format!(
        "SELECT {read} FROM {table} ORDER BY rowid"
    )))
    .fetch(from);
    let mut batch: Vec<sqlx::sqlite::SqliteRow> = Vec::with_capacity(per_insert);
    let mut copied = 0u64;
    let mut tx = into.begin().await?;
    loop {
        let next = rows.try_next().await?;
        let done = next.is_none();
        if let Some(row) = next {
            batch.push(row);
        }
        if batch.len() == per_insert || (done && !batch.is_empty()) {
            let sql = format!(
                "INSERT INTO {table} ({read}) VALUES {}",
                (0..batch.len())
                    .map(placeholders)
                    .collect::<Vec<_>>()
                    .join(", ")
            );
            let mut q = sqlx::query(sqlx::AssertSqlSafe(sql));
            for row in &batch {
                for (i, c) in columns.iter().enumerate() {
                    q = bind(q, table, c, row, i)?;
                }
            }
            q.execute(&mut *tx).await?;
            copied += batch.len() as u64;
            batch.clear();
        }
        if done {
            break;
        }
    }
    for c in columns.iter().filter(|c| c.identity) {
        // Rows written after the copy number on from the copied ones.
        let column = &c.name;
        sqlx::query(sqlx::AssertSqlSafe(format!(
            "SELECT setval(pg_get_serial_sequence('{table}', '{column}'), COALESCE(MAX({column}), 0) + 1, false) FROM {table}"
        )))
        .execute(&mut *tx)
        .await?;
    }
    tx.commit().await?;
    Ok(copied)
}

type PgQuery<'q> = sqlx::query::Query<'q, sqlx::Postgres, sqlx::postgres::PgArguments>;

/// Binds column `i` of `row` (as SQLite keeps it) as `c`'s PostgreSQL type.
fn bind<'q>(
    q: PgQuery<'q>,
    table: &str,
    c: &Target,
    row: &sqlx::sqlite::SqliteRow,
    i: usize,
) -> StoreResult<PgQuery<'q>> {
    let raw = row.try_get_raw(i)?;
    let null = raw.is_null();
    let storage = raw.type_info().name().to_owned();
    let column = row.column(i).name().to_owned();
    let bad = |why: &dyn std::fmt::Display| bad_value(table, &column, why);
    Ok(match c.kind.as_str() {
        "uuid" => {
            let v = if null {
                None
            } else if storage == "BLOB" {
                let bytes: Vec<u8> = row.try_get(i)?;
                Some(uuid::Uuid::from_slice(&bytes).map_err(|e| bad(&e))?)
            } else {
                let text: String = row.try_get(i)?;
                Some(uuid::Uuid::parse_str(&text).map_err(|e| bad(&e))?)
            };
            q.bind(v)
        }
        "timestamp with time zone" => {
            let v = if null {
                None
            } else {
                let text: String = row.try_get(i)?;
                Some(
                    DateTime::parse_from_rfc3339(&text)
                        .map_err(|e| bad(&format!("{text:?}: {e}")))?
                        .with_timezone(&Utc),
                )
            };
            q.bind(v)
        }
        "boolean" => q.bind(if null {
            None
        } else {
            Some(row.try_get::<i64, _>(i)? != 0)
        }),
        "bigint" => q.bind(if null {
            None
        } else {
            Some(row.try_get::<i64, _>(i)?)
        }),
        "bytea" => q.bind(if null {
            None
        } else {
            Some(row.try_get::<Vec<u8>, _>(i)?)
        }),
        "text" | "jsonb" => q.bind(if null {
            None
        } else if storage == "INTEGER" {
            Some(row.try_get::<i64, _>(i)?.to_string())
        } else {
            Some(row.try_get::<String, _>(i)?)
        }),
        other => return Err(bad(&format!("no copy for a column of type {other}"))),
    })
}
