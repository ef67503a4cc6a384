//! A light element tree of a document (tag, id, classes, parent, previous
//! sibling, whether it holds text) and the part of the CSS cascade that
//! decides fetches: which image each element and `::before`/`::after` box
//! ends up with (specificity, then order), which subtrees `display: none`
//! (or the UA stylesheet, or `hidden`) takes out of rendering, and which
//! font family, weight and style each piece of rendered text asks for
//! (inherited, `var(--x)` in `font-family` resolved from inherited custom
//! properties). Selectors match right to left on the tree; attribute
//! selectors and pseudo-classes other than the user-action ones (`:hover`,
//! `:focus`…, which never match on a page nobody touches) are taken as
//! matching, and `:not()`/`:is()` contents are not looked into; such an
//! approximate match loads images and fonts but never hides anything
//! (normalize.css's `[hidden] { display: none }` would hide the page).

use crate::css::{Rule, IMAGE_GROUPS, USER_ACTION};

/// Elements kept at most (a bound for hostile pages; beyond it discovery
/// falls back to the presence test).
pub const MAX_NODES: usize = 50_000;

/// One element.
#[derive(Clone, Debug, Default)]
pub struct Node {
    /// Lower-case name.
    pub tag: String,
    /// `id`.
    pub id: Option<String>,
    /// `class` tokens.
    pub classes: Vec<String>,
    /// Parent element.
    pub parent: Option<usize>,
    /// Previous element sibling.
    pub prev: Option<usize>,
    /// Holds non-blank text directly.
    pub text: bool,
    /// That text (the first 4,096 bytes).
    pub chars: String,
    /// `hidden` attribute.
    pub hidden: bool,
    /// `style` attribute.
    pub style: Option<String>,
    /// Its attributes (the first 32), for attribute selectors matched
    /// exactly ([`matches_exactly`]).
    pub attrs: Vec<(String, String)>,
}

/// The elements of a document in document order (a parent before its children).
#[derive(Clone, Debug, Default)]
pub struct Tree {
    /// The elements; 0 is `html`, 1 `head`, 2 `body`.
    pub nodes: Vec<Node>,
    /// More elements than [`MAX_NODES`]: the tree is incomplete.
    pub overflow: bool,
    stack: Vec<usize>,
    last_child: Vec<Option<usize>>,
}

const VOID: [&str; 14] = [
    "area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track",
    "wbr", "param",
];
const HEAD_ONLY: [&str; 8] = [
    "meta", "link", "title", "style", "script", "base", "noscript", "template",
];
/// Closed by a start tag of the same name (or, for `p`, by a block).
const SELF_CLOSING_SIBLINGS: [&str; 8] = ["p", "li", "dt", "dd", "tr", "td", "th", "option"];
const BLOCKS: [&str; 20] = [
    "p", "div", "ul", "ol", "dl", "table", "h1", "h2", "h3", "h4", "h5", "h6", "section",
    "article", "header", "footer", "nav", "aside", "main", "figure",
];

impl Tree {
    /// An empty document: `html`, `head` and `body`.
    pub fn new() -> Tree {
        let mut t = Tree::default();
        for (tag, parent) in [("html", None), ("head", Some(0)), ("body", Some(0))] {
            t.nodes.push(Node {
                tag: tag.into(),
                parent,
                prev: if tag == "body" { Some(1) } else { None },
                ..Node::default()
            });
            t.last_child.push(None);
        }
        t.last_child[0] = Some(2);
        t.stack = vec![0];
        t
    }

    fn top(&self) -> usize {
        *self.stack.last().unwrap_or(&0)
    }

