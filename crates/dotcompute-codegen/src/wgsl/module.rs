//! The module around the body: bindings, the uniform block, the entry point, and the
//! grid-stride and vector forms of it.

use super::*;

impl Gen<'_> {
    pub(super) fn module(&mut self, opts: &WgslOptions) {
        let k = self.k;
        let _ = writeln!(
            self.out,
            "// dotcompute WGSL for kernel `{}` (IR v{}), group {:?}, dynamic shared {}",
            k.name, k.version, opts.group_size, opts.dynamic_shared_len
        );
        // naga 30 takes the subgroup builtins without WGSL's `enable subgroups;` (and
        // rejects the directive); the device feature SUBGROUP gates them.
        let subgroups = k.uses_subgroups();
        if dotcompute_ir::Features::required_by(k).contains(dotcompute_ir::Features::F16) {
            self.out.push_str("enable f16;\n");
        }
        self.uniform_struct();
        self.declarations(opts);
        self.out.push_str(HELPERS);
        let [gx, gy, gz] = opts.group_size;
        let subgroup_builtins = if subgroups {
            "    @builtin(subgroup_size) dc_sg_size: u32,\n    @builtin(subgroup_invocation_id) dc_sg_lane: u32,\n"
        } else {
            ""
        };
        if self.vector.is_some() {
            self.vector_entry(gx);
            return;
        }
        if opts.strided {
            self.strided_entry(gx);
            return;
        }
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({gx}, {gy}, {gz})\nfn main(\n    @builtin(local_invocation_id) dc_lid: vec3<u32>,\n    @builtin(workgroup_id) dc_wid: vec3<u32>,\n    @builtin(num_workgroups) dc_nwg: vec3<u32>,\n{subgroup_builtins}) {{"
        );
        // A launch whose groups fit the dispatch limits is dispatched as they are: the
        // group id is the workgroup id, with no arithmetic. Otherwise the dispatch is
        // folded: number groups linearly, skip the padding groups (a uniform branch).
        self.out.push_str(
            "    let dc_ngroups = vec3<u32>(dc_params.groups_x, dc_params.groups_y, dc_params.groups_z);\n    var dc_group = dc_wid;\n    if (any(dc_nwg != dc_ngroups)) {\n        let dc_linear = dc_wid.x + dc_nwg.x * (dc_wid.y + dc_nwg.y * dc_wid.z);\n        if (dc_linear >= dc_params.total_groups) {\n            return;\n        }\n        dc_group = vec3<u32>(dc_linear % dc_ngroups.x, (dc_linear / dc_ngroups.x) % dc_ngroups.y, dc_linear / (dc_ngroups.x * dc_ngroups.y));\n    }\n",
        );
        let _ = writeln!(
            self.out,
            "    let dc_gsize = vec3<u32>({gx}u, {gy}u, {gz}u);\n    let dc_global = dc_group * dc_gsize + dc_lid;"
        );
        if !k.runs_whole_groups() {
            self.out.push_str("    if (dc_global.x >= dc_params.grid_x || dc_global.y >= dc_params.grid_y || dc_global.z >= dc_params.grid_z) {\n        return;\n    }\n");
        }
        self.local_arrays_and_body();
    }

    /// The uniform block: one field per slot of the launch's interface
    /// ([`uniform_slots`]), in its order.
    fn uniform_struct(&mut self) {
        let k = self.k;
        self.out.push_str("struct DcParams {\n");
        for slot in uniform_slots(k, self.view_offsets) {
            const AXES: [&str; 3] = ["x", "y", "z"];
            let _ = match slot {
                Slot::Grid(d) => writeln!(self.out, "    grid_{}: u32,", AXES[d as usize]),
                Slot::Groups(d) => writeln!(self.out, "    groups_{}: u32,", AXES[d as usize]),
                Slot::TotalGroups => writeln!(self.out, "    total_groups: u32,"),
                Slot::Arg(i) => {
                    let Param::Scalar { name, ty } = &k.params[i as usize] else {
                        unreachable!("uniform_slots lists scalars alone")
                    };
                    let t = match *ty {
                        ScalarType::Bool => "u32",
                        // Uniform f16 fields have their own layout rules; an f32 is simpler.
                        ScalarType::F16 => "f32",
                        t => self.ty(t),
                    };
                    writeln!(self.out, "    p_{name}: {t},")
                }
                Slot::ElementOffset(i) => {
                    writeln!(self.out, "    off_{}: u32,", k.params[i as usize].name())
                }
                // A binding's size is a multiple of 4 bytes, so an f16 buffer's
                // `arrayLength` may count one element too many: its length comes from the
                // launch instead.
                Slot::BufferLen(i) => {
                    writeln!(self.out, "    len_{}: u32,", k.params[i as usize].name())
                }
                Slot::Group(_) | Slot::DynamicSharedLen | Slot::ViolationRecord => {
                    unreachable!("not a uniform slot of generated WGSL")
                }
            };
        }
        self.out.push_str("}\n\n");
    }

    /// The storage bindings of the buffers, the uniform block's binding, the checked
    /// mode's violation record, the loop budget's counter and the shared arrays.
    fn declarations(&mut self, opts: &WgslOptions) {
        let k = self.k;
        let mut binding = 0;
        for (i, p) in k.params.iter().enumerate() {
            if let Param::Buffer { name, elem, access } = p {
                let atomic = self.atomic.contains(&Memory::Buffer(i as u32));
                let elem_ty = if atomic {
                    self.atomic_elem(elem.scalar).to_string()
                } else if self.is_vector_buffer(i as u32) {
                    format!("vec4<{}>", self.ty(elem.scalar))
                } else {
                    self.type_name(*elem)
                };
                let mode = if *access == Access::Read {
                    "read"
                } else {
                    "read_write"
                };
                let _ = writeln!(
                    self.out,
                    "@group(0) @binding({binding}) var<storage, {mode}> p_{name}: array<{elem_ty}>;"
                );
                binding += 1;
            }
        }
        let _ = writeln!(
            self.out,
            "@group(0) @binding({binding}) var<uniform> dc_params: DcParams;\n"
        );
        if self.checked || self.loop_budget.is_some() {
            let _ = writeln!(
                self.out,
                "@group(0) @binding({}) var<storage, read_write> dc_err: array<atomic<u32>, 4>;\n{CHECKED_HELPER}",
                binding + 1
            );
        }
        if self.loop_budget.is_some() {
            self.out.push_str("var<private> dc_trips: u32 = 0u;\n");
        }
        for (i, s) in k.shared.iter().enumerate() {
            let len = match s.len {
                SharedLen::Static(n) => n,
                SharedLen::Dynamic => opts.dynamic_shared_len.max(1),
            };
            let atomic = self.atomic.contains(&Memory::Shared(i as u32));
            let elem_ty = if atomic {
                self.atomic_elem(s.elem)
            } else {
                self.ty(s.elem)
            };
            let _ = writeln!(
                self.out,
                "var<workgroup> s_{}: array<{elem_ty}, {len}>;",
                s.name
            );
        }
    }

    /// The thread-private arrays (declared once, filled where the kernel declares them),
    /// the body, and the closing brace of the function they are in.
    pub(super) fn local_arrays_and_body(&mut self) {
        let k = self.k;
        for (i, a) in k.local_arrays.iter().enumerate() {
            let _ = writeln!(
                self.out,
                "    var a_{}_{i}: array<{}, {}>;",
                a.name,
                self.ty(a.elem),
                a.len
            );
        }
        self.block(&k.body, 1);
        self.check_trips(1);
        self.out.push_str("}\n");
    }

    /// The grid-stride form (see [`WgslOptions::strided`]): the body as a function of
    /// the global id (a `return` in it ends one logical thread, not the loop), and an
    /// entry point that calls it for every x the invocation strides over.
    pub(super) fn strided_entry(&mut self, gx: u32) {
        self.out.push_str("\nfn dc_body(dc_global: vec3<u32>) {\n");
        self.local_arrays_and_body();
        self.stride_loop_open(gx, "", "dc_x", "dc_params.grid_x");
        self.out
            .push_str("        dc_body(vec3<u32>(dc_x, 0u, 0u));\n");
        self.stride_loop_close("dc_x");
    }

    /// The entry point of the grid-stride and vector forms up to the body of their
    /// stride loop: `setup` (whole lines) before it, then `var` from this invocation's
    /// index, stepping by the dispatch's invocations, while below `limit`.
    pub(super) fn stride_loop_open(&mut self, gx: u32, setup: &str, var: &str, limit: &str) {
        let _ = writeln!(
            self.out,
            "\n@compute @workgroup_size({gx}, 1, 1)\nfn main(\n    @builtin(local_invocation_id) dc_lid: vec3<u32>,\n    @builtin(workgroup_id) dc_wid: vec3<u32>,\n    @builtin(num_workgroups) dc_nwg: vec3<u32>,\n) {{\n    let dc_stride = dc_nwg.x * {gx}u;\n{setup}    var {var} = dc_wid.x * {gx}u + dc_lid.x;\n    loop {{\n        if ({var} >= {limit}) {{\n            break;\n        }}"
        );
    }

    /// The end of [`Gen::stride_loop_open`]'s loop and entry point.
    pub(super) fn stride_loop_close(&mut self, var: &str) {
        let _ = writeln!(
            self.out,
            "        let dc_next = {var} + dc_stride;\n        // The last stride may pass u32::MAX.\n        if (dc_next < {var}) {{\n            break;\n        }}\n        {var} = dc_next;\n    }}\n}}"
        );
    }

    /// Whether buffer parameter `i` is bound as `vec4`s (the vector form's buffers).
    pub(super) fn is_vector_buffer(&self, i: u32) -> bool {
        self.vector
            .as_ref()
            .is_some_and(|p| p.touched().contains(&i))
    }

    /// The vector form (see [`WgslOptions::vector`]): a lane function, which is the body
    /// with the lane's buffer elements as parameters, and an entry point that loads each
    /// buffer's 16-byte vector, runs the 4 lanes in order, and stores back the lanes
    /// that stored (the others keep their values).
    pub(super) fn vector_entry(&mut self, gx: u32) {
        let k = self.k;
        let plan = self.vector.clone().expect("the vector form has a plan");
        let buffers: Vec<(u32, String, &'static str)> = plan
            .touched()
            .into_iter()
            .map(|b| {
                let elem = k.memory_elem(Memory::Buffer(b)).expect("a buffer").scalar;
                (b, k.params[b as usize].name().to_string(), self.ty(elem))
            })
            .collect();
        let mut params = Vec::new();
        for (b, name, t) in &buffers {
            if plan.stored.contains(b) {
                params.push(format!("r_{name}: ptr<function, {t}>"));
                params.push(format!("m_{name}: ptr<function, bool>"));
            } else {
                params.push(format!("r_{name}: {t}"));
            }
        }
        params.push("dc_global: vec3<u32>".into());
        let _ = writeln!(
            self.out,
            "\n// One logical thread of the vector form: its own elements are the caller's\n// variables; a store also sets the element's mask.\nfn dc_lane({}) {{",
            params.join(", ")
        );
        self.lane = true;
        self.local_arrays_and_body();
        self.lane = false;
        self.stride_loop_open(
            gx,
            "    // Chunks of 4 logical threads: `dc_full` whole ones, then `dc_rest` threads.\n    let dc_full = dc_params.grid_x / 4u;\n    let dc_rest = dc_params.grid_x & 3u;\n    let dc_chunks = dc_full + select(0u, 1u, dc_rest != 0u);\n",
            "dc_c",
            "dc_chunks",
        );
        const LANES: [&str; 4] = ["x", "y", "z", "w"];
        for (b, name, t) in &buffers {
            self.line(
                2,
                &format!("let dc_in_{name} = dc_c < arrayLength(&p_{name});"),
            );
            self.line(2, &format!("var v_{name} = vec4<{t}>();"));
            if plan.loaded.contains(b) {
                self.line(2, &format!("if (dc_in_{name}) {{"));
                self.line(3, &format!("v_{name} = p_{name}[dc_c];"));
                self.line(2, "}");
            }
            if plan.stored.contains(b) {
                for (j, c) in LANES.iter().enumerate() {
                    self.line(2, &format!("var r_{name}_{j} = v_{name}.{c};"));
                    self.line(2, &format!("var m_{name}_{j} = false;"));
                }
            }
        }
        for (j, lane) in LANES.iter().enumerate() {
            let mut args = Vec::new();
            for (b, name, _) in &buffers {
                if plan.stored.contains(b) {
                    args.push(format!("&r_{name}_{j}"));
                    args.push(format!("&m_{name}_{j}"));
                } else {
                    args.push(format!("v_{name}.{lane}"));
                }
            }
            args.push(format!("vec3<u32>(dc_c * 4u + {j}u, 0u, 0u)"));
            self.line(2, &format!("if (dc_c < dc_full || {j}u < dc_rest) {{"));
            self.line(3, &format!("dc_lane({});", args.join(", ")));
            self.line(2, "}");
        }
        for (b, name, _) in &buffers {
            if !plan.stored.contains(b) {
                continue;
            }
            let masks: Vec<String> = (0..4).map(|j| format!("m_{name}_{j}")).collect();
            self.line(
                2,
                &format!("if (dc_in_{name} && ({})) {{", masks.join(" || ")),
            );
            if !plan.loaded.contains(b) {
                // Lanes that did not store keep the buffer's values.
                self.line(3, &format!("if (!({})) {{", masks.join(" && ")));
                self.line(4, &format!("v_{name} = p_{name}[dc_c];"));
                self.line(3, "}");
            }
            let merged: Vec<String> = LANES
                .iter()
                .enumerate()
                .map(|(j, c)| format!("select(v_{name}.{c}, r_{name}_{j}, m_{name}_{j})"))
                .collect();
            self.line(3, &format!("p_{name}[dc_c] = vec4({});", merged.join(", ")));
            self.line(2, "}");
        }
        self.stride_loop_close("dc_c");
    }
}
