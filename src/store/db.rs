//! The store's one way to its database: a query's text and the values bound to it
//! ([`Query`]), a row read back by column ([`Row`]), and what runs them ([`Exec`]).
//!
//! Every query of the store is built here and not with the driver's own builders, so the
//! store's logic names no driver type: a query is its SQL (`?` placeholders, values always
//! bound) and its values, kept as they were given ([`Param`]) and encoded only when the
//! query runs; a row is read by column name or position into any type the store reads
//! ([`Col`]). What differs between databases (how values are encoded, how placeholders are
//! written, how a script of several statements runs) is decided here, at the moment a query
//! meets a connection ([`Db`]), with `values.rs` (values both keep alike) and `dialect.rs`
//! (how PostgreSQL reads the store's SQL).

use sqlx::postgres::{PgArguments, PgConnection, PgQueryResult, PgRow};
use sqlx::sqlite::{SqliteArguments, SqliteQueryResult, SqliteRow};
use sqlx::{Arguments, Encode, Postgres, Sqlite, SqliteConnection, Type};

use super::dialect::{changes_rows, pg_sql, statements};
pub(crate) use super::values::{Col, Index, Json, Owned};

type BoxDynError = Box<dyn std::error::Error + Send + Sync>;

/// A value a query can be given: kept as it is until the query runs, then encoded for the
/// database it runs on.
pub(crate) trait Param<'q>: Send {
    fn add_to_sqlite(&self, args: &mut SqliteArguments) -> Result<(), BoxDynError>;
    fn add_to_pg(&self, args: &mut PgArguments) -> Result<(), BoxDynError>;
}

impl<'q, T> Param<'q> for T
where
    T: Encode<'q, Sqlite> + Type<Sqlite> + Encode<'q, Postgres> + Type<Postgres> + Send + Sync + 'q,
{
    fn add_to_sqlite(&self, args: &mut SqliteArguments) -> Result<(), BoxDynError> {
        args.add(self)
    }

    fn add_to_pg(&self, args: &mut PgArguments) -> Result<(), BoxDynError> {
        args.add(self)
    }
}

/// A query: its SQL and the values for its placeholders, in order.
#[must_use = "a query does nothing until it runs"]
pub(crate) struct Query<'q> {
    text: String,
    params: Vec<Box<dyn Param<'q> + 'q>>,
    /// Kept prepared on its connection (the default), or prepared for this run only.
    persistent: bool,
}

/// A query of `text`, whose placeholders are `?`. Only constant column lists, table names
/// and placeholders are ever formatted into a query's text; values are always bound.
pub(crate) fn query<'q>(text: impl Into<String>) -> Query<'q> {
    Query {
        text: text.into(),
        params: Vec::new(),
        persistent: true,
    }
}

/// A row read back: its columns by name or position.
#[derive(Debug)]
pub(crate) enum Row {
    Sqlite(SqliteRow),
    Pg(PgRow),
}

impl Row {
    fn names(&self) -> Vec<&str> {
        use sqlx::Column;
        match self {
            Row::Sqlite(r) => sqlx::Row::columns(r).iter().map(|c| c.name()).collect(),
            Row::Pg(r) => sqlx::Row::columns(r).iter().map(|c| c.name()).collect(),
        }
    }

    /// Whether the row has a column named `name`.
    pub(crate) fn has_column(&self, name: &str) -> bool {
        self.names().contains(&name)
    }

    /// The name of the row's first column.
    pub(crate) fn first_column(&self) -> Option<&str> {
        self.names().first().copied()
    }

    /// The column `index` (a name or a position) read as `T`.
    pub(crate) fn try_get<'r, T: Col<'r>, I: Index>(&'r self, index: I) -> Result<T, sqlx::Error> {
        match self {
            Row::Sqlite(r) => T::from_sqlite(r, index),
            Row::Pg(r) => T::from_pg(r, index),
        }
    }
}

/// What a statement did: the rows it changed.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Done {
    rows: u64,
}

impl Done {
    pub(crate) fn rows_affected(&self) -> u64 {
        self.rows
    }
}

impl From<SqliteQueryResult> for Done {
    fn from(r: SqliteQueryResult) -> Done {
        Done {
            rows: r.rows_affected(),
        }
    }
}

impl From<PgQueryResult> for Done {
    fn from(r: PgQueryResult) -> Done {
        Done {
            rows: r.rows_affected(),
        }
    }
}

/// One result of a text of several statements (see [`Query::steps`]): a statement done, or a
/// row it returned.
pub(crate) enum Step {
    Done(Done),
    Row(Row),
}

