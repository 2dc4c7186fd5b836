//! Where a thread's side effects happen: the [`SandboxProvider`] trait and the
//! [`LocalSandboxProvider`], which gives each thread its own directories on disk.
//!
//! Acquisition is idempotent per (user, thread): the id is derived from the two, so every
//! process derives the same id and finds the same directories. Release is not destruction:
//! a released sandbox keeps its files, and the next run of the thread (in this process or
//! another) finds them. Destruction is explicit.

use std::fmt;
use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use cap_std::ambient_authority;
use cap_std::fs::Dir;
use futures::future::BoxFuture;
use futures::{future, FutureExt};

use super::id::{IdError, IdRole};

/// The prefix of every id the local provider hands out.
const LOCAL_PREFIX: &str = "local";

/// The three per-thread directories, in the order they are created.
const THREAD_ROOTS: [&str; 3] = ["workspace", "uploads", "outputs"];

/// The id of an acquired sandbox, as stored in `ThreadState::sandbox`.
#[derive(Clone, Debug, PartialEq, Eq, Hash, PartialOrd, Ord)]
pub struct SandboxId(String);

impl SandboxId {
    /// An id as stored (for example read back from a checkpoint).
    pub fn new(id: impl Into<String>) -> Self {
        SandboxId(id.into())
    }

    /// The id's text.
    pub fn as_str(&self) -> &str {
        &self.0
    }
}

impl fmt::Display for SandboxId {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.0)
    }
}

/// The host directories of one thread's sandbox. Host paths are for the runtime only: what a
/// model sees goes through [`MountTable`](super::MountTable), which prints virtual paths.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ThreadDirs {
    /// `<root>/threads/<thread>/user-data`, the common parent of the three roots.
    pub user_data: PathBuf,
    /// `<user_data>/workspace`.
    pub workspace: PathBuf,
    /// `<user_data>/uploads`.
    pub uploads: PathBuf,
    /// `<user_data>/outputs`.
    pub outputs: PathBuf,
}

impl ThreadDirs {
    fn under(root: &Path, thread: &str) -> Self {
        let user_data = root.join("threads").join(thread).join("user-data");
        ThreadDirs {
            workspace: user_data.join("workspace"),
            uploads: user_data.join("uploads"),
            outputs: user_data.join("outputs"),
            user_data,
        }
    }
}

/// An acquired sandbox: its id and its directories.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Sandbox {
    /// The id.
    pub id: SandboxId,
    /// The thread whose sandbox it is.
    pub thread: String,
    /// Its directories.
    pub dirs: ThreadDirs,
}

