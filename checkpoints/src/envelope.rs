//! The blob envelope: how every stored value is framed and checked.
//!
//! ```text
//! offset  size  field
//! 0       3     magic "SGB"
//! 3       1     format version (1)
//! 4       1     codec id: 1 = JSON (user values), 2 = bincode 2 standard config (engine records)
//! 5       n     payload
//! ```
//!
//! The blob's key is `blake3(payload)` (32 bytes), stored next to it; a read re-hashes the
//! payload and rejects a mismatch, so a damaged blob is reported, never decoded.

/// The magic bytes at the start of every envelope.
pub const MAGIC: &[u8; 3] = b"SGB";
/// The envelope format version this build writes and reads.
pub const ENVELOPE_VERSION: u8 = 1;
/// Codec id of JSON payloads.
pub const CODEC_JSON: u8 = 1;
/// Codec id of bincode payloads.
pub const CODEC_BINCODE: u8 = 2;

/// Frame `payload`; returns the envelope bytes and the payload's blake3 hash.
pub fn seal(codec: u8, payload: &[u8]) -> (Vec<u8>, [u8; 32]) {
    let mut out = Vec::with_capacity(payload.len() + 5);
    out.extend_from_slice(MAGIC);
    out.push(ENVELOPE_VERSION);
    out.push(codec);
    out.extend_from_slice(payload);
    (out, *blake3::hash(payload).as_bytes())
}

/// Check an envelope against its expected codec and hash and return its payload.
///
/// # Errors
/// A description of what is wrong: too short, bad magic, unknown version or codec, hash
/// mismatch.
pub fn open<'a>(bytes: &'a [u8], codec: u8, hash: &[u8]) -> Result<&'a [u8], String> {
    if bytes.len() < 5 {
        return Err(format!("truncated envelope ({} bytes)", bytes.len()));
    }
    if &bytes[..3] != MAGIC {
        return Err("bad magic".to_owned());
    }
    if bytes[3] != ENVELOPE_VERSION {
        return Err(format!("unsupported envelope version {}", bytes[3]));
    }
    if bytes[4] != codec {
        return Err(format!("codec {} where {codec} was expected", bytes[4]));
    }
    let payload = &bytes[5..];
    if blake3::hash(payload).as_bytes()[..] != *hash {
        return Err("payload does not match its hash".to_owned());
    }
    Ok(payload)
}

/// Lower-case hex of bytes.
pub fn hex(bytes: &[u8]) -> String {
    let mut out = String::with_capacity(bytes.len() * 2);
    push_hex(&mut out, bytes);
    out
}

/// Append `bytes` to `out` as lowercase hex digits.
pub(crate) fn push_hex(out: &mut String, bytes: &[u8]) {
    const DIGITS: &[u8; 16] = b"0123456789abcdef";
    for b in bytes {
        out.push(char::from(DIGITS[usize::from(b >> 4)]));
        out.push(char::from(DIGITS[usize::from(b & 0x0f)]));
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_sealed_envelope_opens_to_its_payload() {
        let (env, hash) = seal(CODEC_JSON, b"[1,2]");
        assert_eq!(open(&env, CODEC_JSON, &hash), Ok(&b"[1,2]"[..]));
    }

    #[test]
    fn any_flipped_bit_is_rejected() {
        let (env, hash) = seal(CODEC_JSON, b"{\"a\":1}");
        for i in 0..env.len() {
            for bit in 0..8 {
                let mut bad = env.clone();
                bad[i] ^= 1 << bit;
                assert!(
                    open(&bad, CODEC_JSON, &hash).is_err(),
                    "flip at {i}:{bit} accepted"
                );
            }
        }
    }

    #[test]
    fn truncation_and_wrong_codec_are_rejected() {
        let (env, hash) = seal(CODEC_BINCODE, b"xyz");
        assert!(open(&env[..4], CODEC_BINCODE, &hash).is_err());
        assert!(open(&env[..env.len() - 1], CODEC_BINCODE, &hash).is_err());
        assert!(open(&env, CODEC_JSON, &hash).is_err());
    }

    proptest::proptest! {
        #![proptest_config(proptest::prelude::ProptestConfig { cases: 4000, ..Default::default() })]

        /// Arbitrary bytes and hashes open to an error (or, only for a genuine envelope, its
        /// payload), never a panic.
        #[test]
        fn arbitrary_envelopes_never_panic(
            bytes in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..96),
            hash in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..40),
            codec in proptest::prelude::any::<u8>(),
        ) {
            let _ = open(&bytes, codec, &hash);
        }

        /// Whatever is sealed opens back to itself (round trip).
        #[test]
        fn sealed_payloads_round_trip(payload in proptest::collection::vec(proptest::prelude::any::<u8>(), 0..256)) {
            let (env, hash) = seal(CODEC_BINCODE, &payload);
            proptest::prop_assert_eq!(open(&env, CODEC_BINCODE, &hash), Ok(&payload[..]));
        }
    }
}
