//! Reading an nginx configuration: the lexer (quotes, escapes, `#`
//! comments), includes with globs relative to the prefix, and splitting an
//! `nginx -T` dump into its files.

use super::*;

/// Lexer state over one file, following `ngx_conf_read_token`.
pub(super) struct Lexer<'a> {
    pub(super) b: &'a [u8],
    pub(super) pos: usize,
    pub(super) line: usize,
}

/// What the lexer found next.
pub(super) enum Tok {
    /// Words then `;`: (words, first line, `;` line, start byte, end byte, line clear after).
    Stmt(Vec<String>, usize, usize, usize, usize, bool),
    /// Words then `{`.
    Open(Vec<String>, usize, usize, usize, usize, bool),
    /// `}`.
    Close,
    /// End of the file.
    End,
}

pub(super) fn blank(c: u8) -> bool {
    matches!(c, b' ' | b'\t' | b'\r' | b'\n')
}

/// nginx's unescaping of a word: `\"`, `\'`, `\\` lose the backslash; `\t`,
/// `\r`, `\n` become the control characters; any other `\x` stays as written.
pub(super) fn unescape(w: &[u8]) -> String {
    let mut out = Vec::with_capacity(w.len());
    let mut i = 0;
    while i < w.len() {
        if w[i] == b'\\' && i + 1 < w.len() {
            match w[i + 1] {
                b'"' | b'\'' | b'\\' => {
                    out.push(w[i + 1]);
                    i += 2;
                    continue;
                }
                b't' => {
                    out.push(b'\t');
                    i += 2;
                    continue;
                }
                b'r' => {
                    out.push(b'\r');
                    i += 2;
                    continue;
                }
                b'n' => {
                    out.push(b'\n');
                    i += 2;
                    continue;
                }
                _ => {}
            }
        }
        out.push(w[i]);
        i += 1;
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl<'a> Lexer<'a> {
    /// True when only blanks or a comment follow `pos` on its line.
    pub(super) fn line_clear(&self) -> bool {
        let mut i = self.pos;
        while i < self.b.len() && matches!(self.b[i], b' ' | b'\t' | b'\r') {
            i += 1;
        }
        i >= self.b.len() || self.b[i] == b'\n' || self.b[i] == b'#'
    }

    /// The next statement, block start or block end; Err (line, message) as nginx words it.
    pub(super) fn next(&mut self) -> Result<Tok, (usize, String)> {
        let mut words: Vec<String> = Vec::new();
        let (mut last_space, mut need_space, mut sharp, mut quoted) = (true, false, false, false);
        let (mut dq, mut sq, mut variable) = (false, false, false);
        let mut start = self.pos;
        let mut first: Option<(usize, usize)> = None; // (line, byte) of the first word
        loop {
            if self.pos >= self.b.len() {
                if !words.is_empty() || !last_space {
                    return Err((
                        self.line,
                        "unexpected end of file, expecting \";\" or \"}\"".into(),
                    ));
                }
                return Ok(Tok::End);
            }
            let ch = self.b[self.pos];
            self.pos += 1;
            if ch == b'\n' {
                self.line += 1;
                sharp = false;
            }
            if sharp {
                continue;
            }
            if quoted {
                quoted = false;
                continue;
            }
            let done = |s: &Self, words: Vec<String>, first: Option<(usize, usize)>, open: bool| {
                let (l, b0) = first.unwrap_or((s.line, s.pos - 1));
                let clear = s.line_clear();
                if open {
                    Tok::Open(words, l, s.line, b0, s.pos, clear)
                } else {
                    Tok::Stmt(words, l, s.line, b0, s.pos, clear)
                }
            };
            if need_space {
                if blank(ch) {
                    last_space = true;
                    need_space = false;
                    continue;
                }
                if ch == b';' {
                    return Ok(done(self, words, first, false));
                }
                if ch == b'{' {
                    return Ok(done(self, words, first, true));
                }
                if ch == b')' {
                    last_space = true;
                    need_space = false;
                } else {
                    return Err((self.line, format!("unexpected \"{}\"", ch as char)));
                }
            }
            if last_space {
                start = self.pos - 1;
                if blank(ch) {
                    continue;
                }
                match ch {
                    b';' | b'{' => {
                        if words.is_empty() {
                            return Err((self.line, format!("unexpected \"{}\"", ch as char)));
                        }
                        return Ok(done(self, words, first, ch == b'{'));
                    }
                    b'}' => {
                        if !words.is_empty() {
                            return Err((self.line, "unexpected \"}\"".into()));
                        }
                        return Ok(Tok::Close);
                    }
                    b'#' => {
                        sharp = true;
                        continue;
                    }
                    _ => {}
                }
                if first.is_none() {
                    first = Some((self.line, self.pos - 1));
                }
                last_space = false;
                match ch {
                    b'\\' => quoted = true,
                    b'"' => {
                        start += 1;
                        dq = true;
                    }
                    b'\'' => {
                        start += 1;
                        sq = true;
                    }
                    b'$' => variable = true,
                    _ => {}
                }
                continue;
            }
            if ch == b'{' && variable {
                continue;
            }
            variable = false;
            if ch == b'\\' {
                quoted = true;
                continue;
            }
            if ch == b'$' {
                variable = true;
                continue;
            }
            let mut found = false;
            if dq {
                if ch == b'"' {
                    dq = false;
                    need_space = true;
                    found = true;
                }
            } else if sq {
                if ch == b'\'' {
                    sq = false;
                    need_space = true;
                    found = true;
                }
            } else if blank(ch) || ch == b';' || ch == b'{' {
                last_space = true;
                found = true;
            }
            if found {
                words.push(unescape(&self.b[start..self.pos - 1]));
                if ch == b';' {
                    return Ok(done(self, words, first, false));
                }
                if ch == b'{' {
                    return Ok(done(self, words, first, true));
                }
            }
        }
    }

    /// Skips a Lua block body up to its closing `}` (the `{` already read):
    /// Lua strings, long brackets `[[ ]]`/`[==[ ]==]` and `--` comments are
    /// not searched for braces. Returns the line of the `}`.
    pub(super) fn skip_lua(&mut self) -> Result<usize, (usize, String)> {
        let mut depth = 1usize;
        let start_line = self.line;
        while self.pos < self.b.len() {
            let ch = self.b[self.pos];
            self.pos += 1;
            match ch {
                b'\n' => self.line += 1,
                b'{' => depth += 1,
                b'}' => {
                    depth -= 1;
                    if depth == 0 {
                        return Ok(self.line);
                    }
                }
                b'"' | b'\'' => {
                    while self.pos < self.b.len() {
                        let c = self.b[self.pos];
                        self.pos += 1;
                        if c == b'\\' && self.pos < self.b.len() {
                            if self.b[self.pos] == b'\n' {
                                self.line += 1;
                            }
                            self.pos += 1;
                        } else if c == ch {
                            break;
                        } else if c == b'\n' {
                            self.line += 1;
                        }
                    }
                }
                b'[' => {
                    if let Some(level) = self.long_bracket() {
                        self.skip_long(level);
                    }
                }
                b'-' if self.b.get(self.pos) == Some(&b'-') => {
                    self.pos += 1;
                    if self.b.get(self.pos) == Some(&b'[') {
                        self.pos += 1;
                        if let Some(level) = self.long_bracket() {
                            self.skip_long(level);
                            continue;
                        }
                    }
                    while self.pos < self.b.len() && self.b[self.pos] != b'\n' {
                        self.pos += 1;
                    }
                }
                _ => {}
            }
        }
        Err((
            start_line,
            "a *_by_lua_block is never closed (unexpected end of file)".into(),
        ))
    }

    /// After a `[`: `=`* then `[` opens a long bracket of that level.
    pub(super) fn long_bracket(&mut self) -> Option<usize> {
        let mut i = self.pos;
        while i < self.b.len() && self.b[i] == b'=' {
            i += 1;
        }
        if i < self.b.len() && self.b[i] == b'[' {
            let level = i - self.pos;
            self.pos = i + 1;
            Some(level)
        } else {
            None
        }
    }

    pub(super) fn skip_long(&mut self, level: usize) {
        while self.pos < self.b.len() {
            let c = self.b[self.pos];
            self.pos += 1;
            if c == b'\n' {
                self.line += 1;
            } else if c == b']' {
                let mut i = self.pos;
                while i < self.b.len() && self.b[i] == b'=' {
                    i += 1;
                }
                if i - self.pos == level && self.b.get(i) == Some(&b']') {
                    self.pos = i + 1;
                    return;
                }
            }
        }
    }
}

#[derive(Default)]
pub(super) struct Reader {
    pub(super) stmts: Vec<Stmt>,
    pub(super) blocks: Vec<Block>,
    pub(super) files: Vec<PathBuf>,
    pub(super) errors: Vec<(PathBuf, usize, String)>,
    pub(super) reported: BTreeSet<(PathBuf, usize, String)>,
    /// `nginx -T` output split into files.
    pub(super) dumped: Option<BTreeMap<PathBuf, String>>,
    pub(super) base: PathBuf,
    /// The files being read, outermost first (include loop detection).
    pub(super) open: Vec<PathBuf>,
}

impl Reader {
    pub(super) fn error(&mut self, file: &Path, line: usize, msg: String) {
        let k = (file.to_path_buf(), line, msg);
        if self.reported.insert(k.clone()) {
            self.errors.push(k);
        }
    }

    pub(super) fn text_of(&self, p: &Path) -> Result<String, String> {
        match &self.dumped {
            Some(m) => m
                .get(p)
                .cloned()
                .ok_or_else(|| format!("{} is not in the `nginx -T` output", p.display())),
            None => read_config(p),
        }
    }

    pub(super) fn expand(&self, pat: &Path) -> Vec<PathBuf> {
        match &self.dumped {
            Some(m) => {
                let ps = pat.to_string_lossy().to_string();
                m.keys()
                    .filter(|k| {
                        let ks = k.to_string_lossy();
                        let (pd, pf) = ps.rsplit_once('/').unwrap_or(("", &ps));
                        let (kd, kf) = ks.rsplit_once('/').unwrap_or(("", &ks));
                        glob::matches(pd, kd) && glob::matches(pf, kf)
                    })
                    .cloned()
                    .collect()
            }
            None => {
                if glob::has_wildcard(&pat.to_string_lossy()) {
                    glob::expand(pat)
                } else if pat.exists() {
                    vec![pat.to_path_buf()]
                } else {
                    vec![]
                }
            }
        }
    }

    pub(super) fn read(
        &mut self,
        p: &Path,
        ctx: &[String],
        parent: Option<usize>,
        from: Option<(&Path, usize)>,
    ) {
        let key = std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
        let (ff, fl) = from
            .map(|(f, l)| (f.to_path_buf(), l))
            .unwrap_or_else(|| (p.to_path_buf(), 0));
        if self.open.contains(&key) {
            self.error(
                &ff,
                fl,
                format!(
                    "include loop: {} includes itself (nginx recurses until it crashes)",
                    p.display()
                ),
            );
            return;
        }
        if self.open.len() >= 64 {
            self.error(
                &ff,
                fl,
                format!("includes nested too deep at {}", p.display()),
            );
            return;
        }
        match self.text_of(p) {
            Ok(t) => {
                self.files.push(p.to_path_buf());
                self.open.push(key);
                self.parse(p, &t, ctx, parent);
                self.open.pop();
            }
            Err(e) => self.error(&ff, fl, e),
        }
    }

    pub(super) fn parse(
        &mut self,
        file: &Path,
        text: &str,
        outer: &[String],
        outer_parent: Option<usize>,
    ) {
        let mut lx = Lexer {
            b: text.as_bytes(),
            pos: 0,
            line: 1,
        };
        let mut ctx: Vec<String> = outer.to_vec();
        // (block index, open line)
        let mut opened: Vec<(usize, usize)> = Vec::new();
        loop {
            let tok = match lx.next() {
                Ok(t) => t,
                Err((line, msg)) => {
                    // nginx stops at the first error; so does the reading of this file.
                    self.error(file, line, msg);
                    return;
                }
            };
            let parent = opened.last().map(|o| o.0).or(outer_parent);
            match tok {
                Tok::End => break,
                Tok::Close => {
                    if opened.pop().is_some() {
                        ctx.pop();
                    } else {
                        self.error(file, lx.line, "unexpected \"}\"".into());
                        return;
                    }
                }
                Tok::Stmt(words, line, end_line, b0, b1, clear) => {
                    let (name, args) = words.split_first().expect("a statement has a word");
                    let st = Stmt {
                        name: name.clone(),
                        args: args.to_vec(),
                        file: file.to_path_buf(),
                        line,
                        end_line,
                        source: text[b0..b1].to_string(),
                        ctx: ctx.clone(),
                        parent,
                        opens: None,
                    };
                    self.stmts.push(st);
                    if clear {
                        if let Some(b) = parent.filter(|_| !opened.is_empty()) {
                            self.blocks[b].insert_after.get_or_insert(end_line);
                        }
                    }
                    if name == "include" {
                        for pat in args {
                            let p = resolve(&self.base, pat);
                            let found = self.expand(&p);
                            if found.is_empty() && !glob::has_wildcard(pat) {
                                self.error(
                                    file,
                                    line,
                                    format!("include {pat}: open() failed: no such file"),
                                );
                            }
                            for f in found {
                                self.read(&f, &ctx, parent, Some((file, line)));
                            }
                        }
                    }
                }
                Tok::Open(words, line, end_line, b0, b1, clear) => {
                    let (name, args) = words.split_first().expect("a block has a word");
                    let idx = self.blocks.len();
                    self.blocks.push(Block {
                        name: name.clone(),
                        args: args.to_vec(),
                        file: file.to_path_buf(),
                        parent,
                        insert_after: clear.then_some(end_line),
                    });
                    self.stmts.push(Stmt {
                        name: name.clone(),
                        args: args.to_vec(),
                        file: file.to_path_buf(),
                        line,
                        end_line,
                        source: text[b0..b1].to_string(),
                        ctx: ctx.clone(),
                        parent,
                        opens: Some(idx),
                    });
                    if name.ends_with("_by_lua_block") {
                        // The body is Lua, read by the lua module's own lexer.
                        match lx.skip_lua() {
                            Ok(end) => {
                                if lx.line_clear() {
                                    if let Some(b) = parent.filter(|_| !opened.is_empty()) {
                                        self.blocks[b].insert_after.get_or_insert(end);
                                    }
                                }
                            }
                            Err((l, m)) => {
                                self.error(file, l, m);
                                return;
                            }
                        }
                        continue;
                    }
                    ctx.push(name.clone());
                    opened.push((idx, line));
                }
            }
        }
        if let Some((_, l)) = opened.first() {
            let l = *l;
            self.error(
                file,
                l,
                "unexpected end of file, expecting \"}\" (this block is never closed)".into(),
            );
        }
    }
}

/// Splits `nginx -T` output into files.
pub fn split_dump(text: &str) -> Option<BTreeMap<PathBuf, String>> {
    let mut m: BTreeMap<PathBuf, String> = BTreeMap::new();
    let mut cur: Option<PathBuf> = None;
    for line in text.lines() {
        if let Some(p) = line
            .strip_prefix("# configuration file ")
            .and_then(|r| r.trim_end().strip_suffix(':'))
        {
            let p = PathBuf::from(p);
            m.entry(p.clone()).or_default();
            cur = Some(p);
            continue;
        }
        if let Some(c) = &cur {
            let e = m.get_mut(c).expect("inserted");
            e.push_str(line);
            e.push('\n');
        }
    }
    (!m.is_empty()).then_some(m)
}
