//! Optional shared-secret authentication of the control channel (`--auth-key FILE` on
//! both sides): an HMAC-SHA256 challenge–response each way, so neither side runs a test
//! with a peer that does not hold the key, and the key never crosses the wire.
//!
//! The client's hello carries its nonce; the server answers with its own nonce only; the
//! client proves itself first, and only once that proof holds does the server send its
//! own, which the client checks. So a stranger who connects learns nothing keyed to
//! guess the key from offline, and a source address that keeps failing is made to wait
//! ([`Attempts`]). Each proof covers a [`Transcript`] (both nonces, the test asked for,
//! the server's address) and says whose it is, so a proof cannot be replayed, reflected,
//! or relayed by a third host that stands in for the server or asks for another test.
//! docs/security.md says what this protects (the benchmark buffer's address and key) and
//! what it does not.

use std::collections::HashMap;
use std::net::IpAddr;
use std::sync::Mutex;
use std::time::{Duration, Instant};

use hmac::{Hmac, Mac};
use sha2::{Digest, Sha256};

use super::protocol::{Channel, Message, ProtocolError};
use crate::error::{Error, ErrorKind};
pub use crate::spec::key::{
    check_strength, strength, AuthKey, MAX_KEY, MIN_KEY, MIN_KEY_BITS, MIN_KEY_DISTINCT,
};
use crate::spec::TestSpec;

/// Bytes of each side's nonce.
pub const NONCE_LEN: usize = 16;

impl AuthKey {
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
        mac.update(b"rdmabench auth v2 ");
        mac.update(who.label());
        mac.update(&t.client.0);
        mac.update(&t.server.0);
        mac.update(&t.spec);
        mac.update(t.server_ip.to_string().as_bytes());
        mac
    }
}

/// Failed authentications a source address may make before it must wait.
pub const FREE_FAILURES: u32 = 5;
/// The longest wait a failing address is given.
pub const MAX_BACKOFF: Duration = Duration::from_secs(300);
/// Source addresses remembered at most; past it the one that failed longest ago goes.
pub const MAX_REMEMBERED: usize = 1024;

/// Failed authentications per source address: past [`FREE_FAILURES`] in a row, the
/// address must wait 1 s, then twice as long after each further failure (at most
/// [`MAX_BACKOFF`]) before its next attempt is even checked. A success forgets it.
/// One record per process, shared by every connection of a server.
#[derive(Default)]
pub struct Attempts(Mutex<HashMap<IpAddr, (u32, Instant)>>);

static ATTEMPTS: std::sync::LazyLock<Attempts> = std::sync::LazyLock::new(Attempts::default);

impl Attempts {
    /// The process's record.
    pub fn global() -> &'static Attempts {
        &ATTEMPTS
    }

    /// How long `ip` must still wait before its next attempt; zero if it may try now.
    pub fn wait_for(&self, ip: IpAddr, now: Instant) -> Duration {
        let map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        match map.get(&ip.to_canonical()) {
            Some(&(n, last)) if n >= FREE_FAILURES => {
                let backoff =
                    Duration::from_secs(1 << (n - FREE_FAILURES).min(16)).min(MAX_BACKOFF);
                (last + backoff).saturating_duration_since(now)
            }
            _ => Duration::ZERO,
        }
    }

    /// `ip` failed at `now`.
    pub fn failed(&self, ip: IpAddr, now: Instant) {
        let mut map = self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner);
        if map.len() >= MAX_REMEMBERED && !map.contains_key(&ip.to_canonical()) {
            if let Some(oldest) = map.iter().min_by_key(|(_, (_, t))| *t).map(|(ip, _)| *ip) {
                map.remove(&oldest);
            }
        }
        let entry = map.entry(ip.to_canonical()).or_insert((0, now));
        *entry = (entry.0.saturating_add(1), now);
    }

    /// `ip` proved itself: its failures are forgotten.
    pub fn succeeded(&self, ip: IpAddr) {
        self.0.lock().unwrap_or_else(std::sync::PoisonError::into_inner).remove(&ip.to_canonical());
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

/// The server's part, once the hello (`spec`, `client_nonce`) from `peer` is in: with a
/// key, it sends its nonce, checks the client's proof, and only then proves itself.
/// Without one it asks nothing (a client that asked for proof then refuses the server's
/// accept). An address with too many failures is refused before anything is checked.
///
/// # Errors
/// Kind `auth`: the client has no key or another key, or its address must wait; the
/// channel failing.
pub fn check_client(
    ch: &mut Channel,
    key: Option<&AuthKey>,
    client_nonce: Option<&str>,
    spec: &TestSpec,
    peer: IpAddr,
) -> Result<(), Error> {
    let Some(key) = key else { return Ok(()) };
    let attempts = Attempts::global();
    let wait = attempts.wait_for(peer, Instant::now());
    if !wait.is_zero() {
        return Err(failed(&format!(
            "too many failed attempts from {}; the next is heard in {} s",
            peer.to_canonical(),
            wait.as_secs().max(1)
        )));
    }
    let Some(client) = client_nonce else {
        return Err(failed("the server requires --auth-key and the client has none"));
    };
    let here = ch.local_ip().ok_or_else(|| Error::io("the control connection has no address"))?;
    let server = Nonce::fresh()?;
    let t = Transcript::new(Nonce::from_hex(client)?, server.clone(), spec, here);
    ch.send(&Message::Challenge { nonce: server.to_hex() })?;
    match ch.recv("the client's proof")? {
        Message::Proof { proof } if key.verify(Party::Client, &t, &proof) => {
            attempts.succeeded(peer);
            Ok(ch.send(&Message::Proof { proof: key.proof(Party::Server, &t) })?)
        }
        Message::Proof { .. } => {
            attempts.failed(peer, Instant::now());
            Err(failed(
                "the client's proof does not hold (another --auth-key, or relayed by a third host)",
            ))
        }
        other => {
            Err(Error::refused(format!("control channel: expected proof, got {}", other.name())))
        }
    }
}

/// The client's part, after a hello that carried `nonce` and `spec`: the server's
/// answer must be a challenge; this side's proof goes first, then the server's must
/// come back and hold.
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
    let t = match ch.recv("the server's challenge") {
        Ok(Message::Challenge { nonce: server }) => {
            Transcript::new(nonce.clone(), Nonce::from_hex(&server)?, spec, there.ip())
        }
        Ok(Message::Accept { .. }) => {
            return refuse(ch, failed("the client requires --auth-key and the server has none"))
        }
        Ok(other) => return Err(expected("challenge", &other)),
        Err(e @ ProtocolError::Peer(_)) => return Err(Error::from(e).context("the server refused")),
        Err(e) => return Err(e.into()),
    };
    ch.send(&Message::Proof { proof: key.proof(Party::Client, &t) })?;
    match ch.recv("the server's proof") {
        Ok(Message::Proof { proof }) if key.verify(Party::Server, &t, &proof) => Ok(()),
        Ok(Message::Proof { .. }) => refuse(
            ch,
            failed("the server's proof does not hold (another --auth-key, or not the server connected to)"),
        ),
        Ok(other) => Err(expected("proof", &other)),
        Err(e @ ProtocolError::Peer(_)) => Err(Error::from(e).context("the server refused")),
        Err(e) => Err(e.into()),
    }
}

