//! The database each test keeps its data in: a fresh SQLite file in the test's own directory,
//! or, when `SWITCHBOARD_TEST_POSTGRES` names a PostgreSQL server
//! (`postgres://USER@HOST:PORT`), a fresh database on it. `./scripts/test` runs the suite once
//! on each.

use std::path::Path;

use sqlx::Connection;

/// The PostgreSQL server the suite runs against, if it does.
pub fn postgres_server() -> Option<String> {
    std::env::var("SWITCHBOARD_TEST_POSTGRES")
        .ok()
        .filter(|url| !url.is_empty())
        .map(|url| url.trim_end_matches('/').to_owned())
}

/// The URL of a new, empty database for one test: `name` in `dir` for SQLite, else a new
/// database on the suite's PostgreSQL server.
pub async fn fresh_database(dir: &Path, name: &str) -> String {
    let Some(server) = postgres_server() else {
        return format!("sqlite://{}", dir.join(name).display());
    };
    let database = format!("test_{}", uuid::Uuid::new_v4().simple());
    let mut admin = sqlx::PgConnection::connect(&format!("{server}/postgres"))
        .await
        .expect("the suite's PostgreSQL server answers");
    sqlx::raw_sql(sqlx::AssertSqlSafe(format!("CREATE DATABASE {database}")))
        .execute(&mut admin)
        .await
        .expect("a test database is created");
    let _ = admin.close().await;
    format!("{server}/{database}")
}

/// Runs `$body` with `$conn` connected to the database at `$url`, whichever it is.
macro_rules! on_database {
    ($url:expr, |$conn:ident| $body:expr) => {
        if $url.starts_with("postgres") {
            let mut $conn = sqlx::PgConnection::connect($url)
                .await
                .expect("database opens");
            $body
        } else {
            let mut $conn = sqlx::SqliteConnection::connect($url)
                .await
                .expect("database opens");
            $body
        }
    };
}

/// The one row `sql` (its placeholder `$1`, bound to `id`) reads from the database at `url`,
/// every column read as text (`NULL` as `None`): for looking at what the service wrote.
pub async fn text_row(url: &str, sql: &str, id: uuid::Uuid) -> Vec<Option<String>> {
    use sqlx::Row;
    on_database!(url, |conn| {
        let row = sqlx::query(sqlx::AssertSqlSafe(sql.to_owned()))
            .bind(id)
            .fetch_one(&mut conn)
            .await
            .expect("the row is there");
        (0..row.len()).map(|i| row.get(i)).collect()
    })
}

/// Runs `sql` (no values) on the database at `url`.
pub async fn execute(url: &str, sql: &str) {
    let sql = sqlx::AssertSqlSafe(sql.to_owned());
    on_database!(url, |conn| {
        sqlx::raw_sql(sql).execute(&mut conn).await.expect("runs");
    })
}

/// A TCP relay in front of a database server that a test cuts and restores: cutting it drops
/// every connection through it at once and refuses new ones, as a lost network does.
pub struct Relay {
    pub port: u16,
    to: std::net::SocketAddr,
    open: Option<tokio::sync::watch::Sender<()>>,
}

impl Relay {
    /// A relay on a free loopback port to `to`, open.
    pub async fn to(to: std::net::SocketAddr) -> Relay {
        let mut relay = Relay {
            port: 0,
            to,
            open: None,
        };
        relay.restore().await;
        relay
    }

    /// Drops every connection through the relay and stops listening.
    pub fn cut(&mut self) {
        self.open = None;
    }

    /// Listens again on the same port.
    pub async fn restore(&mut self) {
        let socket = tokio::net::TcpSocket::new_v4().expect("socket");
        socket.set_reuseaddr(true).expect("reuse");
        socket
            .bind(std::net::SocketAddr::from(([127, 0, 0, 1], self.port)))
            .expect("the relay's port is free");
        let listener = socket.listen(64).expect("listen");
        self.port = listener.local_addr().expect("addr").port();
        let (open, closed) = tokio::sync::watch::channel(());
        self.open = Some(open);
        tokio::spawn(relay(listener, self.to, closed));
    }
}

async fn relay(
    listener: tokio::net::TcpListener,
    to: std::net::SocketAddr,
    mut closed: tokio::sync::watch::Receiver<()>,
) {
    loop {
        tokio::select! {
            _ = closed.changed() => return,
            accepted = listener.accept() => {
                let Ok((mut inbound, _)) = accepted else { return };
                let mut closed = closed.clone();
                tokio::spawn(async move {
                    let Ok(mut outbound) = tokio::net::TcpStream::connect(to).await else { return };
                    tokio::select! {
                        _ = tokio::io::copy_bidirectional(&mut inbound, &mut outbound) => {}
                        _ = closed.changed() => {}
                    }
                });
            }
        }
    }
}
