//! Sandbox behaviour: the local provider's directories, the virtual-path rules, and the file
//! operations over a real file system in a temporary directory.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::atomic::{AtomicUsize, Ordering};

use proptest::prelude::*;
use stategraph_nodes::sandbox::{
    EntryType, FsError, IdRule, Intent, LineWindow, LocalSandboxProvider, MountTable, PathRule,
    SandboxError, SandboxFs, SandboxId, SandboxProvider, ThreadDirs,
};

type TestResult = Result<(), Box<dyn std::error::Error>>;

/// A thread's sandbox in a temporary directory, a second thread beside it, an enabled skill,
/// a disabled one, and an `outside` directory that nothing may touch.
struct World {
    tmp: tempfile::TempDir,
    dirs: ThreadDirs,
    fs: SandboxFs,
}

impl World {
    async fn new() -> Result<Self, Box<dyn std::error::Error>> {
        let tmp = tempfile::tempdir()?;
        let provider = LocalSandboxProvider::new(tmp.path().join("root"));
        let id = provider.acquire("ana", "t1").await?;
        provider.acquire("ben", "t2").await?;
        let sandbox = provider.get(&id).await?.ok_or("no sandbox")?;
        for dir in ["outside", "skills/pdf", "skills/secret"] {
            std::fs::create_dir_all(tmp.path().join(dir))?;
        }
        std::fs::write(tmp.path().join("skills/pdf/SKILL.md"), "# pdf\n")?;
        std::fs::write(tmp.path().join("skills/secret/SKILL.md"), "# secret\n")?;
        std::fs::write(tmp.path().join("outside/secret.txt"), "host secret\n")?;
        let skills = BTreeMap::from([(
            "/mnt/skills/public/pdf".to_owned(),
            tmp.path().join("skills/pdf"),
        )]);
        let fs = SandboxFs::new(MountTable::new(&sandbox.dirs, &skills)?);
        Ok(World {
            dirs: sandbox.dirs,
            tmp,
            fs,
        })
    }

    fn host(&self) -> String {
        self.tmp.path().display().to_string()
    }

    /// Every file below `dir`, with its contents (symlinks as their targets).
    fn tree(dir: &Path) -> Vec<(PathBuf, String)> {
        let mut out = Vec::new();
        let Ok(entries) = std::fs::read_dir(dir) else {
            return out;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            let Ok(ty) = entry.file_type() else { continue };
            if ty.is_symlink() {
                let target = std::fs::read_link(&path).unwrap_or_default();
                out.push((path, format!("-> {}", target.display())));
            } else if ty.is_dir() {
                out.extend(Self::tree(&path));
            } else {
                out.push((
                    path.clone(),
                    std::fs::read_to_string(&path).unwrap_or_default(),
                ));
            }
        }
        out.sort();
        out
    }

    /// Everything outside thread t1's user data: the other thread, the skills, `outside`.
    fn untouchable(&self) -> Vec<(PathBuf, String)> {
        let mut out = Self::tree(&self.tmp.path().join("outside"));
        out.extend(Self::tree(&self.tmp.path().join("skills")));
        out.extend(Self::tree(&self.tmp.path().join("root/threads/t2")));
        out
    }
}

fn rule_of(result: Result<impl std::fmt::Debug, FsError>) -> Option<PathRule> {
    match result {
        Err(FsError::Path(e)) => Some(e.rule),
        _ => None,
    }
}

// ---- provider ----

#[tokio::test]
async fn acquire_is_idempotent_per_user_and_thread_and_makes_three_dirs() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let provider = LocalSandboxProvider::new(tmp.path());
    let a = provider.acquire("ana", "t1").await?;
    let b = provider.acquire("ana", "t1").await?;
    assert_eq!(a, b);
    assert_ne!(a, provider.acquire("ben", "t1").await?);
    let user_data = tmp.path().join("threads/t1/user-data");
    for name in ["workspace", "uploads", "outputs"] {
        assert!(user_data.join(name).is_dir(), "{name}");
    }
    let sandbox = provider.get(&a).await?.ok_or("missing")?;
    assert_eq!(sandbox.dirs.outputs, user_data.join("outputs"));
    assert_eq!(sandbox.thread, "t1");
    Ok(())
}

