//! The finishing pass over the generated OpenAPI document: every answer a route can give is
//! documented, with the error schema on every refusal.
//!
//! Handlers declare their own outcomes in `#[utoipa::path]` (the success, and refusals only they
//! give: 402, 409, 422, ...). The refusals that come from the shared layers are added here, from
//! what the operation declares:
//!
//! - the gate: 429 on every route (the rate limit is charged before anything else), and the
//!   key's refusals on a scoped route (see [`super::access::refusals`]);
//! - 500 on every route (the gate reads keys from the store even on public routes);
//! - the extractors: 400 for a path, query or body that does not parse, 413 for a body over the
//!   limit, 404 for a path naming something the workspace does not have.
//!
//! **Invariant:** every response has a description, and every status from 400 up carries
//! [`ErrorBody`].

use axum::http::StatusCode;
use serde_json::{Map, Value, json};
use utoipa::openapi::RefOr;
use utoipa::openapi::schema::Schema;
use utoipa::{PartialSchema, ToSchema};

use super::access::{Access, refusals};

/// The body of every error: `{error, code, ...}`; some codes add keys (`details`,
/// `required_scope`, `issues`, ...).
#[derive(ToSchema)]
#[allow(dead_code)] // Read by the OpenAPI document only; `ApiError::body` writes the JSON.
pub struct ErrorBody {
    /// What went wrong, for people.
    error: String,
    /// What went wrong, for programs: INVALID_REQUEST, NOT_FOUND, RATE_LIMIT, ...
    code: String,
    /// The field at fault, for INVALID_REQUEST about one field.
    field: Option<String>,
}

pub use crate::domain::schema::nullable_pattern;

/// The schema of a create body from its input type's: the `required` fields listed (and not
/// null), no other keys. Handlers read create and update bodies with one input type; the
/// document gives each its own rules.
pub fn create_body(input: RefOr<Schema>, required: &[&str]) -> RefOr<Schema> {
    shape_body(input, |body| {
        if let Some(Value::Object(properties)) = body.get_mut("properties") {
            for name in required {
                if let Some(property) = properties.get_mut(*name) {
                    strip_null(property);
                }
            }
        }
        body.insert("required".into(), json!(required));
    })
}

/// The schema of a partial update body from its input type's: the `writable` fields only (the
/// list the handler checks keys against), at least one of them (an empty update is refused),
/// no other keys.
pub fn patch_body(input: RefOr<Schema>, writable: &[&str]) -> RefOr<Schema> {
    shape_body(input, |body| {
        if let Some(Value::Object(properties)) = body.get_mut("properties") {
            properties.retain(|name, _| writable.contains(&name.as_str()));
        }
        body.remove("required");
        body.insert("minProperties".into(), json!(1));
    })
}

fn shape_body(input: RefOr<Schema>, finish: impl FnOnce(&mut Map<String, Value>)) -> RefOr<Schema> {
    let mut body = schema_json(&input);
    if let Value::Object(body) = &mut body {
        body.insert("additionalProperties".into(), Value::Bool(false));
        finish(body);
    }
    json_schema(body)
}

/// The extension key that carries a schema written as JSON through utoipa's types, which
/// drop the keywords they do not model (`if`/`then`, `not`, `const`, `uniqueItems`, ...).
const JSON_SCHEMA: &str = "x-json-schema";

/// A schema written as JSON Schema, any keyword allowed. utoipa carries it as an extension
/// of a placeholder; [`expand_json_schemas`] puts it in the placeholder's place, and refuses
/// (so start-up fails) any that is not a schema object.
pub fn json_schema(schema: Value) -> RefOr<Schema> {
    utoipa::openapi::schema::ObjectBuilder::new()
        .extensions(Some(utoipa::openapi::extensions::Extensions::from_iter([
            (JSON_SCHEMA, schema),
        ])))
        .build()
        .into()
}

/// A schema as JSON: what [`json_schema`] carries, or the serialized utoipa schema (`null`
/// if it does not serialize, which [`expand_json_schemas`] refuses).
pub fn schema_json(schema: &RefOr<Schema>) -> Value {
    let mut value = serde_json::to_value(schema).unwrap_or(Value::Null);
    match value.get_mut(JSON_SCHEMA) {
        Some(inner) => inner.take(),
        None => value,
    }
}

