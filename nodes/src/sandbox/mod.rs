//! The sandbox: where a thread's file side effects happen, and the virtual paths a model uses
//! to name them.
//!
//! - [`SandboxProvider`], [`LocalSandboxProvider`]: a thread's directories
//!   (`workspace`, `uploads`, `outputs`), acquired per (user, thread), released without being
//!   destroyed.
//! - [`MountTable`]: `/mnt/user-data/{uploads,workspace,outputs}` and the read-only
//!   `/mnt/skills/...` projection of enabled skills, with the rules a path must keep
//!   ([`PathError`], [`PathRule`]).
//! - [`SandboxFs`]: read, write, `str_replace`, `ls`, `glob`, `grep` over virtual paths,
//!   through capability directories (`cap-std`), so a symlink can never carry an operation
//!   outside its root, even one swapped in after a check.

mod fs;
mod id;
mod path;
mod provider;
mod search;

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