#[tokio::test]
async fn release_is_not_destruction_and_another_process_finds_the_files() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let first = LocalSandboxProvider::new(tmp.path());
    let id = first.acquire("ana", "t1").await?;
    let dirs = first.get(&id).await?.ok_or("missing")?.dirs;
    std::fs::write(dirs.workspace.join("notes.md"), "kept")?;
    first.release(&id).await?;
    assert!(first.get(&id).await?.is_some());
    // A second provider over the same root, as another process would have.
    let second = LocalSandboxProvider::new(tmp.path());
    let found = second
        .get(&id)
        .await?
        .ok_or("not found by the second provider")?;
    assert_eq!(
        std::fs::read_to_string(found.dirs.workspace.join("notes.md"))?,
        "kept"
    );
    assert_eq!(second.acquire("ana", "t1").await?, id);
    assert_eq!(
        std::fs::read_to_string(dirs.workspace.join("notes.md"))?,
        "kept"
    );
    Ok(())
}

#[tokio::test]
async fn destroy_removes_the_thread_and_get_then_finds_nothing() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let provider = LocalSandboxProvider::new(tmp.path());
    let id = provider.acquire("ana", "t1").await?;
    let other = provider.acquire("ana", "t2").await?;
    provider.destroy(&id).await?;
    assert!(provider.get(&id).await?.is_none());
    assert!(!tmp.path().join("threads/t1").exists());
    assert!(provider.get(&other).await?.is_some());
    provider.destroy(&id).await?;
    Ok(())
}

#[tokio::test]
async fn ids_that_could_escape_the_root_are_typed_errors_naming_the_id() -> TestResult {
    let tmp = tempfile::tempdir()?;
    let provider = LocalSandboxProvider::new(tmp.path().join("root"));
    let long = "t".repeat(300);
    let cases = [
        ("ana", "../t", IdRule::Character('/')),
        ("ana", "..", IdRule::DotSegment),
        ("ana", "a\\b", IdRule::Character('\\')),
        ("ana", "a\0b", IdRule::Character('\0')),
        ("ana", "", IdRule::Empty),
        ("ana", long.as_str(), IdRule::TooLong),
        ("../ana", "t", IdRule::Character('/')),
        ("", "t", IdRule::Empty),
    ];
    for (user, thread, rule) in cases {
        match provider.acquire(user, thread).await {
            Err(SandboxError::Id(e)) => {
                assert_eq!(e.rule, rule, "{user:?} {thread:?}");
                assert!(e.id == user || e.id == thread);
            }
            other => return Err(format!("{user:?} {thread:?}: {other:?}").into()),
        }
    }
    assert!(!tmp.path().join("root").exists(), "nothing was created");
    let foreign = provider.get(&SandboxId::new("local:ana:../../etc")).await;
    assert!(matches!(foreign, Err(SandboxError::Id(_))));
    Ok(())
}

// ---- virtual paths and file operations ----