/// Replaces every placeholder of [`json_schema`] in the document with the schema it carries.
pub fn expand_json_schemas(doc: &mut Value) -> anyhow::Result<()> {
    match doc {
        Value::Object(map) => {
            if let Some(schema) = map.remove(JSON_SCHEMA) {
                anyhow::ensure!(
                    schema.is_object(),
                    "a request body schema could not be built: {schema}"
                );
                *doc = schema;
                return expand_json_schemas(doc);
            }
            map.values_mut().try_for_each(expand_json_schemas)
        }
        Value::Array(items) => items.iter_mut().try_for_each(expand_json_schemas),
        _ => Ok(()),
    }
}

/// Merges `bounds` (property name to JSON Schema keywords) into the properties of an object
/// schema; a keyword already there is replaced.
pub fn with_bounds(mut schema: Value, bounds: Value) -> Value {
    let (Some(Value::Object(properties)), Value::Object(bounds)) =
        (schema.get_mut("properties"), bounds)
    else {
        return schema;
    };
    for (name, keywords) in bounds {
        if let (Some(Value::Object(property)), Value::Object(keywords)) =
            (properties.get_mut(&name), keywords)
        {
            property.extend(keywords);
        }
    }
    schema
}

/// Removes `null` from a property's types (`type: [T, "null"]`, or a `oneOf` with a null
/// branch).
pub fn strip_null(property: &mut Value) {
    let Some(object) = property.as_object_mut() else {
        return;
    };
    if let Some(Value::Array(types)) = object.get_mut("type") {
        types.retain(|t| t != "null");
        if let [only] = types.as_slice() {
            let only = only.clone();
            object.insert("type".into(), only);
        }
    }
    for key in ["oneOf", "anyOf"] {
        if let Some(Value::Array(branches)) = object.get_mut(key) {
            branches.retain(|b| b.get("type").and_then(Value::as_str) != Some("null"));
            if let [only] = branches.as_slice() {
                let only = only.clone();
                object.remove(key);
                if let Value::Object(only) = only {
                    for (k, v) in only {
                        object.entry(k).or_insert(v);
                    }
                }
            }
        }
    }
}

