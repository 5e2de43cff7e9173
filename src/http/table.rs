//! Every route's method, path template and access, read from the assembled router's OpenAPI
//! document: what the gate checks, and what `GET /` and `/openapi.json` list.

use std::collections::HashMap;

use axum::http::Method;
use serde::Serialize;
use serde_json::Value;
use utoipa::ToSchema;

use super::access::Access;
use crate::domain::auth::Scope;

/// One endpoint, as listed by `GET /`.
#[derive(Debug, Clone, Serialize, ToSchema)]
pub struct Endpoint {
    pub method: String,
    pub path: String,
    /// The scope a key needs; null for public endpoints.
    pub scope: Option<String>,
    pub summary: String,
}

/// Method and path template to access, built from the OpenAPI document.
pub struct RouteTable {
    access: HashMap<(Method, String), Access>,
    endpoints: Vec<Endpoint>,
    pub openapi: Value,
}

const METHODS: [&str; 5] = ["get", "post", "put", "patch", "delete"];

impl RouteTable {
    /// Reads every operation's security requirement. An operation must declare either one
    /// `bearer` scope or an explicitly empty requirement (public); anything else is refused, so
    /// no route can be added without saying who may call it.
    ///
    /// The document is completed on the way (see [`super::openapi`]): the schemas written as
    /// JSON take their placeholders' places, and each operation's access decides which of the
    /// gate's refusals it documents.
    pub fn from_openapi(mut openapi: Value) -> anyhow::Result<Self> {
        let mut access = HashMap::new();
        let mut endpoints = Vec::new();
        super::openapi::expand_json_schemas(&mut openapi)?;
        super::openapi::add_error_schema(&mut openapi)?;
        let paths = openapi
            .get_mut("paths")
            .and_then(Value::as_object_mut)
            .ok_or_else(|| anyhow::anyhow!("OpenAPI document has no paths"))?;
        for (path, item) in paths.iter_mut() {
            for method in METHODS {
                let Some(op) = item.get_mut(method).and_then(Value::as_object_mut) else {
                    continue;
                };
                let security = op
                    .get("security")
                    .and_then(Value::as_array)
                    .ok_or_else(|| anyhow::anyhow!("{method} {path} declares no security"))?;
                let route_access = match security.as_slice() {
                    [req] if req.as_object().is_some_and(|o| o.is_empty()) => Access::Public,
                    [req] => {
                        let scopes =
                            req.get("bearer").and_then(Value::as_array).ok_or_else(|| {
                                anyhow::anyhow!("{method} {path}: security must be bearer")
                            })?;
                        match scopes.as_slice() {
                            [Value::String(name)] => {
                                Access::Scoped(Scope::parse(name).ok_or_else(|| {
                                    anyhow::anyhow!("{method} {path}: unknown scope {name}")
                                })?)
                            }
                            _ => anyhow::bail!("{method} {path}: declare exactly one scope"),
                        }
                    }
                    _ => anyhow::bail!("{method} {path}: declare exactly one security requirement"),
                };
                super::openapi::complete_operation(path, op, route_access);
                let upper = method.to_ascii_uppercase();
                let parsed = Method::from_bytes(upper.as_bytes())?;
                access.insert((parsed, path.clone()), route_access);
                endpoints.push(Endpoint {
                    method: upper,
                    path: path.clone(),
                    scope: match route_access {
                        Access::Scoped(s) => Some(s.as_str().to_owned()),
                        Access::Public => None,
                    },
                    summary: op
                        .get("summary")
                        .and_then(Value::as_str)
                        .unwrap_or_default()
                        .to_owned(),
                });
            }
        }
        endpoints.sort_by(|a, b| (&a.path, &a.method).cmp(&(&b.path, &b.method)));
        Ok(Self {
            access,
            endpoints,
            openapi,
        })
    }

    /// Unknown routes are public here; they answer 404 on their own.
    pub fn access(&self, method: &Method, path: &str) -> Access {
        self.access
            .get(&(method.clone(), path.to_owned()))
            .copied()
            .unwrap_or(Access::Public)
    }

    pub fn endpoints(&self) -> &[Endpoint] {
        &self.endpoints
    }
}
