//! A kernel's or helper's signature: parameters, their types and bindings, generic
//! parameters, and the attributes passed through.

use super::*;

/// One parameter of a kernel or a kernel function, parsed.
pub(crate) struct ParamSpec<'a> {
    pub(crate) pat: &'a syn::PatIdent,
    /// `Some(writable)` for an array (`&[T]` / `&mut [T]`), `None` for a scalar.
    pub(crate) array: Option<bool>,
    /// The scalar's type, or the array's element type.
    pub(crate) ty: Ty,
    /// The syntax of that type (for spans and generic inference).
    pub(crate) ty_syntax: &'a Type,
}

impl Tx {
    /// Checks what a kernel and a helper signature have in common and records the generic
    /// type parameters (const parameters are host values to both halves).
    pub(crate) fn signature(&mut self, sig: &syn::Signature, what: &str) {
        for g in &sig.generics.params {
            match g {
                syn::GenericParam::Type(t) => self.type_params.push(t.ident.clone()),
                syn::GenericParam::Const(c) => self.const_params.push(c.ident.clone()),
                syn::GenericParam::Lifetime(l) => self.errors.push(err(
                    l.span(),
                    format!("a {what} cannot have lifetime parameters"),
                )),
            }
        }
        if let Some(a) = &sig.asyncness {
            self.errors
                .push(err(a.span(), format!("a {what} cannot be `async`")));
        }
        if let Some(u) = &sig.unsafety {
            self.errors
                .push(err(u.span(), format!("a {what} cannot be `unsafe`")));
        }
        if let Some(c) = &sig.constness {
            self.errors
                .push(err(c.span(), format!("a {what} cannot be `const`")));
        }
        if let Some(v) = &sig.variadic {
            self.errors
                .push(err(v.span(), format!("a {what} cannot be variadic")));
        }
    }

    /// Parses a parameter the way kernels and kernel functions share: a plain name, and a
    /// scalar type or a slice of one. `what` names the function kind in errors.
    pub(crate) fn param<'a>(&mut self, input: &'a FnArg, what: &str) -> Option<ParamSpec<'a>> {
        let FnArg::Typed(pt) = input else {
            self.errors
                .push(err(input.span(), format!("a {what} cannot take `self`")));
            return None;
        };
        let Pat::Ident(pi) = &*pt.pat else {
            self.errors.push(err(
                pt.pat.span(),
                format!("{what} parameters must be plain names"),
            ));
            return None;
        };
        if let Type::Reference(r) = &*pt.ty {
            let Type::Slice(slice) = &*r.elem else {
                self.errors.push(err(
                    r.span(),
                    "array parameters are slices: `&[T]` or `&mut [T]`",
                ));
                return None;
            };
            let ty = self.ty(&slice.elem, "an array element")?;
            return Some(ParamSpec {
                pat: pi,
                array: Some(r.mutability.is_some()),
                ty,
                ty_syntax: &slice.elem,
            });
        }
        let ty = if self.helper.is_some() {
            self.ty(&pt.ty, "a parameter")?
        } else {
            self.scalar_ty(&pt.ty, "a kernel's scalar parameter")?
        };
        Some(ParamSpec {
            pat: pi,
            array: None,
            ty,
            ty_syntax: &pt.ty,
        })
    }
}

/// The doc comments of `f`, which the generated module carries.
pub(crate) fn doc_attrs(f: &ItemFn) -> Vec<&syn::Attribute> {
    f.attrs
        .iter()
        .filter(|a| a.path().is_ident("doc"))
        .collect()
}

/// Attributes other than doc comments are refused (they would apply to only one half).
pub(crate) fn check_attrs(f: &ItemFn, what: &str) -> Result<(), Vec<syn::Error>> {
    match f.attrs.iter().find(|a| !a.path().is_ident("doc")) {
        Some(a) => Err(vec![err(
            a.span(),
            format!("attributes other than doc comments are not supported on {what}s"),
        )]),
        None => Ok(()),
    }
}

/// The pieces of a function's generics that the generated items repeat.
pub(crate) struct Generics {
    /// `T: Float, const N: u32`: the declared parameters (defaults dropped).
    pub(crate) params: Vec<TokenStream>,
    /// `<T: Float, const N: u32>` as declared (empty without generics).
    pub(crate) decl: TokenStream,
    /// `::<T, N>` (empty without generics).
    pub(crate) turbofish: TokenStream,
    /// `T, const N: u32`: the parameters without bounds, for the instance marker.
    pub(crate) bare: TokenStream,
    /// The type parameters, in order.
    pub(crate) bare_args: Vec<Ident>,
    /// The builder's run-time variable holding each type parameter's IR type.
    pub(crate) ty_vars: Vec<Ident>,
    /// The declared where clause plus `T: KernelScalar` for every type parameter.
    pub(crate) where_clause: TokenStream,
}

impl Generics {
    pub(crate) fn of(sig: &syn::Signature, type_params: &[Ident]) -> Generics {
        let g = &sig.generics;
        let declared: Vec<TokenStream> = g
            .params
            .iter()
            .map(|p| match p {
                // Defaults are not allowed on functions; strip nothing else.
                syn::GenericParam::Type(t) => {
                    let mut t = t.clone();
                    t.default = None;
                    t.eq_token = None;
                    t.to_token_stream()
                }
                other => other.to_token_stream(),
            })
            .collect();
        let decl = if declared.is_empty() {
            quote!()
        } else {
            quote!(<#(#declared),*>)
        };
        let params: Vec<_> = g.params.iter().collect();
        let args: Vec<TokenStream> = params
            .iter()
            .filter_map(|p| match p {
                syn::GenericParam::Type(t) => Some(t.ident.to_token_stream()),
                syn::GenericParam::Const(c) => Some(c.ident.to_token_stream()),
                syn::GenericParam::Lifetime(_) => None,
            })
            .collect();
        let turbofish = if args.is_empty() {
            quote!()
        } else {
            quote!(::<#(#args),*>)
        };
        let bare_params = params.iter().filter_map(|p| match p {
            syn::GenericParam::Type(t) => Some(t.ident.to_token_stream()),
            syn::GenericParam::Const(c) => {
                let (id, ty) = (&c.ident, &c.ty);
                Some(quote!(const #id: #ty))
            }
            syn::GenericParam::Lifetime(_) => None,
        });
        let bare = quote!(#(#bare_params),*);
        let mut predicates: Vec<TokenStream> = g
            .where_clause
            .iter()
            .flat_map(|w| w.predicates.iter().map(|p| p.to_token_stream()))
            .collect();
        predicates.extend(
            type_params
                .iter()
                .map(|t| quote!(#t: __dc::cpu::KernelScalar)),
        );
        let where_clause = if predicates.is_empty() {
            quote!()
        } else {
            quote!(where #(#predicates),*)
        };
        Generics {
            params: declared,
            decl,
            turbofish,
            bare,
            bare_args: type_params.to_vec(),
            ty_vars: type_params.iter().map(ty_var).collect(),
            where_clause,
        }
    }
}
