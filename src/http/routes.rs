//! The route table and the discovery documents, all derived from the one source: the
//! `#[utoipa::path]` declaration beside each handler (method, path, scope, summary).
//!
//! - `GET /`: every endpoint with its method, path, scope and summary.
//! - `GET /openapi.json`: the OpenAPI 3.1 document. `GET /docs`: a rendered reference, whose
//!   script (`GET /docs/scalar.js`) is embedded in the binary.
//! - `GET /healthz`. (`GET /metrics` is served on its own listener: `super::prometheus`.)

use axum::Json;
use axum::extract::State;
use axum::http::{StatusCode, header};
use axum::response::{Html, IntoResponse, Response};
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::state::AppState;
use super::table::Endpoint;

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(index))
        .routes(routes!(openapi_json))
        .routes(routes!(docs))
        .routes(routes!(docs_script))
        .routes(routes!(healthz))
}

#[derive(Serialize, ToSchema)]
pub struct Index {
    pub name: &'static str,
    pub version: &'static str,
    pub endpoints: Vec<Endpoint>,
}

/// List every endpoint
#[utoipa::path(get, path = "/", operation_id = "listEndpoints", tag = "discovery", security(()), responses((status = 200, body = Index)))]
async fn index(State(state): State<AppState>) -> Json<Index> {
    Json(Index {
        name: "switchboard",
        version: env!("CARGO_PKG_VERSION"),
        endpoints: state.routes.endpoints().to_vec(),
    })
}

/// The OpenAPI 3.1 document
#[utoipa::path(get, path = "/openapi.json", operation_id = "getOpenApiDocument", tag = "discovery", security(()), responses((status = 200, description = "OpenAPI document")))]
async fn openapi_json(State(state): State<AppState>) -> Json<Value> {
    Json(state.routes.openapi.clone())
}

/// The rendered API reference
#[utoipa::path(get, path = "/docs", operation_id = "getDocs", tag = "discovery", security(()), responses((status = 200, description = "HTML reference", content_type = "text/html")))]
async fn docs() -> Html<&'static str> {
    Html(DOCS_HTML)
}

/// The reference page: the renderer comes from `/docs/scalar.js` and the document from
/// `/openapi.json`, both served here, so the page works with no internet access (the default
/// web fonts are off: the renderer would fetch them).
const DOCS_HTML: &str = r#"<!doctype html>
<html>
<head>
  <title>Switchboard API reference</title>
  <meta charset="utf-8"/>
  <meta name="viewport" content="width=device-width, initial-scale=1"/>
</head>
<body>
  <div id="app"></div>
  <script src="/docs/scalar.js"></script>
  <script>
    Scalar.createApiReference('#app', { url: '/openapi.json', withDefaultFonts: false })
  </script>
</body>
</html>
"#;

/// The Scalar API reference renderer (`assets/scalar`, MIT), embedded in the binary.
const SCALAR_JS: &[u8] = include_bytes!("../../assets/scalar/standalone.js");

/// The script of the rendered API reference
#[utoipa::path(get, path = "/docs/scalar.js", operation_id = "getDocsScript", tag = "discovery", security(()), responses((status = 200, description = "JavaScript", content_type = "text/javascript")))]
async fn docs_script() -> Response {
    (
        [
            (header::CONTENT_TYPE, "text/javascript; charset=utf-8"),
            (header::CACHE_CONTROL, "public, max-age=86400"),
        ],
        SCALAR_JS,
    )
        .into_response()
}

#[derive(Serialize, ToSchema)]
pub struct Health {
    /// `ok`, or `unavailable` while the database cannot be reached.
    pub status: &'static str,
    pub database: DatabaseHealth,
    pub node: NodeHealth,
}

/// This node (`--node-id`, `--advertise`).
#[derive(Serialize, ToSchema)]
pub struct NodeHealth {
    pub id: String,
    /// Where other machines reach its SIP and media.
    pub advertise: String,
}

/// The store's database as the health check found it.
#[derive(Serialize, ToSchema)]
pub struct DatabaseHealth {
    /// `sqlite` or `postgresql`.
    pub engine: &'static str,
    /// It answered a query within the check's time.
    pub reachable: bool,
    /// The last migration applied to it; absent when it cannot be read.
    pub schema_version: Option<i64>,
    /// Why it cannot be reached (never a password or the URL).
    pub error: Option<String>,
}

/// Liveness and store health
#[utoipa::path(get, path = "/healthz", operation_id = "getHealth", tag = "discovery", security(()), responses((status = 200, body = Health), (status = 503, body = Health)))]
async fn healthz(State(state): State<AppState>) -> Response {
    let engine = match state.store.engine() {
        crate::store::Engine::Sqlite => "sqlite",
        crate::store::Engine::Postgres => "postgresql",
    };
    // A database that does not answer is reported as such, not waited on for the pool's
    // whole timeout.
    let checked = tokio::time::timeout(HEALTH_WAIT, state.store.schema_version()).await;
    let found = match checked {
        Ok(Ok(version)) => Ok(version),
        Ok(Err(err)) => Err(err.to_string()),
        Err(_) => Err(format!(
            "the database did not answer within {} s",
            HEALTH_WAIT.as_secs()
        )),
    };
    let node = || NodeHealth {
        id: state.config.node.id.clone(),
        advertise: state.config.node.advertise.clone(),
    };
    match found {
        Ok(version) => Json(Health {
            status: "ok",
            database: DatabaseHealth {
                engine,
                reachable: true,
                schema_version: Some(version),
                error: None,
            },
            node: node(),
        })
        .into_response(),
        Err(error) => {
            tracing::warn!(error = %error, "health check failed");
            (
                StatusCode::SERVICE_UNAVAILABLE,
                Json(Health {
                    status: "unavailable",
                    database: DatabaseHealth {
                        engine,
                        reachable: false,
                        schema_version: None,
                        error: Some(error),
                    },
                    node: node(),
                }),
            )
                .into_response()
        }
    }
}

/// How long the health check waits for the database.
const HEALTH_WAIT: std::time::Duration = std::time::Duration::from_secs(3);

pub async fn not_found(uri: axum::http::Uri) -> ApiError {
    ApiError::NoRoute {
        path: uri.path().to_owned(),
    }
}

pub async fn method_not_allowed() -> ApiError {
    ApiError::MethodNotAllowed
}
