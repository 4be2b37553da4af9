//! Optional shared-secret authentication of the control channel (`--auth-key FILE` on
//! both sides): an HMAC-SHA256 challenge–response each way, so neither side runs a test
//! with a peer that does not hold the key, and the key never crosses the wire.
//!
//! The client's hello carries its nonce; the server answers with its own nonce and its
//! proof, the client checks that proof and sends its own. Each proof covers a
//! [`Transcript`] (both nonces, the test asked for, the server's address) and says whose it
//! is, so a proof cannot be replayed, reflected, or relayed by a third host that stands
//! in for the server or asks for another test. docs/security.md says what this protects
//! (the benchmark buffer's address and key) and what it does not.

use std::net::IpAddr;
use std::path::Path;

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::protocol::{Channel, Message, ProtocolError};
use crate::error::{Error, ErrorKind};
use crate::spec::TestSpec;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 16;
/// Shortest key accepted, bytes.
pub const MIN_KEY: usize = 16;
/// Longest key file read, bytes.
pub const MAX_KEY: u64 = 4096;

/// A shared secret, read from a file. Its bytes are never printed. (Equality is for
/// comparing settings, never a proof: proofs are checked in constant time by `verify`.)
#[derive(Clone, PartialEq, Eq)]
pub struct AuthKey(Vec<u8>);

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
        let meta = std::fs::metadata(path).map_err(|e| bad(e.to_string()))?;
        if !meta.is_file() {
            return Err(bad("not a file".into()));
        }
        if meta.len() > MAX_KEY {
            return Err(bad(format!("{} bytes; a key file holds at most {MAX_KEY}", meta.len())));
        }
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = meta.permissions().mode();
            if mode & 0o077 != 0 {
                return Err(bad(format!(
                    "open to group or others (mode {:o}): chmod 600 it, as ssh asks of its keys",
                    mode & 0o777
                )));
            }
        }
        let mut bytes = std::fs::read(path).map_err(|e| bad(e.to_string()))?;
        while bytes.last().is_some_and(u8::is_ascii_whitespace) {
            bytes.pop();
        }
        if bytes.len() < MIN_KEY {
            return Err(bad(format!(
                "{} bytes; use at least {MIN_KEY} (e.g. `head -c 32 /dev/urandom | base64`)",
                bytes.len()
            )));
        }
        Ok(AuthKey(bytes))
    }

    /// A key from bytes (tests, the library API).
    ///
    /// # Errors
    /// Shorter than [`MIN_KEY`] (kind `usage`).
    pub fn from_bytes(bytes: &[u8]) -> Result<AuthKey, Error> {
        if bytes.len() < MIN_KEY {
            return Err(Error::usage(format!("an auth key has at least {MIN_KEY} bytes")));
        }
        Ok(AuthKey(bytes.to_vec()))
    }

    /// The proof that `who` holds the key, over `t`.
    pub fn proof(&self, who: Party, t: &Transcript) -> String {
        hex(&self.mac(who, t).finalize().into_bytes())
    }

    /// Whether `proof` (hex, from the peer) is `who`'s proof over `t`; compared in
    /// constant time.
    pub fn verify(&self, who: Party, t: &Transcript, proof: &str) -> bool {
        unhex(proof).is_some_and(|p| self.mac(who, t).verify_slice(&p).is_ok())
    }

    fn mac(&self, who: Party, t: &Transcript) -> Hmac<Sha256> {
        // HMAC takes keys of any length: this cannot fail.
        let mut mac = Hmac::<Sha256>::new_from_slice(&self.0).expect("HMAC accepts any key");
        mac.update(b"rdmabench auth v1 ");
        mac.update(who.label());
        mac.update(&t.client.0);
        mac.update(&t.server.0);
        mac.update(&t.spec);
        mac.update(t.server_ip.to_string().as_bytes());
        mac
    }
}

/// What both proofs of one handshake cover.
#[derive(Clone, Debug)]
pub struct Transcript {
    client: Nonce,
    server: Nonce,
    /// SHA-256 of the spec's JSON, as the hello carried it.
    spec: [u8; 32],
    /// The server's address: where the client connected, where the server was reached.
    server_ip: IpAddr,
}

impl Transcript {
    /// Both nonces, the test and the server's address (IPv4-mapped IPv6 as IPv4).
    pub fn new(client: Nonce, server: Nonce, spec: &TestSpec, server_ip: IpAddr) -> Transcript {
        let json = serde_json::to_vec(spec).unwrap_or_default();
        let spec = Sha256::digest(&json).into();
        Transcript { client, server, spec, server_ip: server_ip.to_canonical() }
    }
}

/// Which side a proof speaks for: a proof of one is never accepted as the other's.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Party {
    /// The side that connected.
    Client,
    /// The side that listened.
    Server,
}