#[tokio::test]
async fn write_read_replace_list_and_search_speak_virtual_paths() -> TestResult {
    let w = World::new().await?;
    w.fs.write("/mnt/user-data/outputs/report/r.md", "one\ntwo\nthree\n")?;
    assert_eq!(
        std::fs::read_to_string(w.dirs.outputs.join("report/r.md"))?,
        "one\ntwo\nthree\n"
    );
    let window = LineWindow {
        offset: 1,
        limit: Some(1),
    };
    assert_eq!(
        w.fs.read("/mnt/user-data/outputs/report/r.md", window)?,
        "two\n"
    );
    w.fs.str_replace("/mnt/user-data/outputs/report/r.md", "two", "2")?;
    assert_eq!(
        w.fs.read("/mnt/user-data/outputs/report/r.md", LineWindow::default())?,
        "one\n2\nthree\n"
    );
    let listed = w.fs.ls("/mnt/user-data/outputs")?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].path, "/mnt/user-data/outputs/report");
    assert_eq!(listed[0].entry_type, EntryType::Dir);
    w.fs.write("/mnt/user-data/workspace/notes.md", "three\n")?;
    let across = w.fs.glob("/mnt/user-data", "**/*.md")?;
    assert_eq!(
        across.items,
        [
            "/mnt/user-data/outputs/report/r.md",
            "/mnt/user-data/workspace/notes.md"
        ]
    );
    assert_eq!(
        w.fs.glob("/mnt", "skills/**/*.md")?.items,
        ["/mnt/skills/public/pdf/SKILL.md"]
    );
    let everywhere = w.fs.grep("/mnt/user-data", "^three$")?;
    assert_eq!(everywhere.items.len(), 2);
    std::fs::remove_file(w.dirs.workspace.join("notes.md"))?;
    let globbed = w.fs.glob("/mnt/user-data/outputs", "**/*.md")?;
    assert_eq!(globbed.items, ["/mnt/user-data/outputs/report/r.md"]);
    let hits = w.fs.grep("/mnt/user-data/outputs", "^t[a-z]+$")?;
    assert_eq!(hits.items.len(), 1);
    assert_eq!(
        (hits.items[0].line, hits.items[0].text.as_str()),
        (3, "three")
    );
    assert_eq!(hits.items[0].path, "/mnt/user-data/outputs/report/r.md");
    let skill =
        w.fs.read("/mnt/skills/public/pdf/SKILL.md", LineWindow::default())?;
    assert_eq!(skill, "# pdf\n");
    Ok(())
}

#[tokio::test]
async fn str_replace_needs_exactly_one_match() -> TestResult {
    let w = World::new().await?;
    let path = "/mnt/user-data/workspace/a.txt";
    w.fs.write(path, "x y x")?;
    assert!(matches!(
        w.fs.str_replace(path, "z", "w"),
        Err(FsError::NoMatch { path: p }) if p == path
    ));
    assert!(matches!(
        w.fs.str_replace(path, "x", "w"),
        Err(FsError::SeveralMatches { count: 2, .. })
    ));
    assert_eq!(w.fs.read(path, LineWindow::default())?, "x y x");
    Ok(())
}

#[tokio::test]
async fn the_skills_projection_is_read_only_and_disabled_skills_are_refused() -> TestResult {
    let w = World::new().await?;
    let before = w.untouchable();
    let write = w.fs.write("/mnt/skills/public/pdf/SKILL.md", "changed");
    assert_eq!(rule_of(write), Some(PathRule::ReadOnly));
    let replace =
        w.fs.str_replace("/mnt/skills/public/pdf/SKILL.md", "pdf", "x");
    assert_eq!(rule_of(replace), Some(PathRule::ReadOnly));
    let disabled =
        w.fs.read("/mnt/skills/public/secret/SKILL.md", LineWindow::default());
    assert_eq!(rule_of(disabled), Some(PathRule::SkillNotEnabled));
    assert!(matches!(
        w.fs.read("/mnt/skills/public", LineWindow::default()),
        Err(FsError::IsADirectory { path }) if path == "/mnt/skills/public"
    ));
    let listed = w.fs.ls("/mnt/skills/public")?;
    assert_eq!(listed.len(), 1);
    assert_eq!(listed[0].path, "/mnt/skills/public/pdf");
    assert_eq!(w.untouchable(), before);
    Ok(())
}

