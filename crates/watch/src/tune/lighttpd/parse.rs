//! Reading a lighttpd configuration: the tokenizer, conditionals
//! (`$HTTP[...]`, `else`), `include`, `include_shell` and variables.

use super::*;

#[derive(Debug, Clone, PartialEq)]
pub(super) enum T {
    Str(String),
    Int(i64),
    Key(String),
    /// `$HTTP` etc.
    Dollar(String),
    /// `=`, `+=`, `:=`, `==`, `!=`, `=~`, `!~`, `=^`, `=$`, `=>`, `+`.
    Op(&'static str),
    Punct(char),
    Eol,
}

/// A token with its line and byte span.
#[derive(Debug, Clone)]
pub(super) struct Tk {
    t: T,
    line: usize,
    start: usize,
    end: usize,
}

pub(super) fn tokenize(text: &str) -> Result<Vec<Tk>, (usize, String)> {
    let b = text.as_bytes();
    let mut out = Vec::new();
    let (mut i, mut line, mut parens) = (0usize, 1usize, 0i32);
    while i < b.len() {
        let c = b[i];
        let start = i;
        let push = |out: &mut Vec<Tk>, t: T, end: usize| {
            out.push(Tk {
                t,
                line,
                start,
                end,
            })
        };
        match c {
            b' ' | b'\t' | b'\r' => i += 1,
            b'\n' => {
                if parens == 0 {
                    push(&mut out, T::Eol, i + 1);
                }
                line += 1;
                i += 1;
            }
            b'#' => {
                while i < b.len() && b[i] != b'\n' {
                    i += 1;
                }
            }
            b'"' => {
                let mut s = Vec::new();
                i += 1;
                let sl = line;
                loop {
                    if i >= b.len() {
                        return Err((sl, "missing closing quote: a string is never closed".into()));
                    }
                    match b[i] {
                        b'\\' if i + 1 < b.len() => {
                            if b[i + 1] != b'"' && b[i + 1] != b'\\' {
                                s.push(b'\\');
                            }
                            s.push(b[i + 1]);
                            i += 2;
                        }
                        b'"' => {
                            i += 1;
                            break;
                        }
                        b'\n' => {
                            line += 1;
                            s.push(b'\n');
                            i += 1;
                        }
                        x => {
                            s.push(x);
                            i += 1;
                        }
                    }
                }
                out.push(Tk {
                    t: T::Str(String::from_utf8_lossy(&s).into_owned()),
                    line: sl,
                    start,
                    end: i,
                });
            }
            b'(' => {
                parens += 1;
                i += 1;
                push(&mut out, T::Punct('('), i);
            }
            b')' => {
                parens -= 1;
                if parens < 0 {
                    return Err((line, "unexpected ')'".into()));
                }
                i += 1;
                push(&mut out, T::Punct(')'), i);
            }
            b'[' | b']' | b'{' | b'}' | b',' => {
                i += 1;
                push(&mut out, T::Punct(c as char), i);
            }
            b'=' | b'!' | b'+' | b':' => {
                let n = b.get(i + 1).copied();
                let op: &'static str = match (c, n) {
                    (b'=', Some(b'=')) => "==",
                    (b'=', Some(b'~')) => "=~",
                    (b'=', Some(b'^')) => "=^",
                    (b'=', Some(b'$')) => "=$",
                    (b'=', Some(b'>')) => "=>",
                    (b'=', _) => "=",
                    (b'!', Some(b'=')) => "!=",
                    (b'!', Some(b'~')) => "!~",
                    (b'+', Some(b'=')) => "+=",
                    (b'+', _) => "+",
                    (b':', Some(b'=')) => ":=",
                    _ => return Err((line, format!("unexpected {:?}", c as char))),
                };
                i += op.len();
                push(&mut out, T::Op(op), i);
            }
            b'$' => {
                i += 1;
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b[i] == b'_') {
                    i += 1;
                }
                push(&mut out, T::Dollar(text[start + 1..i].to_string()), i);
            }
            b'0'..=b'9' => {
                while i < b.len() && b[i].is_ascii_digit() {
                    i += 1;
                }
                let v = text[start..i]
                    .parse()
                    .map_err(|_| (line, format!("integer {} too large", &text[start..i])))?;
                push(&mut out, T::Int(v), i);
            }
            x if x.is_ascii_alphabetic() || x == b'_' => {
                while i < b.len() && (b[i].is_ascii_alphanumeric() || b"._-".contains(&b[i])) {
                    i += 1;
                }
                push(&mut out, T::Key(text[start..i].to_string()), i);
            }
            x => {
                return Err((
                    line,
                    format!("invalid character {:?} (lighttpd has no ';' or other separators: one setting per line)", x as char),
                ))
            }
        }
    }
    Ok(out)
}

