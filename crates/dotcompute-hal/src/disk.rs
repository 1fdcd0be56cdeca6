//! On-disk cache entries, shared by the backends' caches (CUDA's compiled modules,
//! wgpu's pipeline cache): a header that names the kind of entry, the payload's length
//! and its SHA-256, then the payload, written atomically. A damaged or foreign file is
//! detected and ignored (the entry is rebuilt), never handed to a driver.

use sha2::{Digest, Sha256};
use std::path::Path;
use std::sync::atomic::{AtomicU64, Ordering};

/// Bytes before the payload: magic (8), length (8), SHA-256 (32).
const HEADER: usize = 8 + 8 + 32;

/// `payload` as an entry of kind `magic`.
pub fn encode_entry(magic: &[u8; 8], payload: &[u8]) -> Vec<u8> {
    let mut out = Vec::with_capacity(HEADER + payload.len());
    out.extend_from_slice(magic);
    out.extend_from_slice(&(payload.len() as u64).to_le_bytes());
    out.extend_from_slice(&Sha256::digest(payload));
    out.extend_from_slice(payload);
    out
}

/// The payload of an entry of kind `magic`, or why the entry is unusable.
pub fn decode_entry<'a>(magic: &[u8; 8], bytes: &'a [u8]) -> Result<&'a [u8], String> {
    if bytes.len() < HEADER || &bytes[..8] != magic {
        return Err("not a dotcompute cache entry of this kind (bad header)".into());
    }
    let len = u64::from_le_bytes(bytes[8..16].try_into().expect("8 bytes"));
    let payload = &bytes[HEADER..];
    if payload.len() as u64 != len {
        return Err(format!(
            "truncated: {} payload bytes, the header says {len}",
            payload.len()
        ));
    }
    if Sha256::digest(payload).as_slice() != &bytes[16..48] {
        return Err("checksum mismatch".into());
    }
    Ok(payload)
}

/// Writes `bytes` to a fresh temporary file beside `path`, then renames it over `path`:
/// a reader (another process too) sees the old entry or the new one, never a mix.
pub fn write_atomically(path: &Path, bytes: &[u8]) -> std::io::Result<()> {
    static COUNTER: AtomicU64 = AtomicU64::new(0);
    let tmp = path.with_extension(format!(
        "tmp.{}.{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    ));
    let result = std::fs::write(&tmp, bytes).and_then(|()| std::fs::rename(&tmp, path));
    if result.is_err() {
        let _ = std::fs::remove_file(&tmp);
    }
    result
}

#[cfg(test)]
mod tests {
    use super::*;

    const KIND: &[u8; 8] = b"DCTEST01";

    #[test]
    fn entries_round_trip_and_damage_is_detected() {
        let payload = b"\x7fELF some cubin bytes".to_vec();
        let entry = encode_entry(KIND, &payload);
        assert_eq!(decode_entry(KIND, &entry).unwrap(), &payload[..]);
        // Another kind of entry.
        assert!(decode_entry(b"DCOTHER1", &entry)
            .unwrap_err()
            .contains("header"));
        // Truncated.
        assert!(decode_entry(KIND, &entry[..entry.len() - 3])
            .unwrap_err()
            .contains("truncated"));
        // One flipped bit in the payload.
        let mut flipped = entry.clone();
        *flipped.last_mut().unwrap() ^= 1;
        assert!(decode_entry(KIND, &flipped)
            .unwrap_err()
            .contains("checksum"));
        // Garbage and empty files.
        assert!(decode_entry(KIND, b"garbage").is_err());
        assert!(decode_entry(KIND, b"").is_err());
    }

    #[test]
    fn atomic_writes_replace_whole_entries() {
        let dir = std::env::temp_dir().join(format!("dc-disk-test-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("k.bin");
        write_atomically(&path, &encode_entry(KIND, b"first")).unwrap();
        write_atomically(&path, &encode_entry(KIND, b"second")).unwrap();
        let bytes = std::fs::read(&path).unwrap();
        assert_eq!(decode_entry(KIND, &bytes).unwrap(), b"second");
        // No temporary files are left behind.
        assert_eq!(std::fs::read_dir(&dir).unwrap().count(), 1);
        std::fs::remove_dir_all(&dir).unwrap();
    }
}