    /// A start tag; returns the element's index (None past the bound).
    /// `raw`: an element whose content is not parsed (script, style…).
    pub fn open(&mut self, tag: &str, attrs: &[(String, String)], raw: bool) -> Option<usize> {
        let get = |n: &str| attrs.iter().find(|(k, _)| k == n).map(|(_, v)| v.as_str());
        let merge = |t: &mut Tree, i: usize| {
            let n = &mut t.nodes[i];
            if let Some(id) = get("id") {
                n.id = Some(id.to_string());
            }
            if let Some(c) = get("class") {
                n.classes
                    .extend(c.split_ascii_whitespace().map(str::to_string));
            }
            if let Some(s) = get("style") {
                n.style = Some(s.to_string());
            }
            n.hidden |= attrs.iter().any(|(k, _)| k == "hidden");
            for (k, v) in attrs.iter().take(32) {
                if n.attrs.len() < 32 && !n.attrs.iter().any(|(a, _)| a == k) {
                    n.attrs.push((k.clone(), v.clone()));
                }
            }
        };
        match tag {
            "html" => {
                merge(self, 0);
                return Some(0);
            }
            "head" => {
                merge(self, 1);
                self.stack = vec![0, 1];
                return Some(1);
            }
            "body" => {
                merge(self, 2);
                self.stack = vec![0, 2];
                return Some(2);
            }
            _ => {}
        }
        // Content before <body>: head elements stay in head, the rest opens body.
        if self.stack.len() <= 2 && matches!(self.top(), 0 | 1) {
            if HEAD_ONLY.contains(&tag) {
                self.stack = vec![0, 1];
            } else {
                self.stack = vec![0, 2];
            }
        }
        let top_tag = self.nodes[self.top()].tag.as_str();
        if (SELF_CLOSING_SIBLINGS.contains(&tag)
            && (top_tag == tag || (matches!(tag, "td" | "th") && matches!(top_tag, "td" | "th"))))
            || (top_tag == "p" && BLOCKS.contains(&tag))
        {
            self.stack.pop();
        }
        // A <tr> straight in a <table> gets the <tbody> the parser inserts.
        if tag == "tr" && self.nodes[self.top()].tag == "table" {
            self.open("tbody", &[], false);
        }
        if self.nodes.len() >= MAX_NODES {
            self.overflow = true;
            return None;
        }
        let parent = self.top();
        let idx = self.nodes.len();
        self.nodes.push(Node {
            tag: tag.to_string(),
            parent: Some(parent),
            prev: self.last_child[parent],
            ..Node::default()
        });
        self.last_child.push(None);
        self.last_child[parent] = Some(idx);
        merge(self, idx);
        if !raw && !VOID.contains(&tag) && self.stack.len() < 512 {
            self.stack.push(idx);
        }
        Some(idx)
    }

    /// An end tag: closes up to the innermost open element of that name.
    pub fn close(&mut self, tag: &str) {
        if let Some(p) = self.stack.iter().rposition(|&i| self.nodes[i].tag == tag) {
            if p > 0 {
                self.stack.truncate(p);
            }
        }
    }

    /// Non-blank text inside the current element.
    pub fn text(&mut self, text: &str) {
        if matches!(self.top(), 0 | 1) {
            self.stack = vec![0, 2];
        }
        let top = self.top();
        let n = &mut self.nodes[top];
        n.text = true;
        if n.chars.len() < 4096 {
            n.chars.extend(text.chars().take(4096));
        }
    }
}

#[derive(Clone, Debug, Default)]
struct Compound {
    tag: Option<String>,
    ids: Vec<String>,
    classes: Vec<String>,
    /// Attribute selectors.
    attrs: Vec<AttrSel>,
    never: bool,
}

/// One `[…]` of a selector.
#[derive(Clone, Debug)]
struct AttrSel {
    name: String,
    /// The operator (`=`, `~`, `|`, `^`, `$`, `*`), its value, and whether
    /// it ignores case (`i`); none: `[name]`.
    op: Option<(u8, String, bool)>,
}

fn attr_selector(inner: &str) -> AttrSel {
    let ops = ['=', '~', '|', '^', '$', '*'];
    let Some(p) = inner.find(ops) else {
        return AttrSel {
            name: inner.trim().to_ascii_lowercase(),
            op: None,
        };
    };
    let name = inner[..p].trim().to_ascii_lowercase();
    let mut op = inner.as_bytes()[p];
    let mut rest = &inner[p + 1..];
    if op != b'=' {
        rest = rest.strip_prefix('=').unwrap_or(rest);
    } else {
        op = b'=';
    }
    let rest = rest.trim();
    let (value, flags) = match rest.chars().next() {
        Some(q @ ('"' | '\'')) => {
            let body = &rest[1..];
            let e = body.find(q).unwrap_or(body.len());
            (body[..e].to_string(), body.get(e + 1..).unwrap_or(""))
        }
        _ => {
            let e = rest.find(char::is_whitespace).unwrap_or(rest.len());
            (rest[..e].to_string(), &rest[e..])
        }
    };
    let ci = flags.trim().eq_ignore_ascii_case("i");
    AttrSel {
        name,
        op: Some((op, value, ci)),
    }
}

