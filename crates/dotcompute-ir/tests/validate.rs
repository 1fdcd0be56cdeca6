//! The validator rejects malformed IR with a message naming the problem, and hashing and
//! serialization are stable.

use dotcompute_ir::*;

fn lit_u32(v: u32) -> Expr {
    Expr {
        ty: ScalarType::U32.into(),
        kind: ExprKind::Literal(Literal::U32(v)),
    }
}
fn lit_f32(v: f32) -> Expr {
    Expr {
        ty: ScalarType::F32.into(),
        kind: ExprKind::Literal(Literal::f32(v)),
    }
}
fn gid() -> Expr {
    Expr {
        ty: ScalarType::U32.into(),
        kind: ExprKind::Builtin(Builtin::GlobalId, Axis::X),
    }
}

/// `out[gid] = 1.0` with `out: &mut [f32]`: a valid kernel to break in each test.
fn base() -> Kernel {
    Kernel {
        version: IR_VERSION,
        name: "k".into(),
        params: vec![Param::Buffer {
            name: "out".into(),
            elem: ScalarType::F32.into(),
            access: Access::ReadWrite,
        }],
        shared: vec![],
        locals: vec![],
        local_arrays: vec![],
        body: vec![Stmt::Store {
            mem: Memory::Buffer(0),
            index: gid(),
            value: lit_f32(1.0),
        }],
    }
}

fn rejects(k: Kernel, needle: &str) {
    let e = validate(&k).expect_err("the validator accepted a malformed kernel");
    assert!(
        e.to_string().contains(needle),
        "message `{e}` does not mention `{needle}`"
    );
}

#[test]
fn accepts_the_base_kernel() {
    validate(&base()).unwrap();
}

#[test]
fn rejects_a_store_into_a_read_only_buffer() {
    let mut k = base();
    k.params[0] = Param::Buffer {
        name: "out".into(),
        elem: ScalarType::F32.into(),
        access: Access::Read,
    };
    rejects(k, "read-only");
}

#[test]
fn rejects_a_stored_value_of_the_wrong_type() {
    let mut k = base();
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: gid(),
        value: lit_u32(1),
    }];
    rejects(k, "must be f32, found u32");
}

#[test]
fn rejects_a_binary_op_on_mixed_types() {
    let mut k = base();
    let bad = Expr {
        ty: ScalarType::F32.into(),
        kind: ExprKind::Binary(BinaryOp::Add, Box::new(lit_f32(1.0)), Box::new(lit_u32(2))),
    };
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: gid(),
        value: bad,
    }];
    rejects(k, "`f32 + u32` is not defined");
}

#[test]
fn rejects_a_mislabelled_expression_type() {
    let mut k = base();
    let bad = Expr {
        ty: ScalarType::F32.into(),
        kind: ExprKind::Literal(Literal::U32(3)),
    };
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: gid(),
        value: bad,
    }];
    rejects(k, "is labelled f32");
}

#[test]
fn rejects_an_undeclared_local() {
    let mut k = base();
    k.locals.push(Local {
        name: "x".into(),
        ty: ScalarType::F32.into(),
        mutable: true,
    });
    k.body = vec![Stmt::Assign {
        local: 0,
        value: lit_f32(1.0),
    }];
    rejects(k, "outside the block that declares it");
}

#[test]
fn rejects_a_local_used_after_its_block() {
    let mut k = base();
    k.locals.push(Local {
        name: "x".into(),
        ty: ScalarType::F32.into(),
        mutable: false,
    });
    k.body = vec![
        Stmt::If {
            cond: Expr {
                ty: ScalarType::Bool.into(),
                kind: ExprKind::Literal(Literal::Bool(true)),
            },
            then: vec![Stmt::Let {
                local: 0,
                init: Some(lit_f32(1.0)),
            }],
            otherwise: vec![],
        },
        Stmt::Store {
            mem: Memory::Buffer(0),
            index: gid(),
            value: Expr {
                ty: ScalarType::F32.into(),
                kind: ExprKind::Local(0),
            },
        },
    ];
    rejects(k, "outside the block that declares it");
}