/// The words that chain a conditional (`else`; lighttpd 1.4.74 also takes the others).
pub(super) const ELSE_WORDS: &[&str] = &["else", "elif", "elsif", "elseif"];

#[derive(Default)]
pub(super) struct Reader {
    pub(super) assigns: Vec<Assign>,
    pub(super) files: Vec<PathBuf>,
    pub(super) errors: Vec<(PathBuf, usize, String)>,
    /// Things not checked (an `include_shell` that was not run).
    pub(super) notes: Vec<(PathBuf, usize, String)>,
    pub(super) base: PathBuf,
    /// Variables and settings by the conditional they were set in (the
    /// empty path: the global context), as lighttpd keeps one array per
    /// context and looks a name up from the current context outwards.
    pub(super) vars: HashMap<Vec<String>, HashMap<String, Val>>,
    /// `include_shell` commands that were not run: (file, line, command).
    pub(super) unrun: Vec<(PathBuf, usize, String)>,
    pub(super) open: Vec<PathBuf>,
    /// The main file's last line (where a server-wide setting may be added).
    pub(super) main_lines: usize,
}

/// A parse position in one file's tokens.
pub(super) struct P<'a> {
    tk: &'a [Tk],
    i: usize,
    text: &'a str,
    file: &'a Path,
}

pub(super) type PErr = (usize, String);

impl P<'_> {
    fn peek(&self) -> Option<&T> {
        self.tk.get(self.i).map(|t| &t.t)
    }
    fn line(&self) -> usize {
        self.tk
            .get(self.i)
            .or_else(|| self.tk.last())
            .map(|t| t.line)
            .unwrap_or(1)
    }
    fn bump(&mut self) -> Option<&Tk> {
        let t = self.tk.get(self.i);
        self.i += 1;
        t
    }
    fn skip_eols(&mut self) {
        while self.peek() == Some(&T::Eol) {
            self.i += 1;
        }
    }
    fn expect(&mut self, t: T, what: &str) -> Result<(), PErr> {
        if self.peek() == Some(&t) {
            self.i += 1;
            Ok(())
        } else {
            Err((self.line(), format!("expected {what}")))
        }
    }
}

impl Reader {
    pub(super) fn read(&mut self, p: &Path, cond: &[String], from: Option<(&Path, usize)>) {
        let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let (ff, fl) = from
            .map(|(f, l)| (f.to_path_buf(), l))
            .unwrap_or_else(|| (p.to_path_buf(), 0));
        if self.open.contains(&key) {
            self.errors.push((
                ff,
                fl,
                format!("include loop: {} includes itself", p.display()),
            ));
            return;
        }
        if self.open.len() >= 32 {
            self.errors.push((
                ff,
                fl,
                format!("includes nested too deep at {}", p.display()),
            ));
            return;
        }
        match read_config(p) {
            Ok(t) => {
                self.files.push(p.to_path_buf());
                if self.open.is_empty() {
                    self.main_lines = t.lines().count();
                }
                self.open.push(key);
                self.parse(p, &t, cond);
                self.open.pop();
            }
            Err(e) => self.errors.push((ff, fl, e)),
        }
    }

    pub(super) fn include(&mut self, pat: &str, cond: &[String], file: &Path, line: usize) {
        let p = resolve(&self.base, pat);
        let found = if glob::has_wildcard(pat) {
            glob::expand(&p)
        } else {
            vec![p]
        };
        for f in found {
            self.read(&f, cond, Some((file, line)));
        }
    }

    pub(super) fn parse(&mut self, file: &Path, text: &str, cond: &[String]) {
        let tk = match tokenize(text) {
            Ok(t) => t,
            Err((l, m)) => {
                self.errors.push((file.to_path_buf(), l, m));
                return;
            }
        };
        let mut p = P {
            tk: &tk,
            i: 0,
            text,
            file,
        };
        if let Err((l, m)) = self.block(&mut p, cond, false) {
            // lighttpd stops at the first error; so does the reading of this file.
            self.errors.push((file.to_path_buf(), l, m));
        }
    }

