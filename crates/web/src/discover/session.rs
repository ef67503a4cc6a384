//! A page's [`Session`]: turns each fetched document, stylesheet and module
//! into the next fetches, and keeps what was found, skipped and noted.

use super::*;

/// A fetch discovery asks for, resolved.
#[derive(Clone, Debug)]
pub struct Found {
    /// The absolute URL (no fragment).
    pub url: Url,
    /// What it is.
    pub kind: Kind,
    /// `<img width height>`.
    pub size: Option<(Option<u32>, Option<u32>)>,
}

/// A reference discovery did not fetch, and why.
#[derive(Clone, Debug, PartialEq, serde::Serialize)]
pub struct Skipped {
    /// The absolute URL (credentials removed).
    pub url: String,
    /// What it is.
    pub kind: Kind,
    /// Why: `lazy` (below the first screen), `dynamic-import`,
    /// `bare-specifier`, `link-local`, `not-same-origin`.
    pub reason: String,
}

/// What discovery left out of a load (the page result lists it).
#[derive(Clone, Debug, Default, serde::Serialize)]
pub struct Notes {
    /// The screen discovery followed.
    pub viewport: Viewport,
    /// `loading=lazy` images and iframes below the first screen: not in the
    /// first view (their bytes are unknown: they were not fetched).
    pub deferred: Vec<Skipped>,
    /// Module imports not followed (dynamic `import()`, unmapped bare names).
    pub not_followed: Vec<Skipped>,
    /// Fetches refused by scope (link-local or metadata addresses,
    /// `--same-origin`).
    pub blocked: Vec<Skipped>,
}

/// Cloud metadata names (Google, Alibaba, AWS's `instance-data`).
pub(super) const METADATA_NAMES: [&str; 5] = [
    "metadata.google.internal",
    "metadata.goog",
    "metadata",
    "instance-data",
    "instance-data.ec2.internal",
];

/// A link-local address or a cloud metadata endpoint.
pub fn is_link_local_or_metadata(u: &Url) -> bool {
    match u.host() {
        Some(url::Host::Ipv4(a)) => a.is_link_local() || a.octets() == [100, 100, 100, 200],
        Some(url::Host::Ipv6(a)) => {
            let s = a.segments();
            (s[0] & 0xffc0) == 0xfe80
                || a == std::net::Ipv6Addr::new(0xfd00, 0xec2, 0, 0, 0, 0, 0, 0x254)
                || a.to_ipv4_mapped().is_some_and(|v| v.is_link_local())
        }
        Some(url::Host::Domain(d)) => {
            let d = d.trim_end_matches('.').to_ascii_lowercase();
            METADATA_NAMES.contains(&d.as_str())
        }
        None => false,
    }
}

/// What a fetched URL is to discovery.
#[derive(Clone, Debug)]
pub(super) enum Ctx {
    /// A stylesheet of document `doc`, at `key` in cascade order.
    Sheet {
        doc: usize,
        key: Vec<u32>,
        applies: bool,
    },
    /// A module script of document `doc`.
    Module { doc: usize, preload_only: bool },
}

pub(super) struct Doc {
    base: Url,
    layout: Viewport,
    presence: Presence,
    map: ImportMap,
    /// Sheets that arrived: (cascade key, base URL, parsed, applies).
    sheets: Vec<(Vec<u32>, Url, Sheet)>,
    /// `style` attributes, as one rule each.
    attr_rules: Vec<css::Rule>,
    /// The element tree; the cascade runs on it unless it overflowed.
    tree: crate::dom::Tree,
    /// Stylesheets requested and not yet answered.
    pending: usize,
    /// Images and fonts of the stylesheets were handed out.
    styled: bool,
}

/// Discovery's state over one load: turns each finished fetch into the next.
pub struct Session {
    vp: Viewport,
    page: Url,
    same_origin: bool,
    docs: Vec<Doc>,
    ctx: HashMap<String, Ctx>,
    handed: HashSet<String>,
    /// Stylesheets fetched by `preload` alone.
    preloads: HashSet<String>,
    /// The page declares no icon: the browser's own `/favicon.ico`, asked
    /// for after the load event ([`Session::after_load`]).
    favicon: Option<Url>,
    /// What was left out.
    pub notes: Notes,
}

