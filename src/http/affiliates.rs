//! The affiliate program: `GET /affiliates/stats` (a partner's summary) and
//! `GET /affiliates/sub-affiliates` (one row per partner enrolled beneath it, zero rows kept).
//! Both always report for the key's workspace and take no query parameters.

use axum::Json;
use axum::extract::{RawQuery, State};
use serde::Serialize;
use utoipa::ToSchema;
use utoipa_axum::router::OpenApiRouter;
use utoipa_axum::routes;

use super::error::ApiError;
use super::extract::Data;
use super::state::AppState;
use crate::app::auth::Auth;
use crate::store::{AffiliateSummary, SubAffiliateRow};

pub fn router() -> OpenApiRouter<AppState> {
    OpenApiRouter::new()
        .routes(routes!(stats))
        .routes(routes!(sub_affiliates))
}

/// Refuses any query parameter: the figures are always the key's workspace's.
fn no_query(query: Option<String>) -> Result<(), ApiError> {
    match query.as_deref() {
        None | Some("") => Ok(()),
        Some(q)
            if q.split('&')
                .any(|p| p.split('=').next() == Some("company_id")) =>
        {
            Err(ApiError::bad_request(
                "company_id is not accepted: affiliate figures are always those of the key's workspace",
            ))
        }
        Some(_) => Err(ApiError::bad_request(
            "This endpoint takes no query parameters",
        )),
    }
}

#[derive(Serialize, ToSchema)]
pub struct AffiliateStats {
    summary: AffiliateSummary,
}

/// The workspace's affiliate figures
#[utoipa::path(get, path = "/affiliates/stats", operation_id = "getAffiliateStats", tag = "affiliates", security(("bearer" = ["affiliates:read"])),
    responses((status = 200, body = AffiliateStats), (status = 400, description = "A query parameter was sent")))]
async fn stats(
    State(state): State<AppState>,
    auth: Auth,
    RawQuery(query): RawQuery,
) -> Result<Json<AffiliateStats>, ApiError> {
    no_query(query)?;
    let hold = chrono::Duration::days(state.config.affiliate_hold_days);
    Ok(Json(AffiliateStats {
        summary: state
            .store
            .affiliate_summary(auth.workspace_id, state.store.now(), hold)
            .await?,
    }))
}

/// The partners enrolled beneath the workspace, with what each earns it
#[utoipa::path(get, path = "/affiliates/sub-affiliates", operation_id = "listSubAffiliates", tag = "affiliates", security(("bearer" = ["affiliates:read"])),
    responses((status = 200, body = Data<Vec<SubAffiliateRow>>), (status = 400, description = "A query parameter was sent")))]
async fn sub_affiliates(
    State(state): State<AppState>,
    auth: Auth,
    RawQuery(query): RawQuery,
) -> Result<Json<Data<Vec<SubAffiliateRow>>>, ApiError> {
    no_query(query)?;
    let hold = chrono::Duration::days(state.config.affiliate_hold_days);
    Ok(Json(Data {
        data: state
            .store
            .sub_affiliates(auth.workspace_id, state.store.now(), hold)
            .await?,
    }))
}