fn expected(what: &str, got: &Message) -> Error {
    Error::refused(format!("control channel: expected {what}, got {}", got.name()))
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
        AuthKey::from_bytes(format!("{b} a strong enough key of test {b}").as_bytes()).unwrap()
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
    fn a_key_needs_length_variety_and_an_estimated_80_bits() {
        assert!(check_strength(b"abcdefghijklmnop").unwrap_err().contains("about 75 bits"));
        assert!(check_strength(&[b'x'; 64]).unwrap_err().contains("only 1 different"));
        assert!(check_strength(b"0123456789abcdef").is_ok(), "hex: 16 x log2(36) = 83 bits");
        assert!(check_strength(b"correct horse battery staple").is_ok());
        let random = [0x8e, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15];
        assert_eq!(strength(&random), 128.0, "raw bytes count 8 bits each");
    }

    #[test]
    fn failures_past_five_make_an_address_wait_longer_each_time() {
        let a = Attempts::default();
        let (ip, other) = (IpAddr::from([198, 18, 0, 5]), IpAddr::from([198, 18, 0, 6]));
        let t0 = Instant::now();
        for _ in 0..FREE_FAILURES {
            assert_eq!(a.wait_for(ip, t0), Duration::ZERO);
            a.failed(ip, t0);
        }
        assert_eq!(a.wait_for(ip, t0), Duration::from_secs(1));
        assert_eq!(a.wait_for(other, t0), Duration::ZERO, "another address is not held");
        a.failed(ip, t0);
        assert_eq!(a.wait_for(ip, t0), Duration::from_secs(2), "twice as long");
        for _ in 0..40 {
            a.failed(ip, t0);
        }
        assert_eq!(a.wait_for(ip, t0), MAX_BACKOFF);
        a.succeeded(ip);
        assert_eq!(a.wait_for(ip, t0), Duration::ZERO);
        // Memory is bounded: the address that failed longest ago is forgotten.
        for k in 0..=MAX_REMEMBERED as u32 {
            a.failed(IpAddr::from(k.to_be_bytes()), t0 + Duration::from_millis(u64::from(k)));
        }
        assert_eq!(a.0.lock().unwrap().len(), MAX_REMEMBERED);
        assert!(!a.0.lock().unwrap().contains_key(&IpAddr::from([0, 0, 0, 0])));
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
        let weak = file("weak", "abcdefghijklmnopq\n", 0o600);
        let e = AuthKey::load(&weak).unwrap_err();
        assert!(e.message.contains("too weak (about 79 bits; at least 80)"), "{e}");
        let e = AuthKey::load(&dir.join("missing")).unwrap_err();
        assert_eq!(e.kind, ErrorKind::Usage);
        assert!(e.message.starts_with("--auth-key "), "{e}");
    }
}