/// Declares a document-only body type whose schema is built from an input type's, e.g.
/// `body_schema!(DispositionCreate = create_body(DispositionInput, &["label"]))`, or
/// `body_schema!(DispositionPatch = patch_body(DispositionInput, WRITABLE))`; or written as
/// JSON Schema: `body_schema!(ToolCreate = json(tool_create_schema()))`.
macro_rules! body_schema {
    ($(#[$doc:meta])* $name:ident = json($build:expr)) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::http::openapi::json_schema($build)
            }
        }

        impl utoipa::ToSchema for $name {}
    };
    ($(#[$doc:meta])* $name:ident = $kind:ident($input:ty $(, $arg:expr)*)) => {
        $(#[$doc])*
        pub struct $name;

        impl utoipa::PartialSchema for $name {
            fn schema() -> utoipa::openapi::RefOr<utoipa::openapi::schema::Schema> {
                $crate::http::openapi::$kind(<$input as utoipa::PartialSchema>::schema() $(, $arg)*)
            }
        }

        impl utoipa::ToSchema for $name {
            fn schemas(
                schemas: &mut Vec<(
                    String,
                    utoipa::openapi::RefOr<utoipa::openapi::schema::Schema>,
                )>,
            ) {
                <$input as utoipa::ToSchema>::schemas(schemas);
            }
        }
    };
}
pub(crate) use body_schema;

/// The name of [`ErrorBody`] among the document's schemas.
const ERROR_SCHEMA: &str = "Error";

/// Adds the shared layers' refusals to one operation, the error schema to every refusal and a
/// description to every response that lacks one.
pub fn complete_operation(path: &str, op: &mut Map<String, Value>, access: Access) {
    let mut statuses = vec![
        StatusCode::TOO_MANY_REQUESTS,
        StatusCode::INTERNAL_SERVER_ERROR,
    ];
    statuses.extend_from_slice(refusals(access));
    let params = op
        .get("parameters")
        .and_then(Value::as_array)
        .cloned()
        .unwrap_or_default();
    let in_path = |p: &&Value| p.get("in").and_then(Value::as_str) == Some("path");
    let uuid_in_path = params
        .iter()
        .filter(in_path)
        .any(|p| p.pointer("/schema/format").and_then(Value::as_str) == Some("uuid"));
    if uuid_in_path {
        statuses.push(StatusCode::BAD_REQUEST);
    }
    if path.contains('{') {
        statuses.push(StatusCode::NOT_FOUND);
    }
    if params
        .iter()
        .any(|p| p.get("in").and_then(Value::as_str) == Some("query"))
    {
        statuses.push(StatusCode::BAD_REQUEST);
    }
    if let Some(body) = op.get_mut("requestBody") {
        optional_body_not_null(body);
        statuses.push(StatusCode::BAD_REQUEST);
        statuses.push(StatusCode::PAYLOAD_TOO_LARGE);
    }
    let responses = op
        .entry("responses")
        .or_insert_with(|| Value::Object(Map::new()));
    let Some(responses) = responses.as_object_mut() else {
        return;
    };
    for status in statuses {
        responses
            .entry(status.as_str())
            .or_insert_with(|| Value::Object(Map::new()));
    }
    for (status, response) in responses.iter_mut() {
        let Some(response) = response.as_object_mut() else {
            continue;
        };
        let code: u16 = status.parse().unwrap_or(0);
        if !response.contains_key("description") {
            response.insert("description".into(), describe(code).into());
        }
        if code >= 400 && !response.contains_key("content") {
            response.insert(
                "content".into(),
                json!({"application/json": {"schema": {"$ref": format!("#/components/schemas/{ERROR_SCHEMA}")}}}),
            );
        }
    }
}

/// An optional body (`request_body(content = Option<T>)`) may be left out, but when sent it is
/// a `T`, never `null`: utoipa writes `oneOf: [T, null]`, which this reduces to `T`.
fn optional_body_not_null(body: &mut Value) {
    if body.get("required") == Some(&Value::Bool(true)) {
        return;
    }
    let Some(Value::Object(content)) = body.get_mut("content") else {
        return;
    };
    for media in content.values_mut() {
        let Some(schema) = media.get_mut("schema") else {
            continue;
        };
        if let Some(Value::Array(branches)) = schema.get("oneOf") {
            let kept: Vec<&Value> = branches
                .iter()
                .filter(|b| b.get("type").and_then(Value::as_str) != Some("null"))
                .collect();
            if let [only] = kept.as_slice() {
                *schema = (*only).clone();
            }
        }
    }
}

/// Adds [`ErrorBody`] to the document's schemas.
pub fn add_error_schema(doc: &mut Value) -> anyhow::Result<()> {
    let schemas = doc
        .pointer_mut("/components/schemas")
        .and_then(Value::as_object_mut)
        .ok_or_else(|| anyhow::anyhow!("OpenAPI document has no components.schemas"))?;
    schemas.insert(
        ERROR_SCHEMA.into(),
        serde_json::to_value(ErrorBody::schema())?,
    );
    Ok(())
}

/// The description of a status no handler described.
fn describe(status: u16) -> &'static str {
    match status {
        200 => "OK",
        201 => "Created",
        400 => {
            "Invalid request: a missing or bad field, invalid JSON, or a bad path or query parameter (INVALID_REQUEST)"
        }
        401 => "Missing, invalid or expired API key, or the key lacks the route's scope",
        402 => "Billing refused (BILLING_ERROR)",
        403 => "Forbidden",
        404 => "Not found in this workspace (NOT_FOUND)",
        409 => "Conflicts with an existing resource (CONFLICT)",
        413 => "Request body over the size limit (PAYLOAD_TOO_LARGE)",
        416 => "Range not satisfiable (RANGE_NOT_SATISFIABLE)",
        422 => "Not ready (CAMPAIGN_NOT_READY)",
        429 => "Rate limit exceeded (RATE_LIMIT)",
        500 => "Internal error (INTERNAL_ERROR); the detail is logged, never sent",
        503 => "Unavailable on this service",
        _ => "See the error code",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::domain::auth::Scope;

    /// The documented statuses, in order.
    fn statuses(op: &Map<String, Value>) -> Vec<String> {
        let responses = op["responses"].as_object().expect("responses");
        let mut statuses: Vec<String> = responses.keys().cloned().collect();
        statuses.sort();
        statuses
    }

    #[test]
    fn a_scoped_route_with_an_id_and_a_body_documents_every_shared_refusal() {
        let mut op = json!({
            "parameters": [{"name": "id", "in": "path", "required": true, "schema": {"type": "string", "format": "uuid"}}],
            "requestBody": {"content": {"application/json": {"schema": {"type": "object"}}}},
            "responses": {"200": {"description": "The agent"}}
        });
        let op = op.as_object_mut().expect("object");
        complete_operation("/agents/{id}", op, Access::Scoped(Scope::AgentsUpdate));
        let statuses = statuses(op);
        assert_eq!(statuses, ["200", "400", "401", "404", "413", "429", "500"]);
        assert_eq!(op["responses"]["200"]["description"], "The agent");
        assert_eq!(
            op["responses"]["404"]["content"]["application/json"]["schema"]["$ref"],
            "#/components/schemas/Error"
        );
        assert!(op["responses"]["200"].get("content").is_none());
    }

    #[test]
    fn a_public_route_without_parameters_documents_only_the_rate_limit_and_internal_errors() {
        let mut op = json!({"responses": {"200": {}}});
        let op = op.as_object_mut().expect("object");
        complete_operation("/healthz", op, Access::Public);
        let statuses = statuses(op);
        assert_eq!(statuses, ["200", "429", "500"]);
        assert_eq!(op["responses"]["200"]["description"], "OK");
    }

    #[derive(ToSchema)]
    #[allow(dead_code)]
    struct Input {
        label: Option<String>,
        position: Option<i64>,
        secret: Option<String>,
    }

    #[test]
    fn a_create_body_requires_its_fields_and_refuses_other_keys() {
        let body = schema_json(&create_body(Input::schema(), &["label"]));
        assert_eq!(body["required"], json!(["label"]));
        assert_eq!(body["properties"]["label"]["type"], "string");
        assert_eq!(body["additionalProperties"], false);
    }

    #[test]
    fn a_schema_written_as_json_takes_its_placeholders_place_with_every_keyword() {
        let written =
            json!({"type": "object", "if": {"required": ["a"]}, "then": {"required": ["b"]}});
        let mut doc = json!({"components": {"schemas": {"Body": json_schema(written.clone())}}});
        expand_json_schemas(&mut doc).expect("expanded");
        assert_eq!(doc["components"]["schemas"]["Body"], written);
    }

    #[test]
    fn a_schema_that_could_not_be_built_fails_the_document() {
        let mut doc = json!({"paths": {"/x": {"post": {"schema": json_schema(Value::Null)}}}});
        assert!(expand_json_schemas(&mut doc).is_err());
    }

    #[test]
    fn an_optional_body_is_its_schema_not_null() {
        let mut body = json!({"content": {"application/json": {"schema": {"oneOf": [{"$ref": "#/components/schemas/A"}, {"type": "null"}]}}}});
        optional_body_not_null(&mut body);
        assert_eq!(
            body["content"]["application/json"]["schema"],
            json!({"$ref": "#/components/schemas/A"})
        );
    }

    #[test]
    fn a_patch_body_keeps_the_writable_fields_and_needs_one_of_them() {
        let body = schema_json(&patch_body(Input::schema(), &["label", "position"]));
        let properties = body["properties"].as_object().expect("properties");
        assert_eq!(properties.keys().collect::<Vec<_>>(), ["label", "position"]);
        assert_eq!(body["minProperties"], 1);
        assert_eq!(body["additionalProperties"], false);
    }
}
