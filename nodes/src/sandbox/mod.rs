//! The sandbox: where a thread's file side effects happen, and the virtual paths a model uses
//! to name them.
//!
//! - [`SandboxProvider`], [`LocalSandboxProvider`]: a thread's directories
//!   (`workspace`, `uploads`, `outputs`), acquired per (user, thread), released without being
//!   destroyed.
//! - [`MountTable`]: `/mnt/user-data/{uploads,workspace,outputs}` and the read-only
//!   `/mnt/skills/...` projection of enabled skills, with the rules a path must keep
//!   ([`PathError`], [`PathRule`]).
//! - [`SandboxOptions`], [`SandboxAccess`], [`SandboxUpdate`]: an agent's use of its
//!   sandbox — lazy or eager acquisition, the id going back into the state through the
//!   acquiring call's update, release once per invocation.
//! - [`SandboxFs`]: read, write, `str_replace`, `ls`, `glob`, `grep` over virtual paths,
//!   through capability directories (`cap-std`), so a symlink can never carry an operation
//!   outside its root, even one swapped in after a check.
//!
//! ```
//! use std::collections::BTreeMap;
//! use stategraph_nodes::sandbox::*;
//!
//! # tokio::runtime::Builder::new_current_thread().enable_all().build().unwrap().block_on(async {
//! let tmp = tempfile::tempdir()?;
//! let provider = LocalSandboxProvider::new(tmp.path());
//! let id = provider.acquire("ana", "t1").await?;
//! let sandbox = provider.get(&id).await?.ok_or("no sandbox")?;
//! let fs = SandboxFs::new(MountTable::new(&sandbox.dirs, &BTreeMap::new())?);
//! fs.write("/mnt/user-data/outputs/report.md", "# Report\n")?;
//! let found = fs.glob("/mnt/user-data", "**/*.md")?;
//! assert_eq!(found.items, ["/mnt/user-data/outputs/report.md"]);
//! let refused = fs.read("/mnt/user-data/outputs/../../etc/passwd", LineWindow::default());
//! assert!(matches!(refused, Err(FsError::Path(PathError { rule: PathRule::DotDot, .. }))));
//! provider.release(&id).await?; // the files stay
//! # Ok::<(), Box<dyn std::error::Error + Send + Sync>>(())
//! # }).unwrap();
//! ```

mod access;
mod attach;
mod fs;
mod id;
mod lifecycle;
mod path;
mod provider;
mod search;

pub(crate) use access::{acquire, stored_id};
pub use access::{OpenSandbox, SandboxAccess, SandboxAccessError, DEFAULT_SANDBOX_USER};
pub use attach::{attach_sandbox, SandboxUpdate};
pub use lifecycle::{Acquisition, SandboxOptions};
pub(crate) use lifecycle::{InvocationLease, SandboxRuntime};

pub use fs::{Entry, EntryType, FsError, FsOp, LineWindow, SandboxFs, MAX_READ_BYTES};
pub use id::{IdError, IdRole, IdRule, MAX_ID_LEN};
pub use path::{
    Access, Intent, Located, Mount, MountTable, MountedPath, PathError, PathRule, MAX_NAME_LEN,
    MAX_PATH_LEN, OUTPUTS, SKILLS, UPLOADS, USER_DATA, WORKSPACE,
};
pub use provider::{
    LocalSandboxProvider, Sandbox, SandboxError, SandboxId, SandboxProvider, ThreadDirs,
};
pub use search::{
    glob_regex, Found, LineMatch, MAX_GREP_FILE, MAX_LINE_CHARS, MAX_RESULTS, MAX_VISITED,
};
