//! JSON Schema pieces that the service's typed values carry into the OpenAPI document.

/// The schema of a string parameter that takes one of `values` (the type's own list, so the
/// document and the parser cannot disagree).
pub fn one_of(values: impl IntoIterator<Item = &'static str>) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values))
        .build()
}

/// The schema of a string or null, with its description.
pub fn nullable_described(description: &str) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            utoipa::openapi::schema::Type::String,
            utoipa::openapi::schema::Type::Null,
        ]))
        .description(Some(description))
        .build()
}

/// The schema of a string that is `pattern` or null (an optional field that reads null as
/// absent).
pub fn nullable_pattern(
    pattern: &str,
    max_length: Option<usize>,
) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::SchemaType::from_iter([
            utoipa::openapi::schema::Type::String,
            utoipa::openapi::schema::Type::Null,
        ]))
        .pattern(Some(pattern))
        .max_length(max_length)
        .build()
}
