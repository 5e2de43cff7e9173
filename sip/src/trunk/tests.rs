//! The trunk's rules: number formats, the Request-URI's user, validation naming the field,
//! the password never serialized or printed, unknown keys refused, gateways by priority.

use super::*;

fn trunk() -> Trunk {
    Trunk {
        gateways: vec![Gateway {
            host: "sip.example.net".into(),
            port: None,
            transport: TrunkTransport::Udp,
            priority: 0,
        }],
        username: Some("acct".into()),
        auth_username: None,
        password: Some(Secret::new("s3cret")),
        from_user: None,
        request_user: None,
        from_domain: None,
        number_format: NumberFormat::default(),
        headers: vec![],
        calls_per_second: None,
        max_concurrent_calls: None,
    }
}

#[test]
fn number_formats() {
    let mut f = NumberFormat::default();
    assert_eq!(f.apply("+972501234567"), "+972501234567");
    f.plus = false;
    assert_eq!(f.apply("+972501234567"), "972501234567");
    f.tech_prefix = Some("1234#".into());
    assert_eq!(f.apply("+972501234567"), "1234#972501234567");
}

#[test]
fn a_request_user_replaces_the_dialed_number() {
    let mut t = trunk();
    t.number_format.plus = false;
    assert_eq!(t.request_user_for("+972501234567"), "972501234567");
    t.request_user = Some("desk-k2m9q4w7e1r5t8y3u6i0o2p4".into());
    assert_eq!(t.validate(), Ok(()));
    assert_eq!(
        t.request_user_for("+972501234567"),
        "desk-k2m9q4w7e1r5t8y3u6i0o2p4"
    );
    t.request_user = Some("desk <sip:x>".into());
    assert_eq!(t.validate().unwrap_err().field, "request_user");
}

#[test]
fn the_password_never_prints() {
    let t = trunk();
    assert!(!format!("{t:?}").contains("s3cret"));
    assert_eq!(t.password.as_ref().map(Secret::expose), Some("s3cret"));
}

#[test]
fn validation_names_the_field() {
    assert_eq!(trunk().validate(), Ok(()));
    let mut t = trunk();
    t.gateways[0].host = "bad host".into();
    assert_eq!(t.validate().unwrap_err().field, "gateways[0].host");
    let mut t = trunk();
    t.gateways.clear();
    assert_eq!(t.validate().unwrap_err().field, "gateways");
    let mut t = trunk();
    t.headers.push(ExtraHeader {
        name: "Via".into(),
        value: "x".into(),
    });
    assert_eq!(t.validate().unwrap_err().field, "headers[0].name");
    let mut t = trunk();
    t.headers.push(ExtraHeader {
        name: "X-Account".into(),
        value: "a\r\nBYE".into(),
    });
    assert_eq!(t.validate().unwrap_err().field, "headers[0].value");
    let mut t = trunk();
    t.username = None;
    assert_eq!(t.validate().unwrap_err().field, "username");
    let mut t = trunk();
    t.number_format.tech_prefix = Some("12a".into());
    assert_eq!(t.validate().unwrap_err().field, "number_format.tech_prefix");
    let mut t = trunk();
    t.gateways[0].host = "2001:db8::1".into();
    assert_eq!(t.validate(), Ok(()));
}

#[test]
fn a_serialized_trunk_carries_everything_but_the_password() {
    let t = trunk();
    let json = serde_json::to_string(&t).expect("serializes");
    assert!(!json.contains("s3cret"), "{json}");
    assert!(!json.contains("password"), "{json}");
    let back: Trunk = serde_json::from_str(&json).expect("reads back");
    assert_eq!(
        back,
        Trunk {
            password: None,
            ..t
        }
    );
}

#[test]
fn unknown_keys_are_refused_at_every_level() {
    let read = |json: &str| serde_json::from_str::<Trunk>(json);
    assert!(read(r#"{"gateways": [{"host": "a.example"}]}"#).is_ok());
    assert!(read(r#"{"gateways": [{"host": "a.example"}], "pasword": "x"}"#).is_err());
    assert!(read(r#"{"gateways": [{"host": "a.example", "prio": 1}]}"#).is_err());
    assert!(
        read(r#"{"gateways": [{"host": "a.example"}], "number_format": {"plus": true, "x": 1}}"#)
            .is_err()
    );
    assert!(
        read(r#"{"gateways": [{"host": "a.example"}], "headers": [{"name": "X-A", "value": "1", "v": 2}]}"#)
            .is_err()
    );
}

#[test]
fn gateways_go_by_priority_then_order() {
    let mut t = trunk();
    let gw = |host: &str, priority| Gateway {
        host: host.into(),
        port: Some(5060),
        transport: TrunkTransport::Udp,
        priority,
    };
    t.gateways = vec![gw("b", 20), gw("a", 10), gw("c", 20)];
    let order: Vec<&str> = t
        .ordered_gateways()
        .iter()
        .map(|g| g.host.as_str())
        .collect();
    assert_eq!(order, ["a", "b", "c"]);
    assert_eq!(t.from_host(), Some("b"));
    assert_eq!(
        t.gateways[1].to_string(),
        "a:5060;transport=udp".to_string()
    );
}
