//! Tokens of the HBase shell's literal syntax: `'single'` and `"double"` quoted strings,
//! integers, bare words (commands and constants such as `VERSIONS`, `true`, `nil`), `{`, `}`,
//! `[`, `]`, `(`, `)`, `,`, `=>`, and statement separators (a newline or `;`).
//!
//! Not Ruby: there are no expressions, variables or interpolation. The lexer never fails as a
//! whole: a bad character or string becomes an [`Tok::Error`] token and lexing resumes on the
//! next line, so one typo in a script costs one statement, not the rest of the script.

use super::{Pos, ShellError};

/// One token.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Tok {
    /// A quoted string, escapes resolved (bytes: `\xNN` may make it non-UTF-8).
    Str(Vec<u8>),
    /// An integer literal.
    Int(i64),
    /// A bare word: a command name or a constant (`VERSIONS`, `true`, `nil`).
    Word(String),
    /// `{`
    LBrace,
    /// `}`
    RBrace,
    /// `[`
    LBracket,
    /// `]`
    RBracket,
    /// `(`
    LParen,
    /// `)`
    RParen,
    /// `,`
    Comma,
    /// `=>`
    Arrow,
    /// End of a statement: a newline or `;`.
    Sep,
    /// Something that is not a token; lexing resumed on the next line.
    Error(ShellError),
    /// End of input.
    Eof,
}

impl Tok {
    /// How the token reads in an error message.
    pub fn describe(&self) -> String {
        match self {
            Tok::Str(_) => "a string".into(),
            Tok::Int(n) => format!("the number {n}"),
            Tok::Word(w) => format!("'{w}'"),
            Tok::LBrace => "'{'".into(),
            Tok::RBrace => "'}'".into(),
            Tok::LBracket => "'['".into(),
            Tok::RBracket => "']'".into(),
            Tok::LParen => "'('".into(),
            Tok::RParen => "')'".into(),
            Tok::Comma => "','".into(),
            Tok::Arrow => "'=>'".into(),
            Tok::Sep => "the end of the command".into(),
            Tok::Error(_) => "an invalid token".into(),
            Tok::Eof => "the end of input".into(),
        }
    }
}

/// A token and where it starts.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Token {
    /// The token.
    pub tok: Tok,
    /// Its first character.
    pub pos: Pos,
}

struct Lexer {
    chars: Vec<char>,
    i: usize,
    line: u32,
    col: u32,
    /// Open brackets with where they opened: a newline inside them does not end the statement,
    /// as in Ruby, so a long `{...}` can span lines.
    open: Vec<(char, Pos)>,
    out: Vec<Token>,
}

/// Split `src` into tokens; always ends with [`Tok::Eof`].
pub fn tokenize(src: &str) -> Vec<Token> {
    let mut lx = Lexer {
        chars: src.chars().collect(),
        i: 0,
        line: 1,
        col: 1,
        open: Vec::new(),
        out: Vec::new(),
    };
    lx.run();
    lx.out
}

impl Lexer {
    fn pos(&self) -> Pos {
        Pos {
            line: self.line,
            col: self.col,
        }
    }

    fn peek(&self) -> Option<char> {
        self.chars.get(self.i).copied()
    }

    fn peek2(&self) -> Option<char> {
        self.chars.get(self.i + 1).copied()
    }

    fn bump(&mut self) -> Option<char> {
        let c = self.peek()?;
        self.i += 1;
        if c == '\n' {
            self.line += 1;
            self.col = 1;
        } else {
            self.col += 1;
        }
        Some(c)
    }

    fn push(&mut self, tok: Tok, pos: Pos) {
        self.out.push(Token { tok, pos });
    }

    /// True when the last token asks for more (`,` or `=>`): the statement goes on past a
    /// newline, as Ruby lets a call's arguments continue on the next line.
    fn continues(&self) -> bool {
        matches!(
            self.out.last().map(|t| &t.tok),
            Some(Tok::Comma | Tok::Arrow)
        )
    }

    /// Record an error and skip the rest of the line: the newline then ends the broken
    /// statement and the next line starts afresh.
    fn fail(&mut self, pos: Pos, msg: String) {
        self.push(Tok::Error(ShellError::parse(pos, msg)), pos);
        while let Some(c) = self.peek() {
            if c == '\n' {
                break;
            }
            self.bump();
        }
        self.open.clear();
    }