#[test]
fn rejects_assignment_to_an_immutable_local() {
    let mut k = base();
    k.locals.push(Local {
        name: "x".into(),
        ty: ScalarType::F32.into(),
        mutable: false,
    });
    k.body = vec![
        Stmt::Let {
            local: 0,
            init: Some(lit_f32(1.0)),
        },
        Stmt::Assign {
            local: 0,
            value: lit_f32(2.0),
        },
    ];
    rejects(k, "immutable");
}

#[test]
fn rejects_break_outside_a_loop() {
    let mut k = base();
    k.body.push(Stmt::Break);
    rejects(k, "outside a loop");
}

#[test]
fn rejects_two_dynamic_shared_arrays() {
    let mut k = base();
    for name in ["a", "b"] {
        k.shared.push(SharedArray {
            name: name.into(),
            elem: ScalarType::F32,
            len: SharedLen::Dynamic,
        });
    }
    rejects(k, "at most one");
}

#[test]
fn rejects_atomic_min_on_f32() {
    let mut k = base();
    k.body = vec![Stmt::Atomic {
        op: AtomicOp::Min,
        mem: Memory::Buffer(0),
        index: gid(),
        args: vec![lit_f32(1.0)],
        result: None,
    }];
    rejects(k, "atomic min is not defined on f32");
}

#[test]
fn rejects_bool_buffers_and_bad_names_and_versions() {
    let mut k = base();
    k.params[0] = Param::Buffer {
        name: "out".into(),
        elem: ScalarType::Bool.into(),
        access: Access::ReadWrite,
    };
    rejects(k, "bool");
    // bf16 is a storage type: no kernel may take it (f16 is a kernel type).
    let ty = ScalarType::BF16;
    let mut k = base();
    k.params[0] = Param::Buffer {
        name: "out".into(),
        elem: ty.into(),
        access: Access::ReadWrite,
    };
    rejects(k, "kernels cannot use yet");
    let mut k = base();
    k.params.push(Param::Scalar {
        name: "s".into(),
        ty,
    });
    rejects(k, "kernels cannot use yet");
    let mut k = base();
    k.name = "not an identifier".into();
    rejects(k, "not an identifier");
    let mut k = base();
    k.version = IR_VERSION + 1;
    rejects(k, "not supported");
}

#[test]
fn rejects_a_float_index_and_a_non_bool_condition() {
    let mut k = base();
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: lit_f32(0.0),
        value: lit_f32(1.0),
    }];
    rejects(k, "an index must be u32");
    let mut k = base();
    k.body = vec![Stmt::If {
        cond: lit_u32(1),
        then: vec![],
        otherwise: vec![],
    }];
    rejects(k, "an if condition must be bool");
}

#[test]
fn rejects_a_shift_by_a_signed_amount() {
    let mut k = base();
    let amount = Expr {
        ty: ScalarType::I32.into(),
        kind: ExprKind::Literal(Literal::I32(1)),
    };
    let shifted = Expr {
        ty: ScalarType::U32.into(),
        kind: ExprKind::Binary(BinaryOp::Shl, Box::new(gid()), Box::new(amount)),
    };
    k.params.push(Param::Buffer {
        name: "o2".into(),
        elem: ScalarType::U32.into(),
        access: Access::ReadWrite,
    });
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(1),
        index: gid(),
        value: shifted,
    }];
    rejects(k, "shift amount must be u32");
}

#[test]
fn serialization_round_trips_and_hashes_are_stable() {
    let k = base();
    let json = k.to_json();
    let back = Kernel::from_json(&json).unwrap();
    assert_eq!(back, k);
    assert_eq!(back.content_hash(), k.content_hash());
    let mut other = base();
    other.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: gid(),
        value: lit_f32(2.0),
    }];
    assert_ne!(
        other.content_hash(),
        k.content_hash(),
        "a different constant must change the hash"
    );
    // The hash of a fixed kernel is fixed across processes and machines.
    assert_eq!(k.content_hash_hex().len(), 64);
    assert_eq!(
        k.content_hash_hex(),
        Kernel::from_json(&json).unwrap().content_hash_hex()
    );
}

#[test]
fn corrupt_serialized_kernels_are_errors() {
    assert!(matches!(
        Kernel::from_json("{not json"),
        Err(DecodeError::Syntax(_))
    ));
    let mut k = base();
    k.body.push(Stmt::Continue);
    assert!(matches!(
        Kernel::from_json(&k.to_json()),
        Err(DecodeError::Invalid(_))
    ));
    let truncated = &base().to_json()[..40];
    assert!(Kernel::from_json(truncated).is_err());
}

