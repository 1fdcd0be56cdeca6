//! Snapshots of the code generated for every seed kernel: WGSL, and the MSL (`.naga.msl`),
//! HLSL and SPIR-V (hashed) that naga produces from it; the CUDA C++ that NVRTC compiles,
//! and our MSL (`.msl`), both from the shared C-family printer. Every module also passes naga's validator.
//! After an intended codegen change: `INSTA_UPDATE=always cargo test -p
//! dotcompute-conformance --test snapshots`, then review the diff of `tests/snapshots/`.

use dotcompute_codegen::{naga_out, spirv_listing, wgsl};

fn generated(def: &dotcompute::KernelDef) -> (String, naga_out::NagaModule) {
    let ir = def.ir().expect("seed kernels build");
    let opts = wgsl::WgslOptions::default();
    let module = wgsl::generate(ir, &opts).expect("seed kernels are 32-bit");
    let naga = naga_out::validate_wgsl(&module.source)
        .unwrap_or_else(|e| panic!("naga rejected the WGSL of {}:\n{e}", def.name()));
    (module.source, naga)
}

#[test]
fn wgsl_msl_hlsl_and_spirv_of_every_seed_kernel() {
    for def in dotcompute_conformance::seed_kernels() {
        let (source, naga) = generated(def);
        let name = def.name();
        insta::assert_snapshot!(format!("{name}.wgsl"), source);
        insta::assert_snapshot!(format!("{name}.naga.msl"), naga_out::to_msl(&naga).unwrap());
        insta::assert_snapshot!(format!("{name}.hlsl"), naga_out::to_hlsl(&naga).unwrap());
        let spirv = naga_out::to_spirv(&naga).unwrap();
        let header = spirv_listing(&spirv).lines().next().unwrap().to_string();
        insta::assert_snapshot!(format!("{name}.spirv"), header);
    }
}

#[test]
fn the_ir_text_of_every_seed_kernel() {
    use dotcompute_codegen::Target;
    for def in dotcompute_conformance::seed_kernels() {
        let text = dotcompute_codegen::IrText.generate(def.ir().unwrap());
        insta::assert_snapshot!(format!("{}.ir", def.name()), text);
    }
}

#[test]
fn the_msl_of_every_seed_kernel() {
    for def in dotcompute_conformance::seed_kernels() {
        let text = match dotcompute_codegen::msl::generate(def.ir().unwrap()) {
            Ok(module) => module.source,
            Err(e) => format!("refused: {e}"),
        };
        insta::assert_snapshot!(format!("{}.msl", def.name()), text);
    }
}

#[test]
fn the_cuda_cpp_of_every_seed_kernel() {
    for def in dotcompute_conformance::seed_kernels() {
        let module = dotcompute_codegen::cuda::generate(def.ir().unwrap());
        insta::assert_snapshot!(format!("{}.cu", def.name()), module.source);
    }
}

/// With the adapter's f32 atomics, f32 arrays touched by atomics are `atomic<f32>` and the
/// add is one instruction; every seed kernel's module still passes naga.
#[test]
fn native_f32_atomics_pass_naga() {
    for def in dotcompute_conformance::seed_kernels() {
        let opts = wgsl::WgslOptions {
            native_f32_atomics: true,
            ..Default::default()
        };
        let module = wgsl::generate(def.ir().unwrap(), &opts).unwrap();
        naga_out::validate_wgsl(&module.source)
            .unwrap_or_else(|e| panic!("naga rejected {}:\n{e}", def.name()));
        if def.name() == "reduce_sum" {
            assert!(
                module.source.contains("array<atomic<f32>>"),
                "{}",
                module.source
            );
            assert!(!module.source.contains("atomicCompareExchangeWeak"));
        }
    }
}

/// The CUDA generator unrolls grid-stride loops that stream a read-only buffer
/// (`dotcompute_ir::unroll`): the rewritten IR of `reduce_sum` still validates, keeps the
/// original loop for the remaining iterations, and hoists four loads per trip; kernels
/// without such a loop are left alone.
#[test]
fn grid_stride_loops_unroll_into_valid_ir() {
    use dotcompute::ir::{unroll, validate, walk_stmts, ExprKind, Stmt};
    let mut unrolled = 0;
    for def in dotcompute_conformance::seed_kernels() {
        let ir = def.ir().unwrap();
        let Some(u) = unroll::unroll_strided_loads(ir) else {
            continue;
        };
        unrolled += 1;
        validate(&u).unwrap_or_else(|e| panic!("{}: the unrolled IR is invalid: {e}", def.name()));
        let loops = |body: &[Stmt]| {
            let mut n = 0;
            walk_stmts(body, &mut |s| n += matches!(s, Stmt::Loop { .. }) as usize);
            n
        };
        assert_eq!(loops(&u.body), loops(&ir.body) + 1, "{}", def.name());
        let mut hoisted = 0;
        walk_stmts(&u.body, &mut |s| {
            if let Stmt::Let { init: Some(e), .. } = s {
                hoisted += matches!(e.kind, ExprKind::Load { .. }) as usize;
            }
        });
        assert!(hoisted >= unroll::UNROLL as usize, "{}", def.name());
    }
    let reduce = dotcompute_conformance::seed_kernels()
        .into_iter()
        .find(|d| d.name() == "reduce_sum")
        .unwrap();
    assert!(unroll::unroll_strided_loads(reduce.ir().unwrap()).is_some());
    // The elementwise and tiled kernels have no such loop.
    assert!(unrolled < dotcompute_conformance::seed_kernels().len());
}