#[tokio::test]
async fn lexical_rules_refuse_and_name_the_path() -> TestResult {
    let w = World::new().await?;
    let host_path = format!("{}/outside/secret.txt", w.host());
    let cases = [
        ("/mnt/user-data/workspace/../../t2", PathRule::DotDot),
        ("/mnt/user-data/workspace\\..\\..\\t2", PathRule::DotDot),
        (host_path.as_str(), PathRule::OutsideRoots),
        ("/etc/passwd", PathRule::OutsideRoots),
        ("/mnt/user-dataX/outputs/a", PathRule::OutsideRoots),
        ("workspace/a", PathRule::OutsideRoots),
        ("/mnt/user-data/outputs/a\0b", PathRule::Nul),
    ];
    for (path, rule) in cases {
        match w.fs.read(path, LineWindow::default()) {
            Err(FsError::Path(e)) => {
                assert_eq!(e.rule, rule, "{path:?}");
                assert_eq!(e.path, path);
            }
            other => return Err(format!("{path:?}: {other:?}").into()),
        }
    }
    Ok(())
}

#[tokio::test]
async fn a_symlink_leaving_the_roots_is_refused_at_the_operation() -> TestResult {
    let w = World::new().await?;
    let before = w.untouchable();
    std::os::unix::fs::symlink(w.tmp.path().join("outside"), w.dirs.workspace.join("abs"))?;
    std::os::unix::fs::symlink("../../../../../outside", w.dirs.workspace.join("rel"))?;
    std::os::unix::fs::symlink("rel", w.dirs.workspace.join("chain"))?;
    for link in ["abs", "rel", "chain"] {
        let read = w.fs.read(
            &format!("/mnt/user-data/workspace/{link}/secret.txt"),
            LineWindow::default(),
        );
        assert_eq!(rule_of(read), Some(PathRule::SymlinkEscape), "{link}");
        let write =
            w.fs.write(&format!("/mnt/user-data/workspace/{link}/new.txt"), "x");
        assert_eq!(rule_of(write), Some(PathRule::SymlinkEscape), "{link}");
        let check =
            w.fs.check(&format!("/mnt/user-data/workspace/{link}/x"), Intent::Write);
        assert_eq!(rule_of(check), Some(PathRule::SymlinkEscape), "{link}");
    }
    // A symlink that stays inside the thread's user data is followed.
    std::os::unix::fs::symlink("../outputs", w.dirs.workspace.join("out"))?;
    w.fs.write("/mnt/user-data/workspace/out/via-link.md", "ok")?;
    assert!(w.dirs.outputs.join("via-link.md").is_file());
    assert_eq!(w.untouchable(), before);
    Ok(())
}

#[tokio::test]
async fn a_directory_swapped_for_a_symlink_after_the_check_cannot_carry_a_write_out() -> TestResult
{
    let w = World::new().await?;
    let before = w.untouchable();
    let path = "/mnt/user-data/workspace/sub/report.md";
    std::fs::create_dir(w.dirs.workspace.join("sub"))?;
    assert_eq!(w.fs.check(path, Intent::Write)?, path);
    // Between the check and the write, `sub` becomes a symlink to a directory outside.
    std::fs::remove_dir(w.dirs.workspace.join("sub"))?;
    std::os::unix::fs::symlink(w.tmp.path().join("outside"), w.dirs.workspace.join("sub"))?;
    assert_eq!(
        rule_of(w.fs.write(path, "escaped?")),
        Some(PathRule::SymlinkEscape)
    );
    assert_eq!(
        rule_of(w.fs.str_replace("/mnt/user-data/workspace/sub/secret.txt", "host", "x")),
        Some(PathRule::SymlinkEscape)
    );
    assert!(!w.tmp.path().join("outside/report.md").exists());
    assert_eq!(w.untouchable(), before);
    Ok(())
}