#[test]
fn the_builder_reports_type_errors_with_the_line_and_a_hint() {
    let mut b = Builder::new("k");
    let out = b.buffer("out", ScalarType::U32, Access::ReadWrite);
    b.line(7);
    let s = b.let_("s", None, true, V::Int(1)).unwrap();
    // Assigned as an i32 before the use that would have typed it u32.
    let cur = b.get(s);
    let two = b.binary(BinaryOp::Add, cur, V::Int(1)).unwrap();
    b.assign(s, two).unwrap();
    let n = b.len(out);
    let cur = b.get(s);
    let e = b.binary(BinaryOp::Lt, cur, n).unwrap_err();
    assert_eq!(e.line, 7);
    assert!(
        e.message
            .contains("local `s` took i32 from an untyped literal"),
        "{e}"
    );
}

#[test]
fn a_literal_local_takes_the_type_of_its_first_use() {
    let mut b = Builder::new("k");
    let out = b.buffer("out", ScalarType::U32, Access::ReadWrite);
    let s = b.let_("s", None, true, V::Int(1)).unwrap();
    let n = b.len(out);
    let cur = b.get(s);
    let lt = b.binary(BinaryOp::Lt, cur, n).unwrap();
    b.begin_if(lt).unwrap();
    b.end_if().unwrap();
    let k = b.finish().unwrap();
    assert_eq!(k.locals[0].ty, ScalarType::U32);
    assert!(
        matches!(&k.body[0], Stmt::Let { init: Some(e), .. } if e.ty == ScalarType::U32),
        "{:?}",
        k.body[0]
    );
}

fn vec4_f32() -> Type {
    Type::vector(ScalarType::F32, 4)
}

/// `out[gid] = v` with `out: &mut [elem]`.
fn vector_store(elem: Type, value: Expr) -> Kernel {
    let mut k = base();
    k.params[0] = Param::Buffer {
        name: "out".into(),
        elem,
        access: Access::ReadWrite,
    };
    k.body = vec![Stmt::Store {
        mem: Memory::Buffer(0),
        index: gid(),
        value,
    }];
    k
}

fn splat4(x: Expr) -> Expr {
    Expr {
        ty: Type::vector(x.ty.scalar, 4),
        kind: ExprKind::Construct(vec![x.clone(), x.clone(), x.clone(), x]),
    }
}

#[test]
fn vectors_are_checked_lane_by_lane() {
    validate(&vector_store(vec4_f32(), splat4(lit_f32(1.0)))).unwrap();
    // Lane types and counts outside the IR's.
    rejects(
        vector_store(Type::vector(ScalarType::F64, 2), splat4(lit_f32(1.0))),
        "vectors have 2 or 4 lanes of f32, i32 or u32",
    );
    rejects(
        vector_store(Type::vector(ScalarType::F32, 3), splat4(lit_f32(1.0))),
        "vectors have 2 or 4 lanes",
    );
    // A construction with the wrong number or type of lanes.
    let mut three = splat4(lit_f32(1.0));
    if let ExprKind::Construct(l) = &mut three.kind {
        l.pop();
    }
    rejects(vector_store(vec4_f32(), three), "is built from 3 values");
    rejects(
        vector_store(vec4_f32(), splat4(lit_u32(1))),
        "must be Vec4<f32>, found Vec4<u32>",
    );
    // A scalar stored into a vector buffer, and a comparison of vectors.
    rejects(
        vector_store(vec4_f32(), lit_f32(1.0)),
        "must be Vec4<f32>, found f32",
    );
    let v = splat4(lit_f32(2.0));
    let lt = Expr {
        ty: vec4_f32(),
        kind: ExprKind::Binary(BinaryOp::Lt, Box::new(v.clone()), Box::new(v.clone())),
    };
    rejects(vector_store(vec4_f32(), lt), "is not defined");
    // A lane past the end, and math on a vector.
    let lane = |lane| Expr {
        ty: ScalarType::F32.into(),
        kind: ExprKind::Extract {
            value: Box::new(v.clone()),
            lane,
        },
    };
    validate(&vector_store(ScalarType::F32.into(), lane(3))).unwrap();
    rejects(
        vector_store(ScalarType::F32.into(), lane(4)),
        "lane 4 of Vec4<f32> does not exist",
    );
    let sqrt = Expr {
        ty: ScalarType::F32.into(),
        kind: ExprKind::Math(MathFn::Sqrt, vec![v.clone()]),
    };
    rejects(
        vector_store(ScalarType::F32.into(), sqrt),
        "must be a scalar, found Vec4<f32>",
    );
}

