//! OPTIONS probes of a trunk's gateways.

use rsipstack::sip::{self as rsip, StatusCode, StatusCodeKind};
use rsipstack::transaction::Transaction;
use rsipstack::transaction::key::{TransactionKey, TransactionRole};

use super::SipClient;
use super::resolve::{Target, host_port, resolve, uri, uri_user};
use crate::trunk::{GatewayProbe, Trunk, TrunkTransport};

impl SipClient {
    /// Sends OPTIONS to every gateway of `trunk` (each address DNS names, until one answers).
    pub async fn probe(&self, trunk: &Trunk) -> Vec<GatewayProbe> {
        let mut results = Vec::new();
        for gw in &trunk.gateways {
            let probe = match resolve(gw).await {
                Err(e) => GatewayProbe {
                    gateway: gw.to_string(),
                    ok: false,
                    status: None,
                    detail: e,
                },
                Ok(targets) => {
                    let mut result = None;
                    for target in &targets {
                        let probe = self.options(trunk, target).await;
                        let ok = probe.ok;
                        result = Some(probe);
                        if ok {
                            break;
                        }
                    }
                    result.unwrap_or_else(|| GatewayProbe {
                        gateway: gw.to_string(),
                        ok: false,
                        status: None,
                        detail: "no address".into(),
                    })
                }
            };
            results.push(probe);
        }
        results
    }

    async fn options(&self, trunk: &Trunk, target: &Target) -> GatewayProbe {
        let probe = |ok, status, detail: String| GatewayProbe {
            gateway: target.gateway.clone(),
            ok,
            status,
            detail,
        };
        let endpoint = &self.core.endpoint;
        let host = host_port(&target.host, target.port);
        let user = trunk
            .username
            .as_deref()
            .map(uri_user)
            .unwrap_or_else(|| "switchboard".into());
        let from_host = trunk.from_host().unwrap_or(&target.host).to_string();
        let (req_uri, from_uri) = match (
            uri(&format!("sip:{host}")),
            uri(&format!("sip:{user}@{}", host_port(&from_host, None))),
        ) {
            (Ok(a), Ok(b)) => (a, b),
            (Err(e), _) | (_, Err(e)) => return probe(false, None, e),
        };
        let listen = endpoint
            .transport_layer
            .get_listen_addrs()
            .into_iter()
            .find(|a| a.r#type == target.addr.r#type && target.transport != TrunkTransport::Udp);
        let via = match endpoint.get_via(listen, None) {
            Ok(via) => via,
            Err(e) => return probe(false, None, e.to_string()),
        };
        let from = rsip::typed::From {
            display_name: None,
            uri: from_uri,
            params: vec![],
        }
        .with_tag(rsipstack::transaction::make_tag());
        let to = rsip::typed::To {
            display_name: None,
            uri: req_uri.clone(),
            params: vec![],
        };
        let request = endpoint.make_request(rsip::Method::Options, req_uri, via, from, to, 1, None);
        let key = match TransactionKey::from_request(&request, TransactionRole::Client) {
            Ok(key) => key,
            Err(e) => return probe(false, None, e.to_string()),
        };
        let mut tx = Transaction::new_client(key, request, endpoint.clone(), None);
        tx.destination = Some(target.addr.clone());
        let wait = async {
            tx.send().await.map_err(|e| e.to_string())?;
            while let Some(msg) = tx.receive().await {
                if let rsip::SipMessage::Response(resp) = msg
                    && resp.status_code.kind() != StatusCodeKind::Provisional
                {
                    return Ok(resp);
                }
            }
            Err("no response".to_string())
        };
        let timeout = self.core.settings.t1 * 8;
        match tokio::time::timeout(timeout, wait).await {
            Err(_) => probe(false, None, format!("no response in {timeout:?}")),
            Ok(Err(e)) => probe(false, None, e),
            Ok(Ok(resp)) => {
                let code = u16::from(resp.status_code.clone());
                let ok = !matches!(resp.status_code.kind(), StatusCodeKind::ServerFailure)
                    && resp.status_code != StatusCode::RequestTimeout;
                probe(ok, Some(code), resp.status_code.text().to_string())
            }
        }
    }
}
