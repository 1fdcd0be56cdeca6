//! Whole 4-byte words: what wgpu's buffer copies and queue writes move, and what Metal's
//! blits move on macOS (undefined on Intel and AMD GPUs otherwise, an assertion under the
//! API validation layer). Backends widen other ranges to the words around them.

/// Bytes per word.
pub const WORD: usize = 4;

/// Whether `len` bytes at `offset` are whole words.
pub fn word_aligned(offset: usize, len: usize) -> bool {
    offset % WORD == 0 && len % WORD == 0
}

/// The whole words around `offset..offset + len`, as `(start, end)`.
pub fn widen(offset: usize, len: usize) -> (usize, usize) {
    let start = offset / WORD * WORD;
    (start, (offset + len).next_multiple_of(WORD))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn whole_words_and_widening_covers_the_range() {
        assert!(word_aligned(0, 4) && word_aligned(8, 1024));
        assert!(!word_aligned(2, 4) && !word_aligned(4, 6) && !word_aligned(1, 1));
        for offset in 0..9 {
            for len in 1..13 {
                let (start, end) = widen(offset, len);
                assert!(word_aligned(start, end - start));
                assert!(start <= offset && offset + len <= end && end - start < len + 8);
            }
        }
    }
}