pub(super) fn key_str(u: &Url) -> String {
    let mut u = u.clone();
    u.set_fragment(None);
    u.to_string()
}

impl Session {
    /// A session for the page at `page` on screen `vp`.
    pub fn new(page: &Url, vp: Viewport, same_origin: bool) -> Session {
        Session {
            vp,
            page: page.clone(),
            same_origin,
            docs: Vec::new(),
            ctx: HashMap::new(),
            handed: HashSet::new(),
            preloads: HashSet::new(),
            favicon: None,
            notes: Notes {
                viewport: vp,
                ..Notes::default()
            },
        }
    }

    /// Whether scope allows fetching `u` (noting it when not).
    pub fn allowed(&mut self, u: &Url, kind: Kind) -> bool {
        let reason = if self.same_origin
            && redline_engine::redirect::origin_key(u)
                != redline_engine::redirect::origin_key(&self.page)
        {
            "not-same-origin"
        } else if is_link_local_or_metadata(u) && !is_link_local_or_metadata(&self.page) {
            "link-local"
        } else {
            return true;
        };
        let url = crate::http::display_url(u);
        if !self.notes.blocked.iter().any(|s| s.url == url) && self.notes.blocked.len() < 1000 {
            self.notes.blocked.push(Skipped {
                url,
                kind,
                reason: reason.into(),
            });
        }
        false
    }

    fn resolve(&mut self, base: &Url, raw: &str, kind: Kind) -> Option<Url> {
        let u = base.join(raw.trim()).ok()?;
        if !matches!(u.scheme(), "http" | "https") {
            return None;
        }
        let mut u = u;
        u.set_fragment(None);
        self.allowed(&u, kind).then_some(u)
    }

    fn found(
        &mut self,
        out: &mut Vec<Found>,
        u: Url,
        kind: Kind,
        size: Option<(Option<u32>, Option<u32>)>,
        ctx: Option<Ctx>,
    ) {
        let k = key_str(&u);
        if let Some(c) = ctx {
            if let (
                Some(Ctx::Module {
                    preload_only: true, ..
                }),
                Ctx::Module {
                    preload_only: false,
                    ..
                },
            ) = (self.ctx.get(&k), &c)
            {
                // A modulepreload'ed module is also run: its imports count.
                self.ctx.insert(k, c);
                return;
            }
            if !self.ctx.contains_key(&k) {
                if let Ctx::Sheet { doc, .. } = &c {
                    self.docs[*doc].pending += 1;
                }
                self.ctx.insert(k.clone(), c);
            } else {
                return;
            }
        }
        if kind == Kind::Stylesheet && !self.ctx.contains_key(&k) && self.preloads.len() < 10_000 {
            // `preload as=style`: fetched, applied only if a link uses it.
            self.preloads.insert(k.clone());
        }
        if self.handed.len() < 100_000 {
            self.handed.insert(k);
        }
        out.push(Found { url: u, kind, size });
    }

    /// A fetch of `url` (fetched as `kind`) ended; `body` when it succeeded
    /// (200 or 304 with the stored body). Returns what to fetch next.
    pub fn done(&mut self, url: &Url, kind: Kind, body: Option<&[u8]>, ctype: &str) -> Vec<Found> {
        let mut out = Vec::new();
        let k = key_str(url);
        let ctx = self.ctx.get(&k).cloned();
        let is_html = ctype == "text/html" || ctype == "application/xhtml+xml";
        match (ctx, body) {
            (Some(Ctx::Sheet { doc, key, applies }), body) => {
                if let Some(body) = body.filter(|_| !is_html) {
                    let sheet = css::parse(body, &self.docs[doc].layout);
                    self.add_sheet(doc, key, applies, url, sheet, &mut out);
                }
                let d = &mut self.docs[doc];
                d.pending = d.pending.saturating_sub(1);
                if d.pending == 0 {
                    self.style(doc, &mut out);
                }
            }
            (Some(Ctx::Module { doc, preload_only }), Some(body)) if !preload_only => {
                self.module(doc, url, body, &mut out);
            }
            (Some(_), _) => {}
            (None, Some(body)) => {
                if is_html && matches!(kind, Kind::Document | Kind::Iframe) {
                    self.document(url, body, &mut out);
                } else if kind == Kind::Stylesheet
                    && !is_html
                    && !self.docs.is_empty()
                    && !self.preloads.contains(&k)
                {
                    // Reached through a redirect: part of the first document.
                    let sheet = css::parse(body, &self.docs[0].layout);
                    self.add_sheet(0, vec![u32::MAX], true, url, sheet, &mut out);
                    if self.docs[0].styled {
                        self.style(0, &mut out);
                    }
                }
            }
            (None, None) => {}
        }
        out
    }