    /// Statements until `}` (inside a block) or the end. A statement
    /// lighttpd would refuse is reported and skipped to the end of its line
    /// (its block too, when it opened one), so one error does not hide the
    /// settings after it.
    pub(super) fn block(&mut self, p: &mut P, cond: &[String], inner: bool) -> Result<(), PErr> {
        loop {
            p.skip_eols();
            match p.peek() {
                None if inner => return Err((p.line(), "a '{' block is never closed".into())),
                None => return Ok(()),
                Some(T::Punct('}')) if inner => {
                    p.i += 1;
                    return Ok(());
                }
                Some(T::Punct('}')) => return Err((p.line(), "unexpected '}'".into())),
                _ => {
                    let start = p.i;
                    if let Err((l, m)) = self.statement(p, cond) {
                        self.errors.push((p.file.to_path_buf(), l, m));
                        Self::skip_statement(p, start);
                    }
                }
            }
        }
    }

    /// After an error in the statement starting at token `start`: moves to
    /// the end of its line, past the block it opens when it opens one.
    fn skip_statement(p: &mut P, start: usize) {
        p.i = start;
        let mut depth = 0usize;
        while let Some(t) = p.peek() {
            match t {
                T::Punct('{') => depth += 1,
                T::Punct('}') if depth == 0 => return,
                T::Punct('}') => {
                    depth -= 1;
                    if depth == 0 {
                        p.i += 1;
                        if p.peek() == Some(&T::Eol) {
                            p.i += 1;
                        }
                        return;
                    }
                }
                T::Eol if depth == 0 => {
                    p.i += 1;
                    return;
                }
                _ => {}
            }
            p.i += 1;
        }
    }

    /// A name as lighttpd stores it: a name without a `.` is a variable
    /// (`server_root` is `var.server_root`).
    pub(super) fn full_name(k: &str) -> String {
        if k.contains('.') {
            k.to_string()
        } else {
            format!("var.{k}")
        }
    }

    /// A name's value from the current context outwards (lighttpd's
    /// `configparser_get_variable`).
    fn lookup(&self, cond: &[String], key: &str) -> Option<Val> {
        (0..=cond.len())
            .rev()
            .find_map(|n| self.vars.get(&cond[..n]).and_then(|m| m.get(key)))
            .cloned()
    }

    /// After a statement: the end of its line, a `}` (left for the block) or the end.
    pub(super) fn end_of_statement(p: &mut P) -> Result<(), PErr> {
        match p.peek() {
            None | Some(T::Punct('}')) => Ok(()),
            Some(T::Eol) => {
                p.i += 1;
                Ok(())
            }
            Some(t) => Err((
                p.line(),
                format!("unexpected {t:?} after a complete setting (one setting per line)"),
            )),
        }
    }

