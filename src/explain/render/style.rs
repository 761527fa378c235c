//! How the text form looks: its width, emphasis, wrapping and unknown sizes.

use crate::explain::size;

/// No line of the text form is wider than this.
pub const WIDTH: usize = 100;

/// ANSI emphasis, or nothing when the output is not a terminal.
pub(super) struct Style {
    pub(super) on: bool,
}

impl Style {
    pub(super) fn paint(&self, code: &str, text: &str) -> String {
        if self.on {
            format!("\x1b[{code}m{text}\x1b[0m")
        } else {
            text.to_string()
        }
    }
}

/// Appends `text` after `prefix`, wrapped at word boundaries so no line passes [`WIDTH`];
/// continuation lines are indented by the prefix's width. A word longer than the line is
/// cut.
pub(super) fn wrapped(out: &mut String, prefix: &str, text: &str) {
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
