//! Content blocks: a message's text and media as LangChain's list of blocks, written in
//! langchain-core 1.x's standard form and read in that form, the 0.3 form
//! (`source_type`) and OpenAI's (`image_url`, `input_audio`, `file`).

use serde::ser::{Serialize, SerializeMap, SerializeSeq, Serializer};
use serde_json::{Map, Value};

use super::read::{describe, FormError};
use crate::media::{Attachment, MediaKind};

/// A message's content to write: its text alone as a string, or (with media) a text block
/// (none for empty text) and then one block per attachment.
pub(super) struct ContentOut<'a> {
    /// The text.
    pub(super) text: &'a str,
    /// The media after it.
    pub(super) attachments: &'a [Attachment],
}

impl Serialize for ContentOut<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        if self.attachments.is_empty() {
            return s.serialize_str(self.text);
        }
        let text = !self.text.is_empty();
        let mut seq = s.serialize_seq(Some(self.attachments.len() + usize::from(text)))?;
        if text {
            seq.serialize_element(&TextBlock(self.text))?;
        }
        for attachment in self.attachments {
            seq.serialize_element(&MediaBlock(attachment))?;
        }
        seq.end()
    }
}

/// `{"type": "text", "text": ...}`.
struct TextBlock<'a>(&'a str);

impl Serialize for TextBlock<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let mut map = s.serialize_map(Some(2))?;
        map.serialize_entry("type", "text")?;
        map.serialize_entry("text", self.0)?;
        map.end()
    }
}

/// `{"type": "image"|"audio"|"file", "base64", "mime_type", "extras": {"filename"}?}`.
struct MediaBlock<'a>(&'a Attachment);

impl Serialize for MediaBlock<'_> {
    fn serialize<S: Serializer>(&self, s: S) -> Result<S::Ok, S::Error> {
        let a = self.0;
        let mut map = s.serialize_map(None)?;
        map.serialize_entry("type", block_type(a.kind()))?;
        map.serialize_entry("base64", &a.data)?;
        map.serialize_entry("mime_type", &a.mime_type)?;
        if let Some(name) = &a.name {
            map.serialize_entry("extras", &serde_json::json!({ "filename": name }))?;
        }
        map.end()
    }
}

/// The standard block type of a kind of media.
fn block_type(kind: MediaKind) -> &'static str {
    match kind {
        MediaKind::Image => "image",
        MediaKind::Audio => "audio",
        MediaKind::File => "file",
    }
}

/// What a kind of message does with blocks other than text.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub(super) enum Media {
    /// Media blocks become attachments; a block of an unknown type is an error.
    Keep,
    /// Text only: any other block is an error (a system message).
    Refuse,
    /// Only the text is read; other blocks (media, reasoning, tool use...) are skipped (an AI
    /// message: its tool calls are read from `tool_calls`).
    Skip,
}

/// Text and media read from a message's `content`.
#[derive(Debug, Default)]
pub(super) struct Content {
    /// The text blocks joined (LangChain's `message.text`).
    pub(super) text: String,
    /// The media blocks, in order.
    pub(super) attachments: Vec<Attachment>,
}

/// Read `content` (absent or null: empty; a string; a list of blocks) of a `kind` message.
pub(super) fn read_content(
    content: Option<Value>,
    kind: &str,
    media: Media,
) -> Result<Content, FormError> {
    let blocks = match content {
        None | Some(Value::Null) => return Ok(Content::default()),
        Some(Value::String(text)) => {
            return Ok(Content {
                text,
                attachments: Vec::new(),
            })
        }
        Some(Value::Array(blocks)) => blocks,
        Some(other) => {
            return Err(FormError(format!(
                "`content` must be a string or a list of content blocks, not {}",
                describe(&other)
            )))
        }
    };
    let mut out = Content::default();
    for (i, block) in blocks.into_iter().enumerate() {
        let block = match block {
            Value::String(text) => {
                out.text.push_str(&text);
                continue;
            }
            Value::Object(block) => block,
            other => {
                return Err(FormError(format!(
                    "content block {i} must be an object or a string, not {}",
                    describe(&other)
                )))
            }
        };
        read_block(block, &mut out, kind, media)
            .map_err(|e| FormError(format!("content block {i}: {}", e.0)))?;
    }
    Ok(out)
}

/// Read one block into `out`.
fn read_block(
    mut block: Map<String, Value>,
    out: &mut Content,
    kind: &str,
    media: Media,
) -> Result<(), FormError> {
    let ty = match block.remove("type") {
        Some(Value::String(ty)) => ty,
        Some(other) => {
            return Err(FormError(format!(
                "`type` must be a string, not {}",
                describe(&other)
            )))
        }
        None => return Err(FormError("the block has no `type`".into())),
    };
    if ty == "text" {
        return match block.remove("text") {
            Some(Value::String(text)) => {
                out.text.push_str(&text);
                Ok(())
            }
            Some(other) => Err(FormError(format!(
                "a text block's `text` must be a string, not {}",
                describe(&other)
            ))),
            None => Err(FormError("a text block has no `text`".into())),
        };
    }
    match media {
        Media::Skip => return Ok(()),
        Media::Refuse => {
            return Err(FormError(format!(
                "a {kind} message takes text blocks only, not a `{ty}` block"
            )))
        }
        Media::Keep => {}
    }
    let attachment = match ty.as_str() {
        "image" | "audio" | "file" => standard_media(block, &ty)?,
        "image_url" => openai_image(block)?,
        "input_audio" => openai_audio(block)?,
        _ => {
            return Err(FormError(format!(
                "a {kind} message takes blocks of type text, image, audio, file, image_url or \
                 input_audio, not `{ty}`"
            )))
        }
    };
    out.attachments.push(attachment);
    Ok(())
}