    pub(super) fn statement(&mut self, p: &mut P, cond: &[String]) -> Result<(), PErr> {
        let first = p.bump().cloned().expect("peeked");
        match &first.t {
            T::Dollar(_) => self.conditional(p, first, cond),
            T::Key(k) if k == "if" && matches!(p.peek(), Some(T::Dollar(_))) => {
                self.newer_syntax(p.file, first.line, "if");
                let head = p.bump().cloned().expect("peeked");
                self.conditional(p, head, cond)
            }
            T::Key(k) if k == "global" && p.peek() == Some(&T::Punct('{')) => {
                p.i += 1;
                self.block(p, cond, true)?;
                Self::end_of_statement(p)
            }
            T::Key(k) if ELSE_WORDS.contains(&k.as_str()) && p.peek() == Some(&T::Punct('{')) => {
                // lighttpd reads a stray else block's settings as server-wide.
                self.notes.push((
                    p.file.to_path_buf(),
                    first.line,
                    format!("`{k} {{` without a condition before it: lighttpd reads its settings as server-wide"),
                ));
                p.i += 1;
                self.block(p, cond, true)?;
                Self::end_of_statement(p)
            }
            T::Key(k) if k == "include" || k == "include_shell" => {
                let v = self.expr(p, cond)?;
                Self::end_of_statement(p)?;
                let line = first.line;
                let s = match v {
                    Val::Str(s) => s,
                    Val::Unknown => {
                        self.notes.push((
                            p.file.to_path_buf(),
                            line,
                            format!("{k} with a value not known here (an unset env. variable): not read"),
                        ));
                        return Ok(());
                    }
                    _ => return Err((line, format!("{k} needs a string"))),
                };
                if k == "include" {
                    self.include(&s, cond, p.file, line);
                } else {
                    self.include_shell(&s, cond, p.file, line);
                }
                Ok(())
            }
            T::Key(k) => {
                let key = Self::full_name(k);
                let op = match p.bump().map(|t| &t.t) {
                    Some(T::Op(o @ ("=" | "+=" | ":="))) => *o,
                    _ => {
                        return Err((
                            first.line,
                            format!("{k}: expected '=', '+=' or ':=' after the name"),
                        ))
                    }
                };
                let vstart = p.tk.get(p.i).map(|t| t.start).unwrap_or(p.text.len());
                let val = self.expr(p, cond)?;
                let last = &p.tk[p.i - 1];
                let value = p.text[vstart..last.end].to_string();
                let source = p.text[first.start..last.end].to_string();
                let end_line = last.line + p.text[last.start..last.end].matches('\n').count();
                Self::end_of_statement(p)?;
                if key.starts_with("env.") {
                    return Err((
                        first.line,
                        format!("{key}: setting an env. variable is not supported (lighttpd refuses it)"),
                    ));
                }
                let here = self
                    .vars
                    .get(cond.to_vec().as_slice())
                    .and_then(|m| m.get(&key))
                    .cloned();
                let val = match op {
                    // `=` sets a name once per context; `:=` replaces.
                    "=" if here.is_some() => {
                        self.errors.push((
                            p.file.to_path_buf(),
                            first.line,
                            format!("duplicate config variable {key}: it is already set in this context (lighttpd refuses `=` twice; use `:=` to replace or `+=` to add)"),
                        ));
                        val
                    }
                    // `+=` adds to the value in this context, else to the one in effect here.
                    "+=" => match here.or_else(|| self.lookup(cond, &key)) {
                        Some(old) => old
                            .plus(val)
                            .map_err(|e| (first.line, format!("{key} += …: {e}")))?,
                        None => val,
                    },
                    _ => val,
                };
                self.vars
                    .entry(cond.to_vec())
                    .or_default()
                    .insert(key.clone(), val.clone());
                self.assigns.push(Assign {
                    key,
                    append: op == "+=",
                    value,
                    val,
                    file: p.file.to_path_buf(),
                    line: first.line,
                    end_line,
                    source,
                    cond: cond.to_vec(),
                });
                Ok(())
            }
            t => Err((
                first.line,
                format!("unexpected {t:?} at the start of a line"),
            )),
        }
    }

    /// `$NAME["field"] OP value { ... }` and its `else`/`elif` chain.
    pub(super) fn conditional(
        &mut self,
        p: &mut P,
        first: Tk,
        cond: &[String],
    ) -> Result<(), PErr> {
        let mut head = first;
        loop {
            let start = head.start;
            p.expect(T::Punct('['), "'[' after the condition's $NAME")?;
            match p.bump().map(|t| &t.t) {
                Some(T::Str(_)) => {}
                _ => return Err((head.line, "expected a \"string\" in $NAME[...]".into())),
            }
            p.expect(T::Punct(']'), "']'")?;
            match p.bump().map(|t| &t.t) {
                Some(T::Op("==" | "!=" | "=~" | "!~" | "=^" | "=$")) => {}
                _ => {
                    return Err((
                        head.line,
                        "expected ==, !=, =~, !~, =^ or =$ in the condition".into(),
                    ))
                }
            }
            self.expr(p, cond)?;
            let end = p.tk[p.i - 1].end;
            let label = p.text[start..end]
                .split_whitespace()
                .collect::<Vec<_>>()
                .join(" ");
            p.skip_eols();
            p.expect(T::Punct('{'), "'{' after the condition")?;
            let mut inner = cond.to_vec();
            inner.push(label.clone());
            self.block(p, &inner, true)?;
            // An else / elif may follow on the same or a later line.
            let save = p.i;
            p.skip_eols();
            let kw = match p.peek() {
                Some(T::Key(k)) if ELSE_WORDS.contains(&k.as_str()) => k.clone(),
                _ => {
                    p.i = save;
                    return Self::end_of_statement(p);
                }
            };
            let kw_line = p.line();
            p.i += 1;
            let mut spelled = kw.clone();
            if kw == "else" && matches!(p.peek(), Some(T::Key(k)) if k == "if") {
                p.i += 1;
                spelled = "else if".into();
            }
            if spelled != "else" {
                self.newer_syntax(p.file, kw_line, &spelled);
            }
            p.skip_eols();
            match p.peek() {
                Some(T::Dollar(_)) => {
                    head = p.bump().cloned().expect("peeked");
                }
                Some(T::Punct('{')) => {
                    p.i += 1;
                    let mut inner = cond.to_vec();
                    inner.push(format!("else (not {label})"));
                    self.block(p, &inner, true)?;
                    return Self::end_of_statement(p);
                }
                _ => return Err((p.line(), "expected a condition or '{' after else".into())),
            }
        }
    }

