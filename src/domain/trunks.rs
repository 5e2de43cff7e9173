//! SIP trunks on carrier accounts, as the service manages them: the status a test gives an
//! account, the port that probes a trunk's gateways, when a phone number counts as configured
//! for outbound SIP, how a trunk is shown (never its password) and read from an operator's flag.
//! What a valid trunk is belongs to `switchboard_sip::trunk`.
//!
//! **Invariant:** a trunk's password leaves the service only towards the carrier (digest
//! authentication): [`ShownTrunk`] has none, and `Trunk` never serializes it.

use anyhow::Context;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};
use switchboard_sip::trunk::{GatewayProbe, Secret, Trunk, TrunkError};
use utoipa::ToSchema;

/// Sends SIP OPTIONS to a trunk's gateways. The running SIP server implements it; without one,
/// nothing can be probed.
#[async_trait::async_trait]
pub trait TrunkProber: Send + Sync + 'static {
    /// One result per gateway of `trunk`.
    async fn probe(&self, trunk: &Trunk) -> Vec<GatewayProbe>;
}

/// The running SIP server probes with OPTIONS.
#[async_trait::async_trait]
impl TrunkProber for switchboard_sip::outbound::SipClient {
    async fn probe(&self, trunk: &Trunk) -> Vec<GatewayProbe> {
        switchboard_sip::outbound::SipClient::probe(self, trunk).await
    }
}

/// A carrier account's trunk status.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize, ToSchema)]
#[serde(rename_all = "lowercase")]
pub enum TrunkStatus {
    /// New, or the trunk changed since its last test.
    Untested,
    /// The last test reached at least one gateway.
    Active,
    /// The last test reached no gateway (or the account has no trunk to test).
    Failing,
}

impl TrunkStatus {
    pub fn as_str(self) -> &'static str {
        match self {
            TrunkStatus::Untested => "untested",
            TrunkStatus::Active => "active",
            TrunkStatus::Failing => "failing",
        }
    }

    pub fn parse(s: &str) -> Option<Self> {
        match s {
            "untested" => Some(TrunkStatus::Untested),
            "active" => Some(TrunkStatus::Active),
            "failing" => Some(TrunkStatus::Failing),
            _ => None,
        }
    }
}

/// Longest carrier account name.
pub const ACCOUNT_NAME_MAX: usize = 100;
/// Longest carrier account provider.
pub const PROVIDER_MAX: usize = 64;

/// A carrier account's name or provider, trimmed; else the rule it breaks: 1 to `max`
/// characters, not blank, no control characters.
pub fn account_label(raw: &str, max: usize) -> Result<String, String> {
    let trimmed = raw.trim();
    if trimmed.is_empty() || raw.chars().count() > max || raw.chars().any(char::is_control) {
        return Err(format!(
            "must be 1-{max} characters, not blank, without control characters"
        ));
    }
    Ok(trimmed.to_owned())
}

/// The status a test's probes give an account, and the reason when it fails: one gateway
/// answering is enough (the dialer tries the next one on a failure); when none does, the reason
/// says how each failed.
pub fn assess(probes: &[GatewayProbe]) -> (TrunkStatus, Option<String>) {
    if probes.iter().any(|p| p.ok) {
        return (TrunkStatus::Active, None);
    }
    if probes.is_empty() {
        return (TrunkStatus::Failing, Some("no gateway was probed".into()));
    }
    let failures: Vec<String> = probes
        .iter()
        .map(|p| match p.status {
            Some(status) => format!("{}: {status} {}", p.gateway, p.detail),
            None => format!("{}: {}", p.gateway, p.detail),
        })
        .map(|line| line.trim_end().to_owned())
        .collect();
    let reason = if failures.len() == 1 {
        format!("the gateway did not answer: {}", failures[0])
    } else {
        format!("no gateway answered: {}", failures.join("; "))
    };
    (TrunkStatus::Failing, Some(reason))
}

/// Whether a number can place calls over SIP: through its carrier account's trunk once a test
/// found it working, or (a number on no account, `None`) through the operator's default trunk.
pub fn sip_outbound_configured(account: Option<(bool, TrunkStatus)>, default_trunk: bool) -> bool {
    match account {
        Some((has_trunk, status)) => has_trunk && status == TrunkStatus::Active,
        None => default_trunk,
    }
}

/// What an update of a trunk does with the stored password.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PasswordUpdate {
    /// No `password` key was sent: the stored password stays.
    Keep,
    /// `"password": null`.
    Clear,
    Set(Secret),
}