/// A sandbox operation that failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SandboxError {
    /// A user or thread id that could escape the sandbox root.
    #[error(transparent)]
    Id(#[from] IdError),
    /// An id this provider did not hand out.
    #[error("sandbox id {id:?} is not a local sandbox id")]
    ForeignId {
        /// The id.
        id: SandboxId,
    },
    /// The thread's directories could not be created, opened or removed.
    #[error("sandbox of thread {thread:?}: {source}")]
    Io {
        /// The thread.
        thread: String,
        /// The file-system error.
        source: io::Error,
    },
    /// The blocking task doing the file-system work did not finish.
    #[error("sandbox file-system task failed: {0}")]
    Task(#[from] tokio::task::JoinError),
}

/// A source of sandboxes.
///
/// `acquire` is idempotent per (user, thread): calling it twice gives the same id. `release`
/// ends one agent invocation's use of a sandbox and must not destroy it; `destroy` removes it.
pub trait SandboxProvider: Send + Sync + 'static {
    /// The sandbox of `thread` for `user`, creating it if needed.
    ///
    /// # Errors
    /// [`SandboxError::Id`] for a user or thread id that could escape the root; an I/O error
    /// if the sandbox cannot be created.
    fn acquire(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<SandboxId, SandboxError>>;

    /// The sandbox with `id`, or `None` if it does not exist (any more).
    ///
    /// # Errors
    /// [`SandboxError::ForeignId`] for an id of another provider; an I/O error if it cannot be
    /// looked up.
    fn get(&self, id: &SandboxId) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>>;

    /// The sandbox `acquire` would give `user` and `thread`, if it exists, without creating it
    /// or counting as a use (run settlement looks at a thread's outputs before a run, when the
    /// run has not acquired anything yet).
    ///
    /// # Errors
    /// As [`SandboxProvider::acquire`] and [`SandboxProvider::get`].
    fn locate(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>>;

    /// Ends one invocation's use of the sandbox. It stays usable.
    ///
    /// # Errors
    /// [`SandboxError::ForeignId`] for an id of another provider.
    fn release(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>>;

    /// Removes the sandbox and everything in it. Destroying a missing sandbox is not an error.
    ///
    /// # Errors
    /// [`SandboxError::ForeignId`] for an id of another provider; an I/O error if it cannot be
    /// removed.
    fn destroy(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>>;
}

/// Sandboxes as directories under a root: `<root>/threads/<thread>/user-data/{workspace,
/// uploads,outputs}`.
///
/// The provider keeps no state in memory: its ids are `local:<user>:<thread>`, so another
/// provider over the same root (another process) finds the same sandboxes. The thread id is the
/// unit of isolation on disk; who may open which thread is decided before the provider is
/// asked. Every file-system call runs on a blocking thread.
#[derive(Clone, Debug)]
pub struct LocalSandboxProvider {
    root: Arc<PathBuf>,
}

impl LocalSandboxProvider {
    /// A provider over `root` (created on first acquisition).
    pub fn new(root: impl Into<PathBuf>) -> Self {
        LocalSandboxProvider {
            root: Arc::new(root.into()),
        }
    }

    /// The root directory.
    pub fn root(&self) -> &Path {
        &self.root
    }

    /// The id `acquire` gives `user` and `thread`, without touching the disk.
    ///
    /// # Errors
    /// [`IdError`] for an id that could escape the root.
    pub fn id_for(user: &str, thread: &str) -> Result<SandboxId, IdError> {
        IdRole::User.check(user)?;
        IdRole::Thread.check(thread)?;
        Ok(SandboxId(format!("{LOCAL_PREFIX}:{user}:{thread}")))
    }

    /// The thread of a local id, checked again (an id may come from a checkpoint).
    fn thread_of(id: &SandboxId) -> Result<String, SandboxError> {
        let foreign = || SandboxError::ForeignId { id: id.clone() };
        let mut parts = id.as_str().split(':');
        let (Some(LOCAL_PREFIX), Some(user), Some(thread), None) =
            (parts.next(), parts.next(), parts.next(), parts.next())
        else {
            return Err(foreign());
        };
        IdRole::User.check(user)?;
        IdRole::Thread.check(thread)?;
        Ok(thread.to_owned())
    }

    fn sandbox(&self, id: SandboxId, thread: String) -> Sandbox {
        let dirs = ThreadDirs::under(&self.root, &thread);
        Sandbox { id, thread, dirs }
    }
}

/// Creates the thread's directories through a capability on the root, so a thread id can never
/// name a directory outside it.
fn create_thread_dirs(root: &Path, thread: &str) -> io::Result<()> {
    Dir::create_ambient_dir_all(root, ambient_authority())?;
    let root = Dir::open_ambient_dir(root, ambient_authority())?;
    let user_data = Path::new("threads").join(thread).join("user-data");
    for name in THREAD_ROOTS {
        root.create_dir_all(user_data.join(name))?;
    }
    Ok(())
}

/// Whether every directory of the thread exists (as a directory, inside the root).
fn thread_dirs_exist(root: &Path, thread: &str) -> io::Result<bool> {
    let root = match Dir::open_ambient_dir(root, ambient_authority()) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(false),
        Err(e) => return Err(e),
    };
    let user_data = Path::new("threads").join(thread).join("user-data");
    Ok(THREAD_ROOTS
        .iter()
        .all(|name| root.is_dir(user_data.join(name))))
}

/// Removes the thread's directory through a capability on the root.
fn remove_thread_dirs(root: &Path, thread: &str) -> io::Result<()> {
    let root = match Dir::open_ambient_dir(root, ambient_authority()) {
        Ok(dir) => dir,
        Err(e) if e.kind() == io::ErrorKind::NotFound => return Ok(()),
        Err(e) => return Err(e),
    };
    match root.remove_dir_all(Path::new("threads").join(thread)) {
        Err(e) if e.kind() != io::ErrorKind::NotFound => Err(e),
        _ => Ok(()),
    }
}

impl SandboxProvider for LocalSandboxProvider {
    fn acquire(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<SandboxId, SandboxError>> {
        let checked = Self::id_for(user, thread);
        let root = Arc::clone(&self.root);
        let thread = thread.to_owned();
        async move {
            let id = checked?;
            let work_thread = thread.clone();
            tokio::task::spawn_blocking(move || create_thread_dirs(&root, &work_thread))
                .await?
                .map_err(|source| SandboxError::Io { thread, source })?;
            Ok(id)
        }
        .boxed()
    }

    fn get(&self, id: &SandboxId) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>> {
        let checked = Self::thread_of(id);
        let id = id.clone();
        let this = self.clone();
        async move {
            let thread = checked?;
            let (root, work_thread) = (Arc::clone(&this.root), thread.clone());
            let exists =
                tokio::task::spawn_blocking(move || thread_dirs_exist(&root, &work_thread))
                    .await?
                    .map_err(|source| SandboxError::Io {
                        thread: thread.clone(),
                        source,
                    })?;
            Ok(exists.then(|| this.sandbox(id, thread)))
        }
        .boxed()
    }

    fn locate(
        &self,
        user: &str,
        thread: &str,
    ) -> BoxFuture<'static, Result<Option<Sandbox>, SandboxError>> {
        match Self::id_for(user, thread) {
            Ok(id) => self.get(&id),
            Err(e) => future::ready(Err(e.into())).boxed(),
        }
    }

    fn release(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
        let checked = Self::thread_of(id).map(drop);
        async move { checked }.boxed()
    }

    fn destroy(&self, id: &SandboxId) -> BoxFuture<'static, Result<(), SandboxError>> {
        let checked = Self::thread_of(id);
        let root = Arc::clone(&self.root);
        async move {
            let thread = checked?;
            let work_thread = thread.clone();
            tokio::task::spawn_blocking(move || remove_thread_dirs(&root, &work_thread))
                .await?
                .map_err(|source| SandboxError::Io { thread, source })
        }
        .boxed()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    type TestResult = Result<(), Box<dyn std::error::Error>>;

    #[test]
    fn a_local_id_names_user_and_thread_and_parses_back() -> TestResult {
        let id = LocalSandboxProvider::id_for("ana", "t-1")?;
        assert_eq!(id.as_str(), "local:ana:t-1");
        assert_eq!(LocalSandboxProvider::thread_of(&id)?, "t-1");
        Ok(())
    }

    #[test]
    fn an_id_of_another_shape_is_foreign() {
        for raw in [
            "",
            "local",
            "local:ana",
            "local:ana:t:x",
            "docker:ana:t",
            "abc123",
        ] {
            let id = SandboxId::new(raw);
            assert!(
                matches!(
                    LocalSandboxProvider::thread_of(&id),
                    Err(SandboxError::ForeignId { .. })
                ),
                "{raw}"
            );
        }
    }

    #[test]
    fn a_stored_id_with_a_hostile_thread_is_refused() {
        let id = SandboxId::new("local:ana:..");
        assert!(matches!(
            LocalSandboxProvider::thread_of(&id),
            Err(SandboxError::Id(_))
        ));
    }

    #[test]
    fn the_thread_dirs_sit_under_the_root() {
        let dirs = ThreadDirs::under(Path::new("/r"), "t");
        assert_eq!(dirs.user_data, Path::new("/r/threads/t/user-data"));
        assert_eq!(dirs.outputs, Path::new("/r/threads/t/user-data/outputs"));
    }
}
