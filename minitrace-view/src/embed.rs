//! The page's text: one windows-1252 HTML file, its data elements nearly
//! byte for byte, everything else ASCII.
//!
//! Base64 would add a third to the dump's blocks, most of a page's bytes.
//! In windows-1252 every byte is a character of its own (0x80-0x9F map to
//! other code points, which `embed.js` maps back), so a `<script>` data
//! element can hold raw bytes, escaping only those the HTML parser would
//! change or stop at. The rest of the page (template, scripts, the JSON of
//! its meta, the title) is kept to ASCII, so that its characters read the
//! same in that encoding.

use std::borrow::Cow;
use std::io::{self, Write};

/// The script that reads data elements back, first of the page's scripts.
pub(crate) const EMBED: &str = include_str!("embed.js");

/// The byte that starts an escape in a data element.
const ESCAPE: u8 = b'=';

/// Writes `bytes` as a `<script>` data element, nearly byte for byte.
///
/// The page is windows-1252, in which every byte is a character of its
/// own, so a data element holds its bytes as they are, but for the four
/// that the HTML parser would change or stop at: NUL (read as U+FFFD), CR
/// (read as LF), `<` (which could begin `</script`) and [`ESCAPE`] itself.
/// Each is written as [`ESCAPE`] followed by the byte XOR 0x40, none of
/// which is one of the four. Compressed blocks grow by about 1.6 % (4
/// bytes in 256, written twice) where base64 would add a third. embed.js
/// reads them back.
pub(crate) fn data_element(out: &mut impl Write, id: &str, bytes: &[u8]) -> io::Result<()> {
    write!(out, "<script type=\"application/octet-stream\" id=\"{id}\">")?;
    let mut escaped = Vec::with_capacity(64 << 10);
    for chunk in bytes.chunks(32 << 10) {
        escaped.clear();
        for &byte in chunk {
            if matches!(byte, 0 | b'\r' | b'<' | ESCAPE) {
                escaped.extend_from_slice(&[ESCAPE, byte ^ 0x40]);
            } else {
                escaped.push(byte);
            }
        }
        out.write_all(&escaped)?;
    }
    out.write_all(b"</script>\n")
}

/// `text` in ASCII for the page's scripts and JSON, which it holds in
/// windows-1252: every other character as `\u` escapes of its UTF-16
/// units (valid in JavaScript's and JSON's strings, template literals,
/// regular expressions and comments, where the scripts' are).
pub(crate) fn ascii_script(text: &str) -> Cow<'_, str> {
    if text.is_ascii() {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 16);
    for c in text.chars() {
        if c.is_ascii() {
            out.push(c);
        } else {
            for unit in c.encode_utf16(&mut [0; 2]) {
                out.push_str(&format!("\\u{unit:04x}"));
            }
        }
    }
    Cow::Owned(out)
}

/// `text` as HTML text in ASCII (the page is windows-1252): markup's
/// characters and every non-ASCII one as character references.
pub(crate) fn html_escape(text: &str) -> String {
    let mut out = String::with_capacity(text.len());
    for c in text.chars() {
        match c {
            '&' => out.push_str("&amp;"),
            '<' => out.push_str("&lt;"),
            '>' => out.push_str("&gt;"),
            '"' => out.push_str("&quot;"),
            c if c.is_ascii() => out.push(c),
            c => out.push_str(&format!("&#x{:x};", u32::from(c))),
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A data element's bytes as embed.js reads them back.
    fn read_back(element: &[u8]) -> Vec<u8> {
        let open = element.iter().position(|&b| b == b'>').unwrap() + 1;
        let close = element.len() - b"</script>\n".len();
        let mut out = Vec::new();
        let mut bytes = element[open..close].iter();
        while let Some(&byte) = bytes.next() {
            out.push(if byte == ESCAPE { bytes.next().unwrap() ^ 0x40 } else { byte });
        }
        out
    }

    #[test]
    fn every_byte_comes_back_and_none_the_parser_changes_is_written() {
        let bytes: Vec<u8> = (0..=255u8).cycle().take(100_000).collect();
        let mut element = Vec::new();
        data_element(&mut element, "b0", &bytes).unwrap();
        assert_eq!(read_back(&element), bytes);
        let open = element.iter().position(|&b| b == b'>').unwrap() + 1;
        let body = &element[open..element.len() - b"</script>\n".len()];
        assert!(!body.iter().any(|&b| matches!(b, 0 | b'\r' | b'<')));
        // 4 of 256 values escaped, each in two bytes: 1.6 % more here.
        let escaped = bytes.iter().filter(|&&b| matches!(b, 0 | b'\r' | b'<' | ESCAPE)).count();
        assert_eq!(body.len(), bytes.len() + escaped);
    }

    #[test]
    fn scripts_and_text_are_kept_to_ascii() {
        assert_eq!(ascii_script("µs – 𝄞"), "\\u00b5s \\u2013 \\ud834\\udd1e");
        assert!(matches!(ascii_script("plain"), Cow::Borrowed("plain")));
        assert_eq!(html_escape("<a & \"µ\">"), "&lt;a &amp; &quot;&#xb5;&quot;&gt;");
    }
}