impl Party {
    fn label(self) -> &'static [u8] {
        match self {
            Party::Client => b"client ",
            Party::Server => b"server ",
        }
    }
}

/// A fresh random value of one handshake.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Nonce([u8; NONCE_LEN]);

impl Nonce {
    /// From the operating system's random source.
    ///
    /// # Errors
    /// The source failing (kind `io`).
    pub fn fresh() -> Result<Nonce, Error> {
        let mut n = [0u8; NONCE_LEN];
        getrandom::fill(&mut n).map_err(|e| Error::io(format!("random nonce: {e}")))?;
        Ok(Nonce(n))
    }

    /// As sent on the wire.
    pub fn to_hex(&self) -> String {
        hex(&self.0)
    }

    /// A peer's nonce, checked.
    ///
    /// # Errors
    /// Not [`NONCE_LEN`] bytes of hex (kind `refused`).
    pub fn from_hex(text: &str) -> Result<Nonce, Error> {
        unhex(text)
            .and_then(|b| <[u8; NONCE_LEN]>::try_from(b).ok())
            .map(Nonce)
            .ok_or_else(|| Error::refused("authentication: a malformed nonce"))
    }
}

/// The server's part, once the hello (`spec`, `client_nonce`) is in: with a key, it
/// proves itself and checks the client's proof. Without one it asks nothing (a client
/// that asked for proof then refuses the server's accept).
///
/// # Errors
/// Kind `auth`: the client has no key or another key; the channel failing.
pub fn check_client(
    ch: &mut Channel,
    key: Option<&AuthKey>,
    client_nonce: Option<&str>,
    spec: &TestSpec,
) -> Result<(), Error> {
    let Some(key) = key else { return Ok(()) };
    let Some(client) = client_nonce else {
        return Err(failed("the server requires --auth-key and the client has none"));
    };
    let here = ch.local_ip().ok_or_else(|| Error::io("the control connection has no address"))?;
    let server = Nonce::fresh()?;
    let t = Transcript::new(Nonce::from_hex(client)?, server.clone(), spec, here);
    let proof = key.proof(Party::Server, &t);
    ch.send(&Message::Challenge { nonce: server.to_hex(), proof })?;
    match ch.recv("the client's proof")? {
        Message::Proof { proof } if key.verify(Party::Client, &t, &proof) => Ok(()),
        Message::Proof { .. } => Err(failed(
            "the client's proof does not hold (another --auth-key, or relayed by a third host)",
        )),
        other => {
            Err(Error::refused(format!("control channel: expected proof, got {}", other.name())))
        }
    }
}

/// The client's part, after a hello that carried `nonce` and `spec`: the server's
/// answer must be a challenge whose proof holds; this side's proof goes back.
///
/// # Errors
/// Kind `auth`: the server has no key or another key (it is told so); the server's
/// own refusal; the channel failing.
pub fn prove_to_server(
    ch: &mut Channel,
    key: &AuthKey,
    nonce: &Nonce,
    spec: &TestSpec,
) -> Result<(), Error> {
    let refuse = |ch: &mut Channel, e: Error| {
        ch.send_error(&e);
        Err(e)
    };
    let there = ch.peer_addr().ok_or_else(|| Error::io("the control connection has no peer"))?;
    match ch.recv("the server's challenge") {
        Ok(Message::Challenge { nonce: server, proof }) => {
            let t = Transcript::new(nonce.clone(), Nonce::from_hex(&server)?, spec, there.ip());
            if !key.verify(Party::Server, &t, &proof) {
                return refuse(
                    ch,
                    failed("the server's proof does not hold (another --auth-key, or not the server connected to)"),
                );
            }
            let proof = key.proof(Party::Client, &t);
            Ok(ch.send(&Message::Proof { proof })?)
        }
        Ok(Message::Accept { .. }) => {
            refuse(ch, failed("the client requires --auth-key and the server has none"))
        }
        Ok(other) => Err(Error::refused(format!(
            "control channel: expected challenge, got {}",
            other.name()
        ))),
        Err(e @ ProtocolError::Peer(_)) => Err(Error::from(e).context("the server refused")),
        Err(e) => Err(e.into()),
    }
}