    /// The browser's automatic `/favicon.ico` of a page that declares no
    /// icon, once: Chromium asks for it after the load event (its request
    /// comes after every resource of the page, and a 404 is not the page's).
    /// None when the page declares an icon or scope forbids it (the loader
    /// skips it when the page itself fetched that URL).
    pub fn after_load(&mut self) -> Option<Url> {
        self.favicon.take()
    }

    /// Hands out what waits for stylesheets that never answered (the loader
    /// calls this when it has nothing else to do).
    pub fn flush(&mut self) -> Vec<Found> {
        let mut out = Vec::new();
        for d in 0..self.docs.len() {
            if !self.docs[d].styled {
                self.docs[d].pending = 0;
                self.style(d, &mut out);
            }
        }
        out
    }

    fn document(&mut self, url: &Url, body: &[u8], out: &mut Vec<Found>) {
        if self.docs.len() >= 64 {
            return;
        }
        let scan = scan_html(body, &self.vp);
        let base = scan
            .base
            .as_deref()
            .and_then(|b| url.join(b).ok())
            .unwrap_or_else(|| url.clone());
        let doc = self.docs.len();
        let mut map = ImportMap::default();
        for m in &scan.import_maps {
            map.extend(ImportMap::parse(m.as_bytes()));
        }
        let mut attr_rules = Vec::new();
        for st in &scan.style_attrs {
            let sheet = css::parse(format!("*{{{st}}}").as_bytes(), &scan.layout);
            attr_rules.extend(sheet.rules);
        }
        self.docs.push(Doc {
            base: base.clone(),
            layout: scan.layout,
            presence: scan.presence.clone(),
            map,
            sheets: Vec::new(),
            attr_rules: attr_rules.clone(),
            tree: scan.tree.clone(),
            pending: 0,
            styled: false,
        });
        // srcdoc frames: documents of their own, on the parent's base URL.
        for sd in &scan.srcdocs {
            self.document(&base, sd.as_bytes(), out);
        }
        for e in &scan.embeds {
            let Some(u) = self.resolve(&base, &e.url, e.kind) else {
                continue;
            };
            let size = (e.width.is_some() || e.height.is_some()).then_some((e.width, e.height));
            let ctx = if let Some((no, applies)) = e.sheet {
                Some(Ctx::Sheet {
                    doc,
                    key: vec![no],
                    applies,
                })
            } else if e.module {
                Some(Ctx::Module {
                    doc,
                    preload_only: e.preload_only,
                })
            } else {
                None
            };
            self.found(out, u, e.kind, size, ctx);
        }
        // Inline styles: their imports are fetched now, their rules wait.
        for (no, text, applies) in &scan.styles {
            let sheet = css::parse(text.as_bytes(), &scan.layout);
            self.add_sheet(doc, vec![*no], *applies, &base, sheet, out);
        }
        // style="" attributes apply to their element: their images load
        // (through the cascade when there is a tree).
        let eager = if scan.tree.overflow {
            attr_rules.as_slice()
        } else {
            &[]
        };
        for r in eager {
            for u in r.urls() {
                if let Some(u) = self.resolve(&base, &u, Kind::Image) {
                    self.found(out, u, Kind::Image, None, None);
                }
            }
        }
        for m in &scan.inline_modules {
            self.module(doc, &base, m.as_bytes(), out);
        }
        if doc == 0 && !scan.has_icon {
            if let Ok(u) = base.join("/favicon.ico") {
                if self.allowed(&u, Kind::Image) {
                    self.favicon = Some(u);
                }
            }
        }
        for e in &scan.deferred {
            if let Ok(u) = base.join(&e.url) {
                if self.notes.deferred.len() < 1000 {
                    self.notes.deferred.push(Skipped {
                        url: crate::http::display_url(&u),
                        kind: e.kind,
                        reason: "lazy".into(),
                    });
                }
            }
        }
        if self.docs[doc].pending == 0 {
            self.style(doc, out);
        }
    }

