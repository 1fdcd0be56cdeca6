//! Expressions: literals, operators, methods, fields, `if` values and `match`
//! (desugared into `if` chains).

use super::*;

impl Tx {
    pub(crate) fn expr(&mut self, e: &Expr) -> Pair {
        match e {
            Expr::Lit(l) => self.literal(&l.lit),
            Expr::Paren(p) => {
                let (b, n) = self.expr(&p.expr);
                (b, quote!((#n)))
            }
            Expr::Group(g) => self.expr(&g.expr),
            Expr::Path(p) => {
                if let Some(id) = p.path.get_ident() {
                    match self.lookup(&id.to_string()) {
                        Some(Binding::Local | Binding::GidX) => return (quote!(__b.get(#id)), quote!(#id)),
                        Some(Binding::Scalar) => return (quote!(#id.clone()), quote!(#id)),
                        // Already reported where it was declared (nothing is emitted: the
                        // kernel has errors).
                        Some(Binding::Failed) => return (quote!(), quote!()),
                        Some(_) => {
                            return self.fail(
                                id.span(),
                                format!("`{id}` is an array: use it as `{id}[i]`, `{id}.len()`, in an atomic or as a kernel function's argument"),
                            )
                        }
                        None => {}
                    }
                }
                // Anything else is a host value (a `const`, `f32::MAX`, ...).
                (quote!(__dc::ir::V::host(#p)), quote!(#p))
            }
            Expr::Binary(b) => self.binary(b),
            Expr::Unary(u) => self.unary(u),
            Expr::Cast(c) => {
                let Some(Ty {
                    ir: t, native: id, ..
                }) = self.scalar_ty(&c.ty, "a cast")
                else {
                    return (quote!(), quote!());
                };
                let (b, n) = self.expr(&c.expr);
                // `as` cannot name a generic type nor `f16` (nor take such a value), so
                // casts go through a trait with `as` semantics (inlined, it is the `as`).
                let native = quote!(__dc::ops::cast::<#id, _>(#n));
                (quote!({ let __v = #b; __b.cast(__v, #t)? }), native)
            }
            Expr::Index(ix) => {
                let Some((mem, ib, inn)) = self.element(ix, false) else {
                    return (quote!(), quote!());
                };
                (
                    quote!({ let __i = #ib; __b.load(#mem, __i)? }),
                    quote!(#mem.load(#inn)),
                )
            }
            Expr::MethodCall(m) => self.method(m),
            Expr::Field(f) => self.field(f),
            Expr::Call(c) => self.call(c),
            Expr::If(i) => self.if_value(i),
            Expr::Match(m) => match self.desugar_match(m, true) {
                Some(e) => self.expr(&e),
                None => (quote!(), quote!()),
            },
            Expr::Block(b) if b.label.is_none() => {
                let (sb, vb, n) = self.value_block(&b.block, b.span());
                (quote!({ #sb #vb }), n)
            }
            other => self.fail(
                other.span(),
                format!("{} is not supported in kernels", describe(other)),
            ),
        }
    }

    pub(crate) fn literal(&mut self, lit: &Lit) -> Pair {
        match lit {
            Lit::Int(i) => {
                let suffix = i.suffix();
                if suffix.is_empty() {
                    match i.base10_parse::<i128>() {
                        Ok(v) => (quote!(__dc::ir::V::Int(#v)), quote!(#i)),
                        Err(e) => {
                            self.errors.push(e);
                            (quote!(), quote!())
                        }
                    }
                } else if SCALARS.contains(&suffix) {
                    (quote!(__dc::ir::V::host(#i)), quote!(#i))
                } else {
                    self.fail(i.span(), format!("`{suffix}` literals are not supported in kernels; use i32, u32, i64 or u64"))
                }
            }
            Lit::Float(f) => {
                let suffix = f.suffix();
                if suffix.is_empty() {
                    match f.base10_parse::<f64>() {
                        Ok(v) => (quote!(__dc::ir::V::Float(#v)), quote!(#f)),
                        Err(e) => {
                            self.errors.push(e);
                            (quote!(), quote!())
                        }
                    }
                } else {
                    (quote!(__dc::ir::V::host(#f)), quote!(#f))
                }
            }
            Lit::Bool(b) => (quote!(__dc::ir::V::host(#b)), quote!(#b)),
            other => self.fail(
                other.span(),
                "only numeric and boolean literals are supported in kernels",
            ),
        }
    }

    pub(crate) fn binary(&mut self, b: &syn::ExprBinary) -> Pair {
        if compound_op(&b.op).is_some() {
            return self.fail(
                b.span(),
                "compound assignment is a statement in kernels, not a value",
            );
        }
        let (lb, ln) = self.expr(&b.left);
        let short = matches!(b.op, BinOp::And(_) | BinOp::Or(_));
        if short {
            self.short_circuit += 1;
        }
        let (rb, rn) = self.expr(&b.right);
        if short {
            self.short_circuit -= 1;
        }
        let Some((ir, native)) = binary_op(&b.op) else {
            return self.fail(b.op.span(), "unsupported operator in kernels");
        };
        let ir = format_ident!("{ir}");
        let op = &b.op;
        let n = match native {
            Some(f) => {
                let f = format_ident!("{f}");
                quote!(__dc::ops::#f(#ln, #rn))
            }
            None => quote!((#ln #op #rn)),
        };
        (
            quote!({ let __l = #lb; let __r = #rb; __b.binary(__dc::ir::BinaryOp::#ir, __l, __r)? }),
            n,
        )
    }

    pub(crate) fn unary(&mut self, u: &syn::ExprUnary) -> Pair {
        let (b, n) = self.expr(&u.expr);
        match u.op {
            UnOp::Neg(_) => {
                // `-literal` stays a literal natively so `-2147483648i32` is accepted.
                let native = if matches!(&*u.expr, Expr::Lit(_)) {
                    quote!((-#n))
                } else {
                    quote!(__dc::ops::neg(#n))
                };
                (
                    quote!({ let __v = #b; __b.unary(__dc::ir::UnaryOp::Neg, __v)? }),
                    native,
                )
            }
            UnOp::Not(_) => (
                quote!({ let __v = #b; __b.unary(__dc::ir::UnaryOp::Not, __v)? }),
                quote!((!#n)),
            ),
            _ => self.fail(u.span(), "dereferencing is not supported in kernels"),
        }
    }

    pub(crate) fn method(&mut self, m: &syn::ExprMethodCall) -> Pair {
        let name = m.method.to_string();
        if m.turbofish.is_some() {
            return self.fail(
                m.span(),
                "turbofish method calls are not supported in kernels",
            );
        }
        if name == "len" && m.args.is_empty() {
            let Some(mem) = self.memory(&m.receiver) else {
                return (quote!(), quote!());
            };
            return (quote!(__b.len(#mem)), quote!(#mem.len()));
        }
        // `wrapping_*` are the IR's own integer `+ - *` (which wrap).
        let wrapping = match name.as_str() {
            "wrapping_add" => Some(("Add", "add")),
            "wrapping_sub" => Some(("Sub", "sub")),
            "wrapping_mul" => Some(("Mul", "mul")),
            _ => None,
        };
        if name == "powi" {
            if m.args.len() != 1 {
                return self.fail(m.span(), "`powi` takes 1 argument (an i32 exponent)");
            }
            let (xb, xn) = self.expr(&m.receiver);
            let (nb, nn) = self.expr(&m.args[0]);
            return (
                quote!({ let __x = #xb; let __n = #nb; __b.powi(__x, __n)? }),
                quote!(__dc::ops::powi(#xn, #nn)),
            );
        }
        if let Some((ir, native)) = wrapping {
            if m.args.len() != 1 {
                return self.fail(m.span(), format!("`{name}` takes 1 argument"));
            }
            let (lb, ln) = self.expr(&m.receiver);
            let (rb, rn) = self.expr(&m.args[0]);
            let (ir, native) = (format_ident!("{ir}"), format_ident!("{native}"));
            return (
                quote!({ let __l = #lb; let __r = #rb; __b.binary(__dc::ir::BinaryOp::#ir, __l, __r)? }),
                quote!(__dc::ops::#native(#ln, #rn)),
            );
        }
        let Some((_, ir, native, arity)) = math_methods().find(|(n, ..)| *n == name) else {
            let list: Vec<_> = math_methods()
                .map(|m| m.0)
                .chain(["powi", "wrapping_add", "wrapping_sub", "wrapping_mul"])
                .collect();
            return self.fail(
                m.method.span(),
                format!(
                    "method `{name}` is not supported in kernels; supported: len, {}",
                    list.join(", ")
                ),
            );
        };
        if m.args.len() + 1 != arity {
            return self.fail(
                m.span(),
                format!("`{name}` takes {} argument(s)", arity - 1),
            );
        }
        let (bs, ns, tmps) = self.operands(std::iter::once(&*m.receiver).chain(m.args.iter()));
        let ir = format_ident!("{ir}");
        let native = format_ident!("{native}");
        (
            quote!({ #(let #tmps = #bs;)* __b.math(__dc::ir::MathFn::#ir, vec![#(#tmps),*])? }),
            quote!(__dc::ops::#native(#(#ns),*)),
        )
    }

    /// `global_id().x` and the other coordinates, or a vector's lane (`v.x` .. `v.w`).
    pub(crate) fn field(&mut self, f: &syn::ExprField) -> Pair {
        let builtin = match &*f.base {
            Expr::Call(c) if c.args.is_empty() => builtins().find(|(n, _)| is_call_to(c, n)),
            _ => None,
        };
        let Some((native, ir)) = builtin else {
            let lane = match &f.member {
                syn::Member::Named(id) => ["x", "y", "z", "w"]
                    .iter()
                    .position(|l| id == l)
                    .map(|i| (i as u8, id.clone())),
                syn::Member::Unnamed(_) => None,
            };
            let Some((lane, id)) = lane else {
                return self.fail(
                    f.member.span(),
                    "fields are a vector's lanes (`.x`, `.y`, `.z`, `.w`) and the builtins' \
                     coordinates (`global_id().x`)",
                );
            };
            let (b, n) = self.expr(&f.base);
            return (
                quote!({ let __v = #b; __b.lane(__v, #lane)? }),
                quote!((#n).#id),
            );
        };
        let axis = match &f.member {
            syn::Member::Named(id) if id == "x" || id == "y" || id == "z" => id.clone(),
            other => return self.fail(other.span(), "builtin coordinates are `.x`, `.y` or `.z`"),
        };
        let ir_axis = format_ident!("{}", axis.to_string().to_uppercase());
        let ir = format_ident!("{ir}");
        let native = format_ident!("{native}");
        (
            quote!(__b.builtin(__dc::ir::Builtin::#ir, __dc::ir::Axis::#ir_axis)),
            quote!(__ctx.#native.#axis),
        )
    }

    /// `match` on an integer as the equivalent `if` chain, compiled by both halves (so the
    /// CPU body and the IR agree by construction): `{ let dc_match_N = scrutinee; if .. }`.
    /// Patterns: integer literals and constants, ranges (`a..b`, `a..=b`), `|`, `_`, and
    /// guards. A `match` used as a value needs a final `_` arm (Rust would demand one for
    /// integers too).
    pub(crate) fn desugar_match(&mut self, m: &syn::ExprMatch, value: bool) -> Option<Expr> {
        let var = format_ident!("dc_match_{}", self.matches);
        self.matches += 1;
        let scrutinee = &m.expr;
        let mut chain: Option<Expr> = None;
        for (k, arm) in m.arms.iter().enumerate().rev() {
            let body = &arm.body;
            let block: syn::Block = match &**body {
                Expr::Block(b) if b.label.is_none() => b.block.clone(),
                other if value => syn::parse_quote!({ #other }),
                other => syn::parse_quote!({ #other; }),
            };
            let wild = matches!(arm.pat, Pat::Wild(_)) && arm.guard.is_none();
            if wild {
                if k + 1 != m.arms.len() {
                    self.fail(
                        arm.pat.span(),
                        "in a kernel `match`, `_` must be the last arm",
                    );
                    return None;
                }
                chain = Some(Expr::Block(syn::ExprBlock {
                    attrs: Vec::new(),
                    label: None,
                    block,
                }));
                continue;
            }
            let mut cond = self.pattern_cond(&arm.pat, &var)?;
            if let Some((_, guard)) = &arm.guard {
                cond = syn::parse_quote!((#cond) && (#guard));
            }
            let else_branch = chain
                .take()
                .map(|e| (syn::token::Else::default(), Box::new(e)));
            chain = Some(Expr::If(syn::ExprIf {
                attrs: Vec::new(),
                if_token: Default::default(),
                cond: Box::new(cond),
                then_branch: block,
                else_branch,
            }));
        }
        let Some(chain) = chain else {
            self.fail(m.span(), "a kernel `match` needs at least one arm");
            return None;
        };
        if value
            && m.arms
                .last()
                .is_none_or(|a| !matches!(a.pat, Pat::Wild(_)) || a.guard.is_some())
        {
            self.fail(
                m.span(),
                "a `match` used as a value in a kernel needs a final `_ =>` arm",
            );
            return None;
        }
        Some(syn::parse_quote!({ let #var = #scrutinee; #chain }))
    }

    /// The condition under which `var` matches `pat`.
    pub(crate) fn pattern_cond(&mut self, pat: &Pat, var: &Ident) -> Option<Expr> {
        match pat {
            Pat::Lit(l) => Some(syn::parse_quote!(#var == #l)),
            Pat::Path(p) => Some(syn::parse_quote!(#var == #p)),
            Pat::Wild(_) => Some(syn::parse_quote!(true)),
            Pat::Paren(p) => self.pattern_cond(&p.pat, var),
            Pat::Range(r) => {
                let lo = r
                    .start
                    .as_ref()
                    .map(|a| -> Expr { syn::parse_quote!(#var >= #a) });
                let hi = r.end.as_ref().map(|b| -> Expr {
                    match r.limits {
                        syn::RangeLimits::Closed(_) => syn::parse_quote!(#var <= #b),
                        syn::RangeLimits::HalfOpen(_) => syn::parse_quote!(#var < #b),
                    }
                });
                match (lo, hi) {
                    (Some(l), Some(h)) => Some(syn::parse_quote!((#l) && (#h))),
                    (Some(c), None) | (None, Some(c)) => Some(c),
                    (None, None) => Some(syn::parse_quote!(true)),
                }
            }
            Pat::Or(o) => {
                let mut conds = Vec::new();
                for case in &o.cases {
                    conds.push(self.pattern_cond(case, var)?);
                }
                Some(syn::parse_quote!(#((#conds))||*))
            }
            // `-1` and other literal expressions syn keeps verbatim.
            Pat::Verbatim(ts) => match syn::parse2::<Expr>(ts.clone()) {
                Ok(e) => Some(syn::parse_quote!(#var == (#e))),
                Err(_) => self.unsupported_pattern(pat),
            },
            _ => self.unsupported_pattern(pat),
        }
    }

    pub(crate) fn unsupported_pattern(&mut self, pat: &Pat) -> Option<Expr> {
        self.fail(
            pat.span(),
            "kernel `match` patterns are integer literals or constants, ranges (`a..b`, `a..=b`), `|` and `_`",
        );
        None
    }

    pub(crate) fn if_value(&mut self, i: &syn::ExprIf) -> Pair {
        if let Expr::Let(l) = &*i.cond {
            return self.fail(l.span(), "`if let` is not supported in kernels");
        }
        let Some((_, else_expr)) = &i.else_branch else {
            return self.fail(i.span(), "an `if` used as a value needs an `else`");
        };
        let (cb, cn) = self.expr(&i.cond);
        let (tsb, tvb, tn) = self.value_block(&i.then_branch, i.then_branch.span());
        let (eb, en) = match &**else_expr {
            Expr::Block(b) => {
                let (sb, vb, n) = self.value_block(&b.block, b.span());
                (quote!(#sb let __v = #vb; __b.set_value(__slot, __v)?;), n)
            }
            Expr::If(inner) => {
                let (vb, n) = self.if_value(inner);
                (
                    quote!(let __v = #vb; __b.set_value(__slot, __v)?;),
                    quote!({ #n }),
                )
            }
            other => return self.fail(other.span(), "unsupported else branch"),
        };
        (
            quote!({
                let __c = #cb;
                let __slot = __b.begin_if_value(__c)?;
                { #tsb let __v = #tvb; __b.set_value(__slot, __v)?; }
                __b.begin_else()?;
                { #eb }
                __b.end_if_value(__slot)?
            }),
            quote!((if #cn #tn else #en)),
        )
    }
}
