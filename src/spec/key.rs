//! The shared secret of `--auth-key`: read once from its file (this side's own setting,
//! in [`super::Local`]), judged strong enough, never printed. What it proves is the
//! control session's (`session::auth`).

use std::path::Path;

use crate::error::Error;

/// Shortest key accepted, bytes.
pub const MIN_KEY: usize = 16;
/// Least strength of a key accepted, bits, as [`strength`] estimates it.
pub const MIN_KEY_BITS: u32 = 80;
/// Least number of different bytes in a key.
pub const MIN_KEY_DISTINCT: usize = 8;
/// Longest key file read, bytes.
pub const MAX_KEY: u64 = 4096;

/// A shared secret, read from a file. Its bytes are never printed. (Equality is for
/// comparing settings, never a proof: proofs are checked in constant time by `verify`.)
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(pub(crate) Vec<u8>);

impl std::fmt::Debug for AuthKey {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str("AuthKey(..)")
    }
}

impl AuthKey {
    /// Reads the key from `path`: its bytes without trailing white space, at least
    /// [`MIN_KEY`] of them. On Unix the file must not be readable by group or others.
    ///
    /// # Errors
    /// Kind `usage`, naming `--auth-key` and the file.
    pub fn load(path: &Path) -> Result<AuthKey, Error> {
        let bad = |why: String| Error::usage(format!("--auth-key {}: {why}", path.display()));
        // Type and size judged on what was opened (files::read_bytes), then who may read it.
        let mut bytes = crate::files::read_bytes(path, MAX_KEY)
            .map_err(|e| Error::usage(format!("--auth-key {e}")))?;
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(bad(format!(
                    "open to group or others (mode {:o}): chmod 600 it, as ssh asks of its keys",
                    mode & 0o777
                )));
            }
        }
        while bytes.last().is_some_and(u8::is_ascii_whitespace) {
            bytes.pop();
        }
        check_strength(&bytes).map_err(|why| {
            bad(format!("{why}; e.g. `head -c 32 /dev/urandom | base64` makes a strong one"))
        })?;
        Ok(AuthKey(bytes))
    }

    /// A key from bytes (tests, the library API).
    ///
    /// # Errors
    /// Too weak a key (kind `usage`): see [`check_strength`].
    pub fn from_bytes(bytes: &[u8]) -> Result<AuthKey, Error> {
        check_strength(bytes).map_err(|why| Error::usage(format!("auth key: {why}")))?;
        Ok(AuthKey(bytes.to_vec()))
    }
}

/// Whether `key` is strong enough: at least [`MIN_KEY`] bytes, [`MIN_KEY_DISTINCT`]
/// different ones, and [`MIN_KEY_BITS`] by [`strength`]'s estimate. A key guessed
/// offline or by trying falls to these first: sixteen lower-case letters, a repeated
/// byte, a word padded out.
///
/// # Errors
/// Why not, in one phrase.
pub fn check_strength(key: &[u8]) -> Result<(), String> {
    let distinct = {
        let mut seen = [false; 256];
        key.iter().for_each(|&b| seen[b as usize] = true);
        seen.iter().filter(|&&s| s).count()
    };
    let bits = strength(key);
    if key.len() < MIN_KEY {
        Err(format!("{} bytes; use at least {MIN_KEY}", key.len()))
    } else if distinct < MIN_KEY_DISTINCT {
        Err(format!("only {distinct} different bytes; use at least {MIN_KEY_DISTINCT}"))
    } else if bits < f64::from(MIN_KEY_BITS) {
        Err(format!(
            "too weak (about {} bits; at least {MIN_KEY_BITS}): longer, or more kinds of character",
            bits as u32
        ))
    } else {
        Ok(())
    }
}

/// A key's strength as if its bytes were drawn at random from the classes it uses: its
/// length × log2 of their size (lower-case 26, upper-case 26, digits 10, other printable
/// ASCII 33; any other byte makes it 256). An upper bound for a chosen phrase, exact
/// for a random key.
pub fn strength(key: &[u8]) -> f64 {
    let uses = |f: fn(&u8) -> bool| key.iter().any(f);
    let alphabet = if uses(|b| !(b.is_ascii_graphic() || *b == b' ')) {
        256
    } else {
        [
            (uses(u8::is_ascii_lowercase), 26),
            (uses(u8::is_ascii_uppercase), 26),
            (uses(u8::is_ascii_digit), 10),
            (uses(|b| b.is_ascii_punctuation() || *b == b' '), 33),
        ]
        .iter()
        .filter(|(used, _)| *used)
        .map(|(_, n)| n)
        .sum()
    };
    key.len() as f64 * f64::from(alphabet).log2()
}