    fn add_sheet(
        &mut self,
        doc: usize,
        key: Vec<u32>,
        applies: bool,
        base: &Url,
        sheet: Sheet,
        out: &mut Vec<Found>,
    ) {
        for (j, imp) in sheet.imports.iter().enumerate() {
            let Some(u) = self.resolve(base, &imp.url, Kind::Stylesheet) else {
                continue;
            };
            let mut k = key.clone();
            k.push(j as u32);
            let applies = applies && self.docs[doc].layout.matches_media(&imp.media);
            if k.len() <= 16 {
                self.found(
                    out,
                    u,
                    Kind::Stylesheet,
                    None,
                    Some(Ctx::Sheet {
                        doc,
                        key: k,
                        applies,
                    }),
                );
            }
        }
        if applies && self.docs[doc].sheets.len() < 10_000 {
            let mut k = key;
            k.push(u32::MAX);
            self.docs[doc].sheets.push((k, base.clone(), sheet));
        }
    }

    fn module(&mut self, doc: usize, url: &Url, body: &[u8], out: &mut Vec<Found>) {
        let imports = modules::scan(body);
        for (spec, dynamic) in imports
            .static_
            .iter()
            .map(|s| (s, false))
            .chain(imports.dynamic.iter().map(|s| (s, true)))
        {
            let mapped = self.docs[doc].map.map(spec);
            let target = match (&mapped, modules::is_relative_or_url(spec)) {
                (Some(m), _) => m.clone(),
                (None, true) => spec.clone(),
                (None, false) => {
                    self.note_not_followed(spec.clone(), "bare-specifier");
                    continue;
                }
            };
            let base = if mapped.is_some() {
                self.docs[doc].base.clone()
            } else {
                url.clone()
            };
            if dynamic {
                let shown = base
                    .join(&target)
                    .map(|u| crate::http::display_url(&u))
                    .unwrap_or(target);
                self.note_not_followed(shown, "dynamic-import");
                continue;
            }
            let Some(u) = self.resolve(&base, &target, Kind::Script) else {
                continue;
            };
            self.found(
                out,
                u,
                Kind::Script,
                None,
                Some(Ctx::Module {
                    doc,
                    preload_only: false,
                }),
            );
        }
    }

    fn note_not_followed(&mut self, url: String, reason: &str) {
        if self.notes.not_followed.len() < 1000
            && !self.notes.not_followed.iter().any(|s| s.url == url)
        {
            self.notes.not_followed.push(Skipped {
                url,
                kind: Kind::Script,
                reason: reason.into(),
            });
        }
    }