/// Rows read as a value of several columns (a tuple of [`Col`]s, first column first).
pub(crate) trait FromRow: Sized {
    fn from_row(row: &Row) -> Result<Self, sqlx::Error>;
}

macro_rules! tuple_from_row {
    ($($t:ident $i:tt),+) => {
        impl<$($t: Owned),+> FromRow for ($($t,)+) {
            fn from_row(row: &Row) -> Result<Self, sqlx::Error> {
                Ok(($(row.try_get::<$t, _>($i)?,)+))
            }
        }
    };
}

tuple_from_row!(A 0);
tuple_from_row!(A 0, B 1);
tuple_from_row!(A 0, B 1, C 2);
tuple_from_row!(A 0, B 1, C 2, D 3);
tuple_from_row!(A 0, B 1, C 2, D 3, E 4);

/// The database connection a query runs on.
pub enum Db<'c> {
    Sqlite(&'c mut SqliteConnection),
    Postgres(&'c mut PgConnection),
}

/// What a query runs on: a connection, or a transaction's.
pub trait Exec: Send {
    /// The connection the query runs on.
    fn db(&mut self) -> Db<'_>;
}

impl Exec for SqliteConnection {
    fn db(&mut self) -> Db<'_> {
        Db::Sqlite(self)
    }
}

impl Exec for PgConnection {
    fn db(&mut self) -> Db<'_> {
        Db::Postgres(self)
    }
}

impl<T: Exec + ?Sized> Exec for &mut T {
    fn db(&mut self) -> Db<'_> {
        (**self).db()
    }
}

impl Exec for Tx<'_> {
    fn db(&mut self) -> Db<'_> {
        match self {
            Tx::Sqlite(t) => Db::Sqlite(t),
            Tx::Postgres(t) => Db::Postgres(t),
        }
    }
}

/// A write transaction: committed by [`Tx::commit`], rolled back if dropped before.
pub(crate) enum Tx<'c> {
    Sqlite(sqlx::Transaction<'c, Sqlite>),
    Postgres(sqlx::Transaction<'c, Postgres>),
}

/// Opens a write transaction on `conn`. SQLite takes its write lock at once (`BEGIN
/// IMMEDIATE`), so a transaction that reads before it writes cannot fail to upgrade when
/// another writer commits in between; PostgreSQL locks the rows each statement writes.
pub(crate) async fn begin_write<'c>(
    conn: &'c mut (impl Exec + ?Sized),
) -> Result<Tx<'c>, sqlx::Error> {
    use sqlx::Connection;
    Ok(match conn.db() {
        Db::Sqlite(c) => Tx::Sqlite(c.begin_with("BEGIN IMMEDIATE").await?),
        Db::Postgres(c) => Tx::Postgres(c.begin().await?),
    })
}

impl Tx<'_> {
    pub async fn commit(self) -> Result<(), sqlx::Error> {
        match self {
            Tx::Sqlite(t) => t.commit().await,
            Tx::Postgres(t) => t.commit().await,
        }
    }
}

/// A connection of its own (not a pool's).
pub(crate) enum DbConn {
    Sqlite(SqliteConnection),
    Postgres(PgConnection),
}

impl Exec for DbConn {
    fn db(&mut self) -> Db<'_> {
        match self {
            DbConn::Sqlite(c) => Db::Sqlite(c),
            DbConn::Postgres(c) => Db::Postgres(c),
        }
    }
}

/// A write transaction on a connection of its own (see `Store::begin`): committed by
/// [`OwnedTx::commit`], rolled back by [`OwnedTx::rollback`] or when dropped (its connection
/// is closed).
pub struct OwnedTx(pub(super) DbConn);

impl Exec for OwnedTx {
    fn db(&mut self) -> Db<'_> {
        self.0.db()
    }
}

impl OwnedTx {
    pub async fn commit(mut self) -> Result<(), sqlx::Error> {
        query("COMMIT").execute(&mut self).await.map(drop)
    }

    pub async fn rollback(mut self) -> Result<(), sqlx::Error> {
        query("ROLLBACK").execute(&mut self).await.map(drop)
    }
}

impl<'q> Query<'q> {
    /// Binds the next placeholder's value.
    pub(crate) fn bind<T: Param<'q> + 'q>(mut self, value: T) -> Self {
        self.params.push(Box::new(value));
        self
    }

    /// Whether the query's prepared statement is kept on its connection for the next run
    /// (the default) or dropped after this one (a text of which there are many).
    pub(crate) fn persistent(mut self, keep: bool) -> Self {
        self.persistent = keep;
        self
    }

