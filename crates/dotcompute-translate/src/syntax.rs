//! Questions asked of `syn` trees (is this `global_id().x`, a call to `f`, a compound
//! operator) and the names they map to.

use super::*;

pub(crate) fn is_global_id_x(e: &Expr) -> bool {
    match e {
        Expr::Field(f) => {
            matches!(&f.member, syn::Member::Named(id) if id == "x")
                && matches!(&*f.base, Expr::Call(c) if c.args.is_empty() && is_call_to(c, "global_id"))
        }
        Expr::Paren(p) => is_global_id_x(&p.expr),
        _ => false,
    }
}

/// `e` without the parentheses around it.
pub(crate) fn unparen(mut e: &Expr) -> &Expr {
    while let Expr::Paren(p) = e {
        e = &p.expr;
    }
    e
}

/// A kernel `for` loop's `a..b` or `(a..b).step_by(s)`: the range and the step; else the
/// expression that is neither.
pub(crate) fn for_range(e: &Expr) -> Result<(&syn::ExprRange, Option<&Expr>), &Expr> {
    match e {
        Expr::Range(r) => Ok((r, None)),
        Expr::MethodCall(m) if m.method == "step_by" && m.args.len() == 1 => {
            match unparen(&m.receiver) {
                Expr::Range(r) => Ok((r, Some(&m.args[0]))),
                other => Err(other),
            }
        }
        other => Err(other),
    }
}

pub(crate) fn is_call_to(c: &syn::ExprCall, name: &str) -> bool {
    matches!(&*c.func, Expr::Path(p) if p.path.is_ident(name))
}

/// `Some(<IR type>)` or `None`, as builder code.
pub(crate) fn optional_ir(ty: Option<&Ty>) -> TokenStream {
    match ty {
        Some(Ty { ir, .. }) => quote!(Some(__dc::ir::Type::from(#ir))),
        None => quote!(None),
    }
}

pub(crate) fn ty_var(param: &Ident) -> Ident {
    format_ident!("__dc_ty_{param}")
}

/// The tensor-core operation a call names, with its counts of A and B operands.
pub(crate) fn mma_shape(c: &syn::ExprCall) -> Option<(&'static str, (usize, usize))> {
    [("mma_m16n8k8_tf32", (4, 2)), ("mma_m16n8k16_f16", (8, 4))]
        .into_iter()
        .find(|(name, _)| is_call_to(c, name))
}

/// The `array[index]` of an element's address argument, `&array[index]` (or `&mut
/// array[index]` where `mutable`), as atomics and `mma_m16n8k8_tf32` take it.
pub(crate) fn element_address(arg: &Expr, mutable: bool) -> Option<&syn::ExprIndex> {
    match arg {
        Expr::Reference(r) if !mutable || r.mutability.is_some() => match &*r.expr {
            Expr::Index(ix) => Some(ix),
            _ => None,
        },
        _ => None,
    }
}

pub(crate) fn atomic_name(c: &syn::ExprCall) -> Option<(String, String)> {
    atomics().find(|(n, _)| is_call_to(c, n))
}

/// A binary operator of the kernel language: its IR name, and the `__dc::ops` function
/// native code calls for it (wrapping integers, the IR's division by zero), or `None`
/// where native code uses Rust's own operator (`& | ^`, comparisons, `&&` / `||`).
pub(crate) fn binary_op(op: &BinOp) -> Option<(&'static str, Option<&'static str>)> {
    Some(match op {
        BinOp::Add(_) => ("Add", Some("add")),
        BinOp::Sub(_) => ("Sub", Some("sub")),
        BinOp::Mul(_) => ("Mul", Some("mul")),
        BinOp::Div(_) => ("Div", Some("div")),
        BinOp::Rem(_) => ("Rem", Some("rem")),
        BinOp::Shl(_) => ("Shl", Some("shl")),
        BinOp::Shr(_) => ("Shr", Some("shr")),
        BinOp::BitAnd(_) => ("BitAnd", None),
        BinOp::BitOr(_) => ("BitOr", None),
        BinOp::BitXor(_) => ("BitXor", None),
        BinOp::Eq(_) => ("Eq", None),
        BinOp::Ne(_) => ("Ne", None),
        BinOp::Lt(_) => ("Lt", None),
        BinOp::Le(_) => ("Le", None),
        BinOp::Gt(_) => ("Gt", None),
        BinOp::Ge(_) => ("Ge", None),
        BinOp::And(_) => ("LogicalAnd", None),
        BinOp::Or(_) => ("LogicalOr", None),
        _ => return None,
    })
}

pub(crate) fn compound_op(op: &BinOp) -> Option<(&'static str, &'static str)> {
    Some(match op {
        BinOp::AddAssign(_) => ("Add", "add"),
        BinOp::SubAssign(_) => ("Sub", "sub"),
        BinOp::MulAssign(_) => ("Mul", "mul"),
        BinOp::DivAssign(_) => ("Div", "div"),
        BinOp::RemAssign(_) => ("Rem", "rem"),
        BinOp::ShlAssign(_) => ("Shl", "shl"),
        BinOp::ShrAssign(_) => ("Shr", "shr"),
        BinOp::BitAndAssign(_) => ("BitAnd", "bitand"),
        BinOp::BitOrAssign(_) => ("BitOr", "bitor"),
        BinOp::BitXorAssign(_) => ("BitXor", "bitxor"),
        _ => return None,
    })
}

pub(crate) fn describe(e: &Expr) -> &'static str {
    match e {
        Expr::Array(_) => "an array expression",
        Expr::Async(_) => "an async block",
        Expr::Await(_) => "`.await`",
        Expr::Closure(_) => "a closure",
        Expr::Match(_) => "`match`",
        Expr::Macro(_) => "a macro call",
        Expr::Reference(_) => "taking a reference",
        Expr::Range(_) => "a range outside a `for` loop",
        Expr::Repeat(_) => "an array expression",
        Expr::Struct(_) => "a struct literal",
        Expr::Try(_) => "the `?` operator",
        Expr::TryBlock(_) => "a try block",
        Expr::Tuple(_) => "a tuple",
        Expr::Unsafe(_) => "an `unsafe` block",
        Expr::Yield(_) => "`yield`",
        Expr::Let(_) => "`let` in an expression",
        Expr::Index(_) => "an index expression",
        Expr::Call(_) => "a call",
        Expr::MethodCall(_) => "a method call",
        Expr::Lit(_) => "literal",
        Expr::Path(_) => "path",
        Expr::Binary(_) => "binary expression",
        Expr::Field(_) => "field access",
        Expr::Block(_) => "a labelled block",
        _ => "construct",
    }
}
