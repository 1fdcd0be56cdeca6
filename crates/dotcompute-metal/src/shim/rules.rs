//! What MSL forbids that a C++14 compiler accepts, checked on the generated text before the
//! shim compiles it: Metal's language is C++14 without `double`, `long long`, `goto`,
//! `new` / `delete`, virtual functions, exceptions, thread-local storage, `register`,
//! run-time type information and the C++ standard library (Metal Shading Language
//! Specification, section 1.4.4). The shim's compiler flags refuse exceptions and RTTI, and
//! its header poisons `double`; the rest is here, because `long` and `ll`-suffixed literals
//! are valid C++ the compiler cannot be told to refuse. (Recursion, also forbidden, cannot
//! arise: the IR has no calls, `#[kernel_fn]`s are inlined.)

/// Each place `source` uses what MSL lacks, as `line N: what`; empty when it is clean.
pub fn violations(source: &str) -> Vec<String> {
    let mut found = Vec::new();
    for (number, line) in without_comments(source).lines().enumerate() {
        let tokens = tokens(line);
        for (i, token) in tokens.iter().enumerate() {
            let next = tokens.get(i + 1).map(String::as_str);
            let what = match token.as_str() {
                "double" => Some("`double` (Metal has no 64-bit float)".to_string()),
                "long" if next == Some("long") => {
                    Some("`long long` (MSL's 64-bit integer is `long`)".to_string())
                }
                "goto" | "new" | "delete" | "virtual" | "throw" | "try" | "catch"
                | "thread_local" | "register" | "dynamic_cast" | "typeid" => {
                    Some(format!("`{token}` (not in MSL)"))
                }
                "std" if next == Some("::") => {
                    Some("`std::` (MSL has no C++ standard library)".to_string())
                }
                t if is_long_long_literal(t) => Some(format!(
                    "the literal `{t}`: MSL has no `ll` suffix (`l` / `ul` are 64-bit)"
                )),
                _ => None,
            };
            if let Some(what) = what {
                found.push(format!("line {}: {what}", number + 1));
            }
        }
    }
    found
}

/// `source` with `//` and `/* */` comments blanked (newlines kept, so line numbers hold).
fn without_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut chars = source.chars().peekable();
    while let Some(c) = chars.next() {
        match (c, chars.peek()) {
            ('/', Some('/')) => {
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                        break;
                    }
                }
            }
            ('/', Some('*')) => {
                chars.next();
                let mut last = ' ';
                for c in chars.by_ref() {
                    if c == '\n' {
                        out.push('\n');
                    }
                    if last == '*' && c == '/' {
                        break;
                    }
                    last = c;
                }
                out.push(' ');
            }
            _ => out.push(c),
        }
    }
    out
}

/// Identifiers, numbers and `::` of one line (other punctuation dropped).
fn tokens(line: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut chars = line.char_indices().peekable();
    while let Some((start, c)) = chars.next() {
        if c.is_ascii_alphanumeric() || c == '_' {
            let mut end = start + c.len_utf8();
            while let Some(&(i, d)) = chars.peek() {
                // `.` continues a number (`1.5f`), not an identifier.
                if d.is_ascii_alphanumeric() || d == '_' || (d == '.' && c.is_ascii_digit()) {
                    end = i + d.len_utf8();
                    chars.next();
                } else {
                    break;
                }
            }
            out.push(line[start..end].to_string());
        } else if c == ':' && chars.peek().is_some_and(|&(_, d)| d == ':') {
            chars.next();
            out.push("::".to_string());
        }
    }
    out
}

/// A number ending in C's `ll` (any case, with or without `u`): `5ll`, `7ULL`, `0x1llu`.
fn is_long_long_literal(token: &str) -> bool {
    let lower = token.to_ascii_lowercase();
    let digits = lower.trim_end_matches(['u', 'l']);
    token.starts_with(|c: char| c.is_ascii_digit()) && lower[digits.len()..].contains("ll")
}

#[cfg(test)]
mod tests {
    use super::violations;

    #[test]
    fn what_msl_lacks_is_found_and_its_lookalikes_are_not() {
        let bad = "i64 a = -9223372036854775807ll - 1;\n\
                   long long b = 0;\n\
                   double c = 1.0;\n\
                   goto end;\n\
                   u64 d = 0x10ULL;\n\
                   float e = std::sqrt(2.0f);";
        let found = violations(bad);
        assert_eq!(found.len(), 6, "{found:?}");
        assert!(found[0].starts_with("line 1: the literal `9223372036854775807ll`"));
        assert!(found[1].starts_with("line 2: `long long`"));
        assert!(found[2].starts_with("line 3: `double`"));
        assert!(found[3].starts_with("line 4: `goto`"));
        assert!(found[4].starts_with("line 5: the literal `0x10ULL`"));
        assert!(found[5].starts_with("line 6: `std::`"));
        let clean = "i64 a = (-9223372036854775807l - 1l); // a double-checked long long\n\
                     u64 b = 18446744073709551615ul; /* goto new\n delete */ long c = 0;\n\
                     u32 l_new_1 = 0x7fffffffu; float f = 1.5f; i32 t = dc_sat_add(a, 0);\n\
                     simd_vote::vote_t v = 0;";
        assert_eq!(violations(clean), Vec::<String>::new());
    }
}
