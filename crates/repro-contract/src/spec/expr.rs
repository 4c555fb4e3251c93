//! Integer expressions over named sizes, as written in shapes and strides (`K`, `2*N`,
//! `ceil_div(M, 64) * 64`). Evaluated with C++ integer semantics so the harness agrees.

use indexmap::IndexMap;

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum ExprError {
    UnknownName(String),
    Syntax(String),
    Arithmetic(String),
}

impl std::fmt::Display for ExprError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ExprError::UnknownName(n) => write!(f, "`{n}` is not a declared size"),
            ExprError::Syntax(m) | ExprError::Arithmetic(m) => f.write_str(m),
        }
    }
}

/// Evaluates `text` with the given sizes.
pub fn evaluate(text: &str, sizes: &IndexMap<String, i64>) -> Result<i64, ExprError> {
    let mut parser = ExprParser {
        chars: text.chars().collect(),
        pos: 0,
        sizes,
    };
    let value = parser.sum()?;
    parser.skip_space();
    if parser.pos != parser.chars.len() {
        return Err(ExprError::Syntax(format!(
            "unexpected `{}` in `{text}`",
            parser.chars[parser.pos..].iter().collect::<String>()
        )));
    }
    Ok(value)
}

/// The expression as C++ over `int64_t` sizes: the functions become the harness's own
/// (`ceil_div`, `min`, `max` -> `repro::ceil_div`, `repro::size_min`, `repro::size_max`), which
/// take int64_t, so `min(M, 64)` does not trip over std::min's single template type.
pub fn to_cpp(text: &str) -> String {
    let mut out = String::new();
    let mut current = String::new();
    let flush = |current: &mut String, out: &mut String, next: Option<char>| {
        let called = next == Some('(');
        out.push_str(match current.as_str() {
            "ceil_div" if called => "repro::ceil_div",
            "min" if called => "repro::size_min",
            "max" if called => "repro::size_max",
            other => other,
        });
        current.clear();
    };
    let chars: Vec<char> = text.chars().collect();
    for (i, &c) in chars.iter().enumerate() {
        if c.is_ascii_alphanumeric() || c == '_' {
            current.push(c);
        } else {
            if !current.is_empty() {
                let next = chars[i..].iter().copied().find(|c| !c.is_whitespace());
                flush(&mut current, &mut out, next);
            }
            out.push(c);
        }
    }
    if !current.is_empty() {
        flush(&mut current, &mut out, None);
    }
    out
}

/// Every identifier in `text`, in order (for "did you mean" on an unknown one).
pub fn identifiers(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut current = String::new();
    for c in text.chars().chain(std::iter::once(' ')) {
        if c.is_ascii_alphanumeric() || c == '_' {
            current.push(c);
        } else if !current.is_empty() {
            if !current.starts_with(|c: char| c.is_ascii_digit()) {
                out.push(current.clone());
            }
            current.clear();
        }
    }
    out
}

struct ExprParser<'a> {
    chars: Vec<char>,
    pos: usize,
    sizes: &'a IndexMap<String, i64>,
}