    fn run(&mut self) {
        while let Some(c) = self.peek() {
            let pos = self.pos();
            match c {
                '\n' => {
                    self.bump();
                    if self.open.is_empty() && !self.continues() {
                        self.push(Tok::Sep, pos);
                    }
                }
                ';' => {
                    self.bump();
                    self.open.clear();
                    self.push(Tok::Sep, pos);
                }
                c if c.is_whitespace() => {
                    self.bump();
                }
                '#' => {
                    while self.peek().is_some_and(|c| c != '\n') {
                        self.bump();
                    }
                }
                '{' | '[' | '(' => {
                    self.bump();
                    self.open.push((c, pos));
                    let tok = match c {
                        '{' => Tok::LBrace,
                        '[' => Tok::LBracket,
                        _ => Tok::LParen,
                    };
                    self.push(tok, pos);
                }
                '}' | ']' | ')' => {
                    self.bump();
                    let want = match c {
                        '}' => '{',
                        ']' => '[',
                        _ => '(',
                    };
                    match self.open.pop() {
                        Some((o, _)) if o == want => {}
                        Some((o, opos)) => {
                            self.fail(
                                pos,
                                format!(
                                    "'{c}' does not close the '{o}' opened at line {}, column {}",
                                    opos.line, opos.col
                                ),
                            );
                            continue;
                        }
                        None => {
                            self.fail(pos, format!("'{c}' closes nothing"));
                            continue;
                        }
                    }
                    let tok = match c {
                        '}' => Tok::RBrace,
                        ']' => Tok::RBracket,
                        _ => Tok::RParen,
                    };
                    self.push(tok, pos);
                }
                ',' => {
                    self.bump();
                    self.push(Tok::Comma, pos);
                }
                '=' if self.peek2() == Some('>') => {
                    self.bump();
                    self.bump();
                    self.push(Tok::Arrow, pos);
                }
                '\'' | '"' => self.string(c, pos),
                c if c.is_ascii_digit()
                    || (c == '-' && self.peek2().is_some_and(|d| d.is_ascii_digit())) =>
                {
                    self.number(pos)
                }
                c if c.is_ascii_alphabetic() || c == '_' => self.word(pos),
                '=' => self.fail(pos, "expected '=>' (a lone '=' is not shell syntax)".into()),
                other => self.fail(pos, format!("unexpected character {other:?}")),
            }
        }
        let pos = self.pos();
        if let Some(&(o, opos)) = self.open.last() {
            let e = ShellError::parse(
                opos,
                format!(
                    "'{o}' is never closed (input ends at line {}, column {})",
                    pos.line, pos.col
                ),
            )
            .incomplete();
            self.push(Tok::Error(e), pos);
        } else if self.continues() {
            let e =
                ShellError::parse(pos, "input ends where a value was expected".into()).incomplete();
            self.push(Tok::Error(e), pos);
        }
        self.push(Tok::Eof, pos);
    }

    fn word(&mut self, pos: Pos) {
        let mut w = String::new();
        while let Some(c) = self.peek() {
            if c.is_ascii_alphanumeric() || c == '_' {
                w.push(c);
                self.bump();
            } else {
                break;
            }
        }
        // Ruby predicate names such as `exists?` are accepted as written.
        if matches!(self.peek(), Some('?' | '!')) {
            if let Some(c) = self.bump() {
                w.push(c);
            }
        }
        self.push(Tok::Word(w), pos);
    }