#[test]
fn atomics_on_vector_buffers_are_rejected() {
    let mut k = vector_store(Type::vector(ScalarType::U32, 2), splat4(lit_u32(0)));
    k.body = vec![Stmt::Atomic {
        op: AtomicOp::Add,
        mem: Memory::Buffer(0),
        index: gid(),
        args: vec![lit_u32(1)],
        result: None,
    }];
    rejects(k, "atomic add is not defined on Vec2<u32>");
}

#[test]
fn the_builder_splits_integer_vector_division_into_lanes() {
    let mut b = Builder::new("k");
    let ty = Type::vector(ScalarType::I32, 4);
    let a = b.buffer("a", ty, Access::Read);
    let out = b.buffer("out", ty, Access::ReadWrite);
    let i = b.builtin(Builtin::GlobalId, Axis::X);
    let x = b.load(a, i.clone()).unwrap();
    let q = b.binary(BinaryOp::Div, x.clone(), x.clone()).unwrap();
    let V::Typed(Expr {
        kind: ExprKind::Construct(lanes),
        ..
    }) = &q
    else {
        panic!("integer vector division is not split: {q:?}");
    };
    assert_eq!(lanes.len(), 4);
    assert!(matches!(lanes[2].kind, ExprKind::Binary(BinaryOp::Div, ..)));
    // An untyped splat takes the lane type of the vector it meets (u32 here, not i32).
    let u = Type::vector(ScalarType::U32, 2);
    let ub = b.buffer("u", u, Access::ReadWrite);
    let seven = b.splat(V::Int(7), 2).unwrap();
    let ux = b.load(ub, i.clone()).unwrap();
    let diff = b.binary(BinaryOp::Sub, ux, seven).unwrap();
    b.store(ub, i.clone(), diff).unwrap();
    b.store(out, i, q).unwrap();
    let k = b.finish().unwrap();
    assert!(k.uses_vectors());
    // Lanes of a scalar, and `as` on a vector, are errors that say what to do.
    let mut b = Builder::new("k");
    let one = b.lane(V::host(1.0f32), 0).unwrap_err();
    assert!(one.message.contains("reads a vector's lane"), "{one}");
    let v = b.splat(V::host(1.0f32), 4).unwrap();
    let cast = b.cast(v, ScalarType::I32).unwrap_err();
    assert!(cast.message.contains("convert each lane"), "{cast}");
}

