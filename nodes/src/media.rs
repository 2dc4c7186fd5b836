//! Media a tool message carries for the model besides its text: images, audio and other files.
//!
//! Each is an [`Attachment`] (media type, base64 bytes, an optional file name) whose media type
//! says its [`MediaKind`]. A model reports the kinds it takes as content parts
//! ([`ChatModel::media`](crate::ChatModel::media), a [`MediaKinds`]); a client leaves out what
//! its model does not take and tells the model so in the tool message's text
//! ([`ToolMessage::content_leaving_out`](crate::ToolMessage::content_leaving_out)).

use serde::{Deserialize, Serialize};

/// What kind of media an attachment is, by its media type.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum MediaKind {
    /// An `image/*` type.
    Image,
    /// An `audio/*` type.
    Audio,
    /// Anything else (a PDF, an archive, ...).
    File,
}

impl MediaKind {
    /// The kind of media type `mime_type` (compared without case; parameters ignored).
    ///
    /// ```
    /// use stategraph_nodes::media::MediaKind;
    ///
    /// assert_eq!(MediaKind::of("image/png"), MediaKind::Image);
    /// assert_eq!(MediaKind::of("Audio/WAV"), MediaKind::Audio);
    /// assert_eq!(MediaKind::of("application/pdf"), MediaKind::File);
    /// ```
    pub fn of(mime_type: &str) -> MediaKind {
        let top = mime_type.split('/').next().unwrap_or_default().trim();
        if top.eq_ignore_ascii_case("image") {
            MediaKind::Image
        } else if top.eq_ignore_ascii_case("audio") {
            MediaKind::Audio
        } else {
            MediaKind::File
        }
    }

    /// The kind's name in text for a model (`image`, `audio`, `file`).
    pub fn noun(self) -> &'static str {
        match self {
            MediaKind::Image => "image",
            MediaKind::Audio => "audio",
            MediaKind::File => "file",
        }
    }
}

/// A set of [`MediaKind`]s: what a model takes as content parts.
///
/// ```
/// use stategraph_nodes::media::{MediaKind, MediaKinds};
///
/// let kinds = MediaKinds::NONE.with(MediaKind::Image).with(MediaKind::Audio);
/// assert!(kinds.contains(MediaKind::Audio));
/// assert!(!kinds.contains(MediaKind::File));
/// assert!(!kinds.without(MediaKind::Audio).contains(MediaKind::Audio));
/// ```
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Hash)]
pub struct MediaKinds {
    image: bool,
    audio: bool,
    file: bool,
}

impl MediaKinds {
    /// No kind: text only.
    pub const NONE: MediaKinds = MediaKinds {
        image: false,
        audio: false,
        file: false,
    };

    /// Every kind.
    pub const ALL: MediaKinds = MediaKinds {
        image: true,
        audio: true,
        file: true,
    };

    /// The set with `kind` added.
    pub const fn with(self, kind: MediaKind) -> MediaKinds {
        self.set(kind, true)
    }

    /// The set with `kind` removed.
    pub const fn without(self, kind: MediaKind) -> MediaKinds {
        self.set(kind, false)
    }

    /// Whether `kind` is in the set.
    pub const fn contains(self, kind: MediaKind) -> bool {
        match kind {
            MediaKind::Image => self.image,
            MediaKind::Audio => self.audio,
            MediaKind::File => self.file,
        }
    }

    const fn set(mut self, kind: MediaKind, on: bool) -> MediaKinds {
        match kind {
            MediaKind::Image => self.image = on,
            MediaKind::Audio => self.audio = on,
            MediaKind::File => self.file = on,
        }
        self
    }
}

/// Media in a message: its media type, its bytes base64-encoded, and a file name if it has one.
///
/// Stored tool messages written before audio and files were kept (an `images` list of
/// `{mime_type, data}`) decode into attachments unchanged.
#[derive(Debug, Clone, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Attachment {
    /// The media type (`image/png`, `audio/wav`, `application/pdf`, ...).
    pub mime_type: String,
    /// The bytes, base64-encoded (standard alphabet, padded).
    pub data: String,
    /// A file name (for a file: what the model is told it is called).
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub name: Option<String>,
}

impl Attachment {
    /// Media of type `mime_type` whose base64-encoded bytes are `data`.
    pub fn new(mime_type: impl Into<String>, data: impl Into<String>) -> Self {
        Attachment {
            mime_type: mime_type.into(),
            data: data.into(),
            name: None,
        }
    }

    /// The same attachment named `name`.
    pub fn named(mut self, name: impl Into<String>) -> Self {
        self.name = Some(name.into());
        self
    }

    /// Its kind, by its media type.
    pub fn kind(&self) -> MediaKind {
        MediaKind::of(&self.mime_type)
    }

    /// About how many bytes it decodes to.
    pub fn approx_bytes(&self) -> usize {
        self.data.len() / 4 * 3
    }

    /// The attachment as a `data:` URL (`data:image/png;base64,...`).
    ///
    /// ```
    /// use stategraph_nodes::media::Attachment;
    ///
    /// let dot = Attachment::new("image/png", "iVBORw0KGgo=");
    /// assert_eq!(dot.data_url(), "data:image/png;base64,iVBORw0KGgo=");
    /// ```
    pub fn data_url(&self) -> String {
        format!("data:{};base64,{}", self.mime_type, self.data)
    }

    /// The line telling a model this attachment was left out and `why`:
    /// `[left out: audio audio/ogg "x.ogg", about 3 bytes: <why>]`.
    ///
    /// ```
    /// use stategraph_nodes::media::Attachment;
    ///
    /// let clip = Attachment::new("audio/wav", "AAAA");
    /// assert_eq!(
    ///     clip.left_out_note("this model takes no audio"),
    ///     "[left out: audio audio/wav, about 3 bytes: this model takes no audio]"
    /// );
    /// ```
    pub fn left_out_note(&self, why: &str) -> String {
        let name = self
            .name
            .as_deref()
            .map(|n| format!(" {n:?}"))
            .unwrap_or_default();
        format!(
            "[left out: {} {}{name}, about {} bytes: {why}]",
            self.kind().noun(),
            self.mime_type,
            self.approx_bytes()
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_media_type_decides_the_kind_whatever_its_case_or_parameters() {
        assert_eq!(MediaKind::of("IMAGE/png"), MediaKind::Image);
        assert_eq!(MediaKind::of("audio/mpeg; rate=44100"), MediaKind::Audio);
        assert_eq!(MediaKind::of("imagery/x"), MediaKind::File);
        assert_eq!(MediaKind::of(""), MediaKind::File);
    }

    #[test]
    fn every_kind_is_in_all_and_none_in_none() {
        for kind in [MediaKind::Image, MediaKind::Audio, MediaKind::File] {
            assert!(MediaKinds::ALL.contains(kind));
            assert!(!MediaKinds::NONE.contains(kind));
            assert_eq!(MediaKinds::NONE.with(kind).without(kind), MediaKinds::NONE);
        }
    }

    #[test]
    fn a_left_out_note_names_a_named_file() {
        let pdf = Attachment::new("application/pdf", "AAAAAAAA").named("report.pdf");
        assert_eq!(
            pdf.left_out_note("this model takes no files"),
            "[left out: file application/pdf \"report.pdf\", about 6 bytes: this model takes no files]"
        );
    }
}
