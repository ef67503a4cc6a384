//! A small YAML writer for JSON values (block style, strings always quoted
//! as JSON strings, which YAML reads the same), so the manifests need no
//! YAML library: the maintained ones are heavy and the old one is deprecated.

use serde_json::Value;
use std::fmt::Write;

/// The YAML form of one document (no leading `---`).
pub fn to_yaml(v: &Value) -> String {
    let mut o = String::new();
    match v {
        Value::Object(m) if !m.is_empty() => map(&mut o, m, 0),
        Value::Array(a) if !a.is_empty() => seq(&mut o, a, 0),
        other => {
            let _ = writeln!(o, "{}", scalar(other));
        }
    }
    o
}

/// Several documents separated by `---`.
pub fn to_yaml_stream(docs: &[Value]) -> String {
    docs.iter()
        .map(|d| format!("---\n{}", to_yaml(d)))
        .collect()
}

fn scalar(v: &Value) -> String {
    match v {
        Value::Null => "null".into(),
        Value::Bool(b) => b.to_string(),
        Value::Number(n) => n.to_string(),
        // A JSON string is a valid YAML double-quoted scalar.
        Value::String(s) => serde_json::to_string(s).unwrap_or_else(|_| "\"\"".into()),
        Value::Array(_) => "[]".into(),
        Value::Object(_) => "{}".into(),
    }
}

fn key(k: &str) -> String {
    let plain = !k.is_empty()
        && k.chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '-' | '_' | '.' | '/'));
    if plain {
        k.to_string()
    } else {
        serde_json::to_string(k).unwrap_or_default()
    }
}

fn is_block(v: &Value) -> bool {
    matches!(v, Value::Object(m) if !m.is_empty()) || matches!(v, Value::Array(a) if !a.is_empty())
}

fn map(o: &mut String, m: &serde_json::Map<String, Value>, ind: usize) {
    for (k, v) in m {
        let pad = " ".repeat(ind);
        if is_block(v) {
            let _ = writeln!(o, "{pad}{}:", key(k));
            match v {
                Value::Object(m2) => map(o, m2, ind + 2),
                Value::Array(a) => seq(o, a, ind + 2),
                _ => {}
            }
        } else {
            let _ = writeln!(o, "{pad}{}: {}", key(k), scalar(v));
        }
    }
}

fn seq(o: &mut String, a: &[Value], ind: usize) {
    let pad = " ".repeat(ind);
    for v in a {
        match v {
            Value::Object(m) if !m.is_empty() => {
                // The first key on the dash line, the rest indented under it.
                let mut first = String::new();
                map(&mut first, m, ind + 2);
                let body = first.strip_prefix(&" ".repeat(ind + 2)).unwrap_or(&first);
                let _ = write!(o, "{pad}- {body}");
            }
            Value::Array(inner) if !inner.is_empty() => {
                let _ = writeln!(o, "{pad}-");
                seq(o, inner, ind + 2);
            }
            other => {
                let _ = writeln!(o, "{pad}- {}", scalar(other));
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    #[test]
    fn block_style() {
        let v = json!({"a": 1, "b": {"c": "x: y", "d": []}, "e": [{"f": true, "g": [1, 2]}, "h"], "weird key": null});
        let y = to_yaml(&v);
        assert_eq!(
            y,
            "a: 1\nb:\n  c: \"x: y\"\n  d: []\ne:\n  - f: true\n    g:\n      - 1\n      - 2\n  - \"h\"\n\"weird key\": null\n"
        );
        assert!(to_yaml_stream(&[json!({"a": 1}), json!({"b": 2})])
            .starts_with("---\na: 1\n---\nb: 2\n"));
    }
}
