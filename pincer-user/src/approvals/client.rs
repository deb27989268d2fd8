//! The operators' side of the approval service's API: what `pincer
//! approvals pending | approve | deny` send.

use std::{path::Path, time::Duration};

use reqwest::{StatusCode, Url};

use super::{ApiAnswer, DecideRequest, Decision, PendingList, PendingRequest};

/// How long the API may take to answer: it answers at once.
const TIMEOUT: Duration = Duration::from_secs(30);

/// Errors talking to the service.
#[derive(Debug, thiserror::Error)]
pub enum ClientError {
    /// The server URL does not parse, or is not `http`/`https`.
    #[error("invalid server url {url:?}: write it like http://127.0.0.1:8443")]
    Url {
        /// The URL given.
        url: String,
    },
    /// The token file cannot be used.
    #[error("cannot read the operator token file {}", .path.display())]
    Token {
        /// The file.
        path: std::path::PathBuf,
        /// The cause.
        #[source]
        source: std::io::Error,
    },
    /// The exchange failed.
    #[error("cannot reach the approval service at {url}")]
    Transport {
        /// The server.
        url: String,
        /// The cause.
        #[source]
        source: reqwest::Error,
    },
    /// The service refused the token.
    #[error("the approval service refused the operator token (HTTP 401): {message}")]
    Unauthorized {
        /// The service's words.
        message: String,
    },
    /// The service refused the request.
    #[error("the approval service answered HTTP {status}: {message}")]
    Refused {
        /// The status.
        status: StatusCode,
        /// The service's words.
        message: String,
    },
}

/// An operator's connection to the service.
pub struct Client {
    http: reqwest::Client,
    base: Url,
    token: String,
}

impl Client {
    /// A client of the service at `server`, with the token in `token_file`
    /// (one trailing newline ignored).
    pub fn new(server: &str, token_file: &Path) -> Result<Self, ClientError> {
        let base = Url::parse(server)
            .ok()
            .filter(|url| matches!(url.scheme(), "http" | "https") && url.has_host())
            .ok_or_else(|| ClientError::Url {
                url: server.to_owned(),
            })?;
        let token =
            pincer_model::files::read_regular(token_file, pincer_model::files::MAX_SECRET_BYTES)
                .map_err(|source| ClientError::Token {
                    path: token_file.to_owned(),
                    source,
                })?;
        let token = String::from_utf8_lossy(token.strip_suffix(b"\n").unwrap_or(&token))
            .trim_end_matches('\r')
            .to_owned();
        let http = reqwest::Client::builder()
            .timeout(TIMEOUT)
            .redirect(reqwest::redirect::Policy::none())
            .user_agent(concat!("pincer/", env!("CARGO_PKG_VERSION")))
            .build()
            .map_err(|source| ClientError::Transport {
                url: server.to_owned(),
                source,
            })?;
        Ok(Self { http, base, token })
    }

    /// The requests waiting for an operator.
    pub async fn pending(&self) -> Result<Vec<PendingRequest>, ClientError> {
        let list: PendingList = self
            .call(self.http.get(self.url("api/pending")))
            .await
            .and_then(|body| self.decode(&body))?;
        Ok(list.requests)
    }

    /// Decides request `id`; the service's message.
    pub async fn decide(&self, id: u64, decision: Decision) -> Result<String, ClientError> {
        let body = self
            .call(
                self.http
                    .post(self.url("api/decide"))
                    .json(&DecideRequest { id, decision }),
            )
            .await?;
        match self.decode(&body)? {
            ApiAnswer::Done { message } => Ok(message),
            ApiAnswer::Error { error } => Err(ClientError::Refused {
                status: StatusCode::OK,
                message: error,
            }),
        }
    }

    fn url(&self, path: &str) -> Url {
        self.base.join(path).unwrap_or_else(|_| self.base.clone())
    }

    async fn call(&self, request: reqwest::RequestBuilder) -> Result<Vec<u8>, ClientError> {
        let transport = |source: reqwest::Error| ClientError::Transport {
            url: self.base.to_string(),
            source: source.without_url(),
        };
        let response = request
            .bearer_auth(&self.token)
            .send()
            .await
            .map_err(transport)?;
        let status = response.status();
        let body = response.bytes().await.map_err(transport)?.to_vec();
        if status.is_success() {
            return Ok(body);
        }
        let message = match serde_json::from_slice(&body) {
            Ok(ApiAnswer::Error { error }) => error,
            _ => String::from_utf8_lossy(&body).chars().take(200).collect(),
        };
        Err(if status == StatusCode::UNAUTHORIZED {
            ClientError::Unauthorized { message }
        } else {
            ClientError::Refused { status, message }
        })
    }

    fn decode<T: serde::de::DeserializeOwned>(&self, body: &[u8]) -> Result<T, ClientError> {
        serde_json::from_slice(body).map_err(|error| ClientError::Refused {
            status: StatusCode::OK,
            message: format!("unexpected answer: {error}"),
        })
    }
}