    fn number(&mut self, pos: Pos) {
        let mut digits = String::new();
        if self.peek() == Some('-') {
            digits.push('-');
            self.bump();
        }
        while let Some(c) = self.peek() {
            if c.is_ascii_digit() {
                digits.push(c);
                self.bump();
            } else if c == '_' && self.peek2().is_some_and(|d| d.is_ascii_digit()) {
                // Ruby's digit grouping: 1_000_000.
                self.bump();
            } else {
                break;
            }
        }
        if self
            .peek()
            .is_some_and(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        {
            let c = self.peek().unwrap_or(' ');
            let at = self.pos();
            self.fail(
                at,
                format!("unexpected {c:?} in a number (only integers are accepted)"),
            );
            return;
        }
        match digits.parse::<i64>() {
            Ok(n) => self.push(Tok::Int(n), pos),
            Err(_) => self.fail(pos, format!("number {digits} is out of range")),
        }
    }

    fn string(&mut self, quote: char, pos: Pos) {
        self.bump();
        let mut out: Vec<u8> = Vec::new();
        loop {
            let at = self.pos();
            let Some(c) = self.peek() else {
                self.fail(pos, "unterminated string".into());
                return;
            };
            if c == '\n' {
                self.fail(
                    pos,
                    "unterminated string (a string ends on its line; write \\n for a newline)"
                        .into(),
                );
                return;
            }
            self.bump();
            if c == quote {
                break;
            }
            if c != '\\' {
                let mut buf = [0u8; 4];
                out.extend_from_slice(c.encode_utf8(&mut buf).as_bytes());
                continue;
            }
            let Some(e) = self.peek() else {
                continue;
            };
            match e {
                'x' => {
                    self.bump();
                    let h1 = self.peek().and_then(|c| c.to_digit(16));
                    let h2 = self.peek2().and_then(|c| c.to_digit(16));
                    match (h1, h2) {
                        (Some(a), Some(b)) => {
                            self.bump();
                            self.bump();
                            out.push((a * 16 + b) as u8);
                        }
                        _ => {
                            self.fail(at, "\\x must be followed by two hex digits".into());
                            return;
                        }
                    }
                }
                '\\' => {
                    self.bump();
                    out.push(b'\\');
                }
                q if q == quote => {
                    self.bump();
                    out.push(q as u8);
                }
                // Ruby keeps other backslashes of a single-quoted string as they are.
                _ if quote == '\'' => out.push(b'\\'),
                'n' | 't' | 'r' | '0' | 'e' | '\'' => {
                    self.bump();
                    out.push(match e {
                        'n' => b'\n',
                        't' => b'\t',
                        'r' => b'\r',
                        '0' => 0,
                        'e' => 0x1b,
                        _ => b'\'',
                    });
                }
                other => {
                    self.fail(
                        at,
                        format!(
                            "unknown escape \\{other} (known: \\xNN \\n \\t \\r \\0 \\e \\\\ \\\" \\')"
                        ),
                    );
                    return;
                }
            }
        }
        self.push(Tok::Str(out), pos);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn toks(s: &str) -> Vec<Tok> {
        tokenize(s).into_iter().map(|t| t.tok).collect()
    }

    #[test]
    fn literals() {
        assert_eq!(
            toks(r#"put 't', "r\x001", 'cf:q', -12, {A => [1, nil]}"#),
            vec![
                Tok::Word("put".into()),
                Tok::Str(b"t".to_vec()),
                Tok::Comma,
                Tok::Str(b"r\x001".to_vec()),
                Tok::Comma,
                Tok::Str(b"cf:q".to_vec()),
                Tok::Comma,
                Tok::Int(-12),
                Tok::Comma,
                Tok::LBrace,
                Tok::Word("A".into()),
                Tok::Arrow,
                Tok::LBracket,
                Tok::Int(1),
                Tok::Comma,
                Tok::Word("nil".into()),
                Tok::RBracket,
                Tok::RBrace,
                Tok::Eof,
            ]
        );
    }

    #[test]
    fn escapes_in_both_quotes() {
        assert_eq!(toks(r"'a\xFFb'")[0], Tok::Str(vec![b'a', 0xff, b'b']));
        assert_eq!(toks(r"'it\'s \n'")[0], Tok::Str(b"it's \\n".to_vec()));
        assert_eq!(toks(r#""a\tb\n\"\\""#)[0], Tok::Str(b"a\tb\n\"\\".to_vec()));
        assert_eq!(toks("'é'")[0], Tok::Str("é".as_bytes().to_vec()));
    }

    #[test]
    fn separators_and_continuations() {
        let t = toks("list; list\nscan 't',\n {LIMIT =>\n 1}\n# comment\nlist");
        let seps = t.iter().filter(|t| **t == Tok::Sep).count();
        assert_eq!(seps, 4, "{t:?}");
    }

    #[test]
    fn errors_carry_positions_and_recover_on_the_next_line() {
        let t = tokenize("put 't', \"a\\qb\"\nlist");
        let Tok::Error(e) = &t[3].tok else {
            panic!("{t:?}")
        };
        assert_eq!(e.to_string(), "line 1, column 12: unknown escape \\q (known: \\xNN \\n \\t \\r \\0 \\e \\\\ \\\" \\')");
        assert_eq!(t[4].tok, Tok::Sep);
        assert_eq!(t[5].tok, Tok::Word("list".into()));

        let t = tokenize("scan 't', {LIMIT => 1");
        let Some(Tok::Error(e)) = t
            .iter()
            .map(|t| &t.tok)
            .find(|t| matches!(t, Tok::Error(_)))
        else {
            panic!("{t:?}")
        };
        assert!(e.is_incomplete());
        assert_eq!(e.pos.map(|p| (p.line, p.col)), Some((1, 11)));

        for bad in [
            "'abc",
            "x = 1",
            "1.5",
            "99999999999999999999",
            "}",
            "[)",
            "'\\x4'",
        ] {
            assert!(
                tokenize(bad).iter().any(|t| matches!(t.tok, Tok::Error(_))),
                "{bad:?} lexed cleanly"
            );
        }
    }
}