impl PasswordUpdate {
    /// Reads the `password` key of a trunk object as sent. A value that is not a string is
    /// refused here, before a parser could quote it in its error.
    pub fn sent(trunk: &Map<String, Value>) -> Result<Self, TrunkError> {
        match trunk.get("password") {
            None => Ok(PasswordUpdate::Keep),
            Some(Value::Null) => Ok(PasswordUpdate::Clear),
            Some(Value::String(s)) => Ok(PasswordUpdate::Set(Secret::new(s.clone()))),
            Some(_) => Err(TrunkError {
                field: "password".into(),
                message: "must be a string or null".into(),
            }),
        }
    }

    /// The password after the update, given the stored one.
    pub fn apply(self, stored: Option<Secret>) -> Option<Secret> {
        match self {
            PasswordUpdate::Keep => stored,
            PasswordUpdate::Clear => None,
            PasswordUpdate::Set(secret) => Some(secret),
        }
    }
}

/// A trunk as the API and the operator commands show it: every field but the password, and
/// `has_password`.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ShownTrunk {
    /// Always without its password.
    trunk: Trunk,
    has_password: bool,
}

impl ShownTrunk {
    pub fn new(trunk: Trunk, has_password: bool) -> Self {
        ShownTrunk {
            trunk: Trunk {
                password: None,
                ..trunk
            },
            has_password,
        }
    }

    pub fn trunk(&self) -> &Trunk {
        &self.trunk
    }

    pub fn has_password(&self) -> bool {
        self.has_password
    }
}

impl Serialize for ShownTrunk {
    fn serialize<S: serde::Serializer>(&self, serializer: S) -> Result<S::Ok, S::Error> {
        #[derive(Serialize)]
        struct Shown<'a> {
            #[serde(flatten)]
            trunk: &'a Trunk,
            has_password: bool,
        }
        Shown {
            trunk: &self.trunk,
            has_password: self.has_password,
        }
        .serialize(serializer)
    }
}

/// Reads a valid trunk from an operator's flag: JSON, or `@path` for a file holding it. The
/// error names the field at fault and never quotes the password.
pub fn read_trunk(value: &str) -> anyhow::Result<Trunk> {
    let (trunk, _) = read_trunk_update(value)?;
    trunk.validate()?;
    Ok(trunk)
}

