//! Hand-written MSL kernels: their interface, read from the kernel function's signature.
//!
//! MSL has no reflection without Apple's compiler, so this reads the one thing the
//! binding rules depend on, the signature of `kernel void <entry>(...)`, with a small
//! tokenizer (comments dropped, nested brackets and `[[...]]` attributes respected). The
//! conventions are those of hand-written WGSL and SPIR-V (so one kernel binds the same on
//! the native Metal backend and on wgpu's Metal adapters, which number buffers in bind
//! group order):
//!
//! * buffer parameter *i* is `device T* name [[buffer(i)]]` (`const device T*` or
//!   `constant T*` when read-only);
//! * the scalars, if any, are one `constant S& name [[buffer(n)]]` after the last buffer,
//!   where `S` is a struct of the source whose fields are the scalars in order, 4 bytes
//!   each (`float`, `int`, `uint`; a `bool` parameter is a `uint`);
//! * then thread-position attributes ([`MslAttribute`]), after every buffer.
//!
//! [`reflect`] returns what it read; [`raw_module`] turns it into the [`MslModule`] the
//! Metal encoders and the Linux shim take.

use crate::msl::{MslAttribute, MslBinding, MslModule};
use dotcompute_ir::{Kernel, ScalarType, Type};

/// One argument of a hand-written kernel function, in declaration order.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum MslArg {
    /// A buffer: `[[buffer(index)]]`, its element type, whether it is read-only, and its
    /// declared type (`const device float*`).
    Buffer {
        index: u32,
        elem: Type,
        read_only: bool,
        ty: String,
    },
    /// The scalar block: `[[buffer(index)]]`, the types of its struct's fields in order,
    /// and its declared type (`constant Params&`).
    Block {
        index: u32,
        fields: Vec<ScalarType>,
        ty: String,
    },
    /// A thread-position attribute and its declared type (`uint3`, or `uint` for the x
    /// component).
    Position { attribute: MslAttribute, ty: String },
}

/// The attributes a hand-written kernel may take, by spelling.
pub const POSITIONS: [MslAttribute; 6] = [
    MslAttribute::ThreadPositionInGrid,
    MslAttribute::ThreadPositionInThreadgroup,
    MslAttribute::ThreadgroupPositionInGrid,
    MslAttribute::ThreadgroupsPerGrid,
    MslAttribute::ThreadsPerSimdgroup,
    MslAttribute::ThreadIndexInSimdgroup,
];

/// `source` without its comments (each replaced by a space).
fn strip_comments(source: &str) -> String {
    let mut out = String::with_capacity(source.len());
    let mut rest = source;
    loop {
        let line = rest.find("//");
        let block = rest.find("/*");
        match (line, block) {
            (Some(l), b) if b.is_none_or(|b| l < b) => {
                out.push_str(&rest[..l]);
                out.push(' ');
                rest = rest[l..].find('\n').map_or("", |e| &rest[l + e..]);
            }
            (_, Some(b)) => {
                out.push_str(&rest[..b]);
                out.push(' ');
                rest = rest[b + 2..]
                    .find("*/")
                    .map_or("", |e| &rest[b + 2 + e + 2..]);
            }
            _ => {
                out.push_str(rest);
                return out;
            }
        }
    }
}

