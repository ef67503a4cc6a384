//! Shell-style wildcards (`*`, `?`, `[abc]`, `[a-z]`, `[!x]`) in path
//! components, as Apache's Include and nginx's include use them. Matches are
//! sorted, as both servers read them in that order.

use std::path::{Component, Path, PathBuf};

/// True when a name matches a wildcard pattern (one path component).
pub fn matches(pattern: &str, name: &str) -> bool {
    let p: Vec<char> = pattern.chars().collect();
    let n: Vec<char> = name.chars().collect();
    // Iterative matcher with backtracking on the last '*': O(p·n) worst case.
    let (mut pi, mut ni) = (0usize, 0usize);
    let mut star: Option<(usize, usize)> = None;
    while ni < n.len() {
        if pi < p.len() {
            match p[pi] {
                '*' => {
                    star = Some((pi, ni));
                    pi += 1;
                    continue;
                }
                '?' => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                '[' => {
                    if let Some((ok, next)) = class(&p, pi, n[ni]) {
                        if ok {
                            pi = next;
                            ni += 1;
                            continue;
                        }
                    } else if n[ni] == '[' {
                        pi += 1;
                        ni += 1;
                        continue;
                    }
                }
                c if c == n[ni] => {
                    pi += 1;
                    ni += 1;
                    continue;
                }
                _ => {}
            }
        }
        match star {
            Some((sp, sn)) => {
                pi = sp + 1;
                ni = sn + 1;
                star = Some((sp, sn + 1));
            }
            None => return false,
        }
    }
    p[pi..].iter().all(|c| *c == '*')
}

/// Matches `c` against the class starting at `p[i] == '['`: (matched, index after `]`).
fn class(p: &[char], i: usize, c: char) -> Option<(bool, usize)> {
    let mut j = i + 1;
    let neg = matches!(p.get(j), Some('!') | Some('^'));
    if neg {
        j += 1;
    }
    let mut hit = false;
    let mut first = true;
    while j < p.len() && (first || p[j] != ']') {
        first = false;
        if j + 2 < p.len() && p[j + 1] == '-' && p[j + 2] != ']' {
            hit |= p[j] <= c && c <= p[j + 2];
            j += 3;
        } else {
            hit |= p[j] == c;
            j += 1;
        }
    }
    if j >= p.len() {
        return None;
    }
    Some((hit != neg, j + 1))
}

/// True when a path has a wildcard in it.
pub fn has_wildcard(s: &str) -> bool {
    s.contains(['*', '?', '['])
}

/// The existing paths a pattern names, sorted (dot files only when the
/// component's pattern starts with a dot).
pub fn expand(pattern: &Path) -> Vec<PathBuf> {
    let mut current: Vec<PathBuf> = vec![PathBuf::new()];
    for comp in pattern.components() {
        let part = match comp {
            Component::Normal(s) => s.to_string_lossy().to_string(),
            other => {
                for c in current.iter_mut() {
                    c.push(other.as_os_str());
                }
                continue;
            }
        };
        if !has_wildcard(&part) {
            for c in current.iter_mut() {
                c.push(&part);
            }
            continue;
        }
        let mut next = Vec::new();
        for dir in &current {
            let d = if dir.as_os_str().is_empty() {
                Path::new(".")
            } else {
                dir.as_path()
            };
            let Ok(rd) = std::fs::read_dir(d) else {
                continue;
            };
            let mut names: Vec<String> = rd
                .filter_map(|e| e.ok())
                .map(|e| e.file_name().to_string_lossy().to_string())
                .filter(|n| (!n.starts_with('.') || part.starts_with('.')) && matches(&part, n))
                .collect();
            names.sort();
            next.extend(names.into_iter().map(|n| dir.join(n)));
        }
        current = next;
    }
    current.retain(|p| p.exists());
    current
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn wildcard_cases() {
        assert!(matches("*.conf", "a.conf"));
        assert!(!matches("*.conf", "a.conf.bak"));
        assert!(matches("*.load", ".load"));
        assert!(matches("a?c", "abc"));
        assert!(matches("[a-c]x", "bx"));
        assert!(!matches("[!a-c]x", "bx"));
        assert!(matches("*", ""));
        assert!(matches("*a*b*", "xxaxxbxx"));
        assert!(!matches("*a*b", "xxaxxbxx"));
        assert!(matches("[x", "[x"));
    }
}
