//! Tool-message media as chat-completions content parts: an image as `image_url` (a `data:`
//! URL), audio as `input_audio` (WAV or MP3), a file as `file` (PDF only, what the format
//! accepts); anything else, or a kind the configuration leaves off, is left out with the reason.

use serde_json::{json, Value};

use crate::media::{Attachment, MediaKind, MediaKinds};

/// The content part for `attachment` when `media` are sent, or why it is left out.
pub(super) fn part(attachment: &Attachment, media: MediaKinds) -> Result<Value, String> {
    let kind = attachment.kind();
    if !media.contains(kind) {
        return Err(format!("this model does not take {} input", kind.noun()));
    }
    match kind {
        MediaKind::Image => Ok(json!({
            "type": "image_url",
            "image_url": {"url": attachment.data_url()},
        })),
        MediaKind::Audio => match audio_format(&attachment.mime_type) {
            Some(format) => Ok(json!({
                "type": "input_audio",
                "input_audio": {"data": attachment.data, "format": format},
            })),
            None => Err(format!(
                "this model takes audio as WAV or MP3 only, not {}",
                attachment.mime_type
            )),
        },
        MediaKind::File if essence(&attachment.mime_type) == "application/pdf" => Ok(json!({
            "type": "file",
            "file": {
                "filename": attachment.name.as_deref().unwrap_or("attachment.pdf"),
                "file_data": attachment.data_url(),
            },
        })),
        MediaKind::File => Err(format!(
            "this model takes files as PDF only, not {}",
            attachment.mime_type
        )),
    }
}

/// The media type without parameters, lower-cased.
fn essence(mime_type: &str) -> String {
    mime_type
        .split(';')
        .next()
        .unwrap_or_default()
        .trim()
        .to_ascii_lowercase()
}

/// The `input_audio` format of an audio media type (`wav` or `mp3`), if it has one.
fn audio_format(mime_type: &str) -> Option<&'static str> {
    match essence(mime_type).as_str() {
        "audio/wav" | "audio/x-wav" | "audio/wave" | "audio/vnd.wave" => Some("wav"),
        "audio/mpeg" | "audio/mp3" | "audio/mpeg3" | "audio/x-mpeg-3" => Some("mp3"),
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn each_kind_becomes_its_part_when_sent() {
        let all = MediaKinds::ALL;
        assert_eq!(
            part(&Attachment::new("image/png", "AAAA"), all).unwrap(),
            json!({"type": "image_url", "image_url": {"url": "data:image/png;base64,AAAA"}})
        );
        assert_eq!(
            part(&Attachment::new("audio/x-wav", "AAAA"), all).unwrap(),
            json!({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "wav"}})
        );
        assert_eq!(
            part(&Attachment::new("audio/mpeg", "AAAA"), all).unwrap(),
            json!({"type": "input_audio", "input_audio": {"data": "AAAA", "format": "mp3"}})
        );
        assert_eq!(
            part(
                &Attachment::new("application/pdf", "AAAA").named("r.pdf"),
                all
            )
            .unwrap(),
            json!({"type": "file", "file": {
                "filename": "r.pdf", "file_data": "data:application/pdf;base64,AAAA"
            }})
        );
    }

    #[test]
    fn a_kind_left_off_or_a_format_the_wire_lacks_is_refused_with_the_reason() {
        let clip = Attachment::new("audio/wav", "AAAA");
        let images = MediaKinds::NONE.with(MediaKind::Image);
        assert_eq!(
            part(&clip, images).unwrap_err(),
            "this model does not take audio input"
        );
        assert_eq!(
            part(&Attachment::new("audio/ogg", "AAAA"), MediaKinds::ALL).unwrap_err(),
            "this model takes audio as WAV or MP3 only, not audio/ogg"
        );
        assert_eq!(
            part(
                &Attachment::new("application/gzip", "AAAA"),
                MediaKinds::ALL
            )
            .unwrap_err(),
            "this model takes files as PDF only, not application/gzip"
        );
    }
}