/// The text between the parentheses of `kernel void <entry>(...)`.
fn signature<'s>(source: &'s str, entry: &str) -> Result<&'s str, String> {
    let mut found = None;
    let mut search = 0;
    while let Some(at) = source[search..].find(entry) {
        let start = search + at;
        search = start + entry.len();
        let before = source[..start].trim_end();
        let after = source[search..].trim_start();
        let is_name = |c: char| c.is_alphanumeric() || c == '_';
        let whole = !source[..start].ends_with(is_name) && !source[search..].starts_with(is_name);
        let Some(before_void) = before.strip_suffix("void") else {
            continue;
        };
        let before_void = before_void.trim_end();
        if whole
            && after.starts_with('(')
            && (before_void.ends_with("kernel") || before_void.ends_with("[[kernel]]"))
        {
            if found.is_some() {
                return Err(format!(
                    "the MSL defines `kernel void {entry}(...)` more than once"
                ));
            }
            found = Some(source.len() - after.len());
        }
    }
    let open = found
        .ok_or_else(|| format!("the MSL has no kernel function `kernel void {entry}(...)`"))?;
    let mut depth = 0usize;
    for (i, c) in source[open..].char_indices() {
        match c {
            '(' => depth += 1,
            ')' => {
                depth -= 1;
                if depth == 0 {
                    return Ok(&source[open + 1..open + i]);
                }
            }
            _ => {}
        }
    }
    Err(format!("the parameter list of `{entry}` is not closed"))
}

/// `list` split at the commas outside brackets and attributes.
fn split_args(list: &str) -> Vec<&str> {
    let mut out = Vec::new();
    let mut depth = 0i32;
    let mut start = 0;
    for (i, c) in list.char_indices() {
        match c {
            '(' | '[' | '<' => depth += 1,
            ')' | ']' | '>' => depth -= 1,
            ',' if depth == 0 => {
                out.push(list[start..i].trim());
                start = i + 1;
            }
            _ => {}
        }
    }
    let last = list[start..].trim();
    if !last.is_empty() {
        out.push(last);
    }
    out
}

/// The element type a buffer of MSL type `name` holds.
fn element(name: &str) -> Option<Type> {
    let name = name.strip_prefix("metal::").unwrap_or(name);
    let scalar = |s: &str| match s {
        "float" | "atomic_float" => Some(ScalarType::F32),
        "half" => Some(ScalarType::F16),
        "int" | "atomic_int" | "int32_t" => Some(ScalarType::I32),
        "uint" | "atomic_uint" | "uint32_t" => Some(ScalarType::U32),
        _ => None,
    };
    if let Some(s) = scalar(name) {
        return Some(s.into());
    }
    let (base, lanes) = name.split_at(name.len().checked_sub(1)?);
    let lanes: u8 = lanes.parse().ok()?;
    if !matches!(lanes, 2 | 4) || base.starts_with("atomic") {
        return None;
    }
    Some(Type {
        scalar: scalar(base)?,
        lanes,
    })
}

/// The field types of `struct <name> { ... };` in `source`, each a 32-bit scalar.
fn block_fields(source: &str, name: &str) -> Result<Vec<ScalarType>, String> {
    let refuse = |why: String| {
        Err(format!(
            "the scalar block `{name}` must be a struct of the source whose fields are the \
             scalar parameters in order, each `float`, `int` or `uint` (a bool is a `uint`): \
             {why}"
        ))
    };
    let mut body = None;
    let mut search = 0;
    while let Some(at) = source[search..].find("struct") {
        let start = search + at + "struct".len();
        search = start;
        let rest = source[start..].trim_start();
        if let Some(after) = rest.strip_prefix(name) {
            let after = after.trim_start();
            if let Some(open) = after.strip_prefix('{') {
                body = open.find('}').map(|end| &open[..end]);
                break;
            }
        }
    }
    let Some(body) = body else {
        return refuse("no such struct in the source".into());
    };
    let mut fields = Vec::new();
    for decl in body.split(';').map(str::trim).filter(|d| !d.is_empty()) {
        let (ty, names) = decl.split_once(char::is_whitespace).unwrap_or((decl, ""));
        let scalar = match ty.strip_prefix("metal::").unwrap_or(ty) {
            "float" => ScalarType::F32,
            "int" | "int32_t" => ScalarType::I32,
            "uint" | "uint32_t" => ScalarType::U32,
            other => return refuse(format!("field `{decl}` has type `{other}`")),
        };
        for field in names.split(',') {
            if field.contains('[') {
                return refuse(format!("field `{decl}` is an array"));
            }
            fields.push(scalar);
        }
    }
    Ok(fields)
}

