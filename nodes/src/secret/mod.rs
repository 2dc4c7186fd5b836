//! Secrets in a tool's environment (reliability §5: a secret reaches a tool only when the
//! tool's manifest declares it, and never reaches checkpoints, logs or error strings).
//!
//! Three parties declare or supply: a **skill** lists the secrets it needs in its SKILL.md
//! (`secrets: [SALES_API_TOKEN]`), a **tool** lists the secrets it may receive in its spec
//! ([`ToolSpec::secrets`](crate::ToolSpec::secrets)), and the **application** supplies values
//! through a [`SecretStore`] given to the agent with
//! [`AgentBuilder::secrets`](crate::AgentBuilder::secrets). [`SecretGrant`] says when a
//! call receives a secret; a tool reads what it received with
//! [`ToolContext::secret_env`](crate::ToolContext::secret_env), which asks the live
//! skill store and secret store at that moment — a revoked secret or a disabled skill is gone
//! on the next call.
//!
//! Values are [`SecretValue`]s (no `Display`, no `Serialize`, a `Debug` without content), and
//! what [`bash`](crate::sandbox_tools::bash_with_secrets) returns passes through
//! [`SecretEnv::redact`] before it becomes a message.

mod env;
mod grant;
mod store;

pub use env::SecretEnv;
pub use grant::SecretGrant;
pub(crate) use grant::{SecretAccess, SecretInjection};
pub use store::{MemorySecrets, SecretStore, SecretValue};
