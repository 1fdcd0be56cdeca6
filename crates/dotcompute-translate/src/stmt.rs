//! Statements: blocks, `let` (locals, local and shared arrays), assignments, `if`,
//! `for` and the other loops.

use super::*;

impl Tx {
    /// The body of a `for`, `while` or `loop`.
    pub(crate) fn loop_body(&mut self, stmts: &[Stmt]) -> Pair {
        if let Some(d) = &mut self.region {
            *d += 1;
        }
        let r = self.block(stmts);
        if let Some(d) = &mut self.region {
            *d -= 1;
        }
        r
    }

    pub(crate) fn block(&mut self, stmts: &[Stmt]) -> Pair {
        self.scopes.push(HashMap::new());
        let mut b = TokenStream::new();
        let mut n = TokenStream::new();
        for s in stmts {
            let (sb, sn) = self.stmt(s);
            let line = line_of(s.span());
            b.extend(quote!(__b.line(#line); #sb));
            n.extend(sn);
        }
        self.scopes.pop();
        (quote!({ #b }), quote!({ #n }))
    }

    /// A block used as a value: statements, then a tail expression. `tail` receives the
    /// builder tokens of the value and returns what to do with it.
    pub(crate) fn value_block(
        &mut self,
        block: &syn::Block,
        span: Span,
    ) -> (TokenStream, TokenStream, TokenStream) {
        let (last, init) = match block.stmts.split_last() {
            Some((Stmt::Expr(e, None), init)) => (e, init),
            _ => {
                self.fail(
                    span,
                    "this block must end with a value (an expression without `;`)",
                );
                return (quote!(), quote!(), quote!());
            }
        };
        self.scopes.push(HashMap::new());
        let mut b = TokenStream::new();
        let mut n = TokenStream::new();
        for s in init {
            let (sb, sn) = self.stmt(s);
            b.extend(sb);
            n.extend(sn);
        }
        let (vb, vn) = self.expr(last);
        self.scopes.pop();
        (b, vb, quote!({ #n #vn }))
    }

    pub(crate) fn stmt(&mut self, s: &Stmt) -> Pair {
        match s {
            Stmt::Local(local) => self.local(local),
            Stmt::Expr(e, _) => self.expr_stmt(e),
            Stmt::Item(syn::Item::Const(c)) => {
                // A const item is needed by both the builder and the native body.
                (quote!(#c), quote!(#c))
            }
            Stmt::Item(i) => self.fail(
                i.span(),
                "items inside kernels are not supported (only `const`); define them outside",
            ),
            Stmt::Macro(m) => self.fail(
                m.span(),
                format!(
                    "macro `{}!` is not supported in kernels",
                    m.mac
                        .path
                        .segments
                        .last()
                        .map(|s| s.ident.to_string())
                        .unwrap_or_default()
                ),
            ),
        }
    }

    pub(crate) fn local(&mut self, local: &syn::Local) -> Pair {
        let (pat, ty) = match &local.pat {
            Pat::Type(pt) => (&*pt.pat, Some(&*pt.ty)),
            p => (p, None),
        };
        let Pat::Ident(pi) = pat else {
            return self.fail(
                pat.span(),
                "unsupported pattern: kernels bind one name per `let` (no tuples or destructuring)",
            );
        };
        if pi.by_ref.is_some() || pi.subpat.is_some() {
            return self.fail(pat.span(), "unsupported pattern: `ref` and `@` bindings");
        }
        let name = &pi.ident;
        let name_str = name.to_string();
        let Some(init) = &local.init else {
            return self.fail(
                local.span(),
                "a kernel local needs an initial value (`let x: f32 = 0.0;`)",
            );
        };
        if init.diverge.is_some() {
            return self.fail(local.span(), "`let ... else` is not supported in kernels");
        }
        if let Expr::Repeat(rep) = &*init.expr {
            return self.local_array(name, pi.mutability.is_some(), ty, rep, local.span());
        }
        // Shared arrays.
        if let Expr::Call(call) = &*init.expr {
            if let Expr::Path(p) = &*call.func {
                let last = p.path.segments.last().unwrap();
                let fname = last.ident.to_string();
                if fname == "shared" || fname == "shared_dynamic" {
                    return self.shared_decl(name, &fname, last, call, local.span());
                }
            }
        }
        let ty_info = match ty {
            Some(t) => match self.ty(t, "a local's type") {
                Some(t) => Some(t),
                None => return (quote!(), quote!()),
            },
            None => None,
        };
        let errors_before = self.errors.len();
        let (ib, inn) = self.expr(&init.expr);
        if self.errors.len() > errors_before {
            self.bind(&name_str, Binding::Failed);
            return (quote!(), quote!());
        }
        let mutable = pi.mutability.is_some();
        let mut_tok = pi.mutability;
        // Helpers have no fast body, so no in-bounds assumption to record.
        let is_gid_x = !mutable
            && self.helper.is_none()
            && ty_info.as_ref().is_none_or(|t| t.name == "u32")
            && is_global_id_x(&init.expr);
        self.bind(
            &name_str,
            if is_gid_x {
                Binding::GidX
            } else {
                Binding::Local
            },
        );

        let ty_b = optional_ir(ty_info.as_ref());
        let ty_n = match &ty_info {
            Some(t) => {
                let t = &t.native;
                quote!(: #t)
            }
            None => quote!(),
        };
        let assume = if is_gid_x {
            // The CPU backend's fast path may assume this index is in bounds of every array
            // it indexes (see dotcompute_cpu::runtime::execute).
            quote!(__dc_assume_in_bounds!(#name);)
        } else {
            quote!()
        };
        (
            quote!(let #name = { let __v = #ib; __b.let_(#name_str, #ty_b, #mutable, __v)? };),
            quote!(let #mut_tok #name #ty_n = #inn; #assume),
        )
    }

    /// `let mut acc = [init; LEN];` (optionally `: [T; LEN]`): a thread-private array.
    /// Natively a Rust array on the thread's stack behind a checked view.
    pub(crate) fn local_array(
        &mut self,
        name: &Ident,
        mutable: bool,
        ty: Option<&Type>,
        rep: &syn::ExprRepeat,
        span: Span,
    ) -> Pair {
        // Taken first: the initial value's translation must not see it.
        let lifted_slot = self.lift_array.take();
        if self.helper.is_some() {
            return self.fail(
                span,
                "local arrays are declared in kernels; pass one to a #[kernel_fn] as `&mut [T]`",
            );
        }
        let elem = match ty {
            None => None,
            Some(Type::Array(a)) => match self.scalar_ty(&a.elem, "a local array") {
                Some(t) => Some(t),
                None => return (quote!(), quote!()),
            },
            Some(other) => {
                return self.fail(other.span(), "a local array's type is `[T; LEN]`");
            }
        };
        let (ib, inn) = self.expr(&rep.expr);
        // The length is a host expression (a literal or a constant, `usize` as Rust
        // requires), evaluated when the kernel is built.
        let len = &rep.len;
        let name_str = name.to_string();
        let slot = self.local_arrays;
        self.local_arrays += 1;
        self.bind(
            &name_str,
            if mutable {
                Binding::Shared
            } else {
                Binding::ReadOnlyArray
            },
        );
        let elem_b = match &elem {
            Some(Ty { ir, .. }) => quote!(Some(#ir)),
            None => quote!(None),
        };
        let ty_n = match ty {
            Some(t) => quote!(: #t),
            None => quote!(),
        };
        let storage = format_ident!("__dc_storage_{name}");
        if let Some(lifted) = lifted_slot {
            // `(v)` or, with a declared element type, `<T>::from(v)`: the slot's type.
            let elem_n = match &elem {
                Some(Ty { native, .. }) => {
                    quote!(<#native as ::core::convert::From<#native>>::from)
                }
                None => quote!(),
            };
            // The CPU's group body: the array lives in its per-thread slot, indexed in
            // place in every region that uses it.
            return (
                quote!(),
                quote!(let #name = __ctx.local_array(#lifted.fill(__th, #elem_n(#inn)), #slot);),
            );
        }
        // A length naming a const parameter (`[0.0; PER]`, `[0; PER + 1]`) is not a Rust
        // array length in generic code: natively the array is room for the IR's largest
        // local array, of which the instance's length is used. The IR takes the value.
        let per_instance = len.to_token_stream().into_iter().any(
            |t| matches!(&t, proc_macro2::TokenTree::Ident(i) if self.const_params.contains(i)),
        );
        if per_instance {
            let elem_n = match &elem {
                Some(Ty { native, .. }) => quote!(#native),
                None => quote!(_),
            };
            return (
                quote!(let #name = { let __v = #ib; __b.local_array(#name_str, #elem_b, __dc::ir::V::host((#len) as u32), __v)? };),
                quote!(
                    let mut #storage = __dc::cpu::LocalArray::<#elem_n, { __dc::ir::LOCAL_ARRAY_MAX as usize }>::new(#inn, (#len) as usize);
                    let #name = __ctx.local_array(#storage.as_mut_slice(), #slot);
                ),
            );
        }
        (
            quote!(let #name = { let __v = #ib; __b.local_array(#name_str, #elem_b, __dc::ir::V::host(#len), __v)? };),
            quote!(let mut #storage #ty_n = [#inn; #len]; let #name = __ctx.local_array(&mut #storage, #slot);),
        )
    }

    pub(crate) fn shared_decl(
        &mut self,
        name: &Ident,
        fname: &str,
        seg: &syn::PathSegment,
        call: &syn::ExprCall,
        span: Span,
    ) -> Pair {
        if !self.top_level {
            return self.fail(
                span,
                "shared arrays must be declared at the top level of the kernel body",
            );
        }
        if !call.args.is_empty() {
            return self.fail(call.span(), format!("`{fname}` takes no arguments; give the type and length as `{fname}::<f32, 256>()`"));
        }
        let PathArguments::AngleBracketed(args) = &seg.arguments else {
            return self.fail(
                seg.span(),
                format!(
                    "write `{}`",
                    if fname == "shared" {
                        "shared::<f32, 256>()"
                    } else {
                        "shared_dynamic::<f32>()"
                    }
                ),
            );
        };
        let args: Vec<_> = args.args.iter().collect();
        // `shared::<[[T; COLS]; ROWS]>()`: a 2-D array, stored row-major.
        if let (true, [GenericArgument::Type(Type::Array(outer))]) = (fname == "shared", &args[..])
        {
            let Type::Array(inner) = &*outer.elem else {
                return self.fail(outer.span(), "write `shared::<[[T; COLS]; ROWS]>()` for a 2-D array, or `shared::<T, LEN>()`");
            };
            let Some(Ty {
                ir: t,
                native: elem_id,
                ..
            }) = self.scalar_ty(&inner.elem, "a shared array")
            else {
                return (quote!(), quote!());
            };
            let (rows, cols) = (&outer.len, &inner.len);
            let name_str = name.to_string();
            let slot = self.shared_slots;
            self.shared_slots += 1;
            self.bind(&name_str, Binding::Shared);
            self.row_len.insert(name_str.clone(), quote!(#cols));
            return (
                quote!(let #name = __b.shared(#name_str, #t, __dc::ir::V::host(((#rows) as u32) * ((#cols) as u32)))?;),
                quote!(let #name = __ctx.shared::<#elem_id>(#slot);),
            );
        }
        let expected = if fname == "shared" { 2 } else { 1 };
        if args.len() != expected {
            return self.fail(
                seg.span(),
                if fname == "shared" {
                    "write `shared::<T, LEN>()`: an element type and a constant length"
                } else {
                    "write `shared_dynamic::<T>()`: the length is given at launch"
                },
            );
        }
        let GenericArgument::Type(elem_ty) = args[0] else {
            return self.fail(
                args[0].span(),
                "the first argument must be the element type",
            );
        };
        let Some(Ty {
            ir: t,
            native: elem_id,
            ..
        }) = self.scalar_ty(elem_ty, "a shared array")
        else {
            return (quote!(), quote!());
        };
        let name_str = name.to_string();
        let slot = self.shared_slots;
        self.shared_slots += 1;
        self.bind(&name_str, Binding::Shared);
        let native = quote!(let #name = __ctx.shared::<#elem_id>(#slot););
        if fname == "shared_dynamic" {
            return (
                quote!(let #name = __b.shared_dynamic(#name_str, #t)?;),
                native,
            );
        }
        let len = match args[1] {
            GenericArgument::Const(e) => quote!(#e),
            GenericArgument::Type(Type::Path(p)) => quote!(#p), // a const's name parses as a type
            other => return self.fail(other.span(), "the length must be a constant expression"),
        };
        (
            quote!(let #name = __b.shared(#name_str, #t, __dc::ir::V::host(#len))?;),
            native,
        )
    }

    pub(crate) fn expr_stmt(&mut self, e: &Expr) -> Pair {
        let was_top = std::mem::replace(&mut self.top_level, false);
        let r = self.expr_stmt_inner(e);
        self.top_level = was_top;
        r
    }

    pub(crate) fn expr_stmt_inner(&mut self, e: &Expr) -> Pair {
        match e {
            Expr::Assign(a) => self.assign(&a.left, None, &a.right, a.span()),
            Expr::Binary(b) if compound_op(&b.op).is_some() => {
                self.assign(&b.left, compound_op(&b.op), &b.right, b.span())
            }
            Expr::If(i) => self.if_stmt(i),
            Expr::Match(m) => match self.desugar_match(m, false) {
                Some(Expr::Block(b)) => self.block(&b.block.stmts),
                _ => (quote!(), quote!()),
            },
            Expr::ForLoop(f) => self.for_loop(f),
            Expr::While(w) => {
                if let Some(l) = &w.label {
                    return self.fail(l.span(), "loop labels are not supported in kernels");
                }
                if let Expr::Let(l) = &*w.cond {
                    return self.fail(l.span(), "`while let` is not supported in kernels");
                }
                let (cb, cn) = self.expr(&w.cond);
                let (bb, bn) = self.loop_body(&w.body.stmts);
                let stop = poll_stop();
                (
                    quote!({ __b.begin_loop(); { let __c = #cb; __b.break_unless(__c)?; #bb } __b.end_loop()?; }),
                    quote!(while #cn { #stop #bn }),
                )
            }
            Expr::Loop(l) => {
                if let Some(l) = &l.label {
                    return self.fail(l.span(), "loop labels are not supported in kernels");
                }
                let (bb, bn) = self.loop_body(&l.body.stmts);
                let stop = poll_stop();
                (
                    quote!({ __b.begin_loop(); #bb __b.end_loop()?; }),
                    quote!(loop { #stop #bn }),
                )
            }
            Expr::Break(b) => {
                if b.label.is_some() || b.expr.is_some() {
                    return self.fail(
                        b.span(),
                        "`break` with a label or a value is not supported in kernels",
                    );
                }
                let native = if self.region == Some(0) {
                    quote!(return __dc::cpu::Flow::Break;)
                } else {
                    quote!(break;)
                };
                (quote!(__b.brk();), native)
            }
            Expr::Continue(c) => {
                if c.label.is_some() {
                    return self.fail(c.span(), "loop labels are not supported in kernels");
                }
                let native = if self.region == Some(0) {
                    quote!(return __dc::cpu::Flow::Continue;)
                } else {
                    quote!(continue;)
                };
                (quote!(__b.cont();), native)
            }
            Expr::Return(r) if self.helper.is_some() => self.fail(
                r.span(),
                "`return` is not supported in a #[kernel_fn]: end the body with its value \
                 (an `if`/`else` can choose it)",
            ),
            Expr::Return(r) => {
                if r.expr.is_some() {
                    return self.fail(r.span(), "kernels return nothing: write `return;`");
                }
                let native = if self.region.is_some() {
                    quote!(return __dc::cpu::Flow::Return;)
                } else {
                    quote!(return;)
                };
                (quote!(__b.ret();), native)
            }
            Expr::Block(b) if b.label.is_none() && b.block.stmts.iter().all(|_| true) => {
                if b.attrs.is_empty() {
                    self.block(&b.block.stmts)
                } else {
                    self.fail(
                        b.span(),
                        "attributes on blocks are not supported in kernels",
                    )
                }
            }
            Expr::Call(c) if is_call_to(c, "barrier") => {
                if !c.args.is_empty() {
                    return self.fail(c.span(), "`barrier()` takes no arguments");
                }
                self.barrier_sites += 1;
                let site = self.barrier_site();
                (quote!(__b.barrier();), quote!(__ctx.barrier(#site);))
            }
            Expr::Call(c) if mma_shape(c).is_some() => self.mma(c),
            Expr::Call(_) => {
                // Atomics and #[kernel_fn] calls; `call` rejects the rest.
                let (b, n) = self.expr(e);
                (quote!({ let _ = #b; }), quote!(#n;))
            }
            other => self.fail(
                other.span(),
                format!(
                    "this {} has no effect as a statement in a kernel (statements are `let`, \
                     assignments, if, for, while, loop, break, continue, return, barrier() \
                     and atomics)",
                    describe(other)
                ),
            ),
        }
    }

    pub(crate) fn assign(
        &mut self,
        left: &Expr,
        op: Option<(&str, &str)>,
        right: &Expr,
        span: Span,
    ) -> Pair {
        let (rb, rn) = self.expr(right);
        match left {
            Expr::Path(p) if p.path.get_ident().is_some() => {
                let name = p.path.get_ident().unwrap();
                match self.lookup(&name.to_string()) {
                    Some(Binding::Local) => {}
                    // Already reported where it was declared.
                    Some(Binding::Failed) => return (quote!(), quote!()),
                    Some(Binding::GidX) => {
                        return self.fail(name.span(), format!("cannot assign twice to immutable local `{name}`"))
                    }
                    Some(_) => {
                        return self.fail(
                            name.span(),
                            format!("`{name}` is a kernel parameter and cannot be assigned; copy it into a local (`let mut x = {name};`)"),
                        )
                    }
                    None => return self.fail(name.span(), format!("`{name}` is not a local of this kernel")),
                }
                match op {
                    None => (
                        quote!({ let __v = #rb; __b.assign(#name, __v)?; }),
                        quote!(#name = #rn;),
                    ),
                    Some((irop, nop)) => {
                        let irop = format_ident!("{irop}");
                        let nop = format_ident!("{nop}");
                        (
                            quote!({ let __v = #rb; let __cur = __b.get(#name); let __n = __b.binary(__dc::ir::BinaryOp::#irop, __cur, __v)?; __b.assign(#name, __n)?; }),
                            quote!(#name = __dc::ops::#nop(#name, #rn);),
                        )
                    }
                }
            }
            Expr::Index(ix) => {
                let Some((mem, ib, inn)) = self.element(ix, true) else {
                    return (quote!(), quote!());
                };
                match op {
                    None => (
                        quote!({ let __i = #ib; let __v = #rb; __b.store(#mem, __i, __v)?; }),
                        quote!(#mem.store(#inn, #rn);),
                    ),
                    Some((irop, nop)) => {
                        let irop = format_ident!("{irop}");
                        let nop = format_ident!("{nop}");
                        (
                            quote!({
                                let __i = #ib; let __v = #rb;
                                let __cur = __b.load(#mem, __i.clone())?;
                                let __n = __b.binary(__dc::ir::BinaryOp::#irop, __cur, __v)?;
                                __b.store(#mem, __i, __n)?;
                            }),
                            quote!({ let __i = #inn; let __v = #rn; #mem.store(__i, __dc::ops::#nop(#mem.load(__i), __v)); }),
                        )
                    }
                }
            }
            Expr::Field(f) if !matches!(&*f.base, Expr::Call(_)) => self.fail(
                f.span(),
                "a vector's lanes are not assigned one at a time in kernels: assign the whole \
                 vector (`v = Vec4::new(x, v.y, v.z, v.w)`)",
            ),
            other => self.fail(
                span.join(other.span()).unwrap_or(span),
                "only locals (`x = ..`) and array elements (`out[i] = ..`) can be assigned in kernels",
            ),
        }
    }

    pub(crate) fn if_stmt(&mut self, i: &syn::ExprIf) -> Pair {
        if let Expr::Let(l) = &*i.cond {
            return self.fail(l.span(), "`if let` is not supported in kernels");
        }
        let (cb, cn) = self.expr(&i.cond);
        let (tb, tn) = self.block(&i.then_branch.stmts);
        let (eb, en) = match &i.else_branch {
            None => (quote!(), quote!()),
            Some((_, e)) => match &**e {
                Expr::If(inner) => {
                    let (b, n) = self.if_stmt(inner);
                    (quote!(__b.begin_else()?; #b), quote!(else #n))
                }
                Expr::Block(b) => {
                    let (bb, bn) = self.block(&b.block.stmts);
                    (quote!(__b.begin_else()?; #bb), quote!(else #bn))
                }
                other => return self.fail(other.span(), "unsupported else branch"),
            },
        };
        (
            quote!({ let __c = #cb; __b.begin_if(__c)?; #tb #eb __b.end_if()?; }),
            quote!(if #cn #tn #en),
        )
    }

    pub(crate) fn for_loop(&mut self, f: &syn::ExprForLoop) -> Pair {
        if let Some(l) = &f.label {
            return self.fail(l.span(), "loop labels are not supported in kernels");
        }
        let Pat::Ident(pi) = &*f.pat else {
            return self.fail(
                f.pat.span(),
                "a kernel `for` binds one name: `for i in a..b`",
            );
        };
        if pi.mutability.is_some() {
            return self.fail(pi.span(), "a kernel loop variable cannot be `mut`");
        }
        let var = &pi.ident;
        let var_str = var.to_string();
        let (range, step) = match for_range(&f.expr) {
            Ok(parts) => parts,
            Err(other) => return self.fail(
                other.span(),
                "`for` loops in kernels iterate over `a..b` or `(a..b).step_by(s)`, not iterators",
            ),
        };
        let (Some(start), Some(end), RangeLimits::HalfOpen(_)) =
            (&range.start, &range.end, &range.limits)
        else {
            return self.fail(range.span(), "use a half-open range with both ends, `a..b`");
        };
        let (sb, sn) = self.expr(start);
        let (eb, en) = self.expr(end);
        let (stb, stn) = match step {
            Some(s) => {
                let (b, n) = self.step_arg(s);
                (quote!(Some(#b)), Some(n))
            }
            None => (quote!(None), None),
        };
        self.scopes.push(HashMap::new());
        self.bind(&var_str, Binding::Local);
        let (bb, bn) = self.loop_body(&f.body.stmts);
        self.scopes.pop();
        let bn = poll_stop_in_for(&f.body.stmts, bn);
        let native = match stn {
            None => quote!(for #var in (#sn)..(#en) #bn),
            Some(stn) => quote!(for #var in __dc::ops::step_range(#sn, #en, #stn) #bn),
        };
        (
            quote!({
                let __s = #sb; let __e = #eb; let __st = #stb;
                let #var = __b.begin_for(#var_str, __s, __e, __st)?;
                #bb
                __b.end_for()?;
            }),
            native,
        )
    }

    /// The argument of `step_by`. Rust's `step_by` takes a `usize`; `s as usize` is the
    /// range's type to the builder (usize is no kernel type) and stays a usize natively.
    pub(crate) fn step_arg(&mut self, s: &Expr) -> Pair {
        match usize_step(s) {
            Some(x) => {
                let (b, n) = self.expr(x);
                (b, quote!(((#n) as usize)))
            }
            None => self.expr(s),
        }
    }
}