    /// Appends `text` to the query's SQL.
    pub(crate) fn push(&mut self, text: impl std::fmt::Display) -> &mut Self {
        use std::fmt::Write;
        let _ = write!(self.text, "{text}");
        self
    }

    /// Appends a placeholder, bound to `value`.
    pub(crate) fn push_bind<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.text.push('?');
        self.params.push(Box::new(value));
        self
    }

    /// A list appended to the query, its items apart by `separator`.
    pub(crate) fn separated<'b>(&'b mut self, separator: &'static str) -> Separated<'b, 'q> {
        Separated {
            query: self,
            separator,
            first: true,
        }
    }

    /// The query as SQLite's driver runs it.
    fn for_sqlite(
        self,
    ) -> Result<sqlx::query::Query<'static, Sqlite, SqliteArguments>, sqlx::Error> {
        let mut args = SqliteArguments::default();
        for p in &self.params {
            p.add_to_sqlite(&mut args).map_err(sqlx::Error::Encode)?;
        }
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(self.text), args).persistent(self.persistent))
    }

    /// The query as PostgreSQL's driver runs it.
    fn for_pg(self) -> Result<sqlx::query::Query<'static, Postgres, PgArguments>, sqlx::Error> {
        let mut args = PgArguments::default();
        for p in &self.params {
            p.add_to_pg(&mut args).map_err(sqlx::Error::Encode)?;
        }
        let text = pg_sql(&self.text);
        Ok(sqlx::query_with(sqlx::AssertSqlSafe(text), args).persistent(self.persistent))
    }

    /// Runs the query; what it changed.
    pub(crate) async fn execute(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Done, sqlx::Error> {
        Ok(match conn.db() {
            Db::Sqlite(c) => self.for_sqlite()?.execute(c).await?.into(),
            Db::Postgres(c) if self.is_script() => {
                let steps = self.pg_script(c).await?;
                let rows = steps.iter().map(|s| match s {
                    Step::Done(d) => d.rows,
                    Step::Row(_) => 0,
                });
                Done { rows: rows.sum() }
            }
            Db::Postgres(c) => self.for_pg()?.execute(c).await?.into(),
        })
    }

    /// Every row the query returns.
    pub(crate) async fn fetch_all(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<Row>, sqlx::Error> {
        Ok(match conn.db() {
            Db::Sqlite(c) => self
                .for_sqlite()?
                .fetch_all(c)
                .await?
                .into_iter()
                .map(Row::Sqlite)
                .collect(),
            Db::Postgres(c) if self.is_script() => {
                let steps = self.pg_script(c).await?.into_iter();
                steps
                    .filter_map(|s| match s {
                        Step::Row(r) => Some(r),
                        Step::Done(_) => None,
                    })
                    .collect()
            }
            Db::Postgres(c) => self
                .for_pg()?
                .fetch_all(c)
                .await?
                .into_iter()
                .map(Row::Pg)
                .collect(),
        })
    }

    /// The query's first row; an error ([`sqlx::Error::RowNotFound`]) without one.
    pub(crate) async fn fetch_one(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Row, sqlx::Error> {
        self.fetch_optional(conn)
            .await?
            .ok_or(sqlx::Error::RowNotFound)
    }

    /// The query's first row, if any.
    pub(crate) async fn fetch_optional(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<Row>, sqlx::Error> {
        Ok(match conn.db() {
            Db::Sqlite(c) => self.for_sqlite()?.fetch_optional(c).await?.map(Row::Sqlite),
            Db::Postgres(c) if self.is_script() => {
                let mut steps = self.pg_script(c).await?.into_iter();
                steps.find_map(|s| match s {
                    Step::Row(r) => Some(r),
                    Step::Done(_) => None,
                })
            }
            Db::Postgres(c) => self.for_pg()?.fetch_optional(c).await?.map(Row::Pg),
        })
    }

    /// The first column of the first row.
    pub(crate) async fn scalar<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<T, sqlx::Error> {
        Ok(self.fetch_one_as::<(T,)>(conn).await?.0)
    }

    /// The first column of the first row, if there is a row.
    pub(crate) async fn scalar_optional<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<T>, sqlx::Error> {
        Ok(self.fetch_optional_as::<(T,)>(conn).await?.map(|(v,)| v))
    }

    /// The first column of every row.
    pub(crate) async fn scalars<T: Owned>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<T>, sqlx::Error> {
        let rows = self.fetch_all_as::<(T,)>(conn).await?;
        Ok(rows.into_iter().map(|(v,)| v).collect())
    }

    /// Runs a text of several statements: what each statement did and each row it returned,
    /// in order, up to the first error, and that error.
    ///
    /// SQLite runs the text as it is, in one call. PostgreSQL takes one statement at a time
    /// (each its own round trip): the text is cut at its `;`s, each statement given its own
    /// values, `BEGIN IMMEDIATE` begun as `BEGIN`, and `changes()` (SQLite's count of the rows
    /// the last insert, update or delete changed) read as that count.
    pub(crate) async fn steps(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> (Vec<Step>, Option<sqlx::Error>) {
        let mut steps = Vec::new();
        let failed = match conn.db() {
            Db::Sqlite(c) => self.sqlite_steps(c, &mut steps).await,
            Db::Postgres(c) => self.pg_steps(c, &mut steps).await,
        };
        (steps, failed.err())
    }

    async fn sqlite_steps(
        self,
        conn: &mut SqliteConnection,
        steps: &mut Vec<Step>,
    ) -> Result<(), sqlx::Error> {
        use futures_util::TryStreamExt;
        use sqlx::Executor;
        let query = self.for_sqlite()?;
        let mut stream = conn.fetch_many(query);
        while let Some(step) = stream.try_next().await? {
            steps.push(match step {
                sqlx::Either::Left(done) => Step::Done(done.into()),
                sqlx::Either::Right(row) => Step::Row(Row::Sqlite(row)),
            });
        }
        Ok(())
    }

    /// Whether the query's text holds more than one statement.
    fn is_script(&self) -> bool {
        self.text.contains(';') && statements(&self.text).len() > 1
    }

    /// Runs a text of several statements on PostgreSQL (see [`Query::steps`]).
    async fn pg_script(self, conn: &mut PgConnection) -> Result<Vec<Step>, sqlx::Error> {
        let mut steps = Vec::new();
        self.pg_steps(conn, &mut steps).await?;
        Ok(steps)
    }

    async fn pg_steps(
        self,
        conn: &mut PgConnection,
        steps: &mut Vec<Step>,
    ) -> Result<(), sqlx::Error> {
        use futures_util::TryStreamExt;
        use sqlx::Executor;
        let mut params = self.params.into_iter();
        let mut changed = 0;
        for (text, marks) in statements(&self.text) {
            let text = text.trim();
            let text = if text.eq_ignore_ascii_case("BEGIN IMMEDIATE") {
                "BEGIN".to_owned()
            } else {
                text.replace("changes()", &changed.to_string())
            };
            let one = Query {
                text,
                params: params.by_ref().take(marks).collect(),
                persistent: self.persistent,
            };
            let counts = changes_rows(&one.text);
            let query = one.for_pg()?;
            let mut stream = conn.fetch_many(query);
            while let Some(step) = stream.try_next().await? {
                steps.push(match step {
                    sqlx::Either::Left(done) => {
                        if counts {
                            changed = done.rows_affected();
                        }
                        Step::Done(done.into())
                    }
                    sqlx::Either::Right(row) => Step::Row(Row::Pg(row)),
                });
            }
        }
        Ok(())
    }

    /// Every row, each read as `T`.
    pub(crate) async fn fetch_all_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Vec<T>, sqlx::Error> {
        self.fetch_all(conn)
            .await?
            .iter()
            .map(T::from_row)
            .collect()
    }

    /// The first row read as `T`, if any.
    pub(crate) async fn fetch_optional_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<Option<T>, sqlx::Error> {
        self.fetch_optional(conn)
            .await?
            .map(|r| T::from_row(&r))
            .transpose()
    }

    /// The first row read as `T`.
    pub(crate) async fn fetch_one_as<T: FromRow>(
        self,
        conn: &mut (impl Exec + ?Sized),
    ) -> Result<T, sqlx::Error> {
        T::from_row(&self.fetch_one(conn).await?)
    }
}

/// A list being appended to a query (see [`Query::separated`]).
pub(crate) struct Separated<'b, 'q> {
    query: &'b mut Query<'q>,
    separator: &'static str,
    first: bool,
}

impl<'q> Separated<'_, 'q> {
    fn next(&mut self) {
        if !self.first {
            self.query.text.push_str(self.separator);
        }
        self.first = false;
    }

    /// Appends `text` as the list's next item.
    pub(crate) fn push(&mut self, text: impl std::fmt::Display) -> &mut Self {
        self.next();
        self.query.push(text);
        self
    }

    /// Appends a placeholder bound to `value` as the list's next item.
    pub(crate) fn push_bind<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.next();
        self.query.push_bind(value);
        self
    }

    /// Appends a placeholder bound to `value` to the current item.
    pub(crate) fn push_bind_unseparated<T: Param<'q> + 'q>(&mut self, value: T) -> &mut Self {
        self.query.push_bind(value);
        self
    }
}