/// Whether element `n` meets attribute selector `a`.
fn attr_matches(a: &AttrSel, n: &Node) -> bool {
    let Some((_, v)) = n.attrs.iter().find(|(k, _)| *k == a.name) else {
        return false;
    };
    let Some((op, want, ci)) = &a.op else {
        return true;
    };
    let (v, want) = if *ci {
        (v.to_ascii_lowercase(), want.to_ascii_lowercase())
    } else {
        (v.clone(), want.clone())
    };
    match op {
        b'=' => v == want,
        b'~' => v.split_ascii_whitespace().any(|w| w == want),
        b'|' => v == want || v.starts_with(&format!("{want}-")),
        b'^' => !want.is_empty() && v.starts_with(&want),
        b'$' => !want.is_empty() && v.ends_with(&want),
        _ => !want.is_empty() && v.contains(&want),
    }
}

#[derive(Clone, Copy, Debug, PartialEq)]
enum Comb {
    Descendant,
    Child,
    Adjacent,
    Sibling,
}

/// One complex selector.
#[derive(Clone, Debug)]
pub struct Selector {
    compounds: Vec<Compound>,
    combs: Vec<Comb>,
    /// (ids, classes/attributes/pseudo-classes, types/pseudo-elements).
    pub spec: (u32, u32, u32),
    /// `before` or `after` (other pseudo-elements: `never`).
    pub pseudo: Option<String>,
    /// It has parts taken as matching (attribute selectors, pseudo-classes):
    /// it may match more than the browser's, so it never hides anything.
    pub approx: bool,
    /// It has pseudo-classes (taken as matching even by [`matches_exactly`]).
    pub pseudo_class: bool,
}

fn ident_byte(c: u8) -> bool {
    c.is_ascii_alphanumeric() || c == b'-' || c == b'_' || c == b'\\' || c >= 0x80
}

fn skip_parens(b: &[u8], mut i: usize) -> usize {
    let mut depth = 0i32;
    while i < b.len() {
        match b[i] {
            b'(' => depth += 1,
            b')' => {
                depth -= 1;
                if depth <= 0 {
                    return i + 1;
                }
            }
            _ => {}
        }
        i += 1;
    }
    b.len()
}

/// Compounds per selector at most (real ones have a handful).
const MAX_COMPOUNDS: usize = 32;