    /// Every stylesheet of `doc` is in: hand out the images the cascade
    /// keeps and the fonts the matching rules use.
    fn style(&mut self, doc: usize, out: &mut Vec<Found>) {
        let d = &mut self.docs[doc];
        d.styled = true;
        d.sheets.sort_by(|a, b| a.0.cmp(&b.0));
        if !d.tree.overflow {
            self.style_tree(doc, out);
            return;
        }
        let bold = ["h1", "h2", "h3", "h4", "h5", "h6", "b", "strong", "th"]
            .iter()
            .any(|t| d.presence.tags.contains(*t));
        let italic = ["i", "em", "cite", "var", "dfn", "address"]
            .iter()
            .any(|t| d.presence.tags.contains(*t));
        // (selector as written, property) -> (URLs, base) of the last declaration.
        let mut winners: Vec<((String, usize), Vec<String>, Url)> = Vec::new();
        let mut index: HashMap<(String, usize), usize> = HashMap::new();
        let mut faces: Vec<(css::FontFace, Url)> = Vec::new();
        let mut wants: Vec<(Vec<String>, u16, bool)> = Vec::new();
        for (_, base, sheet) in &d.sheets {
            for f in &sheet.faces {
                faces.push((f.clone(), base.clone()));
            }
            for r in &sheet.rules {
                if !css::could_match(&r.selectors, &d.presence) {
                    continue;
                }
                let sel: String = r.selectors.split_whitespace().collect::<Vec<_>>().join(" ");
                for (g, urls) in r.images.iter().enumerate() {
                    if let Some(urls) = urls {
                        let key = (sel.clone(), g);
                        match index.get(&key) {
                            Some(&i) => winners[i] = (key, urls.clone(), base.clone()),
                            None => {
                                index.insert(key.clone(), winners.len());
                                winners.push((key, urls.clone(), base.clone()));
                            }
                        }
                    }
                }
                if !r.families.is_empty() {
                    wants.push((r.families.clone(), r.weight.unwrap_or(400), r.italic));
                }
            }
        }
        for r in &d.attr_rules {
            if !r.families.is_empty() {
                wants.push((r.families.clone(), r.weight.unwrap_or(400), r.italic));
            }
        }
        let mut fetch: Vec<(Url, String, Kind)> = Vec::new();
        for (_, urls, base) in winners {
            for u in urls {
                fetch.push((base.clone(), u, Kind::Image));
            }
        }
        const GENERIC: [&str; 12] = [
            "serif",
            "sans-serif",
            "monospace",
            "cursive",
            "fantasy",
            "system-ui",
            "math",
            "emoji",
            "fangsong",
            "ui-serif",
            "ui-sans-serif",
            "ui-monospace",
        ];
        for (families, weight, ital) in wants {
            let Some(fam) = families
                .iter()
                .take_while(|f| {
                    !GENERIC.contains(&f.as_str()) && !f.starts_with("-apple") && *f != "inherit"
                })
                .find(|f| faces.iter().any(|(ff, _)| &ff.family == *f))
            else {
                continue;
            };
            let mut styles = vec![(weight, ital)];
            if bold {
                styles.push((700, ital));
            }
            if italic {
                styles.push((weight, true));
            }
            for (w, it) in styles {
                if let Some((face, base)) = best_face(&faces, fam, w, it) {
                    if let Some(src) = &face.src {
                        fetch.push((base.clone(), src.clone(), Kind::Font));
                    }
                }
            }
        }
        for (base, raw, kind) in fetch {
            if let Some(u) = self.resolve(&base, &raw, kind) {
                if !self.handed.contains(&key_str(&u)) {
                    self.found(out, u, kind, None, None);
                }
            }
        }
    }
}

