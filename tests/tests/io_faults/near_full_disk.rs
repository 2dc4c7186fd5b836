//! A nearly full disk, for real: a tmpfs of 3 MB mounted for the test. The WAL's room never
//! takes the disk's last space, a successful run leaves its data in the main file and the disk
//! not full, a run that fills the disk stops with a typed error and keeps what it committed,
//! and freeing space lets the thread go on in place. Where this machine cannot mount a tmpfs
//! (not root), each test says so on stderr and passes without checking anything.

use std::path::{Path, PathBuf};
use std::process::Command;

use super::*;

/// The disk the tests run on: 3 MB.
const DISK: u64 = 3 << 20;

/// A tmpfs mounted on a fresh directory, unmounted when dropped.
struct Tmpfs {
    dir: tempfile::TempDir,
}

impl Tmpfs {
    /// A tmpfs of `bytes`, or `None` (the reason printed) where none can be mounted here.
    fn mount(test: &str, bytes: u64) -> Result<Option<Tmpfs>, BoxedError> {
        let dir = tempfile::tempdir()?;
        let mounted = Command::new("mount")
            .args(["-t", "tmpfs", "-o", &format!("size={bytes}"), "tmpfs"])
            .arg(dir.path())
            .output();
        let why = match mounted {
            Ok(out) if out.status.success() => return Ok(Some(Tmpfs { dir })),
            Ok(out) => String::from_utf8_lossy(&out.stderr).trim().to_owned(),
            Err(e) => e.to_string(),
        };
        eprintln!("SKIPPED {test}: this machine cannot mount a {bytes}-byte tmpfs ({why})");
        Ok(None)
    }

    fn path(&self) -> &Path {
        self.dir.path()
    }

    /// The bytes free on it.
    fn free(&self) -> Result<u64, BoxedError> {
        let out = Command::new("df")
            .args(["-B1", "--output=avail"])
            .arg(self.path())
            .output()?;
        let text = String::from_utf8(out.stdout)?;
        let last = text.lines().last().ok_or("df printed nothing")?;
        Ok(last.trim().parse()?)
    }
}

impl Drop for Tmpfs {
    fn drop(&mut self) {
        let _ = Command::new("umount")
            .arg("-l")
            .arg(self.dir.path())
            .status();
    }
}

fn config_of(durability: Durability, steps: u64) -> RunConfig {
    RunConfig::new()
        .thread("t")
        .durability(durability)
        .recursion_limit(10 * steps as usize)
}

fn wal_of(db: &Path) -> PathBuf {
    let mut name = db.as_os_str().to_owned();
    name.push("-wal");
    PathBuf::from(name)
}

/// Copy the file and its WAL (if any) into `to`; the copy's path.
fn copy_with_wal(db: &Path, to: &Path) -> Result<PathBuf, BoxedError> {
    let copy = to.join("copy.db");
    std::fs::copy(db, &copy)?;
    if wal_of(db).exists() {
        std::fs::copy(wal_of(db), wal_of(&copy))?;
    }
    Ok(copy)
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_on_a_nearly_full_disk_leaves_its_data_in_the_file_and_the_disk_not_full(
) -> TestResult {
    let Some(disk) = Tmpfs::mount("near_full_disk::a_run_on_a_nearly_full_disk", DISK)? else {
        return Ok(());
    };
    let steps = 10;
    let path = disk.path().join("t.db");
    let saver = SqliteSaver::open(&path)?;
    let g = graph_of(steps)?.with_checkpointer(Arc::new(saver.clone()));
    let out = g
        .invoke(Tally::update(), &config_of(Durability::Sync, steps))
        .await?;
    assert_eq!(*out.state, expected_of(steps).await?);
    drop(g);
    saver.close()?;

    // No room left behind: the log was folded into the file and truncated.
    let wal = std::fs::metadata(wal_of(&path)).map_or(0, |m| m.len());
    assert_eq!(wal, 0, "the WAL keeps {wal} bytes after a clean close");
    let free = disk.free()?;
    assert!(free > DISK / 2, "only {free} bytes of the disk are free");

    // The main file alone holds the thread: a copy without its WAL has the final state.
    let roomy = tempfile::tempdir()?;
    let copy = roomy.path().join("alone.db");
    std::fs::copy(&path, &copy)?;
    let reader = SqliteSaver::open_read_only(&copy)?;
    let g = graph_of(steps)?.with_checkpointer(Arc::new(reader));
    let snapshot = g
        .get_state("t", None)
        .await?
        .ok_or("the copy has no thread")?;
    assert_eq!(*snapshot.values, *out.state);
    Ok(())
}

#[tokio::test(flavor = "multi_thread", worker_threads = 2)]
async fn a_run_that_fills_the_disk_stops_typed_and_goes_on_once_space_is_freed() -> TestResult {
    let steps = 2_000;
    let want = expected_of(steps).await?;
    for durability in [Durability::Sync, Durability::Async] {
        let Some(disk) = Tmpfs::mount("near_full_disk::a_run_that_fills_the_disk", DISK)? else {
            return Ok(());
        };
        let ballast = disk.path().join("ballast");
        std::fs::write(&ballast, vec![1u8; 1 << 20])?;
        let path = disk.path().join("t.db");
        let saver = SqliteSaver::open(&path)?;
        let g = graph_of(steps)?.with_checkpointer(Arc::new(saver.clone()));
        let err = g
            .invoke(Tally::update(), &config_of(durability, steps))
            .await
            .err()
            .ok_or("2,000 steps of 2 kB fit on a 2 MB disk")?;
        assert!(
            matches!(err, RunError::Checkpoint(CheckpointError::Storage(_))),
            "{durability:?}: {err}"
        );
        assert!(err.to_string().contains("full"), "{err}");
        let before = stored(&saver).await?;
        // The data, not the log's room, filled the disk: most of its 2 MB hold steps (a step
        // takes about 4.5 kB of file: its 2 kB item, its record, index entries).
        assert!(
            before.len() > 300,
            "{durability:?}: only {} checkpoints fit",
            before.len()
        );
        assert_linear(&saver, "t").await?;
        drop(g);
        if let Err(e) = saver.close() {
            assert!(e.to_string().contains("full"), "{durability:?}: {e}");
        }

        // What held keeps holding: a copy on a roomy disk resumes to the exact state.
        let roomy = tempfile::tempdir()?;
        let copy = copy_with_wal(&path, roomy.path())?;
        integrity_ok(&copy)?;
        let copied = SqliteSaver::open(&copy)?;
        let g = graph_of(steps)?.with_checkpointer(Arc::new(copied.clone()));
        let out = g
            .invoke(Input::Continue, &config_of(durability, steps))
            .await?;
        assert_eq!(*out.state, want, "{durability:?}");
        assert_linear(&copied, "t").await?;
        let after = stored(&copied).await?;
        assert!(
            before.iter().all(|id| after.contains(id)),
            "a commit is lost"
        );
        drop(g);
        copied.close()?;

        // Freed in place, the thread goes on where it is.
        std::fs::remove_file(&ballast)?;
        let saver = SqliteSaver::open(&path)?;
        let g = graph_of(steps)?.with_checkpointer(Arc::new(saver.clone()));
        let _ = g
            .invoke(Input::Continue, &config_of(durability, steps))
            .await;
        let further = stored(&saver).await?;
        assert!(
            further.len() > before.len() + 100,
            "{durability:?}: freeing 1 MB took the thread from {} to {} checkpoints",
            before.len(),
            further.len()
        );
        assert_linear(&saver, "t").await?;
        drop(g);
        let _ = saver.close();
    }
    Ok(())
}
