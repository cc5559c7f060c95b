class GraphModule(torch.nn.Module):
    def forward(self, primals_1: "f32[8, 8]", primals_3: "f32[2, 8]", tangents_1: "f32[2, 8]"):
        # File: /tmp/tmp.KrPdvnaDJm/b/fz_config_11000/fz_config_11000.py:51 in forward, code: return x * self.k
        mul_3: "f32[2, 8]" = torch.ops.aten.mul.Tensor(tangents_1, -0.599)

        # File: /tmp/tmp.KrPdvnaDJm/b/fz_config_11000/fz_config_11000.py:141 in forward, code: y = y * SCALE
        mul_4: "f32[2, 8]" = torch.ops.aten.mul.Tensor(mul_3, -1.591);  mul_3 = None

        # File: /tmp/tmp.KrPdvnaDJm/b/fz_config_11000/fz_config_11000.py:140 in forward, code: y = self.part(y)
        mul_5: "f32[2, 8]" = torch.ops.aten.mul.Tensor(mul_4, -1.866);  mul_4 = None

        # File: /tmp/tmp.KrPdvnaDJm/b/fz_config_11000/fz_config_11000.py:139 in forward, code: y = self.lin(x)
        permute: "f32[8, 8]" = torch.ops.aten.permute.default(primals_1, [1, 0]);  primals_1 = None
        permute_1: "f32[8, 8]" = torch.ops.aten.permute.default(permute, [1, 0]);  permute = None
        mm: "f32[2, 8]" = torch.ops.aten.mm.default(mul_5, permute_1);  permute_1 = None
        permute_2: "f32[8, 2]" = torch.ops.aten.permute.default(mul_5, [1, 0])
        mm_1: "f32[8, 8]" = torch.ops.aten.mm.default(permute_2, primals_3);  permute_2 = primals_3 = None
        sum_1: "f32[1, 8]" = torch.ops.aten.sum.dim_IntList(mul_5, [0], True);  mul_5 = None
        view: "f32[8]" = torch.ops.aten.view.default(sum_1, [8]);  sum_1 = None
        add_1: "f32[2, 8]" = torch.ops.aten.add.Tensor(tangents_1, mm);  tangents_1 = mm = None
        return (mm_1, view, add_1)
