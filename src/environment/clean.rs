//! The one sanitiser of text rdmabench shows but did not write: sysfs and `/proc`
//! strings, a peer's environment (its host name first), doctor's facts. Such text goes
//! on one line of a terminal, a report or a log, so nothing in it may move the cursor,
//! reorder what follows or hide itself, and it has a length.

use super::{DeviceEnvironment, Environment, InterfaceEnvironment, PcieEnvironment};

/// Most characters [`clean`] keeps; a longer text is cut, with `…` for the rest.
pub const MAX_TEXT_CHARS: usize = 256;

/// `text` on one line, at most [`MAX_TEXT_CHARS`] characters: control characters and
/// runs of whitespace (line and paragraph separators included) become one space,
/// leading and trailing ones go, and characters that show nothing or reorder the line
/// ([`invisible`]) are removed.
pub fn clean(text: &str) -> String {
    let words = text.split(|c: char| c.is_whitespace() || c.is_control());
    let visible = |w: &str| w.chars().filter(|&c| !invisible(c)).collect::<String>();
    let words: Vec<String> = words.map(visible).filter(|w| !w.is_empty()).collect();
    let line = words.join(" ");
    let mut starts = line.char_indices().map(|(i, _)| i);
    match (starts.nth(MAX_TEXT_CHARS - 1), starts.next()) {
        (Some(cut), Some(_)) => format!("{}…", &line[..cut]),
        _ => line,
    }
}

/// Format characters and fillers that print as nothing, or change the order or shape
/// of what follows: soft hyphen, Arabic letter mark, Mongolian vowel separator,
/// zero-width spaces and joiners, bidi marks, embeddings, overrides and isolates,
/// invisible operators, the byte-order mark, Hangul fillers, variation selectors,
/// interlinear annotations and the tag characters (Unicode's Default_Ignorable_Code_Point
/// and the Cf category).
fn invisible(c: char) -> bool {
    matches!(c,
        '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}' | '\u{17B5}'
        | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}' | '\u{202A}'..='\u{202E}'
        | '\u{2060}'..='\u{206F}' | '\u{3164}' | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}'
        | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}' | '\u{0600}'..='\u{0605}' | '\u{06DD}'
        | '\u{070F}' | '\u{08E2}' | '\u{110BD}' | '\u{110CD}' | '\u{13430}'..='\u{1343F}'
        | '\u{1BCA0}'..='\u{1BCA3}' | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
}

impl Environment {
    /// A peer's environment with every text [`clean`]ed, as this side's own reads are:
    /// what a peer sends is shown and stored as it would be from sysfs.
    pub fn cleaned(self) -> Environment {
        let opt = |o: Option<String>| o.map(|t| clean(&t));
        Environment {
            hostname: clean(&self.hostname),
            kernel: clean(&self.kernel),
            os: clean(&self.os),
            cpu_model: clean(&self.cpu_model),
            governor: opt(self.governor),
            rdmabench: clean(&self.rdmabench),
            device: self.device.map(|d| DeviceEnvironment {
                name: clean(&d.name),
                model: opt(d.model),
                firmware: clean(&d.firmware),
                link_layer: clean(&d.link_layer),
                pcie: d.pcie.map(|p| PcieEnvironment {
                    current_speed: opt(p.current_speed),
                    max_speed: opt(p.max_speed),
                    ..p
                }),
                driver: opt(d.driver),
                rdma_core: opt(d.rdma_core),
                ..d
            }),
            interface: self.interface.map(|i| InterfaceEnvironment { name: clean(&i.name), ..i }),
            ..self
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn clean_keeps_one_line_of_words() {
        assert_eq!(clean("  Intel(R)  Xeon(R)\tCPU\n"), "Intel(R) Xeon(R) CPU");
        assert_eq!(clean("a\r\nb\u{1b}[31mc\u{7f}d\u{2028}e\u{85}f"), "a b [31mc d e f");
        assert_eq!(clean("\n\t "), "");
    }

    #[test]
    fn clean_removes_what_shows_nothing_or_reorders() {
        let hidden = [
            '\u{061C}',
            '\u{00AD}',
            '\u{180E}',
            '\u{3164}',
            '\u{E0001}',
            '\u{E0041}',
            '\u{E007F}',
            '\u{202A}',
            '\u{202B}',
            '\u{202C}',
            '\u{202D}',
            '\u{202E}',
            '\u{2066}',
            '\u{2067}',
            '\u{2068}',
            '\u{2069}',
            '\u{200B}',
            '\u{200C}',
            '\u{200D}',
            '\u{200E}',
            '\u{200F}',
            '\u{2060}',
            '\u{FEFF}',
            '\u{FFA0}',
            '\u{115F}',
            '\u{FE0F}',
        ];
        for c in hidden {
            assert_eq!(clean(&format!("ho{c}st")), "host", "U+{:04X}", c as u32);
        }
        assert_eq!(clean("\u{202E}gnp.exe \u{2067}x"), "gnp.exe x");
        assert_eq!(clean("naïve café ünïcode 中文"), "naïve café ünïcode 中文", "letters stay");
    }

    #[test]
    fn clean_caps_the_length_on_a_char_boundary() {
        let fits = "é".repeat(MAX_TEXT_CHARS);
        assert_eq!(clean(&fits), fits);
        let long = clean(&"é".repeat(100_000));
        assert_eq!(long.chars().count(), MAX_TEXT_CHARS);
        assert_eq!(long, format!("{}…", "é".repeat(MAX_TEXT_CHARS - 1)));
    }

    #[test]
    fn a_peers_environment_is_cleaned_and_capped() {
        let mut env = Environment::host_at(std::path::Path::new("/nonexistent"));
        env.hostname = format!("\u{1b}]0;x\u{7}{}", "h".repeat(100_000));
        env.os = "Debian\u{1b}[2J\nPASS".into();
        let env = env.cleaned();
        assert_eq!(env.hostname.chars().count(), MAX_TEXT_CHARS);
        assert!(env.hostname.starts_with("]0;x h") && env.hostname.ends_with('…'));
        assert_eq!(env.os, "Debian [2J PASS");
    }
}
