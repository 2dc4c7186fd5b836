//! A real headless Chromium over WebDriver (chromedriver), for the browser tests of the
//! studio and of the Agent Server's chat page (included by path from both crates' tests):
//! start a browser, run a scenario with a screenshot on failure, wait for text, save the
//! guides' screenshots. Without Debian's `chromium` and `chromium-driver` a test says how to
//! install them and passes; under `CI=true` it fails.
#![allow(dead_code)]

use std::future::Future;
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::Duration;

use fantoccini::{Client, Locator};

pub type R = Result<(), Box<dyn std::error::Error + Send + Sync>>;
pub type E = Box<dyn std::error::Error + Send + Sync>;

/// How long a page may take to show what a step waits for.
pub const PATIENCE: Duration = Duration::from_secs(20);

/// A program found through `var` or on the PATH.
pub fn program(var: &str, name: &str) -> Option<PathBuf> {
    if let Some(p) = std::env::var_os(var) {
        return Some(PathBuf::from(p));
    }
    std::env::var_os("PATH").and_then(|paths| {
        std::env::split_paths(&paths)
            .map(|d| d.join(name))
            .find(|p| p.is_file())
    })
}

/// chromedriver, and a Chromium session on it.
pub struct Browser {
    pub driver: Child,
    pub client: Client,
    _profile: tempfile::TempDir,
}

/// A browser, or `None` (after saying how to install one) when there is none outside CI.
pub async fn browser() -> Result<Option<Browser>, E> {
    let driver = program("STATEGRAPH_CHROMEDRIVER", "chromedriver");
    let chromium = program("STATEGRAPH_CHROMIUM", "chromium");
    let (Some(driver), Some(chromium)) = (driver, chromium) else {
        let how = "the browser tests need Debian's chromium and chromium-driver: \
                   run `sudo .ci/browser.sh` (or apt-get install chromium chromium-driver)";
        if std::env::var("CI").is_ok_and(|v| v == "true") {
            return Err(how.into());
        }
        eprintln!("skipped: {how}");
        return Ok(None);
    };
    let port = std::net::TcpListener::bind("127.0.0.1:0")?
        .local_addr()?
        .port();
    let mut child = Command::new(&driver)
        .arg(format!("--port={port}"))
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .spawn()?;
    let mut up = false;
    for _ in 0..200 {
        if tokio::net::TcpStream::connect(("127.0.0.1", port))
            .await
            .is_ok()
        {
            up = true;
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    if !up {
        let _ = child.kill();
        let _ = child.wait();
        return Err(format!("chromedriver did not listen on port {port}").into());
    }
    let profile = tempfile::tempdir()?;
    let args = vec![
        "--headless".to_owned(),
        "--no-sandbox".to_owned(),
        "--disable-gpu".to_owned(),
        "--disable-quic".to_owned(),
        "--no-first-run".to_owned(),
        "--disable-background-networking".to_owned(),
        "--disable-component-update".to_owned(),
        "--disable-sync".to_owned(),
        "--disable-dev-shm-usage".to_owned(),
        "--window-size=1500,1000".to_owned(),
        format!("--user-data-dir={}", profile.path().display()),
    ];
    let mut caps = serde_json::Map::new();
    caps.insert(
        "goog:chromeOptions".to_owned(),
        serde_json::json!({ "binary": chromium, "args": args }),
    );
    let connector = hyper_util::client::legacy::connect::HttpConnector::new();
    let client = match Client::with_capabilities_and_connector(
        &format!("http://127.0.0.1:{port}"),
        &caps,
        connector,
    )
    .await
    {
        Ok(c) => c,
        Err(e) => {
            let _ = child.kill();
            let _ = child.wait();
            return Err(e.into());
        }
    };
    Ok(Some(Browser {
        driver: child,
        client,
        _profile: profile,
    }))
}

/// Run `scenario` in a fresh browser; on failure save a screenshot as `name`.png under
/// `target/<shots>/` of the workspace. The browser and its driver are closed either way.
pub async fn in_browser<F, Fut>(shots: &str, name: &str, scenario: F) -> R
where
    F: FnOnce(Client) -> Fut,
    Fut: Future<Output = R>,
{
    let Some(mut b) = browser().await? else {
        return Ok(());
    };
    let result = scenario(b.client.clone()).await;
    if result.is_err() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR"))
            .join("../target")
            .join(shots);
        if let Ok(png) = b.client.screenshot().await {
            let _ = std::fs::create_dir_all(&dir);
            let _ = std::fs::write(dir.join(format!("{name}.png")), png);
            eprintln!("screenshot: {}", dir.join(format!("{name}.png")).display());
        }
    }
    let _ = b.client.clone().close().await;
    let _ = b.driver.kill();
    let _ = b.driver.wait();
    result
}

/// Save a screenshot of the page into `docs/images/` when asked to refresh them.
pub async fn doc_shot(c: &Client, name: &str) -> R {
    if std::env::var_os("STATEGRAPH_UPDATE_GOLDEN").is_some() {
        let dir = Path::new(env!("CARGO_MANIFEST_DIR")).join("../docs/images");
        std::fs::create_dir_all(&dir)?;
        std::fs::write(dir.join(format!("{name}.png")), c.screenshot().await?)?;
    }
    Ok(())
}

/// Wait until the element at `css` shows text containing `want`; its text.
pub async fn text_of(c: &Client, css: &str, want: &str) -> Result<String, E> {
    let deadline = tokio::time::Instant::now() + PATIENCE;
    let mut last = String::new();
    while tokio::time::Instant::now() < deadline {
        if let Ok(e) = c.find(Locator::Css(css)).await {
            last = e.text().await.unwrap_or_default();
            if last.contains(want) {
                return Ok(last);
            }
        }
        tokio::time::sleep(Duration::from_millis(100)).await;
    }
    Err(format!("`{css}` never showed `{want}`; it showed `{last}`").into())
}

/// Wait for an element at `css`.
pub async fn wait_for(c: &Client, css: &str) -> Result<fantoccini::elements::Element, E> {
    Ok(c.wait()
        .at_most(PATIENCE)
        .for_element(Locator::Css(css))
        .await?)
}
