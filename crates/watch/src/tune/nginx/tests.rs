//! Unit tests of `tune/nginx.rs`, kept in their own file so that file reads as its job.

use super::*;

fn words(src: &str) -> Result<Vec<Vec<String>>, (usize, String)> {
    let mut lx = Lexer {
        b: src.as_bytes(),
        pos: 0,
        line: 1,
    };
    let mut out = Vec::new();
    loop {
        match lx.next()? {
            Tok::Stmt(w, ..) | Tok::Open(w, ..) => out.push(w),
            Tok::Close => out.push(vec!["}".into()]),
            Tok::End => return Ok(out),
        }
    }
}

#[test]
fn tokens_follow_nginx() {
    assert_eq!(
        words("a b#c d; # note\n").unwrap(),
        vec![vec!["a", "b#c", "d"]]
    );
    assert_eq!(
        words("set $x ${a}b;").unwrap(),
        vec![vec!["set", "$x", "${a}b"]]
    );
    assert_eq!(
        words(r#"set $x "a\"b" 'c d' e\ f;"#).unwrap(),
        vec![vec!["set", "$x", "a\"b", "c d", "e\\ f"]]
    );
    assert_eq!(
        words("if ($a) { }").unwrap(),
        vec![vec!["if", "($a)"], vec!["}"]]
    );
    assert!(words("a \"b\"c;").is_err());
    assert!(words("a b").is_err());
    assert!(words("; a;").is_err());
}

#[test]
fn time_units() {
    assert_eq!(parse_time("75"), Some(75.0));
    assert_eq!(parse_time("75s"), Some(75.0));
    assert_eq!(parse_time("1m30s"), Some(90.0));
    assert_eq!(parse_time("500ms"), Some(0.5));
    assert_eq!(parse_time("2h"), Some(7200.0));
    assert_eq!(parse_time("x"), None);
}
