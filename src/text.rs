//! The one sanitiser of text rdmabench shows but did not write: a peer's messages and
//! environment (its host name first), sysfs and `/proc` strings, doctor's facts. Such
//! text goes on one line of a terminal, a report or a log, so nothing in it may move
//! the cursor, start a line, reorder what follows or hide itself, and it has a length.
//! [`one_line`] keeps a message's spacing; [`clean`] makes a value one run of words.

/// Most characters [`one_line`] keeps (an error message), before its `…`.
pub const MAX_LINE_CHARS: usize = 500;
/// Most characters [`clean`] gives (a value: a host name, a firmware version), its `…`
/// included.
pub const MAX_TEXT_CHARS: usize = 256;

/// Text for one log or terminal line: every [`hidden`] character becomes a space, and it
/// is cut at [`MAX_LINE_CHARS`] characters.
pub fn one_line(text: &str) -> String {
    let shown = |c: char| if hidden(c) { ' ' } else { c };
    let mut line: String = text.chars().map(shown).take(MAX_LINE_CHARS).collect();
    if text.chars().nth(MAX_LINE_CHARS).is_some() {
        line.push('…');
    }
    line
}

/// A value on one line, at most [`MAX_TEXT_CHARS`] characters: whitespace and
/// [`hidden`] characters separate words, which are joined by one space.
pub fn clean(text: &str) -> String {
    let words = text.split(|c: char| c.is_whitespace() || hidden(c));
    let line = words.filter(|w| !w.is_empty()).collect::<Vec<_>>().join(" ");
    let mut starts = line.char_indices().map(|(i, _)| i);
    match (starts.nth(MAX_TEXT_CHARS - 1), starts.next()) {
        (Some(cut), Some(_)) => format!("{}…", &line[..cut]),
        _ => line,
    }
}

/// Whether `c` does not print as itself on a line: control characters (newlines,
/// escapes, C1), and the format characters and fillers that show nothing or change the
/// order or shape of what follows: line and paragraph separators, soft hyphen, Arabic
/// letter mark, Mongolian vowel separator, zero-width spaces and joiners, bidi marks,
/// embeddings, overrides and isolates, invisible operators, the byte-order mark, Hangul
/// fillers, variation selectors, interlinear annotations and the tag characters
/// (Unicode's Default_Ignorable_Code_Point and the Cf category).
pub fn hidden(c: char) -> bool {
    c.is_control()
        || matches!(c,
            '\u{00AD}' | '\u{034F}' | '\u{061C}' | '\u{115F}' | '\u{1160}' | '\u{17B4}'
            | '\u{17B5}' | '\u{180B}'..='\u{180F}' | '\u{200B}'..='\u{200F}'
            | '\u{2028}'..='\u{202E}' | '\u{2060}'..='\u{206F}' | '\u{3164}'
            | '\u{FE00}'..='\u{FE0F}' | '\u{FEFF}' | '\u{FFA0}' | '\u{FFF0}'..='\u{FFFB}'
            | '\u{0600}'..='\u{0605}' | '\u{06DD}' | '\u{070F}' | '\u{08E2}' | '\u{110BD}'
            | '\u{110CD}' | '\u{13430}'..='\u{1343F}' | '\u{1BCA0}'..='\u{1BCA3}'
            | '\u{1D173}'..='\u{1D17A}' | '\u{E0000}'..='\u{E0FFF}')
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
    fn what_shows_nothing_or_reorders_is_a_space() {
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
            '\u{1b}',
            '\u{9b}',
        ];
        for c in hidden {
            assert_eq!(clean(&format!("ho{c}st")), "ho st", "U+{:04X}", c as u32);
            assert_eq!(one_line(&format!("ho{c}st")), "ho st", "U+{:04X}", c as u32);
        }
        assert_eq!(clean("\u{202E}gnp.exe \u{2067}x"), "gnp.exe x");
        assert_eq!(clean("naïve café 中文 µs ≥ 5 %"), "naïve café 中文 µs ≥ 5 %", "text stays");
    }

    #[test]
    fn both_are_capped_on_a_char_boundary() {
        let fits = "é".repeat(MAX_TEXT_CHARS);
        assert_eq!(clean(&fits), fits);
        let long = clean(&"é".repeat(100_000));
        assert_eq!(long, format!("{}…", "é".repeat(MAX_TEXT_CHARS - 1)));
        assert_eq!(one_line(&"é".repeat(MAX_LINE_CHARS)), "é".repeat(MAX_LINE_CHARS));
        let long = one_line(&"é".repeat(MAX_LINE_CHARS + 1));
        assert_eq!(long, format!("{}…", "é".repeat(MAX_LINE_CHARS)));
    }
}