#[tokio::test]
async fn errors_and_listings_never_show_host_paths() -> TestResult {
    let w = World::new().await?;
    std::os::unix::fs::symlink(w.tmp.path().join("outside"), w.dirs.workspace.join("abs"))?;
    let host = w.host();
    let results = [
        w.fs.read(
            "/mnt/user-data/workspace/abs/secret.txt",
            LineWindow::default(),
        )
        .err(),
        w.fs.read(
            "/mnt/user-data/workspace/missing.txt",
            LineWindow::default(),
        )
        .err(),
        w.fs.read("/mnt/user-data/workspace", LineWindow::default())
            .err(),
        w.fs.grep("/mnt/user-data/workspace", "(").err(),
    ];
    for err in results {
        let text = err.ok_or("expected an error")?.to_string();
        assert!(!text.contains(&host), "{text}");
        assert!(
            text.contains("/mnt/user-data/workspace") || text.contains("pattern"),
            "{text}"
        );
    }
    for entry in w.fs.ls("/mnt/user-data/workspace")? {
        assert!(entry.path.starts_with("/mnt/user-data/workspace/"));
    }
    let host_output = format!("saved to {}", w.dirs.outputs.join("r.md").display());
    let masked = w.fs.mounts().mask_host_paths(&host_output);
    assert_eq!(masked, "saved to /mnt/user-data/outputs/r.md");
    assert_eq!(
        w.fs.mounts()
            .to_virtual(&w.dirs.uploads.join("in.csv"))
            .as_deref(),
        Some("/mnt/user-data/uploads/in.csv")
    );
    Ok(())
}

// ---- property: hostile paths ----

fn hostile_segment() -> impl Strategy<Value = String> {
    prop_oneof![
        Just("..".to_owned()),
        Just(".".to_owned()),
        Just("".to_owned()),
        Just("%2e%2e".to_owned()),
        Just("%252e%252e".to_owned()),
        Just("..%2f..".to_owned()),
        Just("..\\..".to_owned()),
        Just("\\".to_owned()),
        Just("\u{2024}\u{2024}".to_owned()),
        Just("\u{ff0f}etc".to_owned()),
        Just("\u{2215}..".to_owned()),
        Just("a\0b".to_owned()),
        Just("~".to_owned()),
        Just("abs".to_owned()),
        Just("rel".to_owned()),
        Just("chain".to_owned()),
        Just("loop".to_owned()),
        Just("t2".to_owned()),
        Just("outside".to_owned()),
        Just("secret.txt".to_owned()),
        "[a-z]{1,8}".prop_map(String::from),
        (250usize..300).prop_map(|n| "n".repeat(n)),
    ]
}

fn hostile_prefix(host: String) -> impl Strategy<Value = String> {
    prop_oneof![
        Just("/mnt/user-data/workspace/".to_owned()),
        Just("/mnt/user-data/outputs/".to_owned()),
        Just("/mnt/user-data/uploads/".to_owned()),
        Just("/mnt/user-data/".to_owned()),
        Just("/mnt/user-dataX/".to_owned()),
        Just("\\mnt\\user-data\\workspace\\".to_owned()),
        Just("//mnt//user-data//outputs//".to_owned()),
        Just("/mnt/skills/public/pdf/".to_owned()),
        Just("/mnt/skills/public/secret/".to_owned()),
        Just("/etc/".to_owned()),
        Just("".to_owned()),
        Just(format!("{host}/outside/")),
        Just(format!("{host}/root/threads/t2/user-data/workspace/")),
        Just(format!("{host}/root/threads/t1/user-data/workspace/")),
    ]
}

