//! `--validate`'s per-message pattern: the source fills it before a size runs, the
//! target checks it after (the slots it lies in: [`crate::spec::plan::SlotLayout`]).

use crate::results::Validation;

/// The byte `--validate` expects at `offset` of `slot` on QP `qp`.
pub fn pattern_byte(qp: usize, slot: u64, offset: u64, size: u64) -> u8 {
    (slot.wrapping_mul(131)
        ^ offset.wrapping_mul(7)
        ^ size.wrapping_mul(13)
        ^ (qp as u64).wrapping_mul(29)) as u8
}

/// Fills the first `slots` messages of `buf` with the pattern.
pub fn fill_pattern(buf: &mut [u8], qp: usize, size: u64, slots: u32) {
    for slot in 0..u64::from(slots) {
        let start = (slot * size) as usize;
        for (j, b) in buf[start..start + size as usize].iter_mut().enumerate() {
            *b = pattern_byte(qp, slot, j as u64, size);
        }
    }
}

/// Compares the first `slots` messages of `buf` with the pattern.
pub fn check_pattern(buf: &[u8], qp: usize, size: u64, slots: u64) -> Validation {
    let mut v = Validation::default();
    for slot in 0..slots {
        let start = (slot * size) as usize;
        for (j, &b) in buf[start..start + size as usize].iter().enumerate() {
            v.checked_bytes += 1;
            if b != pattern_byte(qp, slot, j as u64, size) {
                v.corrupted_bytes += 1;
                v.first_corrupted_offset.get_or_insert((start + j) as u64);
            }
        }
    }
    v
}

/// A fetch-and-add target: after `expected` adds of 1 the counter holds `expected`.
pub fn check_sum(buf: &[u8], expected: Option<u64>) -> Validation {
    let got = u64::from_ne_bytes(buf[..8].try_into().unwrap_or([0; 8]));
    let ok = expected.is_none_or(|want| got == want);
    Validation {
        checked_bytes: 8,
        corrupted_bytes: if ok { 0 } else { 8 },
        first_corrupted_offset: (!ok).then_some(0),
    }
}

/// Adds `b` to `a`.
pub fn merge(a: Option<Validation>, b: Validation) -> Option<Validation> {
    let mut a = a.unwrap_or_default();
    a.checked_bytes += b.checked_bytes;
    a.corrupted_bytes += b.corrupted_bytes;
    if a.first_corrupted_offset.is_none() {
        a.first_corrupted_offset = b.first_corrupted_offset;
    }
    Some(a)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_filled_buffer_checks_clean_and_a_flipped_byte_is_found() {
        let mut buf = vec![0u8; 4 * 64];
        fill_pattern(&mut buf, 1, 64, 4);
        assert_eq!(check_pattern(&buf, 1, 64, 4).corrupted_bytes, 0);
        buf[70] ^= 1;
        let v = check_pattern(&buf, 1, 64, 4);
        assert_eq!(
            (v.checked_bytes, v.corrupted_bytes, v.first_corrupted_offset),
            (256, 1, Some(70))
        );
        assert_eq!(check_pattern(&buf, 2, 64, 1).corrupted_bytes, 64 - count_equal(&buf, 2));
        assert_eq!(check_sum(&500u64.to_ne_bytes(), Some(500)).corrupted_bytes, 0);
        assert_eq!(check_sum(&499u64.to_ne_bytes(), Some(500)).corrupted_bytes, 8);
        let m = merge(merge(None, v), check_sum(&[0; 8], None)).unwrap();
        assert_eq!((m.checked_bytes, m.corrupted_bytes), (264, 1));
    }

    /// Bytes of the first message that happen to match QP `qp`'s pattern.
    fn count_equal(buf: &[u8], qp: usize) -> u64 {
        (0..64).filter(|&j| buf[j] == pattern_byte(qp, 0, j as u64, 64)).count() as u64
    }
}