impl ExprParser<'_> {
    fn skip_space(&mut self) {
        while self.chars.get(self.pos).is_some_and(|c| c.is_whitespace()) {
            self.pos += 1;
        }
    }

    fn peek(&mut self) -> Option<char> {
        self.skip_space();
        self.chars.get(self.pos).copied()
    }

    fn expect(&mut self, c: char) -> Result<(), ExprError> {
        if self.peek() == Some(c) {
            self.pos += 1;
            Ok(())
        } else {
            Err(ExprError::Syntax(format!("expected `{c}`")))
        }
    }

    fn sum(&mut self) -> Result<i64, ExprError> {
        let mut value = self.product()?;
        while let Some(op @ ('+' | '-')) = self.peek() {
            self.pos += 1;
            let rhs = self.product()?;
            value = if op == '+' {
                value.checked_add(rhs)
            } else {
                value.checked_sub(rhs)
            }
            .ok_or_else(|| ExprError::Arithmetic("integer overflow".into()))?;
        }
        Ok(value)
    }

    fn product(&mut self) -> Result<i64, ExprError> {
        let mut value = self.unary()?;
        while let Some(op @ ('*' | '/' | '%')) = self.peek() {
            self.pos += 1;
            let rhs = self.unary()?;
            value = match op {
                '*' => value.checked_mul(rhs),
                _ if rhs == 0 => return Err(ExprError::Arithmetic("division by zero".into())),
                // C++ integer division truncates toward zero, like Rust's.
                '/' => value.checked_div(rhs),
                _ => value.checked_rem(rhs),
            }
            .ok_or_else(|| ExprError::Arithmetic("integer overflow".into()))?;
        }
        Ok(value)
    }

    fn unary(&mut self) -> Result<i64, ExprError> {
        if self.peek() == Some('-') {
            self.pos += 1;
            return Ok(-self.unary()?);
        }
        self.atom()
    }

    fn atom(&mut self) -> Result<i64, ExprError> {
        match self.peek() {
            Some('(') => {
                self.pos += 1;
                let v = self.sum()?;
                self.expect(')')?;
                Ok(v)
            }
            Some(c) if c.is_ascii_digit() => {
                let start = self.pos;
                while self.chars.get(self.pos).is_some_and(|c| c.is_ascii_digit()) {
                    self.pos += 1;
                }
                let digits: String = self.chars[start..self.pos].iter().collect();
                digits
                    .parse()
                    .map_err(|_| ExprError::Arithmetic(format!("{digits} is too large")))
            }
            Some(c) if c.is_ascii_alphabetic() || c == '_' => {
                let start = self.pos;
                while self
                    .chars
                    .get(self.pos)
                    .is_some_and(|c| c.is_ascii_alphanumeric() || *c == '_')
                {
                    self.pos += 1;
                }
                let name: String = self.chars[start..self.pos].iter().collect();
                if self.peek() == Some('(') {
                    self.call(&name)
                } else {
                    self.sizes
                        .get(&name)
                        .copied()
                        .ok_or(ExprError::UnknownName(name))
                }
            }
            Some(c) => Err(ExprError::Syntax(format!("unexpected `{c}`"))),
            None => Err(ExprError::Syntax("the expression ends too early".into())),
        }
    }

    fn call(&mut self, name: &str) -> Result<i64, ExprError> {
        self.expect('(')?;
        let a = self.sum()?;
        self.expect(',')?;
        let b = self.sum()?;
        self.expect(')')?;
        match name {
            "ceil_div" if b == 0 => Err(ExprError::Arithmetic("ceil_div by zero".into())),
            "ceil_div" => Ok((a + b - 1) / b),
            "min" => Ok(a.min(b)),
            "max" => Ok(a.max(b)),
            _ => Err(ExprError::Syntax(format!(
                "unknown function `{name}` (shapes may use ceil_div, min, max)"
            ))),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sizes() -> IndexMap<String, i64> {
        [("M".to_string(), 1000), ("K".to_string(), 96)]
            .into_iter()
            .collect()
    }

    #[test]
    fn evaluates_like_cpp() {
        assert_eq!(evaluate("K", &sizes()), Ok(96));
        assert_eq!(evaluate("ceil_div(M, 64) * 64", &sizes()), Ok(1024));
        assert_eq!(evaluate("(M - 1) / 64 + -1", &sizes()), Ok(14));
        assert_eq!(evaluate("7 % 4", &sizes()), Ok(3));
    }

    #[test]
    fn reports_unknown_names_and_syntax() {
        assert_eq!(
            evaluate("2*Q", &sizes()),
            Err(ExprError::UnknownName("Q".into()))
        );
        assert!(matches!(
            evaluate("M +", &sizes()),
            Err(ExprError::Syntax(_))
        ));
        assert!(matches!(
            evaluate("M / 0", &sizes()),
            Err(ExprError::Arithmetic(_))
        ));
        assert_eq!(identifiers("ceil_div(N, 128) + 2x"), vec!["ceil_div", "N"]);
        assert_eq!(
            to_cpp("ceil_div(N, 128) * min (M, 64) + max_k"),
            "repro::ceil_div(N, 128) * repro::size_min (M, 64) + max_k"
        );
    }
}
