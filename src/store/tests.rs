//! The store's own values: coded columns and the enums read from them.

use sqlx::{Connection, SqliteConnection};
use switchboard_actors::call::CallStatus;

use super::db::{Row, query};
use super::*;

async fn row(sql: &'static str) -> Row {
    let mut conn = SqliteConnection::connect("sqlite::memory:").await.unwrap();
    query(sql).fetch_one(&mut conn).await.unwrap()
}

#[tokio::test]
async fn a_coded_column_reads_its_values_and_refuses_an_unknown_one() {
    let r = row("SELECT 'in_progress' AS status, NULL AS outcome, 'talking' AS bad").await;
    assert_eq!(
        coded(&r, "status", CallStatus::parse).unwrap(),
        CallStatus::InProgress
    );
    assert_eq!(opt_coded(&r, "outcome", CallStatus::parse).unwrap(), None);
    for err in [
        coded(&r, "bad", CallStatus::parse).unwrap_err(),
        opt_coded(&r, "bad", CallStatus::parse).unwrap_err(),
    ] {
        assert!(
            matches!(&err, StoreError::Corrupt(m) if m == "bad: talking"),
            "{err:?}"
        );
    }
}

#[test]
fn disposition_sources_and_delivery_statuses_round_trip() {
    for source in DispositionSource::ALL {
        assert_eq!(DispositionSource::parse(source.as_str()), Some(source));
        assert_eq!(serde_json::to_value(source).unwrap(), source.as_str());
    }
    assert_eq!(DispositionSource::parse("operator"), None);
    for status in DeliveryStatus::ALL {
        assert_eq!(DeliveryStatus::parse(status.as_str()), Some(status));
        assert_eq!(serde_json::to_value(status).unwrap(), status.as_str());
    }
    assert_eq!(DeliveryStatus::parse("sent"), None);
}

#[test]
fn tool_types_integrations_and_dnc_sources_round_trip() {
    for t in ToolType::ALL {
        assert_eq!(ToolType::parse(t.as_str()), Some(t));
        assert_eq!(serde_json::to_value(t).unwrap(), t.as_str());
    }
    assert_eq!(ToolType::parse("Webhook"), None);
    for p in crate::domain::integrations::Provider::ALL {
        assert_eq!(serde_json::to_value(p).unwrap(), p.name());
        assert_eq!(p.to_string(), p.name());
    }
    for st in IntegrationStatus::ALL {
        assert_eq!(IntegrationStatus::parse(st.as_str()), Some(st));
        assert_eq!(serde_json::to_value(st).unwrap(), st.as_str());
        assert_eq!(st.to_string(), st.as_str());
    }
    assert_eq!(IntegrationStatus::parse("revoked"), None);
    for s in DncSource::ALL {
        assert_eq!(DncSource::parse(s.as_str()), Some(s));
        assert_eq!(serde_json::to_value(s).unwrap(), s.as_str());
    }
    assert_eq!(DncSource::parse("import"), None);
}

#[test]
fn ledger_kinds_round_trip() {
    for kind in LedgerKind::ALL {
        assert_eq!(LedgerKind::parse(kind.as_str()), Some(kind));
        assert_eq!(serde_json::to_value(kind).unwrap(), kind.as_str());
    }
    assert_eq!(LedgerKind::parse("refund"), None);
}