impl Session {
    /// [`Session::style`] on the element tree: the cascade decides.
    fn style_tree(&mut self, doc: usize, out: &mut Vec<Found>) {
        let d = &self.docs[doc];
        let mut bases: Vec<Url> = Vec::new();
        let mut rules: Vec<(&css::Rule, usize)> = Vec::new();
        let mut faces: Vec<(css::FontFace, Url)> = Vec::new();
        for (_, base, sheet) in &d.sheets {
            bases.push(base.clone());
            for r in &sheet.rules {
                rules.push((r, bases.len() - 1));
            }
            for f in &sheet.faces {
                faces.push((f.clone(), base.clone()));
            }
        }
        bases.push(d.base.clone());
        let inline_src = bases.len() - 1;
        let inline: Vec<(usize, css::Rule)> = d
            .tree
            .nodes
            .iter()
            .enumerate()
            .filter_map(|(i, n)| {
                let st = n.style.as_ref()?;
                let sheet = css::parse(format!("*{{{st}}}").as_bytes(), &d.layout);
                sheet.rules.into_iter().next().map(|r| (i, r))
            })
            .collect();
        let styled = crate::dom::cascade(&d.tree, &rules, &inline, inline_src);
        let mut fetch: Vec<(Url, String, Kind)> = Vec::new();
        for (u, src) in styled.images {
            fetch.push((bases[src].clone(), u, Kind::Image));
        }
        // (family, weight, italic) -> the characters drawn with it.
        let mut wants: Vec<((String, u16, bool), std::collections::BTreeSet<u32>)> = Vec::new();
        for (families, weight, italic, text) in styled.text {
            let Some(fam) = first_declared(&families, &faces) else {
                continue;
            };
            let key = (fam, weight, italic);
            let i = match wants.iter().position(|(k, _)| *k == key) {
                Some(i) => i,
                None => {
                    wants.push((key, Default::default()));
                    wants.len() - 1
                }
            };
            let set = &mut wants[i].1;
            // The first available font is the one covering U+0020.
            set.insert(0x20);
            if set.len() < 20_000 {
                set.extend(
                    text.chars()
                        .filter(|c| !c.is_whitespace())
                        .map(|c| c as u32),
                );
            }
        }
        for ((fam, weight, italic), chars) in wants {
            // The best descriptors, then every unicode-range segment of them
            // that the text drawn with them needs.
            let Some((best, _)) = best_face(&faces, &fam, weight, italic) else {
                continue;
            };
            let (w, it) = (best.weight, best.italic);
            for (face, base) in faces
                .iter()
                .filter(|(f, _)| f.family == fam && f.weight == w && f.italic == it)
            {
                let needed = face.ranges.is_empty()
                    || face
                        .ranges
                        .iter()
                        .any(|&(lo, hi)| chars.range(lo..=hi).next().is_some());
                if let (true, Some(src)) = (needed, &face.src) {
                    fetch.push((base.clone(), src.clone(), Kind::Font));
                }
            }
        }
        for (base, raw, kind) in fetch {
            if let Some(u) = self.resolve(&base, &raw, kind) {
                if !self.handed.contains(&key_str(&u)) {
                    self.found(out, u, kind, None, None);
                }
            }
        }
    }
}

/// The first family of a `font-family` list that has an `@font-face`
/// (a generic family ends the search: the browser has it).
pub(super) fn first_declared(
    families: &[String],
    faces: &[(css::FontFace, Url)],
) -> Option<String> {
    const GENERIC: [&str; 12] = [
        "serif",
        "sans-serif",
        "monospace",
        "cursive",
        "fantasy",
        "system-ui",
        "math",
        "emoji",
        "fangsong",
        "ui-serif",
        "ui-sans-serif",
        "ui-monospace",
    ];
    families
        .iter()
        .take_while(|f| {
            !GENERIC.contains(&f.as_str()) && !f.starts_with("-apple") && *f != "inherit"
        })
        .find(|f| faces.iter().any(|(ff, _)| &ff.family == *f))
        .cloned()
}

/// The face CSS font matching picks for `family` at weight `w` (italic or
/// not): same style first, then the nearest weight in the spec's direction.
pub(super) fn best_face<'a>(
    faces: &'a [(css::FontFace, Url)],
    family: &str,
    w: u16,
    italic: bool,
) -> Option<&'a (css::FontFace, Url)> {
    let cands: Vec<&(css::FontFace, Url)> =
        faces.iter().filter(|(f, _)| f.family == family).collect();
    let same: Vec<&(css::FontFace, Url)> = cands
        .iter()
        .copied()
        .filter(|(f, _)| f.italic == italic)
        .collect();
    let pool = if same.is_empty() { cands } else { same };
    // Distance in the order CSS Fonts 4 §5.2 tries weights.
    let cost = |f: &css::FontFace| -> u32 {
        let (lo, hi) = f.weight;
        if lo <= w && w <= hi {
            return 0;
        }
        let near = if w < lo { lo } else { hi };
        let d = u32::from(near.abs_diff(w));
        let preferred_down = if (400..=500).contains(&w) {
            // Up to 500 first, then down, then above 500.
            if near > w && near <= 500 {
                return d;
            }
            near < w
        } else {
            w < 400
        };
        if (near < w) == preferred_down {
            1000 + d
        } else {
            3000 + d
        }
    };
    pool.into_iter().min_by_key(|(f, _)| cost(f))
}
