//! The Streamable HTTP transport (crate feature `mcp-http`): rmcp's reqwest client, with the
//! config's headers on every request.

use std::collections::HashMap;
use std::sync::Arc;
use std::time::Duration;

use http::{HeaderName, HeaderValue};
use rmcp::transport::common::client_side_sse::ExponentialBackoff;
use rmcp::transport::streamable_http_client::StreamableHttpClientTransportConfig;
use rmcp::transport::{StreamableHttpClientTransport, Transport};
use rmcp::RoleClient;

use super::{McpError, McpServerConfig};

/// How often a dropped response stream is resumed before the request fails.
const RECONNECTS: usize = 3;

/// The transport to the server at `url`.
///
/// # Errors
/// [`McpError::Transport`] for a header name or value that is not valid HTTP.
pub(super) fn transport(
    config: &McpServerConfig,
    url: &str,
) -> Result<impl Transport<RoleClient> + 'static, McpError> {
    let invalid = |what: &str, name: &str| McpError::Transport {
        server: config.name.clone(),
        message: format!("the {what} of the header {name:?} is not valid HTTP"),
    };
    let mut headers = HashMap::new();
    for (name, value) in &config.headers {
        let key = HeaderName::try_from(name.as_str()).map_err(|_| invalid("name", name))?;
        let value = HeaderValue::try_from(value.as_str()).map_err(|_| invalid("value", name))?;
        headers.insert(key, value);
    }
    let mut transport = StreamableHttpClientTransportConfig::with_uri(url).custom_headers(headers);
    // A dropped response stream is resumed a few times, then given up (the SDK's default
    // retries forever, so a call on a server that went away waited its whole timeout).
    let mut retry = ExponentialBackoff::default();
    retry.max_times = Some(RECONNECTS);
    retry.base_duration = Duration::from_millis(250);
    retry.max_delay = Some(Duration::from_secs(2));
    transport.retry_config = Arc::new(retry);
    Ok(StreamableHttpClientTransport::from_config(transport))
}