/// Parses one complex selector (no commas). None: empty, unusable or
/// longer than 32 compounds.
pub fn parse_selector(sel: &str) -> Option<Selector> {
    let b = sel.trim().as_bytes();
    let sel = sel.trim();
    let mut out = Selector {
        compounds: vec![Compound::default()],
        combs: Vec::new(),
        spec: (0, 0, 0),
        pseudo: None,
        approx: false,
        pseudo_class: false,
    };
    let mut pending: Option<Comb> = None;
    let mut started = false;
    let mut i = 0;
    while i < b.len() {
        let c = b[i];
        if c.is_ascii_whitespace() {
            if started && pending.is_none() {
                pending = Some(Comb::Descendant);
            }
            i += 1;
            continue;
        }
        if matches!(c, b'>' | b'+' | b'~') {
            pending = Some(match c {
                b'>' => Comb::Child,
                b'+' => Comb::Adjacent,
                _ => Comb::Sibling,
            });
            i += 1;
            continue;
        }
        if let Some(p) = pending.take() {
            if started {
                // A bound: matching recurses once per compound.
                if out.compounds.len() >= MAX_COMPOUNDS {
                    return None;
                }
                out.combs.push(p);
                out.compounds.push(Compound::default());
            }
        }
        started = true;
        let cur = out.compounds.last_mut().expect("one compound");
        match c {
            b'#' | b'.' => {
                let s = i + 1;
                let mut e = s;
                while e < b.len() && ident_byte(b[e]) {
                    e += 1 + usize::from(b[e] == b'\\');
                }
                let name = sel.get(s..e.min(b.len()))?.replace('\\', "");
                if c == b'#' {
                    cur.ids.push(name);
                    out.spec.0 += 1;
                } else {
                    cur.classes.push(name);
                    out.spec.1 += 1;
                }
                i = e.max(i + 1);
            }
            b'[' => {
                let s = i + 1;
                let mut q = 0u8;
                while i < b.len() && (b[i] != b']' || q != 0) {
                    match b[i] {
                        b'"' | b'\'' if q == 0 => q = b[i],
                        c if c == q => q = 0,
                        _ => {}
                    }
                    i += 1;
                }
                if cur.attrs.len() < 8 {
                    cur.attrs.push(attr_selector(sel.get(s..i.min(b.len()))?));
                }
                i += 1;
                out.spec.1 += 1;
                out.approx = true;
            }
            b':' => {
                let element = b.get(i + 1) == Some(&b':');
                let s = i + 1 + usize::from(element);
                let mut e = s;
                while e < b.len() && ident_byte(b[e]) {
                    e += 1;
                }
                let name = sel.get(s..e)?.to_ascii_lowercase();
                i = e;
                if b.get(i) == Some(&b'(') {
                    i = skip_parens(b, i);
                }
                let legacy = matches!(
                    name.as_str(),
                    "before" | "after" | "first-line" | "first-letter"
                );
                if element || legacy {
                    out.spec.2 += 1;
                    if name == "before" || name == "after" {
                        out.pseudo = Some(name);
                    } else {
                        cur.never = true;
                    }
                } else {
                    if USER_ACTION.contains(&name.as_str()) {
                        cur.never = true;
                    }
                    out.approx = true;
                    out.pseudo_class = true;
                    if name != "where" {
                        out.spec.1 += 1;
                    }
                }
            }
            b'*' | b'&' | b'|' => i += 1,
            _ if ident_byte(c) => {
                let s = i;
                while i < b.len() && ident_byte(b[i]) {
                    i += 1;
                }
                cur.tag = Some(sel[s..i].to_ascii_lowercase());
                out.spec.2 += 1;
            }
            _ => i += 1,
        }
    }
    started.then_some(out)
}

fn compound_matches(c: &Compound, n: &Node, exact: bool) -> bool {
    !c.never
        && c.tag.as_ref().is_none_or(|t| *t == n.tag)
        && c.ids.iter().all(|id| n.id.as_ref() == Some(id))
        && c.classes.iter().all(|k| n.classes.contains(k))
        && (!exact || c.attrs.iter().all(|a| attr_matches(a, n)))
}

/// Whether `sel` matches element `i` of `t`, attribute selectors taken as
/// matching (discovery: an attribute a script may set still loads).
pub fn matches(sel: &Selector, t: &Tree, i: usize) -> bool {
    let mut budget = 10_000u32;
    match_at(sel, t, sel.compounds.len() - 1, i, &mut budget, false)
}

/// As [`matches`], with attribute selectors matched against the
/// attributes the HTML gives (the audit's image sizes).
pub fn matches_exactly(sel: &Selector, t: &Tree, i: usize) -> bool {
    let mut budget = 10_000u32;
    match_at(sel, t, sel.compounds.len() - 1, i, &mut budget, true)
}

fn match_at(sel: &Selector, t: &Tree, k: usize, i: usize, budget: &mut u32, exact: bool) -> bool {
    if *budget == 0 {
        return false;
    }
    *budget -= 1;
    if !compound_matches(&sel.compounds[k], &t.nodes[i], exact) {
        return false;
    }
    if k == 0 {
        return true;
    }
    let n = &t.nodes[i];
    match sel.combs[k - 1] {
        Comb::Child => n
            .parent
            .is_some_and(|p| match_at(sel, t, k - 1, p, budget, exact)),
        Comb::Adjacent => n
            .prev
            .is_some_and(|p| match_at(sel, t, k - 1, p, budget, exact)),
        Comb::Descendant => {
            let mut a = n.parent;
            while let Some(p) = a {
                if match_at(sel, t, k - 1, p, budget, exact) {
                    return true;
                }
                a = t.nodes[p].parent;
            }
            false
        }
        Comb::Sibling => {
            let mut a = n.prev;
            while let Some(p) = a {
                if match_at(sel, t, k - 1, p, budget, exact) {
                    return true;
                }
                a = t.nodes[p].prev;
            }
            false
        }
    }
}

