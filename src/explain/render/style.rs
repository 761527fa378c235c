//! How the text form looks: its width, emphasis, wrapping and unknown sizes.

use std::borrow::Cow;

use crate::explain::size;

/// No line of the text form is wider than this.
pub const WIDTH: usize = 100;

/// ANSI emphasis, or nothing when the output is not a terminal.
pub(super) struct Style {
    pub(super) on: bool,
}

impl Style {
    pub(super) fn paint(&self, code: &str, text: &str) -> String {
        let text = visible(text);
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.into_owned()
        }
    }
}

/// `text` as a terminal may show it: a process names itself (its comm, its cgroup, its
/// binary's path), so a control character (an escape that would clear the screen, a line
/// break that would fake a line) or a direction override (which reorders what is read) is
/// written out as `\xNN` or `\u{NNNN}`, never passed on.
pub(super) fn visible(text: &str) -> Cow<'_, str> {
    let hidden =
        |c: char| c.is_control() || matches!(c, '\u{202a}'..='\u{202e}' | '\u{2066}'..='\u{2069}');
    if !text.chars().any(hidden) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 8);
    for c in text.chars() {
        match c {
            c if hidden(c) && (c as u32) < 0x100 => out.push_str(&format!("\\x{:02x}", c as u32)),
            c if hidden(c) => out.push_str(&format!("\\u{{{:04x}}}", c as u32)),
            c => out.push(c),
        }
    }
    Cow::Owned(out)
}

/// Appends `text` after `prefix`, wrapped at word boundaries so no line passes [`WIDTH`];
/// continuation lines are indented by the prefix's width. A word longer than the line is
/// cut.
pub(super) fn wrapped(out: &mut String, prefix: &str, text: &str) {
    let text = visible(text);
    let indent = prefix.chars().count();
    let room = WIDTH.saturating_sub(indent).max(20);
    let mut line = String::new();
    let mut first = true;
    let mut flush = |line: &mut String, first: &mut bool| {
        if *first {
            out.push_str(prefix);
            *first = false;
        } else {
            out.push_str(&" ".repeat(indent));
        }
        out.push_str(line.trim_end());
        out.push('\n');
        line.clear();
    };
    for word in text.split_whitespace() {
        let mut word: String = word.to_string();
        while word.chars().count() > room {
            if !line.is_empty() {
                flush(&mut line, &mut first);
            }
            let head: String = word.chars().take(room).collect();
            word = word.chars().skip(room).collect();
            line.push_str(&head);
            flush(&mut line, &mut first);
        }
        if line.chars().count() + word.chars().count() + 1 > room && !line.is_empty() {
            flush(&mut line, &mut first);
        }
        line.push_str(&word);
        line.push(' ');
    }
    if !line.is_empty() || first {
        flush(&mut line, &mut first);
    }
}

pub(super) fn opt(v: Option<u64>) -> String {
    v.map_or("unknown".into(), size)
}

/// `size` of a signed figure, with its sign.
pub(super) fn signed_size(b: i64) -> String {
    let abs = size(b.unsigned_abs());
    if b < 0 {
        format!("-{abs}")
    } else {
        abs
    }
}
