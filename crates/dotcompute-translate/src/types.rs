//! Kernel types: scalars, vectors and generic parameters, as the IR builder (a run-time
//! `ScalarType`) and native Rust (a type) each see them.

use super::*;

/// A kernel type as both halves see it: the IR's `ScalarType` (an expression, since a
/// generic parameter's type is a run-time value in the builder) and the native Rust type.
#[derive(Clone)]
pub(crate) struct Ty {
    pub(crate) name: String,
    pub(crate) ir: TokenStream,
    pub(crate) native: TokenStream,
    /// 1 for a scalar, 2 or 4 for `Vec2<T>` / `Vec4<T>`.
    pub(crate) lanes: u8,
}

/// `Vec2<T>` or `Vec4<T>`: the lane count and the lane type's syntax.
pub(crate) fn vector_type(ty: &Type) -> Option<(u8, &Type)> {
    let Type::Path(p) = ty else { return None };
    if p.qself.is_some() || p.path.segments.len() != 1 {
        return None;
    }
    let seg = &p.path.segments[0];
    let lanes = match seg.ident.to_string().as_str() {
        "Vec2" => 2,
        "Vec4" => 4,
        _ => return None,
    };
    let PathArguments::AngleBracketed(args) = &seg.arguments else {
        return None;
    };
    match args.args.first() {
        Some(GenericArgument::Type(t)) if args.args.len() == 1 => Some((lanes, t)),
        _ => None,
    }
}

pub(crate) fn scalar_type(ty: &Type) -> Option<(String, Ident)> {
    if let Type::Path(p) = ty {
        if p.qself.is_none() && p.path.segments.len() == 1 {
            let id = &p.path.segments[0].ident;
            let name = id.to_string();
            if SCALARS.contains(&name.as_str()) && p.path.segments[0].arguments.is_empty() {
                return Some((name, id.clone()));
            }
        }
    }
    None
}

pub(crate) fn ir_type(name: &str) -> TokenStream {
    let v = format_ident!(
        "{}",
        match name {
            "bool" => "Bool",
            "i32" => "I32",
            "u32" => "U32",
            "i64" => "I64",
            "u64" => "U64",
            "f32" => "F32",
            "f16" => "F16",
            _ => "F64",
        }
    );
    quote!(__dc::ir::ScalarType::#v)
}

pub(crate) fn line_of(span: Span) -> u32 {
    span.start().line as u32
}

impl Tx {
    /// A kernel type that must be a scalar (shared and local arrays, casts, a kernel's
    /// scalar parameters).
    pub(crate) fn scalar_ty(&mut self, ty: &Type, what: &str) -> Option<Ty> {
        let t = self.ty(ty, what)?;
        if t.lanes > 1 {
            self.errors.push(err(
                ty.span(),
                format!(
                    "{what} cannot be a vector: vectors are buffer elements (`&[Vec4<f32>]`), \
                     locals and #[kernel_fn] values"
                ),
            ));
            return None;
        }
        Some(t)
    }

    pub(crate) fn ty(&mut self, ty: &Type, what: &str) -> Option<Ty> {
        if let Some((lanes, lane)) = vector_type(ty) {
            let lane_ty = self.ty(lane, what)?;
            if lane_ty.lanes > 1
                || !["f32", "i32", "u32"].contains(&lane_ty.name.as_str())
                    && self.type_param(lane).is_none()
            {
                self.errors.push(err(
                    lane.span(),
                    format!(
                        "Vec{lanes} lanes are f32, i32 or u32 (8- and 16-byte vectors), found `{}`",
                        lane_ty.name
                    ),
                ));
                return None;
            }
            let (ir, native) = (&lane_ty.ir, &lane_ty.native);
            // The user's own name for the type (`use dotcompute::Vec4;`), as Rust resolves it.
            let vec = match ty {
                Type::Path(p) => p.path.segments[0].ident.clone(),
                _ => format_ident!("Vec{lanes}"),
            };
            return Some(Ty {
                name: format!("Vec{lanes}<{}>", lane_ty.name),
                ir: quote!(__dc::ir::Type::vector(#ir, #lanes)),
                native: quote!(#vec<#native>),
                lanes,
            });
        }
        if let Some(param) = self.type_param(ty) {
            return Some(Ty {
                name: param.to_string(),
                ir: ty_var(&param).to_token_stream(),
                native: param.to_token_stream(),
                lanes: 1,
            });
        }
        match scalar_type(ty) {
            Some((name, id)) => Some(Ty {
                lanes: 1,
                ir: ir_type(&name),
                // `f16` is no Rust primitive (on stable): kernels mean dotcompute's.
                native: if name == "f16" {
                    quote!(::dotcompute::f16)
                } else {
                    id.to_token_stream()
                },
                name,
            }),
            None => {
                self.errors.push(err(
                    ty.span(),
                    format!(
                        "unsupported type in {what}: kernels use the scalar types \
                         bool, i32, u32, i64, u64, f32, f64 and f16 (indices and lengths are \
                         u32), their generic type parameters, and Vec2<T> / Vec4<T> of f32, \
                         i32 or u32"
                    ),
                ));
                None
            }
        }
    }

    /// The generic type parameter `ty` names, if it is one.
    pub(crate) fn type_param(&self, ty: &Type) -> Option<Ident> {
        let Type::Path(p) = ty else { return None };
        let id = p.path.get_ident()?;
        p.qself
            .is_none()
            .then(|| self.type_params.iter().find(|t| *t == id).cloned())
            .flatten()
    }
}
