//! Connecting a Google account through the OAuth 2.0 authorization-code flow with PKCE
//! (RFC 7636, `S256`), as the dashboard runs it:
//!
//! 1. [`Handshake::start`]: a random `state` and code verifier; the operator's browser is sent to
//!    Google's consent page ([`authorize_url`]) with the state and the verifier's challenge.
//! 2. Google sends the browser back with a `code` and the same `state`; the dashboard checks the
//!    state against the one it kept for that session, then [`Google::redeem`] trades the code
//!    and the verifier for a refresh token, and [`Google::account`] asks whose it is.
//!
//! The service's own OAuth client (`--google-client-id`, `--google-client-secret`) is what the
//! account grants access to; the grant is sealed in the store like one connected from the
//! command line.

use base64::Engine;
use serde_json::Value;

use super::client::{Failure, Google, GoogleUrls, shortened};

/// The service's OAuth client, registered with Google by the operator.
#[derive(Clone, PartialEq, Eq)]
pub struct OAuthClient {
    pub client_id: String,
    pub client_secret: String,
}

impl std::fmt::Debug for OAuthClient {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("OAuthClient")
            .field("client_id", &self.client_id)
            .finish_non_exhaustive()
    }
}

fn base64url(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

/// A handshake's secrets: the `state` the answer must carry back, and the PKCE code verifier
/// (kept by the service) with its challenge (sent to Google).
pub struct Handshake {
    pub state: String,
    pub verifier: String,
}

impl Handshake {
    pub fn start() -> Handshake {
        Handshake {
            state: base64url(&rand::random::<[u8; 32]>()),
            verifier: base64url(&rand::random::<[u8; 32]>()),
        }
    }

    /// The verifier's `S256` challenge.
    pub fn challenge(&self) -> String {
        challenge(&self.verifier)
    }
}

/// `BASE64URL(SHA256(verifier))`.
pub fn challenge(verifier: &str) -> String {
    base64url(ring::digest::digest(&ring::digest::SHA256, verifier.as_bytes()).as_ref())
}

/// Google's consent page asking for `scope` (a provider's, from the catalog), coming back to
/// `redirect_uri`.
pub fn authorize_url(
    urls: &GoogleUrls,
    client: &OAuthClient,
    redirect_uri: &str,
    scope: &str,
    handshake: &Handshake,
) -> Result<String, url::ParseError> {
    let mut url = url::Url::parse(&urls.authorize)?;
    url.query_pairs_mut()
        .append_pair("response_type", "code")
        .append_pair("client_id", &client.client_id)
        .append_pair("redirect_uri", redirect_uri)
        .append_pair("scope", scope)
        .append_pair("state", &handshake.state)
        .append_pair("code_challenge", &handshake.challenge())
        .append_pair("code_challenge_method", "S256")
        // A refresh token, every time: calls run while nobody is signed in.
        .append_pair("access_type", "offline")
        .append_pair("prompt", "consent");
    Ok(url.into())
}

/// What redeeming a code gives: the refresh token the integration keeps, and an access token
/// to ask whose account it is.
pub struct Redeemed {
    pub refresh_token: String,
    pub access_token: String,
}

impl Google {
    /// Trades an authorization code and its verifier for tokens.
    pub async fn redeem(
        &self,
        client: &OAuthClient,
        code: &str,
        verifier: &str,
        redirect_uri: &str,
    ) -> Result<Redeemed, Failure> {
        let form = [
            ("grant_type", "authorization_code"),
            ("code", code),
            ("code_verifier", verifier),
            ("redirect_uri", redirect_uri),
            ("client_id", client.client_id.as_str()),
            ("client_secret", client.client_secret.as_str()),
        ];
        let (status, answer) = self.token_endpoint(&form).await?;
        if !(200..300).contains(&status) {
            let error = answer["error_description"]
                .as_str()
                .or(answer["error"].as_str())
                .unwrap_or_default();
            return Err(Failure::Status(
                status,
                format!("the token endpoint refused the code: {}", shortened(error)),
            ));
        }
        let field = |name: &str| {
            answer[name]
                .as_str()
                .filter(|t| !t.is_empty())
                .map(str::to_owned)
        };
        match (field("refresh_token"), field("access_token")) {
            (Some(refresh_token), Some(access_token)) => Ok(Redeemed {
                refresh_token,
                access_token,
            }),
            _ => Err(Failure::Status(
                502,
                "the token endpoint gave no refresh token (was offline access refused?)".into(),
            )),
        }
    }

    /// The address of the account an access token stands for.
    pub async fn account(&self, access_token: &str) -> Result<String, Failure> {
        let (status, text) = self
            .exchange(
                reqwest::Method::GET,
                &self.urls.userinfo,
                None,
                Some(access_token),
                None,
            )
            .await?;
        if !(200..300).contains(&status) {
            return Err(Failure::Status(status, shortened(&text)));
        }
        let answer: Value = serde_json::from_str(&text).unwrap_or(Value::Null);
        answer["email"]
            .as_str()
            .filter(|e| e.contains('@'))
            .map(str::to_owned)
            .ok_or_else(|| Failure::Status(502, "the account has no email address".into()))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_challenge_is_rfc_7636_s256() {
        // RFC 7636, appendix B.
        assert_eq!(
            challenge("dBjftJeZ4CVP-mB92K27uhbUJU1p1r_wW1gFWFOEjXk"),
            "E9Melhoa2OwvFrEMTJguCHaoeK1t8URWbuGJSstw-cM"
        );
        let h = Handshake::start();
        assert_eq!(h.verifier.len(), 43);
        assert_ne!(h.state, h.verifier);
    }

    #[test]
    fn the_consent_page_asks_for_a_refresh_token_with_the_challenge() {
        let h = Handshake::start();
        let client = OAuthClient {
            client_id: "id-1".into(),
            client_secret: "s".into(),
        };
        let url = authorize_url(
            &GoogleUrls::default(),
            &client,
            "https://sb.example/app/settings/integrations/callback",
            crate::domain::integrations::Provider::Gmail.scope(),
            &h,
        )
        .unwrap();
        let parsed = url::Url::parse(&url).unwrap();
        let q: std::collections::HashMap<_, _> = parsed.query_pairs().into_owned().collect();
        assert_eq!(q["code_challenge"], h.challenge());
        assert_eq!(q["code_challenge_method"], "S256");
        assert_eq!(q["state"], h.state);
        assert_eq!(q["access_type"], "offline");
        assert!(q["scope"].contains("gmail.send"));
        assert!(
            !url.contains(&h.verifier),
            "the verifier stays with the service"
        );
        assert!(!url.contains("client_secret"));
    }
}