/// Reads the interface of `kernel void <entry>(...)` in `source`; a buffer argument after
/// a thread-position one is an error (the conventions above).
pub fn reflect(source: &str, entry: &str) -> Result<Vec<MslArg>, String> {
    let source = strip_comments(source);
    let list = signature(&source, entry)?;
    let mut args = Vec::new();
    for arg in split_args(list) {
        let (decl, attribute) = match (arg.find("[["), arg.rfind("]]")) {
            (Some(open), Some(close)) if open < close => {
                (arg[..open].trim(), arg[open + 2..close].trim())
            }
            _ => {
                return Err(format!(
                    "argument `{arg}` of `{entry}` has no attribute: each is a \
                     `[[buffer(i)]]` or a thread-position attribute"
                ))
            }
        };
        // The declared type is the declaration without its last word (the name).
        let spaced = decl.replace('*', " * ").replace('&', " & ");
        let words: Vec<&str> = spaced.split_whitespace().collect();
        let Some((_name, type_words)) = words.split_last().filter(|(_, t)| !t.is_empty()) else {
            return Err(format!("argument `{arg}` of `{entry}` has no type"));
        };
        let ty = type_words.join(" ").replace(" *", "*").replace(" &", "&");
        if let Some(index) = attribute
            .strip_prefix("buffer(")
            .and_then(|r| r.strip_suffix(')'))
        {
            if matches!(args.last(), Some(MslArg::Position { .. })) {
                return Err(format!(
                    "argument `{arg}` of `{entry}` comes after a thread-position attribute; \
                     dotcompute's hand-written MSL takes its buffers first (the order the \
                     Linux shim calls the function in)"
                ));
            }
            let index: u32 = index.trim().parse().map_err(|_| {
                format!("argument `{arg}`: `[[{attribute}]]` is not a buffer index")
            })?;
            let has = |w: &str| type_words.contains(&w);
            let base: Vec<&str> = type_words
                .iter()
                .copied()
                .filter(|w| !matches!(*w, "device" | "constant" | "const" | "*" | "&"))
                .collect();
            let shape = format!(
                "argument `{arg}`: a buffer is `device T*` (`const device T*` or \
                 `constant T*` when read-only), the scalars one `constant S&`"
            );
            match (
                has("device"),
                has("constant"),
                has("*"),
                has("&"),
                base.as_slice(),
            ) {
                (true, false, true, false, [t]) | (false, true, true, false, [t]) => {
                    let elem = element(t).ok_or_else(|| {
                        format!(
                            "argument `{arg}`: `{t}` is not an element type of dotcompute \
                             buffers (float, half, int, uint, their 2- and 4-lane vectors, \
                             atomic_int, atomic_uint)"
                        )
                    })?;
                    args.push(MslArg::Buffer {
                        index,
                        elem,
                        read_only: has("const") || has("constant"),
                        ty,
                    });
                }
                (false, true, false, true, [t]) => args.push(MslArg::Block {
                    index,
                    fields: block_fields(&source, t)?,
                    ty,
                }),
                _ => return Err(shape),
            }
        } else if let Some(&attribute) = POSITIONS.iter().find(|p| p.spelling() == attribute) {
            args.push(MslArg::Position { attribute, ty });
        } else {
            return Err(format!(
                "argument `{arg}`: `[[{attribute}]]` is not an attribute dotcompute binds; \
                 it binds `buffer(i)` and {}",
                POSITIONS.map(|p| p.spelling()).join(", ")
            ));
        }
    }
    Ok(args)
}

