//! The tools an agent uses its sandbox through: file tools over virtual paths
//! ([`read_file`], [`write_file`], [`str_replace`], [`ls`], [`glob`], [`grep`]), the host
//! shell ([`bash`], admitted only with [`AgentBuilder::allow_host_bash`]) and
//! [`present_files`].
//!
//! Every tool reaches the thread's sandbox through
//! [`ToolContext::sandbox`](crate::ToolContext::sandbox), so the first one to run acquires it
//! (lazy acquisition) and the id reaches the state through that call's update. Their
//! arguments' JSON Schemas come from the argument types; what they return names virtual paths
//! only.
//!
//! [`AgentBuilder::allow_host_bash`]: crate::AgentBuilder::allow_host_bash

mod bash;
mod files;
mod present;
mod search;

use std::sync::Arc;

use serde::de::DeserializeOwned;

use crate::sandbox::{FsError, SandboxFs};
use crate::tool::{FnTool, Tool, ToolContext, ToolSource, ToolSpec};
use crate::BoxError;

pub use bash::{bash, bash_with_secrets, BashArgs, BashError, BASH_OUTPUT_CAP, BASH_TIMEOUT_SECS};
pub use files::{
    ls, read_file, str_replace, write_file, LsArgs, ReadFileArgs, StrReplaceArgs, WriteFileArgs,
};
pub use present::{present_files, PresentFilesArgs, PRESENTED_MESSAGE};
pub use search::{glob, grep, GlobArgs, GrepArgs};

/// The file tools and `present_files` (not `bash`: add it with [`bash`] and
/// [`AgentBuilder::allow_host_bash`](crate::AgentBuilder::allow_host_bash)).
pub fn sandbox_tools() -> Vec<Arc<dyn Tool>> {
    vec![
        Arc::new(read_file()),
        Arc::new(write_file()),
        Arc::new(str_replace()),
        Arc::new(ls()),
        Arc::new(glob()),
        Arc::new(grep()),
        Arc::new(present_files()),
    ]
}

/// A built-in tool whose handler runs `op` over the thread's sandbox files on a blocking
/// thread; host paths in what it returns are mapped back to virtual paths.
pub(crate) fn fs_tool<A, F>(name: &str, description: &str, read_only: bool, op: F) -> FnTool
where
    A: DeserializeOwned + schemars::JsonSchema + Send + 'static,
    F: Fn(A, &SandboxFs) -> Result<String, FsError> + Send + Sync + Copy + 'static,
{
    let spec = ToolSpec::new(name, description, ToolSource::BuiltIn).read_only(read_only);
    FnTool::typed(spec, move |args: A, cx: ToolContext| async move {
        let open = cx.sandbox().await?;
        let text = tokio::task::spawn_blocking(move || {
            op(args, &open.fs).map(|t| open.fs.mounts().mask_host_paths(&t))
        })
        .await??;
        Ok::<_, BoxError>(text)
    })
}