#[test]
fn vector_types_serialize_apart_from_scalars() {
    let k = vector_store(vec4_f32(), splat4(lit_f32(1.0)));
    let json = k.to_json();
    assert!(json.contains(r#"{"vector":"F32","lanes":4}"#), "{json}");
    assert_eq!(Kernel::from_json(&json).unwrap(), k);
    // A scalar keeps its old form, so kernels without vectors keep their content keys.
    assert!(base().to_json().contains(r#""elem":"F32""#));
}

#[test]
fn integer_vector_division_exists_only_split_into_lanes() {
    let v = splat4(lit_u32(6));
    let div = Expr {
        ty: Type::vector(ScalarType::U32, 4),
        kind: ExprKind::Binary(BinaryOp::Div, Box::new(v.clone()), Box::new(v)),
    };
    rejects(
        vector_store(Type::vector(ScalarType::U32, 4), div),
        "integer / and % are written lane by lane",
    );
}

#[test]
fn rewrites_reach_every_expression_inner_first() {
    // A pass that doubles every f32 literal, run on `out[gid] = if .. { 1.0 } ..`.
    let mut k = base();
    k.body = vec![Stmt::If {
        cond: Expr {
            ty: ScalarType::Bool.into(),
            kind: ExprKind::Literal(Literal::Bool(true)),
        },
        then: k.body.clone(),
        otherwise: vec![],
    }];
    let mut order = Vec::new();
    rewrite_exprs(&mut k.body, &mut |e| {
        order.push(format!("{:?}", std::mem::discriminant(&e.kind)));
        if let ExprKind::Literal(Literal::F32(bits)) = &mut e.kind {
            *bits = (f32::from_bits(*bits) * 2.0).to_bits();
        }
    });
    validate(&k).unwrap();
    let mut stored = None;
    walk_stmts(&k.body, &mut |s| {
        if let Stmt::Store { value, .. } = s {
            stored = Some(value.clone());
        }
    });
    assert_eq!(stored, Some(lit_f32(2.0)));
    assert_eq!(
        order.len(),
        3,
        "the condition, the index and the value: {order:?}"
    );
}

/// `base()` with an f32 local array `acc[4]` and one tensor-core statement.
fn with_mma(shape: MmaShape, acc: Memory, a: Vec<Expr>, b: Vec<Expr>) -> Kernel {
    let mut k = base();
    k.local_arrays.push(LocalArray {
        name: "acc".into(),
        elem: ScalarType::F32,
        len: 4,
    });
    k.body.push(Stmt::Mma {
        shape,
        acc,
        base: lit_u32(0),
        a,
        b,
    });
    k
}

fn lit_f16(v: f32) -> Expr {
    Expr {
        ty: ScalarType::F16.into(),
        kind: ExprKind::Literal(Literal::F16(half::f16::from_f32(v).to_bits())),
    }
}

#[test]
fn tensor_core_statements_check_their_operands() {
    let f32s = |n: usize| vec![lit_f32(1.0); n];
    let f16s = |n: usize| vec![lit_f16(1.0); n];
    let acc = Memory::Local(0);
    validate(&with_mma(MmaShape::M16N8K8Tf32, acc, f32s(4), f32s(2))).unwrap();
    validate(&with_mma(MmaShape::M16N8K16F16, acc, f16s(8), f16s(4))).unwrap();
    // Operand counts are the shape's.
    rejects(
        with_mma(MmaShape::M16N8K16F16, acc, f16s(4), f16s(2)),
        "mma_m16n8k16_f16 takes 8 elements of A and 4 of B, found 4 and 2",
    );
    rejects(
        with_mma(MmaShape::M16N8K8Tf32, acc, f32s(8), f32s(4)),
        "mma_m16n8k8_tf32 takes 4 elements of A and 2 of B, found 8 and 4",
    );
    // Operand types are the shape's.
    rejects(
        with_mma(MmaShape::M16N8K16F16, acc, f32s(8), f32s(4)),
        "an mma_m16n8k16_f16 operand",
    );
    rejects(
        with_mma(MmaShape::M16N8K8Tf32, acc, f16s(4), f16s(2)),
        "an mma_m16n8k8_tf32 operand",
    );
    // The accumulator is an f32 local array, not a buffer.
    rejects(
        with_mma(MmaShape::M16N8K16F16, Memory::Buffer(0), f16s(8), f16s(4)),
        "the accumulator of mma_m16n8k16_f16 must be an f32 local array",
    );
}

#[test]
fn rejects_a_bitcast_between_sizes_and_accepts_one_within_a_size() {
    let bitcast = |from: Expr, to: ScalarType| Expr {
        ty: to.into(),
        kind: ExprKind::Bitcast(Box::new(from)),
    };
    let store = |value: Expr| {
        let mut k = base();
        k.body = vec![Stmt::Store {
            mem: Memory::Buffer(0),
            index: gid(),
            value,
        }];
        k
    };
    // u32 -> f32 is the same four bytes.
    validate(&store(bitcast(lit_u32(0x7fc0_0000), ScalarType::F32))).unwrap();
    // f32 -> u64 -> f32: the inner bitcast changes size.
    let wide = bitcast(lit_f32(1.0), ScalarType::U64);
    rejects(
        store(bitcast(wide, ScalarType::F32)),
        "bitcast from f32 to u64",
    );
    // bool has no bits to read.
    let flag = Expr {
        ty: ScalarType::Bool.into(),
        kind: ExprKind::Literal(Literal::Bool(true)),
    };
    rejects(store(bitcast(flag, ScalarType::F32)), "bitcast from bool");
}