/// An `image`, `audio` or `file` block: 1.x (`base64`), 0.3 (`source_type: base64`, `data`)
/// or OpenAI's file (`file: {file_data, filename}`).
fn standard_media(mut block: Map<String, Value>, ty: &str) -> Result<Attachment, FormError> {
    if let Some(Value::Object(file)) = block.remove("file") {
        return openai_file(file);
    }
    let name = file_name(&block);
    let source = text_field(&mut block, "source_type")?;
    let data = match source.as_deref() {
        Some("base64") => text_field(&mut block, "data")?,
        Some("url") => return Err(by_url(ty, &text_field(&mut block, "url")?)),
        Some(other) => {
            return Err(FormError(format!(
                "a `{ty}` block with `source_type` {other:?} cannot be read: stategraph keeps \
                 media as base64 data"
            )))
        }
        None => match text_field(&mut block, "base64")? {
            Some(data) => Some(data),
            None => {
                if let Some(url) = text_field(&mut block, "url")? {
                    return data_url(&url, ty).map(|a| with_name(a, name));
                }
                if block.contains_key("file_id") {
                    return Err(FormError(format!(
                        "a `{ty}` block given by `file_id` cannot be read: stategraph keeps \
                         media as base64 data"
                    )));
                }
                None
            }
        },
    };
    let Some(data) = data else {
        return Err(FormError(format!(
            "a `{ty}` block has no `base64` data (nor `data` with `source_type: base64`)"
        )));
    };
    let Some(mime_type) = text_field(&mut block, "mime_type")? else {
        return Err(FormError(format!("a `{ty}` block has no `mime_type`")));
    };
    Ok(with_name(Attachment::new(mime_type, data), name))
}

/// `attachment` with the file name `name`, if there is one.
fn with_name(mut attachment: Attachment, name: Option<String>) -> Attachment {
    attachment.name = name;
    attachment
}

/// The file name a block gives: `extras.filename` (1.x), `filename`, or `metadata.filename`
/// (0.3) or `metadata.name`.
fn file_name(block: &Map<String, Value>) -> Option<String> {
    let nested = |outer: &str, key: &str| block.get(outer).and_then(|o| o.get(key));
    nested("extras", "filename")
        .or_else(|| block.get("filename"))
        .or_else(|| nested("metadata", "filename"))
        .or_else(|| nested("metadata", "name"))
        .and_then(Value::as_str)
        .map(str::to_owned)
}

/// OpenAI's `{"type": "image_url", "image_url": {"url": "data:..."} | "data:..."}`.
fn openai_image(mut block: Map<String, Value>) -> Result<Attachment, FormError> {
    let url = match block.remove("image_url") {
        Some(Value::String(url)) => url,
        Some(Value::Object(mut inner)) => text_field(&mut inner, "url")?
            .ok_or_else(|| FormError("an `image_url` block has no `image_url.url`".into()))?,
        _ => return Err(FormError("an `image_url` block has no `image_url`".into())),
    };
    data_url(&url, "image_url")
}

/// OpenAI's `{"type": "input_audio", "input_audio": {"data", "format": "wav"|"mp3"}}`.
fn openai_audio(mut block: Map<String, Value>) -> Result<Attachment, FormError> {
    let Some(Value::Object(mut inner)) = block.remove("input_audio") else {
        return Err(FormError(
            "an `input_audio` block has no `input_audio`".into(),
        ));
    };
    let data = text_field(&mut inner, "data")?
        .ok_or_else(|| FormError("an `input_audio` block has no `input_audio.data`".into()))?;
    let format = text_field(&mut inner, "format")?.unwrap_or_else(|| "wav".into());
    Ok(Attachment::new(format!("audio/{format}"), data))
}

/// OpenAI's file part `{"file_data": "data:...", "filename"}`.
fn openai_file(mut file: Map<String, Value>) -> Result<Attachment, FormError> {
    let name = text_field(&mut file, "filename")?;
    match text_field(&mut file, "file_data")? {
        Some(url) => data_url(&url, "file").map(|a| with_name(a, name)),
        None => Err(FormError(
            "a `file` block's `file` has no `file_data` (a `file_id` cannot be read: \
             stategraph keeps media as base64 data)"
                .into(),
        )),
    }
}

/// The attachment a `data:<mime>;base64,<data>` URL holds; any other URL is an error.
fn data_url(url: &str, ty: &str) -> Result<Attachment, FormError> {
    let parsed = url.strip_prefix("data:").and_then(|rest| {
        let (head, data) = rest.split_once(',')?;
        let mime = head.strip_suffix(";base64")?;
        Some(Attachment::new(mime, data))
    });
    parsed.ok_or_else(|| by_url(ty, &Some(url.to_owned())))
}

/// The error for media given by URL.
fn by_url(ty: &str, url: &Option<String>) -> FormError {
    let url = url.as_deref().unwrap_or_default();
    let shown: String = url.chars().take(80).collect();
    let more = if shown.len() < url.len() { "..." } else { "" };
    FormError(format!(
        "a `{ty}` block given by URL ({shown}{more}) cannot be read: stategraph keeps media as \
         base64 data; send the bytes as `base64` with a `mime_type`"
    ))
}

/// The string `key` of `map` (absent or null: `None`).
fn text_field(map: &mut Map<String, Value>, key: &str) -> Result<Option<String>, FormError> {
    match map.remove(key) {
        None | Some(Value::Null) => Ok(None),
        Some(Value::String(s)) => Ok(Some(s)),
        Some(other) => Err(FormError(format!(
            "`{key}` must be a string, not {}",
            describe(&other)
        ))),
    }
}