/// Reads a trunk from an operator's flag as [`read_trunk`] does, with what it does with a
/// stored password; the caller validates it once the password is known.
pub fn read_trunk_update(value: &str) -> anyhow::Result<(Trunk, PasswordUpdate)> {
    let text = match value.strip_prefix('@') {
        Some(path) => std::fs::read_to_string(path).with_context(|| format!("reading {path}"))?,
        None => value.to_owned(),
    };
    let raw: Value = serde_json::from_str(&text).context("the trunk is not valid JSON")?;
    let Value::Object(object) = &raw else {
        anyhow::bail!("the trunk must be a JSON object");
    };
    let password = PasswordUpdate::sent(object)?;
    let trunk: Trunk = serde_path_to_error::deserialize(raw).map_err(|err| {
        let path = err.path().to_string();
        anyhow::anyhow!("{path}: {}", err.into_inner())
    })?;
    Ok((trunk, password))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn probe(gateway: &str, ok: bool, status: Option<u16>, detail: &str) -> GatewayProbe {
        GatewayProbe {
            gateway: gateway.into(),
            ok,
            status,
            detail: detail.into(),
        }
    }

    #[test]
    fn one_answering_gateway_makes_the_trunk_active() {
        let probes = [
            probe("a.example;transport=udp", false, None, "timeout"),
            probe("b.example;transport=udp", true, Some(200), "OK"),
        ];
        assert_eq!(assess(&probes), (TrunkStatus::Active, None));
        // A 401 to OPTIONS is an answer too: the prober counts it as ok.
        let probes = [probe(
            "a.example;transport=udp",
            true,
            Some(401),
            "Unauthorized",
        )];
        assert_eq!(assess(&probes), (TrunkStatus::Active, None));
    }

    #[test]
    fn no_answering_gateway_makes_it_failing_and_says_how_each_failed() {
        let probes = [
            probe("a.example:5060;transport=udp", false, None, "timeout"),
            probe(
                "b.example;transport=tls",
                false,
                Some(503),
                "Service Unavailable",
            ),
        ];
        assert_eq!(
            assess(&probes),
            (
                TrunkStatus::Failing,
                Some(
                    "no gateway answered: a.example:5060;transport=udp: timeout; \
                     b.example;transport=tls: 503 Service Unavailable"
                        .into()
                )
            )
        );
        let probes = [probe("a.example;transport=udp", false, Some(408), "")];
        assert_eq!(
            assess(&probes),
            (
                TrunkStatus::Failing,
                Some("the gateway did not answer: a.example;transport=udp: 408".into())
            )
        );
        assert_eq!(assess(&[]).0, TrunkStatus::Failing);
    }

    #[test]
    fn outbound_sip_is_configured_by_an_active_trunk_or_the_default_one() {
        use TrunkStatus::*;
        assert!(sip_outbound_configured(Some((true, Active)), false));
        assert!(!sip_outbound_configured(Some((true, Untested)), true));
        assert!(!sip_outbound_configured(Some((true, Failing)), true));
        assert!(!sip_outbound_configured(Some((false, Active)), true));
        assert!(sip_outbound_configured(None, true));
        assert!(!sip_outbound_configured(None, false));
    }

    #[test]
    fn statuses_read_back() {
        for s in [
            TrunkStatus::Untested,
            TrunkStatus::Active,
            TrunkStatus::Failing,
        ] {
            assert_eq!(TrunkStatus::parse(s.as_str()), Some(s));
        }
        assert_eq!(TrunkStatus::parse("ok"), None);
    }

    fn trunk() -> Trunk {
        serde_json::from_value(serde_json::json!({
            "gateways": [{"host": "sip.example.net", "port": 5060}],
            "username": "acct",
            "password": "s3cret",
        }))
        .expect("a trunk")
    }

    #[test]
    fn a_shown_trunk_has_no_password_only_whether_one_is_set() {
        let shown = ShownTrunk::new(trunk(), true);
        let json = serde_json::to_value(&shown).expect("serializes");
        assert_eq!(json["has_password"], true);
        assert_eq!(json["username"], "acct");
        assert!(json.get("password").is_none(), "{json}");
        assert!(!format!("{shown:?}").contains("s3cret"));
    }

    #[test]
    fn the_shown_schema_swaps_the_password_for_has_password() {
        let schema =
            crate::http::openapi::schema_json(&<ShownTrunk as utoipa::PartialSchema>::schema());
        let properties = schema["properties"].as_object().expect("properties");
        assert!(properties.contains_key("has_password"));
        assert!(!properties.contains_key("password"));
        assert!(properties.contains_key("gateways"));
    }

    #[test]
    fn the_trunk_schema_bounds_are_the_trunk_rules_limits() {
        use switchboard_sip::trunk::{MAX_GATEWAYS, MAX_HEADERS, MAX_TEXT};
        let schema = crate::http::openapi::schema_json(&<Trunk as utoipa::PartialSchema>::schema());
        assert_eq!(schema["properties"]["gateways"]["maxItems"], MAX_GATEWAYS);
        assert_eq!(schema["properties"]["headers"]["maxItems"], MAX_HEADERS);
        assert_eq!(schema["properties"]["password"]["maxLength"], MAX_TEXT);
        assert_eq!(schema["properties"]["password"]["writeOnly"], true);
        assert_eq!(schema["additionalProperties"], false);
    }

    #[test]
    fn a_password_update_keeps_clears_or_sets() {
        let sent = |json: Value| PasswordUpdate::sent(json.as_object().expect("object"));
        let stored = Some(Secret::new("old"));
        assert_eq!(
            sent(serde_json::json!({}))
                .expect("ok")
                .apply(stored.clone()),
            stored
        );
        assert_eq!(
            sent(serde_json::json!({"password": null}))
                .expect("ok")
                .apply(stored.clone()),
            None
        );
        assert_eq!(
            sent(serde_json::json!({"password": "new"}))
                .expect("ok")
                .apply(stored),
            Some(Secret::new("new"))
        );
        let err = sent(serde_json::json!({"password": 12345})).unwrap_err();
        assert_eq!(err.field, "password");
        assert!(!err.message.contains("12345"));
    }

    #[test]
    fn a_trunk_flag_reads_json_or_a_file_and_names_the_bad_field() {
        let trunk = read_trunk(r#"{"gateways": [{"host": "sip.example.net"}]}"#).expect("reads");
        assert_eq!(trunk.gateways[0].host, "sip.example.net");
        let err = read_trunk(r#"{"gateways": [{"host": "bad host"}]}"#).unwrap_err();
        assert!(err.to_string().contains("gateways[0].host"), "{err}");
        let err = read_trunk(r#"{"gateways": [{"host": "a.example", "port": "x"}]}"#).unwrap_err();
        assert!(err.to_string().contains("gateways[0].port"), "{err}");
        let err =
            read_trunk(r#"{"gateways": [{"host": "a.example"}], "password": 4242}"#).unwrap_err();
        assert!(!err.to_string().contains("4242"), "{err}");
        let dir = tempfile::tempdir().expect("dir");
        let file = dir.path().join("trunk.json");
        std::fs::write(
            &file,
            r#"{"gateways": [{"host": "10.0.0.1", "port": 5080}]}"#,
        )
        .expect("written");
        let trunk = read_trunk(&format!("@{}", file.display())).expect("reads the file");
        assert_eq!(trunk.gateways[0].port, Some(5080));
        assert!(read_trunk("@/nonexistent/trunk.json").is_err());
    }
}