/// Runs one hostile path through every operation; an accepted write must land inside t1's
/// user data, and nothing outside may change.
fn try_hostile(
    w: &World,
    path: &str,
    before: &[(PathBuf, String)],
    accepted: &AtomicUsize,
) -> Result<(), TestCaseError> {
    let host = w.host();
    let write = w.fs.write(path, "marker");
    let read = w.fs.read(path, LineWindow::default());
    let list = w.fs.ls(path);
    let replace = w.fs.str_replace(path, "marker", "again");
    for err in [
        write.as_ref().err(),
        read.as_ref().err(),
        list.as_ref().err(),
        replace.as_ref().err(),
    ]
    .into_iter()
    .flatten()
    {
        let text = err.to_string();
        if !path.contains(&host) {
            prop_assert!(!text.contains(&host), "{text}");
        }
    }
    if write.is_ok() {
        accepted.fetch_add(1, Ordering::Relaxed);
        let target =
            w.fs.check(path, Intent::Write)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(target.starts_with("/mnt/user-data/"), "{target}");
        let located =
            w.fs.mounts()
                .mounted(path, Intent::Write)
                .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let landed = located
            .mount
            .host_dir
            .join(&located.relative)
            .canonicalize()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        let user_data = w
            .dirs
            .user_data
            .canonicalize()
            .map_err(|e| TestCaseError::fail(e.to_string()))?;
        prop_assert!(
            landed.starts_with(&user_data),
            "{path:?} landed at {landed:?}"
        );
    }
    prop_assert_eq!(
        &w.untouchable(),
        before,
        "{:?} touched something outside",
        path
    );
    Ok(())
}

#[test]
fn hostile_paths_are_refused_or_land_inside_the_thread() -> TestResult {
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()?;
    let w = runtime.block_on(World::new())?;
    let ws = &w.dirs.workspace;
    std::os::unix::fs::symlink(w.tmp.path().join("outside"), ws.join("abs"))?;
    std::os::unix::fs::symlink("../../../../../outside", ws.join("rel"))?;
    std::os::unix::fs::symlink("rel", ws.join("chain"))?;
    std::os::unix::fs::symlink("loop", ws.join("loop"))?;
    std::os::unix::fs::symlink("../../../t2/user-data", w.dirs.outputs.join("t2"))?;
    let before = w.untouchable();
    let accepted = AtomicUsize::new(0);
    let strategy = (
        hostile_prefix(w.host()),
        proptest::collection::vec(hostile_segment(), 0..6),
        proptest::bool::ANY,
    )
        .prop_map(|(prefix, segments, trailing)| {
            let mut path = prefix + &segments.join("/");
            if trailing {
                path.push('/');
            }
            path
        });
    let mut runner = proptest::test_runner::TestRunner::new(ProptestConfig {
        cases: 1500,
        failure_persistence: None,
        ..ProptestConfig::default()
    });
    runner
        .run(&strategy, |path| try_hostile(&w, &path, &before, &accepted))
        .map_err(|e| e.to_string())?;
    // Not vacuous: some hostile paths were accepted (and landed inside), most were refused.
    let accepted = accepted.load(Ordering::Relaxed);
    assert!(
        accepted > 0 && accepted < 1500,
        "{accepted} of 1500 accepted"
    );
    Ok(())
}

#[test]
fn sandbox_types_are_send_and_sync_and_the_provider_is_object_safe() {
    fn send_sync<T: Send + Sync>() {}
    send_sync::<LocalSandboxProvider>();
    send_sync::<std::sync::Arc<dyn SandboxProvider>>();
    send_sync::<SandboxFs>();
    send_sync::<MountTable>();
    send_sync::<FsError>();
    send_sync::<SandboxError>();
    let provider: std::sync::Arc<dyn SandboxProvider> =
        std::sync::Arc::new(LocalSandboxProvider::new("/nonexistent"));
    drop(provider);
}

#[tokio::test]
async fn reading_a_fifo_is_refused_instead_of_blocking() -> TestResult {
    let w = World::new().await?;
    let fifo = w.dirs.workspace.join("pipe");
    let made = std::process::Command::new("mkfifo").arg(&fifo).status()?;
    assert!(made.success());
    let read =
        w.fs.read("/mnt/user-data/workspace/pipe", LineWindow::default());
    assert!(
        matches!(&read, Err(FsError::NotReadable { path, .. }) if path == "/mnt/user-data/workspace/pipe"),
        "{read:?}"
    );
    let grep = w.fs.grep("/mnt/user-data/workspace", "x")?;
    assert!(grep.items.is_empty());
    Ok(())
}