    pub(super) fn expr(&mut self, p: &mut P, cond: &[String]) -> Result<Val, PErr> {
        let mut v = self.value(p, cond)?;
        while p.peek() == Some(&T::Op("+")) {
            p.i += 1;
            let line = p.line();
            let w = self.value(p, cond)?;
            v = v.plus(w).map_err(|e| (line, e))?;
        }
        // lighttpd 1.4.69 accepts strings side by side and keeps only the
        // first (`( "mod_access" "mod_deflate" )` loads mod_access alone).
        while let Some(T::Str(dropped)) = p.peek().cloned() {
            let line = p.line();
            p.i += 1;
            self.notes.push((
                p.file.to_path_buf(),
                line,
                format!("\"{dropped}\" follows another string without a ',' or '+': lighttpd accepts the line and drops it"),
            ));
        }
        Ok(v)
    }

    pub(super) fn value(&mut self, p: &mut P, cond: &[String]) -> Result<Val, PErr> {
        let line = p.line();
        match p.bump().map(|t| t.t.clone()) {
            Some(T::Str(s)) => Ok(Val::Str(s)),
            Some(T::Int(n)) => Ok(Val::Int(n)),
            Some(T::Key(k)) => {
                if let Some(name) = k.strip_prefix("env.") {
                    return Ok(std::env::var(name).map(Val::Str).unwrap_or(Val::Unknown));
                }
                let key = Self::full_name(&k);
                match self.lookup(cond, &key) {
                    Some(v) => Ok(v),
                    None => {
                        // lighttpd refuses the file; the setting is kept as
                        // unknown so that the lines after it are still read.
                        self.errors.push((
                            p.file.to_path_buf(),
                            line,
                            format!("unknown variable {key} (set it before it is used)"),
                        ));
                        Ok(Val::Unknown)
                    }
                }
            }
            Some(T::Punct('(')) => {
                let mut items = Vec::new();
                loop {
                    if p.peek() == Some(&T::Punct(')')) {
                        p.i += 1;
                        return Ok(Val::Arr(items));
                    }
                    let v = self.expr(p, cond)?;
                    if p.peek() == Some(&T::Op("=>")) {
                        p.i += 1;
                        let w = self.expr(p, cond)?;
                        let k = match v {
                            Val::Str(s) => s,
                            _ => return Err((line, "an array key must be a string".into())),
                        };
                        items.push((Some(k), w));
                    } else {
                        items.push((None, v));
                    }
                    match p.peek() {
                        Some(T::Punct(',')) => p.i += 1,
                        Some(T::Punct(')')) => {}
                        _ => return Err((p.line(), "expected ',' or ')' in an array".into())),
                    }
                }
            }
            Some(t) => Err((line, format!("expected a value, found {t:?}"))),
            None => Err((line, "expected a value at the end of the file".into())),
        }
    }

    /// `if`, `elif`, `elsif`, `elseif`, `else if`: lighttpd 1.4.74's words;
    /// read as documented there, and named, since older lighttpd accepts
    /// the line but reads something else (1.4.69's `lighttpd -p` shows an
    /// `elif` block as a `var.elif` setting).
    pub(super) fn newer_syntax(&mut self, file: &Path, line: usize, word: &str) {
        self.notes.push((
            file.to_path_buf(),
            line,
            format!("`{word}` in a conditional needs lighttpd 1.4.74 or later; older versions accept the line but misread it (use `else $COND {{`)"),
        ));
    }

    pub(super) fn include_shell(&mut self, cmd: &str, cond: &[String], file: &Path, line: usize) {
        let script = cmd.split_whitespace().next().unwrap_or("");
        let name = Path::new(script)
            .file_name()
            .and_then(|n| n.to_str())
            .unwrap_or("");
        match name {
            "include-conf-enabled.pl" => self.include("conf-enabled/*.conf", cond, file, line),
            // Debian's helpers that print only the IPv6 socket and the
            // MIME map: nothing the checks look at.
            "use-ipv6.pl" | "create-mime.conf.pl" | "create-mime.assign.pl" => {}
            _ => {
                self.unrun
                    .push((file.to_path_buf(), line, cmd.trim().to_string()));
                self.notes.push((
                    file.to_path_buf(),
                    line,
                    format!(
                        "include_shell {:?} was not run: the settings it prints are not checked",
                        cmd.trim()
                    ),
                ))
            }
        }
    }
}