/// A declaration's place in the cascade: specificity, then order.
type Key = ((u32, u32, u32), u32);

#[derive(Clone, Debug, Default)]
struct Box_ {
    images: Vec<Option<(Key, Vec<String>, usize)>>,
    display_none: Option<(Key, bool)>,
    family: Option<(Key, Vec<String>)>,
    weight: Option<(Key, u16)>,
    italic: Option<(Key, bool)>,
    content: Option<(Key, bool)>,
    content_text: Option<(Key, bool)>,
    content_chars: Option<(Key, String)>,
    /// Custom properties that some `font-family: var(--x)` reads.
    vars: Vec<(String, (Key, String))>,
}

fn set<T: Clone>(slot: &mut Option<(Key, T)>, key: Key, v: T) {
    if slot.as_ref().is_none_or(|(k, _)| *k <= key) {
        *slot = Some((key, v));
    }
}

thread_local! {
    /// The custom property names `font-family` values read (set per cascade).
    static TRACKED: std::cell::RefCell<Vec<String>> = const { std::cell::RefCell::new(Vec::new()) };
}

fn tracked(name: &str) -> bool {
    TRACKED.with(|t| t.borrow().iter().any(|n| n == name))
}

impl Box_ {
    fn apply(&mut self, r: &Rule, key: Key, src: usize, approx: bool) {
        if self.images.is_empty() {
            self.images = vec![None; IMAGE_GROUPS];
        }
        for (g, urls) in r.images.iter().enumerate() {
            if let Some(urls) = urls {
                if self.images[g].as_ref().is_none_or(|(k, _, _)| *k <= key) {
                    self.images[g] = Some((key, urls.clone(), src));
                }
            }
        }
        // An approximate match may show (display: block wins over an
        // earlier none) but never hides.
        if let Some(d) = r.display_none.filter(|d| !(*d && approx)) {
            set(&mut self.display_none, key, d);
        }
        if !r.families.is_empty() {
            set(&mut self.family, key, r.families.clone());
        }
        if let Some(w) = r.weight {
            set(&mut self.weight, key, w);
        }
        if let Some(it) = r.font_style {
            set(&mut self.italic, key, it);
        }
        for (name, v) in &r.custom {
            if !tracked(name) {
                continue;
            }
            match self.vars.iter_mut().find(|(n, _)| n == name) {
                Some((_, slot)) if slot.0 <= key => *slot = (key, v.clone()),
                Some(_) => {}
                None => self.vars.push((name.clone(), (key, v.clone()))),
            }
        }
        if let Some(c) = r.content {
            set(&mut self.content, key, c);
            set(&mut self.content_text, key, r.content_text);
            set(&mut self.content_chars, key, r.content_chars.clone());
        }
    }
}

/// What the cascade says a document fetches.
#[derive(Clone, Debug, Default)]
pub struct Styled {
    /// Image URLs with the index of the rule source (sheet) they came from.
    pub images: Vec<(String, usize)>,
    /// (font-family list, weight, italic, text) of each rendered box.
    pub text: Vec<(Vec<String>, u16, bool, String)>,
}

/// Elements the UA stylesheet does not render.
const UA_HIDDEN: [&str; 12] = [
    "head", "script", "style", "title", "meta", "link", "template", "noscript", "base", "datalist",
    "param", "dialog",
];
const UA_BOLD: [&str; 9] = ["h1", "h2", "h3", "h4", "h5", "h6", "b", "strong", "th"];
const UA_ITALIC: [&str; 6] = ["i", "em", "cite", "var", "dfn", "address"];