/// Worded alike on both sides: each log says which side lacks what.
fn failed(why: &str) -> Error {
    Error::new(ErrorKind::Auth, format!("authentication failed: {why}"))
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

/// Lower- or upper-case hex of at most 64 bytes; anything else is None.
fn unhex(text: &str) -> Option<Vec<u8>> {
    if text.len() % 2 != 0 || text.len() > 128 || !text.is_ascii() {
        return None;
    }
    (0..text.len()).step_by(2).map(|i| u8::from_str_radix(&text[i..i + 2], 16).ok()).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn key(b: u8) -> AuthKey {
        AuthKey::from_bytes(&[b; 32]).unwrap()
    }

    fn spec(size: u64) -> TestSpec {
        let kind = crate::spec::TestKind {
            verb: crate::spec::Verb::Write,
            measure: crate::spec::Measure::Bw,
        };
        let request = crate::spec::rules::RdmaRequest { size: Some(size), ..Default::default() };
        crate::spec::rules::rdma(kind, &request).unwrap()
    }

    #[test]
    fn a_proof_holds_only_for_its_key_nonces_side_test_and_server() {
        let (c, s) = (Nonce::fresh().unwrap(), Nonce::fresh().unwrap());
        assert_ne!(c, s, "fresh nonces differ");
        let ip = IpAddr::from([198, 18, 0, 2]);
        let t = Transcript::new(c.clone(), s.clone(), &spec(65536), ip);
        let p = key(1).proof(Party::Server, &t);
        assert_eq!(p.len(), 64);
        assert!(key(1).verify(Party::Server, &t, &p));
        assert!(!key(2).verify(Party::Server, &t, &p), "another key");
        assert!(!key(1).verify(Party::Client, &t, &p), "reflected to the other side");
        let swapped = Transcript::new(s.clone(), c.clone(), &spec(65536), ip);
        assert!(!key(1).verify(Party::Server, &swapped, &p), "nonces swapped");
        let other_test = Transcript::new(c.clone(), s.clone(), &spec(4096), ip);
        assert!(!key(1).verify(Party::Server, &other_test, &p), "another test (a relay's)");
        let relay =
            Transcript::new(c.clone(), s.clone(), &spec(65536), IpAddr::from([198, 18, 0, 9]));
        assert!(!key(1).verify(Party::Server, &relay, &p), "another server address");
        let mapped: IpAddr = "::ffff:198.18.0.2".parse().unwrap();
        let same = Transcript::new(c, s, &spec(65536), mapped);
        assert!(key(1).verify(Party::Server, &same, &p), "IPv4-mapped is the same address");
        assert!(!key(1).verify(Party::Server, &t, &p[..62]), "cut short");
        assert!(!key(1).verify(Party::Server, &t, "zz"), "not hex");
        assert!(!key(1).verify(Party::Server, &t, "é"), "not ASCII");
    }

    #[test]
    fn the_spec_digest_survives_the_wire() {
        // The server hashes the spec it parsed; the client the spec it sent.
        let sent = spec(1 << 20);
        let parsed: TestSpec = serde_json::from_slice(&serde_json::to_vec(&sent).unwrap()).unwrap();
        let (c, s) = (Nonce::fresh().unwrap(), Nonce::fresh().unwrap());
        let ip = IpAddr::from([127, 0, 0, 1]);
        let a = Transcript::new(c.clone(), s.clone(), &sent, ip);
        let b = Transcript::new(c, s, &parsed, ip);
        assert_eq!(a.spec, b.spec);
    }

    #[test]
    fn nonces_round_trip_and_malformed_ones_are_refused() {
        let n = Nonce::fresh().unwrap();
        assert_eq!(Nonce::from_hex(&n.to_hex()).unwrap(), n);
        for bad in ["", "00", &"0".repeat(34), &"g".repeat(32), &"é".repeat(16)] {
            assert_eq!(Nonce::from_hex(bad).unwrap_err().kind, ErrorKind::Refused, "{bad}");
        }
    }

    #[cfg(unix)]
    #[test]
    fn key_files_are_checked_for_length_and_mode() {
        use std::os::unix::fs::PermissionsExt;
        let dir = std::env::temp_dir().join(format!("rdmabench-auth-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let file = |name: &str, text: &str, mode: u32| {
            let p = dir.join(name);
            std::fs::write(&p, text).unwrap();
            std::fs::set_permissions(&p, std::fs::Permissions::from_mode(mode)).unwrap();
            p
        };
        let good = file("good", "0123456789abcdef0123\n", 0o600);
        let k = AuthKey::load(&good).unwrap();
        assert_eq!(k.0, b"0123456789abcdef0123", "the trailing newline is not part of the key");
        assert_eq!(format!("{k:?}"), "AuthKey(..)", "never printed");
        let open = file("open", "0123456789abcdef0123", 0o644);
        let e = AuthKey::load(&open).unwrap_err();
        assert!(e.message.contains("open to group or others (mode 644)"), "{e}");
        let short = file("short", "tooshort\n", 0o600);
        let e = AuthKey::load(&short).unwrap_err();
        assert!(e.message.contains("8 bytes; use at least 16"), "{e}");
        let e = AuthKey::load(&dir.join("missing")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(e.message.starts_with("--auth-key "), "{e}");
    }
}
