//! JSON Schema pieces that the service's typed values carry into the OpenAPI document.

/// The schema of a string parameter that takes one of `values` (the type's own list, so the
/// document and the parser cannot disagree).
pub fn one_of(values: impl IntoIterator<Item = &'static str>) -> utoipa::openapi::schema::Object {
    utoipa::openapi::schema::ObjectBuilder::new()
        .schema_type(utoipa::openapi::schema::Type::String)
        .enum_values(Some(values))
        .build()
}