/// Runs the cascade: `rules` in cascade order, each with the index of its
/// source (for resolving URLs); `inline` holds each element's `style`
/// attribute parsed as one rule (source index `inline_src`).
pub fn cascade(
    t: &Tree,
    rules: &[(&Rule, usize)],
    inline: &[(usize, Rule)],
    inline_src: usize,
) -> Styled {
    let n = t.nodes.len();
    let mut names: Vec<String> = Vec::new();
    for r in rules
        .iter()
        .map(|(r, _)| *r)
        .chain(inline.iter().map(|(_, r)| r))
    {
        for f in &r.families {
            let mut rest = f.as_str();
            while let Some(p) = rest.find("var(") {
                rest = &rest[p + 4..];
                let name: String = rest
                    .trim_start()
                    .chars()
                    .take_while(|c| !matches!(c, ',' | ')') && !c.is_whitespace())
                    .collect();
                if !names.contains(&name) && names.len() < 64 {
                    names.push(name);
                }
            }
        }
    }
    TRACKED.with(|t| *t.borrow_mut() = names.clone());
    // Element, ::before, ::after.
    let mut boxes: Vec<[Box_; 3]> = vec![Default::default(); n];
    let mut budget: u64 = 20_000_000;
    for (order, (r, src)) in rules.iter().enumerate() {
        let relevant = r.images.iter().any(Option::is_some)
            || r.display_none.is_some()
            || !r.families.is_empty()
            || r.weight.is_some()
            || r.font_style.is_some()
            || r.content.is_some()
            || r.custom.iter().any(|(name, _)| tracked(name));
        if !relevant {
            continue;
        }
        for s in crate::viewport::split_top(&r.selectors, ',') {
            let Some(sel) = parse_selector(s) else {
                continue;
            };
            let slot = match sel.pseudo.as_deref() {
                None => 0,
                Some("before") => 1,
                _ => 2,
            };
            let last = &sel.compounds[sel.compounds.len() - 1];
            for (i, bx) in boxes.iter_mut().enumerate() {
                if budget == 0 {
                    break;
                }
                budget -= 1;
                if !compound_matches(last, &t.nodes[i], false) || !matches(&sel, t, i) {
                    continue;
                }
                bx[slot].apply(r, (sel.spec, order as u32), *src, sel.approx);
            }
        }
    }
    for (i, r) in inline {
        if *i < n {
            boxes[*i][0].apply(r, ((1000, 0, 0), u32::MAX), inline_src, false);
        }
    }
    let mut out = Styled::default();
    let mut hidden = vec![false; n];
    // Computed (family, weight, italic), inherited down the tree.
    let mut font: Vec<(Vec<String>, u16, bool)> = vec![(Vec::new(), 400, false); n];
    // Computed custom properties in `names`, inherited.
    let mut vars: Vec<Vec<Option<String>>> = vec![Vec::new(); n];
    for i in 0..n {
        let node = &t.nodes[i];
        let parent = node.parent;
        hidden[i] = node.hidden
            || UA_HIDDEN.contains(&node.tag.as_str())
            || boxes[i][0].display_none.as_ref().is_some_and(|(_, d)| *d)
            || parent.is_some_and(|p| hidden[p]);
        let inherited = parent
            .map(|p| font[p].clone())
            .unwrap_or((Vec::new(), 400, false));
        let b = &boxes[i][0];
        let mut own: Vec<Option<String>> = parent
            .map(|p| vars[p].clone())
            .unwrap_or_else(|| vec![None; names.len()]);
        for (name, (_, v)) in &b.vars {
            if let Some(k) = names.iter().position(|t| t == name) {
                own[k] = Some(v.clone());
            }
        }
        vars[i] = own;
        let family = b.family.as_ref().map_or(inherited.0.clone(), |(_, f)| {
            resolve_vars(f, &names, &vars[i])
        });
        let weight =
            b.weight
                .as_ref()
                .map(|(_, w)| *w)
                .unwrap_or(if UA_BOLD.contains(&node.tag.as_str()) {
                    700
                } else {
                    inherited.1
                });
        let italic = b
            .italic
            .as_ref()
            .map(|(_, v)| *v)
            .unwrap_or(inherited.2 || UA_ITALIC.contains(&node.tag.as_str()));
        font[i] = (family, weight, italic);
        if hidden[i] {
            continue;
        }
        // Chromium loads the primary font of every rendered box, text or
        // not (an empty span with a web font fetches it: checked).
        out.text
            .push((font[i].0.clone(), font[i].1, font[i].2, node.chars.clone()));
        for (slot, bx) in boxes[i].iter().enumerate() {
            if slot > 0 {
                // A pseudo-element exists only with content.
                if !bx.content.as_ref().is_some_and(|(_, c)| *c)
                    || bx.display_none.as_ref().is_some_and(|(_, d)| *d)
                {
                    continue;
                }
                {
                    let chars = bx
                        .content_chars
                        .as_ref()
                        .map(|(_, c)| c.clone())
                        .unwrap_or_default();
                    let family = bx.family.as_ref().map_or(font[i].0.clone(), |(_, f)| {
                        resolve_vars(f, &names, &vars[i])
                    });
                    let weight = bx.weight.as_ref().map_or(font[i].1, |(_, w)| *w);
                    let italic = bx.italic.as_ref().map_or(font[i].2, |(_, v)| *v);
                    out.text.push((family, weight, italic, chars));
                }
            }
            for (_, urls, src) in bx.images.iter().flatten() {
                for u in urls {
                    out.images.push((u.clone(), *src));
                }
            }
        }
    }
    out
}

