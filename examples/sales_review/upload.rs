//! The upload step: a PDF the user sends is converted to text into the thread's uploads, as
//! a chat harness converts uploads before the agent sees them. A PDF that cannot be read is a
//! typed error, never an empty upload.

use stategraph_nodes::sandbox::{LocalSandboxProvider, SandboxProvider};

/// Why an upload could not be placed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub(crate) enum UploadError {
    /// The bytes are not a PDF this converter can read.
    #[error("upload {file:?} is not a readable PDF: {reason}")]
    Unreadable {
        /// The upload's file name.
        file: String,
        /// What the PDF reader said.
        reason: String,
    },
    /// The PDF was read but none of its pages has text (a scan, say).
    #[error("upload {file:?} has no extractable text on any of its {pages} pages")]
    NoText {
        /// The upload's file name.
        file: String,
        /// Its page count.
        pages: usize,
    },
    /// The file name is not a plain name (a path, or hidden).
    #[error("upload name {file:?} is not a plain file name")]
    BadName {
        /// The name given.
        file: String,
    },
    /// The thread's sandbox could not be opened.
    #[error("the thread's sandbox could not be opened for upload {file:?}: {reason}")]
    Sandbox {
        /// The upload's file name.
        file: String,
        /// The sandbox's error.
        reason: String,
    },
    /// Writing into the uploads folder failed.
    #[error("upload {file:?} could not be stored: {source}")]
    Store {
        /// The upload's file name.
        file: String,
        /// The I/O error.
        #[source]
        source: std::io::Error,
    },
}

/// The text of the PDF `bytes` (named `file` in errors), page by page under `## Page N`.
///
/// # Errors
/// [`UploadError::Unreadable`] when the bytes do not parse as a PDF or a page's content cannot
/// be decoded; [`UploadError::NoText`] when no page has text.
pub(crate) fn pdf_to_text(file: &str, bytes: &[u8]) -> Result<String, UploadError> {
    let unreadable = |reason: String| UploadError::Unreadable {
        file: file.to_owned(),
        reason,
    };
    let doc = lopdf::Document::load_mem(bytes).map_err(|e| unreadable(e.to_string()))?;
    let pages: Vec<u32> = doc.get_pages().keys().copied().collect();
    if pages.is_empty() {
        return Err(unreadable("the document has no pages".into()));
    }
    let mut out = String::new();
    let mut any_text = false;
    for page in &pages {
        let text = doc
            .extract_text(&[*page])
            .map_err(|e| unreadable(format!("page {page}: {e}")))?;
        let text = text.trim();
        any_text |= !text.is_empty();
        out.push_str(&format!("## Page {page}\n\n{text}\n\n"));
    }
    if !any_text {
        return Err(UploadError::NoText {
            file: file.to_owned(),
            pages: pages.len(),
        });
    }
    Ok(out)
}

/// [`pdf_to_text`] on a blocking thread (parsing is CPU work), where a panic of the PDF
/// reader on a malformed file becomes [`UploadError::Unreadable`] too.
async fn convert(file: &str, bytes: &[u8]) -> Result<String, UploadError> {
    let (name, data) = (file.to_owned(), bytes.to_vec());
    tokio::task::spawn_blocking(move || pdf_to_text(&name, &data))
        .await
        .map_err(|e| UploadError::Unreadable {
            file: file.to_owned(),
            reason: format!("the PDF reader failed: {e}"),
        })?
}

/// Places the PDF `bytes` as `file` into the uploads of `user`'s `thread`: the original and,
/// beside it, its text as `<stem>.md`. Returns the text's virtual path.
///
/// # Errors
/// [`UploadError::BadName`] for a name that is not a plain file name; as [`pdf_to_text`]
/// (nothing is stored then); or the sandbox or the write failed.
pub(crate) async fn place_pdf(
    provider: &LocalSandboxProvider,
    user: &str,
    thread: &str,
    file: &str,
    bytes: &[u8],
) -> Result<String, UploadError> {
    let plain = !file.is_empty() && !file.starts_with('.') && !file.contains(['/', '\\']);
    if !plain {
        return Err(UploadError::BadName {
            file: file.to_owned(),
        });
    }
    let text = convert(file, bytes).await?;
    let sandbox_error = |e: &dyn std::fmt::Display| UploadError::Sandbox {
        file: file.to_owned(),
        reason: e.to_string(),
    };
    let id = provider
        .acquire(user, thread)
        .await
        .map_err(|e| sandbox_error(&e))?;
    let sandbox = provider.get(&id).await.map_err(|e| sandbox_error(&e))?;
    let result = match sandbox {
        None => Err(sandbox_error(&"the sandbox was not created")),
        Some(sandbox) => store(&sandbox.dirs.uploads, file, bytes, &text),
    };
    provider.release(&id).await.map_err(|e| sandbox_error(&e))?;
    result
}

/// Writes the original and its text into `uploads`; returns the text's virtual path.
fn store(
    uploads: &std::path::Path,
    file: &str,
    bytes: &[u8],
    text: &str,
) -> Result<String, UploadError> {
    let stem = file.strip_suffix(".pdf").unwrap_or(file);
    let write = |name: &str, data: &[u8]| {
        std::fs::write(uploads.join(name), data).map_err(|source| UploadError::Store {
            file: file.to_owned(),
            source,
        })
    };
    write(file, bytes)?;
    write(&format!("{stem}.md"), text.as_bytes())?;
    Ok(format!("/mnt/user-data/uploads/{stem}.md"))
}