/// The module the Metal encoders (and the Linux shim) run for a hand-written kernel with
/// signature `kernel` (its parameters: the buffers, then the scalars) already checked
/// against the source by the facade: buffer parameter *i* at its `[[buffer(i)]]`, the
/// scalar block at the index after the buffers, then the thread-position attributes.
pub fn raw_module(source: &str, entry: &str, kernel: &Kernel) -> Result<MslModule, String> {
    let args = reflect(source, entry)?;
    let buffer_params: Vec<u32> = kernel.buffer_params().collect();
    let mut module = MslModule {
        source: source.to_string(),
        entry: entry.to_string(),
        bindings: Vec::new(),
        binding_types: Vec::new(),
        attributes: Vec::new(),
        attribute_types: Vec::new(),
        raw: true,
        info: Vec::new(),
    };
    for arg in args {
        match arg {
            MslArg::Position { attribute, ty } => {
                module.attributes.push(attribute);
                module.attribute_types.push(ty);
            }
            MslArg::Buffer { index, ty, .. } => {
                let param = *buffer_params.get(index as usize).ok_or_else(|| {
                    format!("`[[buffer({index})]]` is past the kernel's buffer parameters")
                })?;
                module.bindings.push(MslBinding::Param { param, index });
                module.binding_types.push(ty);
            }
            MslArg::Block { index, ty, .. } => {
                module.bindings.push(MslBinding::Scalars { index });
                module.binding_types.push(ty);
            }
        }
    }
    Ok(module)
}

#[cfg(test)]
mod tests {
    use super::*;

    const SAXPY: &str = "
        #include <metal_stdlib>
        using namespace metal;
        struct Params { float a; uint n; };  // the scalars
        /* a kernel void other(int x) in a comment */
        kernel void saxpy(const device float* x [[buffer(0)]],
                          device float4 *y [[buffer(1)]],
                          constant Params& p [[buffer(2)]],
                          uint3 id [[thread_position_in_grid]],
                          uint lane [[thread_index_in_simdgroup]]) {
            if (id.x < p.n) { y[id.x] = p.a * x[id.x] + y[id.x]; }
        }";

    #[test]
    fn a_signature_reads_as_buffers_a_block_and_positions() {
        let args = reflect(SAXPY, "saxpy").unwrap();
        assert_eq!(
            args,
            vec![
                MslArg::Buffer {
                    index: 0,
                    elem: ScalarType::F32.into(),
                    read_only: true,
                    ty: "const device float*".into()
                },
                MslArg::Buffer {
                    index: 1,
                    elem: Type {
                        scalar: ScalarType::F32,
                        lanes: 4
                    },
                    read_only: false,
                    ty: "device float4*".into()
                },
                MslArg::Block {
                    index: 2,
                    fields: vec![ScalarType::F32, ScalarType::U32],
                    ty: "constant Params&".into()
                },
                MslArg::Position {
                    attribute: MslAttribute::ThreadPositionInGrid,
                    ty: "uint3".into()
                },
                MslArg::Position {
                    attribute: MslAttribute::ThreadIndexInSimdgroup,
                    ty: "uint".into()
                },
            ]
        );
    }

    #[test]
    fn wrong_signatures_are_errors_that_name_the_argument() {
        let cases = [
            (
                SAXPY.replace("kernel void saxpy", "void saxpy"),
                "no kernel function",
            ),
            (
                SAXPY.replace("float* x", "double* x"),
                "`double` is not an element type",
            ),
            (SAXPY.replace(" [[buffer(0)]]", ""), "has no attribute"),
            (
                SAXPY.replace("buffer(1)", "buffer(one)"),
                "is not a buffer index",
            ),
            (
                SAXPY.replace("device float4 *y", "thread float4 *y"),
                "a buffer is `device T*`",
            ),
            (
                SAXPY.replace("thread_position_in_grid", "thread_index_in_threadgroup"),
                "not an attribute dotcompute binds",
            ),
            (
                SAXPY.replace("uint n;", "bool n;"),
                "field `bool n` has type `bool`",
            ),
            (
                SAXPY.replace("struct Params", "struct Other"),
                "no such struct",
            ),
            (
                SAXPY.replace("saxpy(", "saxpy (")
                    + "kernel void saxpy(device int* z [[buffer(0)]]) {}",
                "more than once",
            ),
        ];
        for (source, expected) in cases {
            let e = reflect(&source, "saxpy").unwrap_err();
            assert!(e.contains(expected), "expected `{expected}` in: {e}");
        }
    }
}