/// A `font-family` list with its `var(--x[, fallback])` items replaced by
/// the element's custom property values.
fn resolve_vars(list: &[String], names: &[String], values: &[Option<String>]) -> Vec<String> {
    let mut out = Vec::new();
    for f in list {
        let Some(inner) = f.strip_prefix("var(").and_then(|x| x.strip_suffix(')')) else {
            out.push(f.clone());
            continue;
        };
        let (name, fallback) = match inner.split_once(',') {
            Some((n, fb)) => (n.trim(), Some(fb.trim())),
            None => (inner.trim(), None),
        };
        let value = names
            .iter()
            .position(|n| n == name)
            .and_then(|k| values.get(k).cloned().flatten())
            .or(fallback.map(str::to_string));
        if let Some(v) = value {
            out.extend(crate::css::families(&v));
        }
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tree(html: &[(&str, &str, &str)]) -> Tree {
        // (tag, class, "open"/"close"/"void"/"text")
        let mut t = Tree::new();
        for (tag, class, what) in html {
            match *what {
                "close" => t.close(tag),
                "text" => t.text("x"),
                _ => {
                    let attrs = vec![("class".to_string(), class.to_string())];
                    t.open(tag, &attrs, *what == "void");
                }
            }
        }
        t
    }

    #[test]
    fn selectors_match_on_the_tree() {
        let t = tree(&[
            ("nav", "navbar expand", "open"),
            ("button", "toggler", "open"),
            ("span", "icon", "open"),
            ("span", "", "close"),
            ("button", "", "close"),
            ("ul", "nav", "open"),
            ("li", "item", "open"),
            ("li", "item second", "open"),
            ("ul", "", "close"),
            ("nav", "", "close"),
        ]);
        let find = |c: &str| {
            t.nodes
                .iter()
                .position(|n| n.classes.iter().any(|k| k == c))
                .unwrap()
        };
        let m = |s: &str, c: &str| matches(&parse_selector(s).unwrap(), &t, find(c));
        assert!(m(".navbar .icon", "icon"));
        assert!(m("nav > button > span.icon", "icon"));
        assert!(!m("nav > span", "icon"));
        assert!(m("body .expand .toggler", "toggler"));
        assert!(m(".item + .second", "second"), "li closes the previous li");
        assert!(m("li ~ li", "second"));
        assert!(!m("li li", "second"));
        assert!(!m(".toggler:hover .icon", "icon"));
        assert_eq!(parse_selector("#a .b > c::before").unwrap().spec, (1, 1, 2));
        assert!(parse_selector(&"a + ".repeat(10_000)).is_none());
        assert!(parse_selector("[hidden]").unwrap().approx);
        assert!(parse_selector("li:first-child").unwrap().approx);
        assert!(!parse_selector("nav > .a::before").unwrap().approx);
        let t = tree(&[
            ("table", "t", "open"),
            ("tr", "r", "open"),
            ("td", "c", "open"),
        ]);
        let find = |c: &str| {
            t.nodes
                .iter()
                .position(|n| n.classes.iter().any(|k| k == c))
                .unwrap()
        };
        assert!(matches(
            &parse_selector(".t > tbody > tr > td").unwrap(),
            &t,
            find("c")
        ));
    }
}
